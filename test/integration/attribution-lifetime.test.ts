/**
 * A request's context lives exactly as long as the request (bpf/capture/lifetime.h), on real
 * programs started the ordinary way: what a request starts (a helper thread, a goroutine, a worker
 * fed by a channel or a queue, a timer, a process pool) carries the request while it lives and
 * none after, never that request's context for another request's work. Ground truth: each request
 * names its files by its x-request-id; what a request left running names its files otherwise and
 * is checked against when the request ended.
 */
import { execFileSync, type ChildProcess } from 'node:child_process';
import { mkdirSync, mkdtempSync, readFileSync, rmSync } from 'node:fs';
import { connect } from 'node:net';
import { tmpdir } from 'node:os';
import { basename, join } from 'node:path';
import { connect as tlsConnect } from 'node:tls';
import { selfSignedCert } from '../../bench/tls-cert';
import { RecordType } from '../../core/model';
import { startAgent, type AgentProcess } from '../support/agent-process';
import { createCgroup, serverInCgroup, type TestCgroup } from '../support/cgroup';
import { buildGo } from '../support/go-build';
import {
  hookableEnv,
  httpLoad,
  nodeHookLine,
  pythonHookLine,
  scoreWrites,
  traceparentOf,
  writesUnder,
  type Accuracy,
} from '../support/request-accuracy';
import { readStoredEvents, storedCounter, type StoredEvent } from '../support/store-rows';
import { waitFor } from '../support/wait';

const RUNTIMES = join(__dirname, '..', 'support', 'runtimes');
const LEVELS = [1, 8, 64];
const PER_LEVEL = 128;

let dir: string;
let store: string;
let cgroup: TestCgroup;
let agent: AgentProcess;
let cert: string;
let key: string;
const servers: ChildProcess[] = [];

beforeAll(async () => {
  dir = mkdtempSync(join(tmpdir(), 'kreplay-lifetime-'));
  store = join(dir, 'data', 'lt.db');
  cgroup = createCgroup(`kreplay-lifetime-${process.pid}`);
  ({ cert, key } = selfSignedCert(dir));
  agent = await startAgent([
    '--data-dir',
    join(dir, 'data'),
    '--node',
    'lt',
    '--cgroup-id',
    String(cgroup.id),
  ]);
});

afterAll(async () => {
  for (const s of servers) s.kill('SIGKILL');
  await agent?.stop();
  cgroup?.remove();
  rmSync(dir, { recursive: true, force: true });
});

/** Starts `command` in the test cgroup (outside any request this test sent) and resolves with its port. */
async function serve(command: string, args: string[], env: NodeJS.ProcessEnv = process.env): Promise<number> {
  return (await serverInCgroup(cgroup, command, args, { env, children: servers, clearContext: true })).port;
}

/**
 * One request on a connection of its own that the server closes after answering (`Connection:
 * close`): the request has ended, by the server's close, once this resolves with the answer. The
 * socket waits for the server's FIN before it closes: Node's HTTP client closes its own side at the
 * answer's end, which would resolve before the server's close, and so before the request ended.
 */
function single(port: number, path: string, id: string, ca?: string): Promise<string> {
  return new Promise((resolve, reject) => {
    const tcp = connect({ host: '127.0.0.1', port, allowHalfOpen: true });
    const socket = ca ? tlsConnect({ socket: tcp, ca: readFileSync(ca), host: '127.0.0.1' }) : tcp;
    const chunks: Buffer[] = [];
    socket.once(ca ? 'secureConnect' : 'connect', () =>
      socket.write(
        `GET ${path} HTTP/1.1\r\nHost: 127.0.0.1:${port}\r\nx-request-id: ${id}\r\n` +
          `traceparent: ${traceparentOf(0)}\r\nConnection: close\r\n\r\n`,
      ),
    );
    socket.on('data', (chunk: Buffer) => chunks.push(chunk));
    socket.once('error', reject);
    // the server's FIN: it closed the connection
    socket.once('end', () => {
      socket.destroy();
      try {
        resolve(answerBody(Buffer.concat(chunks).toString('latin1'), path));
      } catch (err) {
        reject(err instanceof Error ? err : new Error(String(err)));
      }
    });
  });
}

