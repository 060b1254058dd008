/**
 * Go's goroutines followed on unmodified net/http servers (real kernel, real agent), in the ways
 * they are built and run: a server started before the agent, one restarted while it runs,
 * CGO_ENABLED=0 and cgo linked by the system linker, and a stripped binary, whose goroutines
 * cannot be followed: its events carry none, never another request's, and one warning names it.
 * Each request writes two files named by its id (the handler's, and a goroutine's it spawns) and
 * GETs an upstream through net/http's pool on a path that names it, so the upstream request's key
 * tells which request sent it. The accuracy at 1 to 256 concurrent requests is
 * attribution-runtimes.test.ts's. A server over TLS with HTTP/2 negotiated has its streams, many
 * on one connection at a time, each attributed to its own request from its HEADERS frame; one with
 * HTTP/1.1 only has each request on its keep-alive connections attributed from the plaintext
 * crypto/tls's Read returns.
 */
import { spawn, type ChildProcess } from 'node:child_process';
import { chmodSync, copyFileSync, mkdirSync, mkdtempSync, readFileSync, rmSync } from 'node:fs';
import { createServer, request, Agent, type Server } from 'node:http';
import { connect } from 'node:http2';
import { get as httpsGet } from 'node:https';
import type { AddressInfo } from 'node:net';
import { connect as tlsConnect } from 'node:tls';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import Database from 'better-sqlite3';
import { nativeAddon } from '../../core/native/addon';
import { RecordType } from '../../core/model';
import { startAgent, type AgentProcess } from '../support/agent-process';
import { createCgroup, serverInCgroup, type TestCgroup } from '../support/cgroup';
import { buildGo, type GoBuild } from '../support/go-build';
import {
  h2Request,
  httpLoad,
  inTurn,
  scoreWrites as scoreByName,
  traceparentOf,
  writesUnder,
  type Accuracy,
} from '../support/request-accuracy';
import { readStoredEvents } from '../support/store-rows';
import { selfSignedCert } from '../../bench/tls-cert';
import { waitFor } from '../support/wait';

const SERVER = join(__dirname, '..', 'support', 'runtimes', 'go-server.go');
const MARKERS = join(__dirname, '..', 'support', 'runtimes', 'go-markers.go');
const H2_SERVER = join(__dirname, '..', 'support', 'runtimes', 'go-h2-server.go');
/** requests a level, and the levels (HTTP/2 streams on one connection, HTTP/1.1 keep-alive connections, or new ones) */
const PER_LEVEL = 256;
const LEVELS = [1, 8, 64];
const REQUESTS = 64;
const CONCURRENT = 8;
const FILES_PER_REQUEST = 2;

let dir: string;
let cgroup: TestCgroup;
let agent: AgentProcess;
let store: string;
let upstream: Server;
let upstreamPort: number;
/** the paths the upstream was asked for: an upstream GET that failed (a refused dial) is no send to score */
const asked = new Set<string>();
const binaries = {} as Record<GoBuild, string>;
const children: ChildProcess[] = [];
let before: Served;

interface Served {
  child: ChildProcess;
  port: number;
  out: string;
}

interface Score {
  correct: number;
  wrong: number;
  none: number;
  missing: number;
}

/** Starts a server build in the test cgroup, the ordinary way; resolves with it and its port. */
async function serve(build: GoBuild, out: string, binary = binaries[build]): Promise<Served> {
  mkdirSync(out, { recursive: true });
  return { ...(await serverInCgroup(cgroup, binary, [out, String(upstreamPort)], { children })), out };
}

const ids = (name: string) => Array.from({ length: REQUESTS }, (_, i) => `${name}-r${i}`);

