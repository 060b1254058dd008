/**
 * Attribution over TLS (real kernel, real agent, real OpenSSL): the request
 * head a server reads through SSL_read sets its thread's context as a
 * plaintext head does. Ground truth: each request writes files named by
 * its x-request-id, so each write's target says which request caused it.
 */
import { spawn, type ChildProcess } from 'node:child_process';
import { chmodSync, copyFileSync, mkdirSync, mkdtempSync, readFileSync, rmSync } from 'node:fs';
import { connect as connectH2 } from 'node:http2';
import { Agent, request } from 'node:https';
import {
  connect as connectTcp,
  createServer as createTcpServer,
  type AddressInfo,
  type Socket,
} from 'node:net';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { RecordType } from '../../core/model';
import { startAgent, type AgentProcess } from '../support/agent-process';
import { createCgroup, serverInCgroup, type TestCgroup } from '../support/cgroup';
import { readStoredEvents, storedCounter, type StoredEvent } from '../support/store-rows';
import { selfSignedCert } from '../../bench/tls-cert';
import { waitFor } from '../support/wait';
import { h2Request, hookableEnv, inTurn, nodeHookLine } from '../support/request-accuracy';
import * as grpc from '@grpc/grpc-js';

const SUPPORT = join(__dirname, '..', 'support');
const PER_LEVEL = 256;
const FILES_PER_REQUEST = 2;

let dir: string;
let cgroup: TestCgroup;
let cert: string;
let key: string;

/** Every server the tests start: killed at the end, whether it got to listen or be hooked or not. */
const children: ChildProcess[] = [];

/**
 * A server in the test cgroup. This thread sent traced requests (their heads set its client-side
 * context), so the server must not start inside the last one: its context is cleared first.
 */
const startServer = (command: string, args: string[], env: NodeJS.ProcessEnv = process.env) =>
  serverInCgroup(cgroup, command, args, { env, clearContext: true, children });

let traced = 0;
/** A fresh valid traceparent: a head without one carries no context. */
const traceparent = () => `00-${(++traced).toString(16).padStart(32, 'a')}-00f067aa0ba902b7-01`;

/** Sends PER_LEVEL requests, `level` at a time over as many keep-alive connections; their ids. */
async function load(port: number, name: string, level: number): Promise<string[]> {
  const pool = new Agent({ keepAlive: true, maxSockets: level });
  const ids = Array.from({ length: PER_LEVEL }, (_, i) => `${name}${level}-${i}`);
  let next = 0;
  const worker = async () => {
    while (next < ids.length) await get(pool, port, ids[next++]!);
  };
  await Promise.all(Array.from({ length: level }, worker));
  pool.destroy();
  return ids;
}

/** One GET over the pool's TLS connections; whether it reused a connection. */
function get(pool: Agent, port: number, rid: string): Promise<boolean> {
  return new Promise((resolve, reject) => {
    const req = request(
      {
        agent: pool,
        host: '127.0.0.1',
        port,
        path: '/',
        ca: readFileSync(cert),
        headers: { 'x-request-id': rid, traceparent: traceparent() },
      },
      (res) => res.resume().once('end', () => resolve(req.reusedSocket)),
    );
    req.once('error', reject).end();
  });
}

/** The file writes stored for requests whose ids start with prefix, once all `n` are in. */
function writesFor(store: string, out: string, prefix: string, n: number): Promise<StoredEvent[]> {
  const where = `e.type = ${RecordType.SysWrite} AND t.value LIKE '${out}/${prefix}%'`;
  return waitFor(() => {
    const rows = readStoredEvents(store, where);
    return rows.length >= n ? rows : undefined;
  }, 30000);
}

const FRAME_HEADERS = 0x1;
const FRAME_CONTINUATION = 0x9;

/** A frame an HTTP/2 client sent: its type, its stream and its payload's length. */
interface SentFrame {
  type: number;
  stream: number;
  length: number;
}

/**
 * A TCP relay to `port` that reads the frames each client sends (after the 24-byte connection
 * preface): what went on the wire, which Node's client does not tell.
 */
