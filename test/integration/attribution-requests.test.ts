/**
 * Attribution where requests really arrive (real kernel, real agent): the
 * context of a server thread comes from the request head it reads, a
 * client's from the head it sends, and `kreplay run` tags only its command.
 */
import type { ChildProcess } from 'node:child_process';
import { copyFileSync, mkdtempSync, rmSync } from 'node:fs';
import { request, Agent } from 'node:http';
import { connect, type Socket } from 'node:net';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { blockOpName, RecordType, SYSCALL_NAMES } from '../../core/model';
import { KREPLAY_BIN, startAgent, type AgentProcess } from '../support/agent-process';
import { createCgroup, runInCgroup, serverInCgroup, type TestCgroup } from '../support/cgroup';
import { readStoredEvents, storedCounter, type StoredEvent } from '../support/store-rows';
import { waitFor } from '../support/wait';

const SUPPORT = join(__dirname, '..', 'support');
const MARKER = (txn: string) => `KREPLAY-CTX txn=${txn}\n`;
const trace = (n: number) => n.toString(16).padStart(32, 'a');
const traceparent = (n: number) => `00-${trace(n)}-00f067aa0ba902b7-01`;

let dir: string;
let cgroup: TestCgroup;

const inCgroup = (command: string, args: string[]) => runInCgroup(cgroup, command, args);

const startServer = (command: string, args: string[]) => serverInCgroup(cgroup, command, args);

/* writes proper: the servers' responses, sent, are sys_write events too and may have the same sizes */
const SENDS = new Set(
  (['sendto', 'sendmsg', 'sendmmsg', 'sendfile'] as const).map((n) => SYSCALL_NAMES.indexOf(n)),
);
const sysWrites = (where: string, store: string) =>
  readStoredEvents(store, where).filter((e) => e.type === RecordType.SysWrite && !SENDS.has(e.syscall ?? 0));

/** Waits until the store holds `n` writes matching `where`. */
const writesOf = (store: string, where: string, n: number): Promise<StoredEvent[]> =>
  waitFor(() => {
    const rows = sysWrites(where, store);
    return rows.length >= n ? rows : undefined;
  });

const bySize = (events: StoredEvent[]) => new Map(events.map((e) => [e.bytes, e]));

beforeAll(() => {
  dir = mkdtempSync(join(tmpdir(), 'kreplay-req-'));
  cgroup = createCgroup(`kreplay-req-${process.pid}.service`);
});

afterAll(() => {
  cgroup?.remove();
  rmSync(dir, { recursive: true, force: true });
});