/** The requests `name` names, CONCURRENT at a time over keep-alive connections, each with a traceparent. */
async function send(port: number, name: string): Promise<void> {
  const pool = new Agent({ keepAlive: true, maxSockets: CONCURRENT });
  const all = ids(name);
  let next = 0;
  const get = (i: number) =>
    new Promise<void>((resolve, reject) => {
      const traceparent = `00-${(i + 1).toString(16).padStart(32, '0')}-00f067aa0ba902b7-01`;
      request(
        { agent: pool, host: '127.0.0.1', port, path: '/', headers: { 'x-request-id': all[i], traceparent } },
        (res) => res.resume().once('end', () => resolve()),
      )
        .once('error', reject)
        .end();
    });
  await Promise.all(
    Array.from({ length: CONCURRENT }, async () => {
      while (next < all.length) await get(next++);
    }),
  );
  pool.destroy();
}

/** Each request's two file writes against its id; missing: those not stored by the deadline. */
async function scoreWrites(out: string, name: string): Promise<Score> {
  const expected = REQUESTS * FILES_PER_REQUEST;
  const writesOf = () =>
    readStoredEvents(store, `e.type = ${RecordType.SysWrite} AND t.value LIKE '${out}/${name}-r%'`);
  const events = await waitFor(() => {
    const found = writesOf();
    return found.length >= expected && found;
  }, 30_000).catch(() => writesOf());
  const score = { correct: 0, wrong: 0, none: 0, missing: expected - events.length };
  for (const e of events) {
    const id = /\/([^/]+)\.(go|spawned)$/.exec(e.target ?? '')![1];
    if (e.txn === null) score.none++;
    else if (e.txn === id) score.correct++;
    else score.wrong++;
  }
  return score;
}

/** go-server.go's letters(): the upstream path that names a request. */
const letters = (id: string) =>
  [...Buffer.from(id)].map((c) => String.fromCharCode(97 + (c >> 4), 97 + (c & 15))).join('');

/** Each request's upstream GET, as the send that started it (its key names the request), against its id. */
function scoreUpstream(pid: number, name: string): Score {
  const byKey = new Map(
    ids(name).map((id) => [
      nativeAddon().requestKey(Buffer.from(`GET /${letters(id)} HTTP/1.1\r\n\r\n`)),
      id,
    ]),
  );
  const sendsOf = () => {
    const db = new Database(store, { readonly: true });
    try {
      const rows = db
        .prepare(
          `SELECT e.request_key AS rkey, c.transaction_id AS txn FROM events e LEFT JOIN contexts c ON c.id = e.ctx
           WHERE e.pid = ? AND e.request_key IS NOT NULL`,
        )
        .all(pid) as { rkey: number; txn: string | null }[];
      return rows.filter((r) => byKey.has(r.rkey));
    } finally {
      db.close();
    }
  };
  // read after the writes were stored: each request sent upstream before it wrote
  const rows = sendsOf();
  const score = { correct: 0, wrong: 0, none: 0, missing: byKey.size - rows.length };
  for (const r of rows) {
    if (r.txn === null) score.none++;
    else if (r.txn === byKey.get(r.rkey)) score.correct++;
    else score.wrong++;
  }
  return score;
}

/**
 * The requests `ids` names, `level` streams at a time on ONE HTTP/2 session over TLS, each with its
 * x-request-id and a traceparent of its own; resolves with the protocols the server saw.
 */
async function h2Load(
  port: number,
  ca: Buffer,
  ids: string[],
  level: number,
  extra: Record<string, string> = {},
): Promise<Set<string>> {
  const session = connect(`https://127.0.0.1:${port}`, { ca });
  const protocols = new Set<string>();
  try {
    await inTurn(ids, level, async (id, i) => {
      protocols.add(
        await h2Request(session, { 'x-request-id': id, traceparent: traceparentOf(i), ...extra }),
      );
    });
  } finally {
    session.close();
  }
  return protocols;
}

/** The agent's line for a binary whose goroutines it follows: its Go version, where g is, the pool probed. */
function followedLine(build: GoBuild): string | undefined {
  return agent
    .output()
    .split('\n')
    .find((l) => l.includes(`goroutines of ${binaries[build]} (`));
}