async function frameTap(port: number): Promise<{ port: number; frames: SentFrame[]; close(): void }> {
  const frames: SentFrame[] = [];
  const sockets = new Set<Socket>();
  const relay = createTcpServer((client) => {
    const upstream = connectTcp(port, '127.0.0.1');
    sockets.add(client).add(upstream);
    let pending = Buffer.alloc(0);
    let preface = 24;
    client.on('data', (chunk: Buffer) => {
      pending = Buffer.concat([pending, chunk]);
      const skip = Math.min(preface, pending.length);
      pending = pending.subarray(skip);
      preface -= skip;
      while (pending.length >= 9 && pending.length >= 9 + pending.readUIntBE(0, 3)) {
        const length = pending.readUIntBE(0, 3);
        frames.push({ type: pending[3]!, stream: pending.readUInt32BE(5) & 0x7fffffff, length });
        pending = pending.subarray(9 + length);
      }
    });
    client.pipe(upstream).pipe(client);
    for (const s of [client, upstream]) s.once('error', () => sockets.forEach((x) => x.destroy()));
  });
  await new Promise<void>((resolve) => relay.listen(0, '127.0.0.1', resolve));
  return {
    port: (relay.address() as AddressInfo).port,
    frames,
    close() {
      for (const s of sockets) s.destroy();
      relay.close();
    },
  };
}

interface Score {
  correct: number;
  wrong: number;
  none: number;
  missing: number;
}

/** Scores each write by its target's request id against its transaction. */
function score(events: StoredEvent[], ids: string[], filesPerRequest = FILES_PER_REQUEST): Score {
  const s = { correct: 0, wrong: 0, none: 0, missing: 0 };
  const seen = new Set<string>();
  for (const e of events) {
    const rid = e.target!.slice(e.target!.lastIndexOf('/') + 1).replace(/\.[ab]$/, '');
    seen.add(rid);
    if (e.txn === rid) s.correct++;
    else if (e.txn === null) s.none++;
    else s.wrong++;
  }
  s.missing = ids.filter((id) => !seen.has(id)).length * filesPerRequest;
  return s;
}

beforeAll(() => {
  dir = mkdtempSync(join(tmpdir(), 'kreplay-tls-'));
  cgroup = createCgroup(`kreplay-tls-${process.pid}.service`);
  ({ cert, key } = selfSignedCert(dir));
});

afterAll(async () => {
  // gone before the cgroup is removed
  await Promise.all(
    children.map((child) => {
      const exited = new Promise((resolve) => child.once('exit', resolve));
      return child.exitCode === null && child.signalCode === null && child.kill() ? exited : null;
    }),
  );
  cgroup?.remove();
  rmSync(dir, { recursive: true, force: true });
});