describe('request attribution (real kernel, cgroup filter)', () => {
  let agent: AgentProcess;
  let store: string;
  const servers: ChildProcess[] = [];

  beforeAll(async () => {
    store = join(dir, 'data', 'req.db');
    agent = await startAgent([
      '--data-dir',
      join(dir, 'data'),
      '--node',
      'req',
      '--cgroup-id',
      String(cgroup.id),
    ]);
  });

  afterAll(async () => {
    for (const s of servers) s.kill();
    const code = await agent?.stop();
    expect(code).toBe(0);
  });

  it('kreplay run -- true puts exactly the marker write into the transaction', async () => {
    await inCgroup(process.execPath, [KREPLAY_BIN, 'run', '--txn', 'run-true', '--', 'true']);
    // a later write of the same cgroup tells the store has caught up with the run
    await inCgroup('/bin/sh', ['-c', `dd if=/dev/zero of=${join(dir, 'sync1')} bs=1201 count=1 status=none`]);
    await writesOf(store, 'e.bytes = 1201', 1);
    const events = sysWrites('1', store).filter((e) => e.txn === 'run-true');
    expect(events.map((e) => [e.bytes, e.comm])).toEqual([[MARKER('run-true').length, 'kreplay-exec-sh']]);
  });

  it("kreplay run -- sh -c 'echo a > f' gives the marker and the shell's writes, none of the wrapper's", async () => {
    const file = join(dir, 'run-sh.out');
    await inCgroup(process.execPath, [
      KREPLAY_BIN,
      'run',
      '--txn',
      'run-sh',
      '--',
      'sh',
      '-c',
      `echo a > ${file}`,
    ]);
    await inCgroup('/bin/sh', ['-c', `dd if=/dev/zero of=${join(dir, 'sync2')} bs=1202 count=1 status=none`]);
    await writesOf(store, 'e.bytes = 1202', 1);
    const events = sysWrites('1', store).filter((e) => e.txn === 'run-sh');
    expect(events.map((e) => [e.bytes, e.comm, e.target])).toEqual([
      [MARKER('run-sh').length, 'kreplay-exec-sh', '/dev/null'],
      [2, 'sh', file],
    ]);
    // the shim execs the command in its own process: one pid for both
    expect(new Set(events.map((e) => e.pid)).size).toBe(1);
  });

  it("gives a thread-per-request server's writes the context of the request it reads (curl, keep-alive)", async () => {
    const server = await startServer('python3', [join(SUPPORT, 'http-log-server.py'), join(dir, 'py.log')]);
    servers.push(server.child);
    const url = (size: number) => `http://127.0.0.1:${server.port}/${size}`;
    const get = (n: number, size: number) => [
      '-s',
      '-o',
      join(dir, `curl-${n}.out`),
      '-H',
      `traceparent: ${traceparent(n)}`,
      '-H',
      `x-request-id: curl-r${n}`,
      url(size),
    ];
    // one curl, two requests: --next reuses the connection
    await inCgroup('curl', [...get(1, 3001), '--next', ...get(2, 3002)]);
    const events = bySize(await writesOf(store, 'e.bytes IN (3001, 3002, 4001, 4002)', 4));
    const ctx = (bytes: number) => [events.get(bytes)!.txn, events.get(bytes)!.trace];
    // the handler's log lines
    expect(ctx(3001)).toEqual(['curl-r1', trace(1)]);
    expect(ctx(3002)).toEqual(['curl-r2', trace(2)]);
    // the same server thread read both heads: the second switched its context
    expect(events.get(3001)!.tid).toBe(events.get(3002)!.tid);
    expect(events.get(3001)!.comm).toMatch(/python/);
    // curl's own writes of each response body, after it sent the head with sendto
    expect(ctx(4001)).toEqual(['curl-r1', trace(1)]);
    expect(ctx(4002)).toEqual(['curl-r2', trace(2)]);
    expect(events.get(4001)!.comm).toBe('curl');
  });

  it('gives no false context for malformed heads, heads split across reads and binary data, and counts them', async () => {
    const server = await startServer('python3', [join(SUPPORT, 'recv-log-server.py'), join(dir, 'raw.log')]);
    servers.push(server.child);
    const open = () =>
      new Promise<Socket>((resolve) => {
        const s = connect(server.port, '127.0.0.1', () => resolve(s));
      });
    // sends one piece and waits for the server's answer to it: one recv, one log line each
    const send = (s: Socket, data: string | Buffer) =>
      new Promise<void>((resolve) => {
        s.once('data', () => resolve());
        s.write(data);
      });
    const head = (n: number | null, extra = '') =>
      `GET /${n} HTTP/1.1\r\nHost: x\r\n${n === null ? '' : `traceparent: ${traceparent(n)}\r\n`}${extra}\r\n`;
    const a = await open();
    await send(a, head(11, 'x-request-id: raw-1\r\n')); // 8001: raw-1
    await send(a, 'GET /bad HTTP/1.1\r\ntraceparent: 00-zzzz-00f067aa0ba902b7-01\r\n\r\n'); // 8002: none
    await send(a, head(12)); // 8003: the trace id as transaction
    await send(a, `GET /split HTTP/1.1\r\ntraceparent: ${traceparent(13)}\r\n`); // 8004: none
    await send(a, 'x-request-id: raw-3\r\n\r\n'); // 8005: still none
    await send(a, head(null)); // 8006: a head without traceparent: none
    await send(a, head(14)); // 8007
    a.destroy();
    const b = await open();
    // a binary protocol on the same port, and bytes that only look like a method
    await send(b, Buffer.from([0x16, 0x03, 0x01, 0x00, 0xa5, 0x01, 0x00, 0x00, 0xa1, 0x03, 0x03])); // 8008
    await send(b, 'GETS / HTTP/1.1\r\ntraceparent: ' + traceparent(15) + '\r\n\r\n'); // 8009
    await send(b, Buffer.concat([Buffer.from([0]), Buffer.from(head(16))])); // 8010
    b.destroy();
    const events = bySize(await writesOf(store, 'e.bytes BETWEEN 8001 AND 8010', 10));
    const txns = Array.from({ length: 10 }, (_, i) => events.get(8001 + i)!.txn);
    expect(txns).toEqual(['raw-1', null, trace(12), null, null, null, trace(14), null, null, null]);
    await waitFor(() => (storedCounter(store, 'incomplete_request_heads') >= 1 ? true : undefined));
    await waitFor(() => (storedCounter(store, 'untraced_request_heads') >= 2 ? true : undefined));
  });

  /**
   * Accuracy = the server's log lines whose stored transaction is the request
   * that wrote them (ground truth: each line of size base + i holds the id of
   * request i) over all requests, at each number of concurrent requests.
   */
  async function accuracy(port: number, name: string, base: number): Promise<Record<string, string>> {
    const perLevel = 192;
    const levels = [1, 8, 64];
    const out: Record<string, string> = {};
    for (const [li, level] of levels.entries()) {
      const lo = base + li * 1000;
      const id = (i: number) => `${name}${level}-${i}`;
      const pool = new Agent({ keepAlive: true, maxSockets: level });
      const get = (i: number) =>
        new Promise<void>((resolve, reject) => {
          const headers = { traceparent: traceparent(lo + i), 'x-request-id': id(i) };
          request({ agent: pool, host: '127.0.0.1', port, path: `/${lo + i}`, headers }, (res) =>
            res.resume().once('end', () => resolve()),
          )
            .once('error', reject)
            .end();
        });
      let next = 0;
      const worker = async () => {
        while (next < perLevel) await get(next++);
      };
      await Promise.all(Array.from({ length: level }, worker));
      pool.destroy();
      const events = await writesOf(store, `e.bytes BETWEEN ${lo} AND ${lo + perLevel - 1}`, perLevel);
      expect(events).toHaveLength(perLevel);
      const right = events.filter((e) => e.txn === id(e.bytes - lo)).length;
      const none = events.filter((e) => e.txn === null).length;
      // correct / wrong (another request's transaction) / none (left unattributed, counted)
      out[`c=${level}`] = `${right}/${perLevel - right - none}/${none}`;
    }
    process.stdout.write(
      `${name} attribution (${perLevel} requests per level, correct/wrong/none): ${JSON.stringify(out)}\n`,
    );
    return out;
  }

  it('is exact for a thread-per-request server under concurrent requests', async () => {
    const server = await startServer('python3', [join(SUPPORT, 'http-log-server.py'), join(dir, 'py2.log')]);
    servers.push(server.child);
    // each connection has its thread, which reads each head before it handles the request
    expect(await accuracy(server.port, 'python', 30000)).toEqual({
      'c=1': '192/0/0',
      'c=8': '192/0/0',
      'c=64': '192/0/0',
    });
  });

  it('never gives the writes of an event-loop (Node http) server another request transaction, at 1, 8 and 64 concurrent', async () => {
    const server = await startServer(process.execPath, [
      join(SUPPORT, 'node-log-server.js'),
      join(dir, 'node.log'),
    ]);
    servers.push(server.child);
    // one thread interleaves the requests' connections: once it does, its writes go unattributed
    // (counted), never to another request; correct is measured, wrong is asserted to be none
    const figures = await accuracy(server.port, 'node', 20000);
    for (const [level, cell] of Object.entries(figures))
      expect({ level, wrong: cell.split('/')[1] }).toEqual({ level, wrong: '0' });
    await waitFor(() => storedCounter(store, 'interleaved_head') > 0, { what: 'interleaved heads counted' });
  });
});