/** A go-h2-server in the test cgroup (`mode` http1: HTTP/1.1 only), once the agent follows it, with its CA. */
async function serveTls(mode: 'h2' | 'http1'): Promise<{ port: number; out: string; ca: Buffer }> {
  const certs = join(dir, `certs-${mode}`);
  mkdirSync(certs);
  const { cert, key } = selfSignedCert(certs);
  const binary = buildGo(H2_SERVER, join(dir, `go-tls-server-${mode}`));
  const out = join(dir, `tls-${mode}`);
  mkdirSync(out);
  const { port } = await serverInCgroup(cgroup, binary, [out, cert, key, mode], { children });
  expect(
    await waitFor(() =>
      agent
        .output()
        .split('\n')
        .find((l) => l.includes(`goroutines of ${binary} (`)),
    ),
  ).toMatch(/are followed \(.*HTTP\/2 server streams too, TLS server reads too, channel hand-offs too\)$/);
  return { port, out, ca: readFileSync(cert) };
}

type LevelTable = Record<string, Accuracy & { otherTrace: number }>;

/** Each level's writes scored, the requests (`${name}-c${level}-r${i}`) sent by `load`. */
async function levelTable(
  out: string,
  name: string,
  load: (ids: string[], level: number) => Promise<void>,
): Promise<LevelTable> {
  const table: LevelTable = {};
  for (const level of LEVELS) {
    const ids = Array.from({ length: PER_LEVEL }, (_, i) => `${name}-c${level}-r${i}`);
    await load(ids, level);
    const events = await writesUnder(store, out, `${name}-c${level}-r`, PER_LEVEL * FILES_PER_REQUEST);
    const traceOf = new Map(ids.map((id, i) => [id, traceparentOf(i).split('-')[1]]));
    // a write of its own request carries that request's trace too (from its traceparent)
    const otherTrace = events.filter((e) => e.txn !== null && e.trace !== traceOf.get(e.txn)).length;
    table[`c=${level}`] = { ...scoreByName(events, ids, FILES_PER_REQUEST), otherTrace };
  }
  return table;
}

/** Prints the table and asserts each level: correct >= 99.9%, wrong 0, missing 0, no other trace. */
function expectLevelTable(what: string, table: LevelTable): void {
  const cells = Object.entries(table).map(
    ([l, a]) => `${l}: ${a.correct}/${a.wrong}/${a.none}/${a.missing} (other trace ${a.otherTrace})`,
  );
  process.stdout.write(
    `Go ${what} writes, correct/wrong/none/missing of ${PER_LEVEL * FILES_PER_REQUEST} a level: ${cells.join(', ')}\n`,
  );
  for (const [level, a] of Object.entries(table))
    expect({ level, ...a, correct: a.correct >= 0.999 * PER_LEVEL * FILES_PER_REQUEST }).toEqual({
      level,
      correct: true,
      wrong: 0,
      none: a.none,
      missing: 0,
      otherTrace: 0,
    });
}

/**
 * Pairs of requests, each pair on a TLS connection of its own, the second written right after the
 * first: in a TLS record of its own, Go's background read peeks its first byte while the first's
 * handler runs and the serving goroutine reads the rest; `together`, both in one record, one read
 * brings both heads. Resolves once all were answered.
 */
async function pipelinedPairs(port: number, ca: Buffer, ids: string[], together = false): Promise<void> {
  const head = (i: number, last: boolean) =>
    `GET / HTTP/1.1\r\nhost: 127.0.0.1\r\nx-request-id: ${ids[i]}\r\ntraceparent: ${traceparentOf(i)}\r\n` +
    `${last ? 'connection: close\r\n' : ''}\r\n`;
  for (let i = 0; i + 1 < ids.length; i += 2) {
    await new Promise<void>((resolve, reject) => {
      let answers = '';
      const socket = tlsConnect({ host: '127.0.0.1', port, ca }, () => {
        if (together) socket.write(head(i, false) + head(i + 1, true));
        else {
          socket.write(head(i, false));
          socket.write(head(i + 1, true));
        }
      });
      socket.setEncoding('utf8');
      socket.on('data', (chunk: string) => (answers += chunk));
      socket.once('end', () =>
        answers.split('HTTP/1.1 200 OK').length === 3 ? resolve() : reject(new Error(`answered: ${answers}`)),
      );
      socket.once('error', reject);
    });
  }
}