/** The body of a 200 answer with a Content-Length (what every server here sends for these requests). */
function answerBody(answer: string, path: string): string {
  const split = answer.indexOf('\r\n\r\n');
  const head = split < 0 ? answer : answer.slice(0, split);
  const length = /\r\ncontent-length: *(\d+)/i.exec(head);
  if (!head.startsWith('HTTP/1.1 200 ') || !length)
    throw new Error(
      `${path}: not a 200 answer with a Content-Length: ${JSON.stringify(answer.slice(0, 200))}`,
    );
  return answer.slice(split + 4, split + 4 + Number(length[1]));
}

/** correct / wrong / none / missing per level of the `suffixes` files each request writes. */
async function measure(
  name: string,
  port: number,
  out: string,
  path: string,
  suffixes: string[],
  ca?: string,
  answered?: (level: number) => Promise<unknown>,
): Promise<Record<string, Record<string, Accuracy>>> {
  const table: Record<string, Record<string, Accuracy>> = {};
  for (const level of LEVELS) {
    const ids = Array.from({ length: PER_LEVEL }, (_, i) => `${name}-c${level}-r${i}`);
    await httpLoad(port, ids, level, { path, ...(ca && { ca: readFileSync(ca) }) });
    await answered?.(level);
    const events = await writesUnder(store, out, `${name}-c${level}-r`, PER_LEVEL * suffixes.length);
    table[`c=${level}`] = Object.fromEntries(
      suffixes.map((suffix) => [
        suffix,
        scoreWrites(
          events.filter((e) => e.target!.endsWith(`.${suffix}`)),
          ids,
          1,
        ),
      ]),
    );
  }
  const cells = Object.entries(table).map(
    ([level, bySuffix]) =>
      `${level}: ` +
      Object.entries(bySuffix)
        .map(([suffix, a]) => `${suffix} ${a.correct}/${a.wrong}/${a.none}/${a.missing}`)
        .join(' '),
  );
  process.stdout.write(`${name}, correct/wrong/none/missing of ${PER_LEVEL} requests: ${cells.join(', ')}\n`);
  return table;
}

/** Each level's `suffix` writes: all correct (`exact`), or all none; never wrong, never missing. */
function expectAll(
  table: Record<string, Record<string, Accuracy>>,
  suffix: string,
  outcome: 'correct' | 'none',
): void {
  for (const [level, bySuffix] of Object.entries(table)) {
    const { correct, wrong, none, missing } = bySuffix[suffix]!;
    expect({ level, suffix, correct, wrong, none, missing }).toEqual({
      level,
      suffix,
      correct: outcome === 'correct' ? PER_LEVEL : 0,
      wrong: 0,
      none: outcome === 'none' ? PER_LEVEL : 0,
      missing: 0,
    });
  }
}

/** The write of file `name` under `out`, once stored. */
function writeOf(out: string, name: string): Promise<StoredEvent> {
  return waitFor(
    () => readStoredEvents(store, `e.type = ${RecordType.SysWrite} AND t.value = '${out}/${name}'`)[0],
    { timeoutMs: 30_000, what: `the write of ${name}` },
  );
}

/**
 * The writes of `prefix.<n>` files numbered past `after` (made after a request ended), once `count`
 * of them are stored.
 */
function writesAfter(out: string, prefix: string, after: number, count: number): Promise<StoredEvent[]> {
  const read = () =>
    readStoredEvents(store, `e.type = ${RecordType.SysWrite} AND t.value LIKE '${out}/${prefix}.%'`).filter(
      (e) => Number(basename(e.target!).slice(prefix.length + 1)) > after,
    );
  return waitFor(
    () => {
      const rows = read();
      return rows.length >= count && rows;
    },
    { timeoutMs: 30_000, what: `${count} ${prefix} writes` },
  );
}

const transactions = (events: StoredEvent[]) => [...new Set(events.map((e) => e.txn))];

/** The run's count of holders of `kind` that lost a request's context at its end, once it is some. */
const outlived = (kind: 'thread' | 'process' | 'goroutine' | 'unit') =>
  waitFor(() => storedCounter(store, `outlived_${kind}`) > 0, {
    timeoutMs: 30_000,
    what: `outlived_${kind} counted`,
  });