describe('a server that ran before the agent (real kernel)', () => {
  it("never gives a request that was in flight when the agent started another request's transaction", async () => {
    const store = join(dir, 'before', 'before.db');
    const get = (port: number, path: string, id: string) =>
      new Promise<string>((resolve, reject) => {
        request(
          {
            host: '127.0.0.1',
            port,
            path,
            agent: false,
            headers: { 'x-request-id': id, traceparent: traceparent(9) },
          },
          (res) => {
            let body = '';
            res.setEncoding('utf8').on('data', (chunk: string) => (body += chunk));
            res.on('end', () => resolve(body));
          },
        )
          .on('error', reject)
          .end();
      });
    // an event loop (Node http, no hook) reads a request's head and holds it, then the agent starts
    const server = await startServer(process.execPath, [
      join(SUPPORT, 'node-held-server.js'),
      join(dir, 'held.log'),
    ]);
    let agent: AgentProcess | undefined;
    try {
      const held = get(server.port, '/hold/3001', 'held-before');
      await waitFor(async () => (await get(server.port, '/held/0', 'ask')) === '1', {
        what: 'the request held',
      });
      agent = await startAgent([
        '--data-dir',
        join(dir, 'before'),
        '--node',
        'before',
        '--cgroup-id',
        String(cgroup.id),
      ]);
      // the first head the agent sees the loop read; the held request writes right after it
      await get(server.port, '/release/3002', 'released-after');
      await held;
      const writes = bySize(await writesOf(store, 'e.bytes IN (3001, 3002)', 2));
      // the loop started before the agent: which request its work is for is not known, and never another's
      expect(writes.get(3001)?.txn ?? null).toBeNull();
      expect(writes.get(3002)?.txn ?? null).toBeNull();
      await waitFor(() => storedCounter(store, 'interleaved_head') > 0, {
        what: 'the loop counted as interleaving',
      });
    } finally {
      server.child.kill();
      expect(await agent?.stop()).toBe(0);
    }
  });
});