const all = (n: number): Score => ({ correct: n, wrong: 0, none: 0, missing: 0 });

/**
 * Every upstream send found in its own request. Found: the sends the kernel recorded as starting a
 * request (with its key), most of them; a send on a socket whose memory an earlier connection left
 * marked as waiting for an answer is recorded as a plain write without a key (the capture's request
 * start, not attribution: such a write carries its request too), so not found is not asserted.
 */
function expectEachOwn(score: Score): void {
  expect({ ...score, correct: score.correct >= REQUESTS / 2, missing: 0 }).toEqual({
    correct: true,
    wrong: 0,
    none: 0,
    missing: 0,
  });
}

/** The server's writes and upstream sends, printed for the record. */
async function measure(server: Served, name: string) {
  await send(server.port, name);
  const writes = await scoreWrites(server.out, name);
  const upstreamSends = scoreUpstream(server.child.pid!, name);
  process.stdout.write(
    `${name}: writes ${JSON.stringify(writes)}, upstream sends ${JSON.stringify(upstreamSends)}\n`,
  );
  return { writes, upstreamSends };
}

beforeAll(async () => {
  dir = mkdtempSync(join(tmpdir(), 'kreplay-go-'));
  cgroup = createCgroup(`kreplay-go-${process.pid}`);
  // the upstream lives in this process, outside the servers' cgroup
  upstream = createServer((req, res) => {
    asked.add(req.url!.slice(1));
    res.end('upstream');
  });
  upstream.keepAliveTimeout = 60_000;
  await new Promise<void>((resolve) => upstream.listen(0, '127.0.0.1', resolve));
  upstreamPort = (upstream.address() as AddressInfo).port;
  for (const build of ['default', 'static', 'external', 'stripped'] as const)
    binaries[build] = buildGo(SERVER, join(dir, `go-server-${build}`), build);
  // a server already serving (goroutines, pool connections) when the agent starts
  before = await serve('default', join(dir, 'warm'));
  await send(before.port, 'warm');
  store = join(dir, 'data', 'go.db');
  agent = await startAgent([
    '--data-dir',
    join(dir, 'data'),
    '--node',
    'go',
    '--cgroup-id',
    String(cgroup.id),
  ]);
}, 180_000);

afterAll(async () => {
  for (const child of children) child.kill('SIGKILL');
  await agent?.stop();
  upstream?.close();
  cgroup?.remove();
  rmSync(dir, { recursive: true, force: true });
});