describe('a request context lives as long as its request (real kernel)', () => {
  describe('Go net/http', () => {
    let out: string;
    let port: number;

    beforeAll(async () => {
      out = join(dir, 'go');
      mkdirSync(out);
      const binary = buildGo(join(RUNTIMES, 'go-lifetime-server.go'), join(dir, 'go-lifetime-server'));
      port = await serve(binary, [out]);
      await waitFor(() => agent.output().includes(`goroutines of ${binary} (`), {
        timeoutMs: 20_000,
        what: 'the agent following the Go server',
      });
      expect(agent.output()).toMatch(/goroutines of .*go-lifetime-server \(.*channel hand-offs too/);
    }, 120_000);

    it('a sync.Once worker fed by a channel: each write is its job sender’s request, never the first one’s', async () => {
      const first = 'go-once-first';
      await single(port, '/once', first);
      expect((await writeOf(out, `${first}.worker`)).txn).toBe(first);
      const table = await measure('go-once', port, out, '/once', ['worker', 'handler']);
      expectAll(table, 'handler', 'correct');
      expectAll(table, 'worker', 'correct');
    }, 300_000);

    it('a background loop the first request started writes with none once that request ended', async () => {
      const first = 'go-loop-first';
      await single(port, '/loop', first);
      // /mark answers with the count after the first request's connection closed; the write in flight
      // then (numbered one past it) may have begun before, every later one began after
      const ended = Number(await single(port, '/mark', 'go-loop-mark'));
      await httpLoad(port, ['go-loop-meanwhile'], 1, { path: '/once' });
      const after = await writesAfter(out, 'loop', ended + 1, 50);
      expect(transactions(after)).toEqual([null]);
      await outlived('goroutine');
    }, 120_000);
  });

  describe.each([
    ['plain', false],
    ['TLS', true],
  ])('Python ThreadingHTTPServer (%s)', (setting, tls) => {
    let out: string;
    let port: number;
    let ca: string | undefined;

    let goChild: string;

    beforeAll(async () => {
      out = join(dir, `py-${setting}`);
      mkdirSync(out);
      ca = tls ? cert : undefined;
      goChild = buildGo(join(RUNTIMES, 'go-child-writer.go'), join(dir, `go-child-writer-${setting}`));
      port = await serve(
        '/usr/bin/python3',
        [join(RUNTIMES, 'threading-lifetime-server.py'), out, ...(tls ? [cert, key] : [])],
        { ...process.env, GO_CHILD: goChild },
      );
    }, 120_000);

    it("the handler's child thread, joined before the reply, is the request's at every level", async () => {
      const table = await measure(`py-${setting}-child`, port, out, '/child', ['child', 'handler'], ca);
      expectAll(table, 'child', 'correct');
      expectAll(table, 'handler', 'correct');
    }, 300_000);

    if (tls) return;

    it('a Go program a request started: its goroutines carry that request while it lives, none after (outlived_process)', async () => {
      // the first program makes the agent inspect the binary: the next exec of it is followed from its start
      await single(port, '/exec-go', `py-${setting}-go-seen`);
      await waitFor(() => agent.output().includes(`goroutines of ${goChild} (`), {
        timeoutMs: 30_000,
        what: 'the agent following the Go program',
      });
      const during = `py-${setting}-go-during`;
      await single(port, '/exec-go', during);
      expect((await writeOf(out, `${during}.gochild`)).txn).toBe(during);
      const before = storedCounter(store, 'outlived_process');
      // its request has ended (the server closed its connection); the program writes within another
      const after = `py-${setting}-go-after`;
      await single(port, '/go-write', after);
      expect((await writeOf(out, `${after}.gochild`)).txn).toBeNull();
      expect((await writeOf(out, `${after}.handler`)).txn).toBe(after);
      await waitFor(() => storedCounter(store, 'outlived_process') > before, {
        timeoutMs: 30_000,
        what: 'outlived_process counted for the Go program',
      });
    }, 120_000);

    it('a consumer thread the first request started: that request’s while it lives, none after', async () => {
      const first = `py-${setting}-consumer-first`;
      await single(port, '/consumer', first, ca);
      expect((await writeOf(out, `${first}.consumer`)).txn).toBe(first);
      const table = await measure(
        `py-${setting}-consumer`,
        port,
        out,
        '/consumer',
        ['consumer', 'handler'],
        ca,
      );
      expectAll(table, 'handler', 'correct');
      expectAll(table, 'consumer', 'none');
      await outlived('thread');
    }, 300_000);

    it('a worker the first request started, while that request is still served, takes each job’s request from its queue.Queue (hooked)', async () => {
      const handoffOut = join(dir, `py-${setting}-handoff`);
      mkdirSync(handoffOut);
      const hookedPort = await serve(
        '/usr/bin/python3',
        [join(RUNTIMES, 'threading-lifetime-server.py'), handoffOut],
        hookableEnv(),
      );
      expect(await pythonHookLine(agent, servers[servers.length - 1]!.pid!)).toMatch(
        /queued the Python hook/,
      );
      await waitFor(async () => (await single(hookedPort, '/hooked', `py-${setting}-probe`)) === 'ye', {
        timeoutMs: 30_000,
        what: 'the Python hook wrapping queue.Queue',
      });
      const first = `py-${setting}-handoff-first`;
      // answered only at /release: it lives while every level's requests hand jobs to its worker
      const firstAnswered = single(hookedPort, '/handoff-first', first);
      expect((await writeOf(handoffOut, `${first}.worker`)).txn).toBe(first);
      const table = await measure(`py-${setting}-handoff`, hookedPort, handoffOut, '/handoff', [
        'worker',
        'handler',
      ]);
      await single(hookedPort, '/release', `py-${setting}-release`);
      await firstAnswered;
      expectAll(table, 'handler', 'correct');
      expectAll(table, 'worker', 'correct');
    }, 300_000);

    it('a multiprocessing.Pool created in a request: its later work is never that request’s', async () => {
      const first = `py-${setting}-pool-first`;
      await single(port, '/pool', first, ca);
      expect((await writeOf(out, `${first}.pool`)).txn).toBe(first);
      const table = await measure(`py-${setting}-pool`, port, out, '/pool', ['pool', 'handler'], ca);
      expectAll(table, 'handler', 'correct');
      expectAll(table, 'pool', 'none');
      await outlived('process');
    }, 300_000);
  });

  it('Node: a setInterval a request started writes with none after the request ended (hooked)', async () => {
    const out = join(dir, 'node');
    mkdirSync(out);
    const port = await serve(
      process.execPath,
      [join(RUNTIMES, 'node-interval-server.js'), out],
      hookableEnv(),
    );
    expect(await nodeHookLine(agent, servers[servers.length - 1]!.pid!)).toMatch(/hooked a Node process/);
    await single(port, '/interval', 'node-interval-first');
    const ended = Number(await single(port, '/mark', 'node-interval-mark'));
    const table = await measure('node-interval', port, out, '/', ['handler']);
    expectAll(table, 'handler', 'correct');
    expect(transactions(await writesAfter(out, 'tick', ended, 50))).toEqual([null]);
    await outlived('unit');
  }, 300_000);

  it('aiohttp: a task and pool work a request left behind are its while it lives, none after (hooked)', async () => {
    const out = join(dir, 'aiohttp');
    mkdirSync(out);
    const port = await serve(
      '/usr/bin/python3',
      [join(RUNTIMES, 'aiohttp-lifetime-server.py'), out],
      hookableEnv(),
    );
    expect(await pythonHookLine(agent, servers[servers.length - 1]!.pid!)).toMatch(/queued the Python hook/);
    // the hook runs at one of the server's calls after it was queued: a request whose write is its own says it ran
    let warm = 0;
    await waitFor(
      async () => {
        const id = `aio-warm-${warm++}`;
        await single(port, '/', id);
        return (await writeOf(out, `${id}.handler`)).txn === id;
      },
      { timeoutMs: 30_000, what: 'the Python hook running in the aiohttp server' },
    );
    // /flush, once a level's requests were answered (ended), lets their tasks write
    const table = await measure(
      'aio-left',
      port,
      out,
      '/',
      ['handler', 'during', 'task', 'pool'],
      undefined,
      (level) => single(port, '/flush', `aio-flush-c${level}`),
    );
    expectAll(table, 'handler', 'correct');
    expectAll(table, 'during', 'correct');
    expectAll(table, 'task', 'none');
    expectAll(table, 'pool', 'none');
    await outlived('unit');
  }, 300_000);

  it('C: a thread per connection and a helper thread per request, joined before the reply: exact', async () => {
    const out = join(dir, 'c');
    mkdirSync(out);
    const binary = join(dir, 'pthread-server');
    execFileSync('cc', ['-O2', '-pthread', '-o', binary, join(RUNTIMES, 'pthread-server.c')]);
    const port = await serve(binary, [out]);
    const table = await measure('c-pthread', port, out, '/', ['helper', 'handler']);
    expectAll(table, 'helper', 'correct');
    expectAll(table, 'handler', 'correct');
  }, 300_000);
});