describe('filters never hide context (real kernel, --comm filter)', () => {
  let agent: AgentProcess;
  let store: string;

  beforeAll(async () => {
    store = join(dir, 'comm', 'comm.db');
    agent = await startAgent(['--data-dir', join(dir, 'comm'), '--node', 'comm', '--comm', 'zzwriter']);
  });

  afterAll(async () => {
    const code = await agent?.stop();
    expect(code).toBe(0);
  });

  it('keeps the marker of kreplay run, though its writer is filtered out, for the included comm (and its transaction write)', async () => {
    const writer = join(dir, 'zzwriter');
    copyFileSync('/bin/dd', writer);
    const out = join(dir, 'zz.out');
    const script = [1, 2, 3].map(
      (n) => `${writer} if=/dev/zero of=${out} bs=${1300 + n} count=1 status=none`,
    );
    await inCgroup(process.execPath, [
      KREPLAY_BIN,
      'run',
      '--txn',
      'comm-txn',
      '--',
      'sh',
      '-c',
      script.join('; '),
    ]);
    const events = await writesOf(store, 'e.bytes BETWEEN 1301 AND 1303', 3);
    expect(events.map((e) => [e.bytes, e.comm, e.txn])).toEqual([
      [1301, 'zzwriter', 'comm-txn'],
      [1302, 'zzwriter', 'comm-txn'],
      [1303, 'zzwriter', 'comm-txn'],
    ]);
    // of the tasks the filter leaves out, only the marker's own write is stored: it is in the
    // transaction, and transaction events are kept unless --filter-transactions
    // (its writes: the reads of the shell it execs, in the transaction, are kept too)
    const others = readStoredEvents(store).filter((e) => e.comm !== 'zzwriter');
    const inTxn = others.filter((e) => e.txn === 'comm-txn');
    const markers = inTxn.filter((e) => e.type === RecordType.SysWrite);
    expect(markers.map((e) => [e.comm, e.target])).toEqual([['kreplay-exec-sh', '/dev/null']]);
    // and, when the page cache is cold (a fresh machine), the block reads of the transaction's own
    // execs: the shell's under the wrapper's name, each writer's under the forking shell's
    const ownPids = new Set([...markers, ...events].map((e) => e.pid));
    expect(
      inTxn
        .filter((e) => e.type !== RecordType.SysWrite && e.type !== RecordType.SysRead)
        .filter(
          (e) => !(e.type === RecordType.BlockIo && blockOpName(e.op!) === 'read' && ownPids.has(e.pid)),
        ),
    ).toEqual([]);
    // nothing outside a transaction (other processes' transactions may run meanwhile)
    expect(others.filter((e) => e.txn === null && e.trace === null)).toEqual([]);
  });
});