describe('Go goroutines (real kernel)', () => {
  it("a server started before the agent: every write its request's; an upstream send on a connection dialed before carries none", async () => {
    expect(followedLine('default')).toMatch(
      /are followed \(g at -8 from the thread pointer, net\/http's client pool too, HTTP\/2 server streams too, TLS server reads too, channel hand-offs too\)$/,
    );
    const { writes, upstreamSends } = await measure(before, 'before');
    expect(writes).toEqual(all(REQUESTS * FILES_PER_REQUEST));
    expect(upstreamSends.wrong).toBe(0);
  }, 120_000);

  it("the same server restarted while the agent runs: marked at its exec, every write and upstream send its request's", async () => {
    const exited = new Promise((resolve) => before.child.once('exit', resolve));
    before.child.kill('SIGTERM');
    await exited;
    // no wait for the agent: the kernel knows the binary
    const restarted = await serve('default', join(dir, 'restarted'));
    const { writes, upstreamSends } = await measure(restarted, 'restarted');
    expect(writes).toEqual(all(REQUESTS * FILES_PER_REQUEST));
    expectEachOwn(upstreamSends);
  }, 120_000);

  it.each(['static', 'external'] as const)(
    "%s build (CGO_ENABLED=0, or cgo linked by the system linker): every write and upstream send its request's",
    async (build) => {
      const server = await serve(build, join(dir, build));
      // the TLS offset comes from runtime.tlsg and PT_TLS when the system linker placed it
      expect(await waitFor(() => followedLine(build))).toMatch(
        /\(go1\.\d+[.\d]*\) are followed \(g at -8 from the thread pointer, net\/http's client pool too, HTTP\/2 server streams too, TLS server reads too, channel hand-offs too\)$/,
      );
      const { writes, upstreamSends } = await measure(server, build);
      expect(writes).toEqual(all(REQUESTS * FILES_PER_REQUEST));
      expectEachOwn(upstreamSends);
    },
    120_000,
  );

  it("a binary never seen before, asked at once: each write its request's or none (the kernel knows Go code by its g until the agent finds it), never another's; followed once found", async () => {
    // a new file: neither the agent nor the kernel knows it
    const fresh = join(dir, 'go-server-fresh');
    copyFileSync(binaries.default, fresh);
    chmodSync(fresh, 0o755);
    const server = await serve('default', join(dir, 'fresh'), fresh);
    const first = await measure(server, 'fresh');
    expect({ ...first.writes, correct: 0, none: 0 }).toEqual({ correct: 0, wrong: 0, none: 0, missing: 0 });
    expect(first.upstreamSends.wrong).toBe(0);
    // once the agent found it, its goroutines are followed
    await waitFor(() => agent.output().includes(`goroutines of ${fresh} (`));
    const later = await measure(server, 'fresh-later');
    expect(later.writes).toEqual(all(REQUESTS * FILES_PER_REQUEST));
    expectEachOwn(later.upstreamSends);
  }, 120_000);

  it("a goroutine's KREPLAY-CTX marker is the goroutine's: its writes carry it on whichever thread they run", async () => {
    const binary = buildGo(MARKERS, join(dir, 'go-markers'));
    const out = join(dir, 'markers');
    mkdirSync(out);
    const child = spawn('/bin/sh', ['-c', `${cgroup.enter} "$@"`, 'sh', binary, out, '16'], {
      stdio: ['pipe', 'pipe', 'inherit'],
    });
    children.push(child);
    await new Promise((resolve) => child.stdout!.once('data', resolve));
    await waitFor(() => agent.output().includes(`goroutines of ${binary} (`));
    const exited = new Promise((resolve) => child.once('exit', resolve));
    child.stdin!.end('\n');
    await exited;
    const events = await waitFor(() => {
      const found = readStoredEvents(
        store,
        `e.type = ${RecordType.SysWrite} AND t.value LIKE '${out}/marker-%'`,
      );
      return found.length >= 16 * 3 && found;
    }, 30_000);
    const own = events.filter((e) => e.txn === /(marker-\d+)\.\d$/.exec(e.target ?? '')![1]);
    expect({ writes: events.length, own: own.length }).toEqual({ writes: 48, own: 48 });
  }, 120_000);

  it("HTTP/2 over TLS (ServeTLS, h2 by ALPN), 1, 8 and 64 streams on one connection: each stream's writes (its handler's, a goroutine's it spawns) carry its own x-request-id and trace", async () => {
    const { port, out, ca } = await serveTls('h2');
    const table = await levelTable(out, 'h2', async (ids, level) => {
      expect([...(await h2Load(port, ca, ids, level))]).toEqual(['HTTP/2.0']);
    });
    expectLevelTable('HTTP/2 over TLS', table);
    // more header fields than the kernel looks at: which of them name the request is not known, so none
    const crowded = Array.from({ length: 8 }, (_, i) => `h2-crowded-r${i}`);
    const filler = Object.fromEntries(Array.from({ length: 64 }, (_, i) => [`x-filler-${i}`, 'f']));
    await h2Load(port, ca, crowded, 8, filler);
    const events = await writesUnder(store, out, 'h2-crowded-r', crowded.length * FILES_PER_REQUEST);
    expect(scoreByName(events, crowded, FILES_PER_REQUEST)).toEqual({
      correct: 0,
      wrong: 0,
      none: crowded.length * FILES_PER_REQUEST,
      missing: 0,
    });
  }, 180_000);

  it("HTTP/1.1 over TLS (an empty TLSNextProto), 1, 8 and 64 keep-alive connections: each request's writes (its handler's, a goroutine's it spawns) carry its own x-request-id and trace", async () => {
    const { port, out, ca } = await serveTls('http1');
    // the handler answers with the protocol it was asked in
    const proto = await new Promise<string>((resolve, reject) =>
      httpsGet(
        { host: '127.0.0.1', port, ca, path: '/', headers: { 'x-request-id': 'tls1-proto' } },
        (res) => {
          let body = '';
          res.setEncoding('utf8');
          res.on('data', (chunk: string) => (body += chunk));
          res.once('end', () => resolve(body));
        },
      ).once('error', reject),
    );
    expect(proto).toBe('HTTP/1.1');
    const table = await levelTable(out, 'tls1', (ids, level) => httpLoad(port, ids, level, { ca }));
    expectLevelTable('HTTP/1.1 over TLS', table);
    // the next request's first byte peeked by the background read, joined with the rest by its socket
    const pairs = Array.from({ length: 64 }, (_, i) => `tls1-pipe-r${i}`);
    await pipelinedPairs(port, ca, pairs);
    const piped = scoreByName(
      await writesUnder(store, out, 'tls1-pipe-r', pairs.length * FILES_PER_REQUEST),
      pairs,
      FILES_PER_REQUEST,
    );
    process.stdout.write(`Go HTTP/1.1 over TLS, pipelined pairs: ${JSON.stringify(piped)}\n`);
    expect(piped).toEqual({ correct: pairs.length * FILES_PER_REQUEST, wrong: 0, none: 0, missing: 0 });
    // two heads in one read: which request a later call serves is not known (pipelined), none, never the other's
    const joined = Array.from({ length: 16 }, (_, i) => `tls1-joined-r${i}`);
    await pipelinedPairs(port, ca, joined, true);
    const together = scoreByName(
      await writesUnder(store, out, 'tls1-joined-r', joined.length * FILES_PER_REQUEST),
      joined,
      FILES_PER_REQUEST,
    );
    process.stdout.write(`Go HTTP/1.1 over TLS, pairs in one record: ${JSON.stringify(together)}\n`);
    expect({ ...together, correct: 0, none: 0 }).toEqual({ correct: 0, wrong: 0, none: 0, missing: 0 });
  }, 180_000);

  it("1, 8 and 64 requests at a time, each on a new connection (Connection: close): each request's writes (its handler's, a goroutine's it spawns) carry its own x-request-id and trace", async () => {
    // a new connection a request: a new socket, target and serving goroutine each time
    const server = await serve('default', join(dir, 'new-conns'));
    const table = await levelTable(server.out, 'newconn', (ids, level) =>
      httpLoad(server.port, ids, level, { keepAlive: false }),
    );
    expectLevelTable('HTTP/1.1, a new connection a request,', table);
  }, 180_000);

  it("a stripped binary: its events carry none, never another request's, and one warning names it", async () => {
    for (const name of ['stripped', 'stripped-again']) {
      const server = await serve('stripped', join(dir, name));
      await waitFor(() => agent.output().includes(`goroutines of ${binaries.stripped} (`));
      const { writes, upstreamSends } = await measure(server, name);
      expect(writes).toEqual({ correct: 0, wrong: 0, none: REQUESTS * FILES_PER_REQUEST, missing: 0 });
      expect({ correct: upstreamSends.correct, wrong: upstreamSends.wrong }).toEqual({
        correct: 0,
        wrong: 0,
      });
      server.child.kill('SIGKILL');
    }
    const warnings = agent
      .output()
      .split('\n')
      .filter((l) => l.includes(`goroutines of ${binaries.stripped} (`));
    expect(warnings).toHaveLength(1);
    expect(warnings[0]).toMatch(/WARN.*are not followed: it is stripped/);
  }, 180_000);
});