describe('TLS request attribution: Python ThreadingHTTPServer over ssl (real kernel)', () => {
  let agent: AgentProcess;
  let store: string;
  let server: { child: ChildProcess; port: number };
  let out: string;
  // a keep-alive connection whose TLS session began before the agent
  const early = new Agent({ keepAlive: true, maxSockets: 1 });

  beforeAll(async () => {
    out = join(dir, 'py');
    mkdirSync(out);
    server = await startServer('/usr/bin/python3', [join(SUPPORT, 'tls-file-server.py'), cert, key, out]);
    await get(early, server.port, 'early-0');
    store = join(dir, 'data', 'tls.db');
    agent = await startAgent([
      '--data-dir',
      join(dir, 'data'),
      '--node',
      'tls',
      '--cgroup-id',
      String(cgroup.id),
    ]);
  });

  afterAll(async () => {
    early.destroy();
    server?.child.kill();
    expect(await agent?.stop()).toBe(0);
  });

  it('attributes the later requests of a TLS connection opened before the agent started', async () => {
    const unsure = storedCounter(store, 'unsure_read');
    expect(await get(early, server.port, 'early-1')).toBe(true);
    expect(await get(early, server.port, 'early-2')).toBe(true);
    expect(await get(early, server.port, 'early-3')).toBe(true);
    const events = await writesFor(store, out, 'early-', 3 * FILES_PER_REQUEST);
    // early-1's head came back from an SSL_read entered before the probes were attached: a return
    // probe sees only calls it saw enter, so that one request is unattributed, never wrong
    expect(
      score(
        events.filter((e) => e.target!.includes('early-1.')),
        ['early-1'],
      ),
    ).toEqual({
      correct: 0,
      wrong: 0,
      none: 2,
      missing: 0,
    });
    expect(
      score(
        events.filter((e) => !e.target!.includes('early-1.')),
        ['early-2', 'early-3'],
      ),
    ).toEqual({
      correct: 4,
      wrong: 0,
      none: 0,
      missing: 0,
    });
    // The server's socket reads happen inside SSL_read, before the head they bring is seen: they
    // are unattributed, never the previous request's (the read that brought early-3 ran while the
    // thread was in early-2: counted unsure, not kept; early-1's response head is no context that
    // could carry the one that brought early-2). target_kind 2: a socket. This server's only:
    // another agent's hooked Python server (a test beside this one) keeps its threads' events
    // here, in their transactions.
    await waitFor(() => storedCounter(store, 'unsure_read') > unsure, { what: 'the unsure reads counted' });
    const socketReads = readStoredEvents(
      store,
      `e.type = ${RecordType.SysRead} AND t.kind = 2 AND e.pid = ${server.child.pid!}`,
    );
    expect(socketReads.filter((e) => e.txn !== null)).toEqual([]);
  });

  it("gives a client's writes the context of the request head it sent with SSL_write (curl, libssl.so.3)", async () => {
    const curlOut = join(dir, 'curl');
    mkdirSync(curlOut, { recursive: true });
    const body = join(curlOut, 'curl-1.a');
    const trace = 'ee'.repeat(16);
    const curl = spawn(
      '/bin/sh',
      [
        '-c',
        `${cgroup.enter} "$@"`,
        'sh',
        'curl',
        '-s',
        '--cacert',
        cert,
        '-H',
        `traceparent: 00-${trace}-00f067aa0ba902b7-01`,
        '-H',
        'x-request-id: curl-1',
        '-o',
        body,
        `https://127.0.0.1:${server.port}/`,
      ],
      { stdio: 'ignore' },
    );
    expect(await new Promise((r) => curl.once('exit', r))).toBe(0);
    // curl's write of the response body, after its SSL_write of the head
    const [write] = await writesFor(store, curlOut, 'curl-', 1);
    expect([write!.comm, write!.txn, write!.trace]).toEqual(['curl', 'curl-1', trace]);
  });

  it('probes a program with OpenSSL linked in that starts after the agent (a copy of node)', async () => {
    const lateOut = join(dir, 'late');
    mkdirSync(lateOut, { recursive: true });
    // a new file: the probes on the running node's file do not cover it until a scan finds it
    const copy = join(dir, 'late-node');
    copyFileSync(process.execPath, copy);
    chmodSync(copy, 0o755);
    const late = await startServer(copy, [join(SUPPORT, 'tls-node-server.js'), cert, key, lateOut]);
    try {
      // requests keep coming until the next scan has probed it: only the earlier ones are unattributed
      const pool = new Agent({ keepAlive: true, maxSockets: 1 });
      const ids: string[] = [];
      const events = await waitFor(
        async () => {
          const rid = `late-${ids.length}`;
          ids.push(rid);
          await get(pool, late.port, rid);
          // the event loop's write (.a); the pool's (.b) is unattributed by design
          const rows = await writesFor(store, lateOut, `${rid}.a`, 1);
          return rows[0]!.txn === rid ? rows : undefined;
        },
        10000,
        200,
      );
      pool.destroy();
      expect(events).toHaveLength(1);
      const all = await writesFor(store, lateOut, 'late-', 2 * ids.length);
      expect(score(all, ids, 2)).toMatchObject({ wrong: 0, missing: 0 });
    } finally {
      late.child.kill();
    }
  });

  it.each([1, 8, 64])(
    'is exact at %i concurrent requests: correct >= 99.9%%, wrong 0, missing 0',
    async (level) => {
      const ids = await load(server.port, 'py', level);
      const s = score(await writesFor(store, out, `py${level}-`, PER_LEVEL * FILES_PER_REQUEST), ids);
      process.stdout.write(`TLS ThreadingHTTPServer c=${level}: ${JSON.stringify(s)}\n`);
      expect(s.wrong).toBe(0);
      expect(s.missing).toBe(0);
      expect(s.correct / (PER_LEVEL * FILES_PER_REQUEST)).toBeGreaterThanOrEqual(0.999);
    },
  );

  /** A Node server in the test cgroup the agent's hook goes into, once it did (started once, kept). */
  const hooked = new Map<string, Promise<{ child: ChildProcess; port: number }>>();
  function hookedNode(
    name: string,
    script: string,
    args: string[],
  ): Promise<{ child: ChildProcess; port: number }> {
    if (!hooked.has(name))
      hooked.set(
        name,
        startServer(process.execPath, [join(SUPPORT, script), ...args], hookableEnv()).then(
          async (server) => {
            expect(await nodeHookLine(agent, server.child.pid!)).toMatch(/hooked a Node process/);
            return server;
          },
        ),
      );
    return hooked.get(name)!;
  }

  /** The goal: correct >= 99.9%, wrong 0, missing 0. */
  function expectExact(s: Score, writes: number): void {
    expect({ wrong: s.wrong, missing: s.missing }).toEqual({ wrong: 0, missing: 0 });
    expect(s.correct / writes).toBeGreaterThanOrEqual(0.999);
  }

  // The hook opens each request's unit on the event loop, which carries it across awaits and
  // through libuv's pool; the TLS connection's own reads stay unsure (none).
  it.each([1, 8, 64])('follows Node https requests at %i concurrent: exact', async (level) => {
    const nodeOut = join(dir, 'node');
    mkdirSync(nodeOut, { recursive: true });
    const node = await hookedNode('https', 'tls-node-server.js', [cert, key, nodeOut]);
    const ids = await load(node.port, 'node', level);
    const s = score(await writesFor(store, nodeOut, `node${level}-`, PER_LEVEL * 2), ids, 2);
    process.stdout.write(`TLS Node https c=${level}: ${JSON.stringify(s)}\n`);
    expectExact(s, PER_LEVEL * 2);
  });

  // Many streams multiplexed on one connection: each stream runs in its own unit (the connection's
  // calls belong to none of them).
  it.each([
    ['h2c', false, 1],
    ['h2c', false, 8],
    ['h2c', false, 64],
    ['h2 over TLS', true, 1],
    ['h2 over TLS', true, 8],
    ['h2 over TLS', true, 64],
  ])(
    'follows Node http2 (%s, TLS %s) streams, %i at a time on one connection: exact',
    async (name, tls, level) => {
      const h2Out = join(dir, tls ? 'h2s' : 'h2c');
      mkdirSync(h2Out, { recursive: true });
      const h2 = await hookedNode(name, 'h2-node-server.js', [h2Out, ...(tls ? [cert, key] : [])]);
      const session = connectH2(
        `${tls ? 'https' : 'http'}://127.0.0.1:${h2.port}`,
        tls ? { ca: readFileSync(cert) } : {},
      );
      try {
        const ids = Array.from({ length: PER_LEVEL }, (_, i) => `h2${tls ? 's' : 'c'}${level}-${i}`);
        await inTurn(ids, level, (rid) =>
          h2Request(session, { 'x-request-id': rid, traceparent: traceparent() }),
        );
        const s = score(
          await writesFor(store, h2Out, `h2${tls ? 's' : 'c'}${level}-`, PER_LEVEL * 2),
          ids,
          2,
        );
        process.stdout.write(`Node http2 ${name}, ${level} streams at a time: ${JSON.stringify(s)}\n`);
        expectExact(s, PER_LEVEL * 2);
      } finally {
        session.destroy();
      }
    },
  );

  // HPACK's shapes, on one h2c connection: a header block that references the dynamic table (the
  // traceparent and x-request-id of an earlier stream, sent again after another stream's),
  // Huffman-coded values (nghttp2's choice wherever shorter), and a block past the 16 KiB frame
  // size that goes on in a CONTINUATION frame. A relay reads the client's frames off the wire to
  // show each shape was sent; each stream's writes must carry exactly its transaction and trace.
  it('follows Node http2 (h2c) streams whose headers are table-indexed, Huffman-coded or split by CONTINUATION: exact', async () => {
    const h2Out = join(dir, 'h2c');
    mkdirSync(h2Out, { recursive: true });
    const h2 = await hookedNode('h2c', 'h2-node-server.js', [h2Out]);
    const tap = await frameTap(h2.port);
    const session = connectH2(`http://127.0.0.1:${tap.port}`);
    const a = { 'x-request-id': 'hpack-a', traceparent: traceparent() };
    const b = { 'x-request-id': 'hpack-b', traceparent: traceparent() };
    // 'X' has an 8-bit Huffman code: no shorter coded, so 20 KiB of it passes the 16 KiB frame
    const c = { 'x-padding': 'X'.repeat(20 * 1024), 'x-request-id': 'hpack-c', traceparent: traceparent() };
    try {
      for (const headers of [a, b, a, c]) await h2Request(session, headers);
    } finally {
      session.destroy();
      tap.close();
    }
    const blocks = tap.frames.filter((f) => f.type === FRAME_HEADERS);
    expect(blocks).toHaveLength(4);
    // b's block is shorter than its two new values alone: they went Huffman-coded
    expect(blocks[1]!.length).toBeLessThan(b.traceparent.length + b['x-request-id'].length);
    // a again: every field (4 pseudo-headers, traceparent, x-request-id) one byte, an indexed
    // reference (the two are in no static table: the dynamic table's entries)
    expect(blocks[2]!.length).toBe(6);
    // c's block fills a 16 KiB HEADERS frame and goes on in a CONTINUATION
    expect(blocks[3]!.length).toBe(16384);
    expect(
      tap.frames.filter((f) => f.type === FRAME_CONTINUATION && f.stream === blocks[3]!.stream),
    ).toHaveLength(1);
    const rows = await writesFor(store, h2Out, 'hpack-', 8);
    const traceOf = (h: { traceparent: string }) => h.traceparent.split('-')[1];
    expect(rows.map((e) => [e.target!.slice(h2Out.length + 1), e.txn, e.trace]).sort()).toEqual(
      [
        ...[a, a, b, c].flatMap((h) => [
          [`${h['x-request-id']}.a`, h['x-request-id'], traceOf(h)],
          [`${h['x-request-id']}.b`, h['x-request-id'], traceOf(h)],
        ]),
      ].sort(),
    );
    expect(score(rows, ['hpack-a', 'hpack-b', 'hpack-c'])).toEqual({
      correct: 8,
      wrong: 0,
      none: 0,
      missing: 0,
    });
  });

  // gRPC on @grpc/grpc-js (npm): its server takes http2 'stream's; the call's metadata carries
  // traceparent and x-request-id. Many calls at a time on one channel.
  it.each([
    ['unary', 'Unary', 1, 1],
    ['unary', 'Unary', 8, 1],
    ['unary', 'Unary', 64, 1],
    ['server-streaming', 'Stream', 1, 4],
    ['server-streaming', 'Stream', 8, 4],
    ['server-streaming', 'Stream', 64, 4],
  ])(
    'follows grpc-js %s calls (%s), %i at a time on one channel: exact',
    async (name, method, level, files) => {
      const grpcOut = join(dir, 'grpc-js');
      mkdirSync(grpcOut, { recursive: true });
      const server = await hookedNode('grpc-js', 'grpc-node-server.js', [grpcOut]);
      const client = new grpc.Client(`127.0.0.1:${server.port}`, grpc.credentials.createInsecure());
      const bytes = (b: Buffer) => b;
      try {
        const prefix = `gjs${method}${level}-`;
        const ids = Array.from({ length: PER_LEVEL }, (_, i) => `${prefix}${i}`);
        await inTurn(ids, level, (rid) => {
          const metadata = new grpc.Metadata();
          metadata.set('x-request-id', rid);
          metadata.set('traceparent', traceparent());
          const path = `/kreplay.Files/${method}`;
          return new Promise<void>((resolve, reject) => {
            if (method === 'Unary')
              client.makeUnaryRequest(path, bytes, bytes, Buffer.from(rid), metadata, (err) =>
                err ? reject(err) : resolve(),
              );
            else
              client
                .makeServerStreamRequest(path, bytes, bytes, Buffer.from(rid), metadata)
                .on('data', () => undefined)
                .once('error', reject)
                .once('end', () => resolve());
          });
        });
        const rows = await writesFor(store, grpcOut, prefix, PER_LEVEL * files);
        const s = score(
          rows.map((e) => ({ ...e, target: e.target!.replace(/\.(u|s\d)$/, '.a') })),
          ids,
          files,
        );
        process.stdout.write(`grpc-js ${name}, ${level} calls at a time: ${JSON.stringify(s)}\n`);
        expectExact(s, PER_LEVEL * files);
      } finally {
        client.close();
      }
    },
  );
});
