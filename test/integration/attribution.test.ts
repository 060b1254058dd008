/**
 * Transaction and trace attribution end to end: the real agent binary, real
 * kernel tracepoints, processes of the test's own in a cgroup the agent is
 * pointed at.
 */
import { mkdtempSync, realpathSync, rmSync } from 'node:fs';
import { createServer, type Server } from 'node:net';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { RecordType, targetKindCode } from '../../core/model';
import { KREPLAY_BIN, startAgent, type AgentProcess } from '../support/agent-process';
import { createCgroup, runInCgroup, type TestCgroup } from '../support/cgroup';
import { createLoopDevice, type LoopDevice } from '../support/loop-device';
import { readStoredEvents, storedCounter, type StoredEvent } from '../support/store-rows';
import { waitFor } from '../support/wait';

const WRITER = join(__dirname, '..', 'support', 'writer-child.js');
const TRACE = '4bf92f3577b34da6a3ce929d0e0e4736';

let dir: string;
let cgroup: TestCgroup;
let agent: AgentProcess;
let store: string;

const inCgroup = (command: string, args: string[]) => runInCgroup(cgroup, command, args);

/** A shell command that writes exactly `bytes` bytes to stdout in one write(2). */
const oneWrite = (bytes: number) => `dd if=/dev/zero bs=${bytes} count=1 status=none`;

const writesOf = (events: StoredEvent[], lo: number, hi: number) =>
  events.filter((e) => e.type === RecordType.SysWrite && e.bytes >= lo && e.bytes < hi);

beforeAll(async () => {
  dir = mkdtempSync(join(tmpdir(), 'kreplay-attr-'));
  cgroup = createCgroup(`kreplay-attr-${process.pid}.service`);
  store = join(dir, 'data', 'attr.db');
  agent = await startAgent([
    '--data-dir',
    join(dir, 'data'),
    '--node',
    'attr',
    '--cgroup-id',
    String(cgroup.id),
  ]);
});

afterAll(async () => {
  const code = await agent?.stop();
  cgroup?.remove();
  rmSync(dir, { recursive: true, force: true });
  expect(code).toBe(0);
});

describe('attribution (real kernel)', () => {
  it('gives the marker context to the thread, its new thread and its child process until cleared', async () => {
    const file = join(dir, 'inherit.out');
    const n = 50;
    const { pid, childPid } = JSON.parse(
      await inCgroup(process.execPath, [WRITER, file, 'checkout-42', TRACE, String(n)]),
    ) as {
      pid: number;
      childPid: number;
    };
    const phases = (rows: StoredEvent[]) => [
      writesOf(rows, 7, 8),
      writesOf(rows, 1000, 1000 + n),
      writesOf(rows, 2000, 2005),
      writesOf(rows, 3000, 3003),
      writesOf(rows, 4000, 4003),
    ];
    const events = await waitFor(() => {
      const rows = readStoredEvents(store, `e.pid IN (${pid}, ${childPid})`);
      return phases(rows)[4]!.length === 3 ? rows : undefined;
    });
    const [before, main, thread, child, after] = phases(events) as StoredEvent[][];
    expect([before!.length, main!.length, thread!.length, child!.length, after!.length]).toEqual([
      3,
      n,
      5,
      3,
      3,
    ]);
    for (const e of [...main!, ...thread!, ...child!])
      expect([e.txn, e.trace]).toEqual(['checkout-42', TRACE]);
    for (const e of [...before!, ...after!]) expect([e.txn, e.trace]).toEqual([null, null]);
    expect(new Set(thread!.map((e) => e.tid)).has(pid)).toBe(false);
    expect(thread!.every((e) => e.pid === pid)).toBe(true);
    expect(child!.every((e) => e.pid === childPid)).toBe(true);
    // the marker write itself is an event of the context it sets, the clearing one of none
    const markerBytes = `KREPLAY-CTX txn=checkout-42 trace=${TRACE}\n`.length;
    const markers = events.filter(
      (e) => e.pid === pid && (e.bytes === markerBytes || e.bytes === 'KREPLAY-CTX\n'.length),
    );
    expect(markers.map((e) => e.txn)).toEqual(['checkout-42', null]);
    // the cgroup is a *.service unit, so that is the service name
    expect(new Set(main!.map((e) => e.service))).toEqual(new Set([`kreplay-attr-${process.pid}`]));
  });

  it('tags a whole command and everything it starts with kreplay run', async () => {
    const file = join(dir, 'run.out');
    await inCgroup(process.execPath, [
      KREPLAY_BIN,
      'run',
      '--txn',
      'ci-job-7',
      '--',
      'sh',
      '-c',
      `${oneWrite(5000)} >> ${file}; sh -c "${oneWrite(5001)} >> ${file}"`,
    ]);
    const events = await waitFor(() => {
      // (dd's reads of /dev/zero are in the transaction too, as sys_read)
      const rows = readStoredEvents(store, `e.type = ${RecordType.SysWrite} AND e.bytes IN (5000, 5001)`);
      return rows.length >= 2 ? rows : undefined;
    });
    expect(events.map((e) => [e.bytes, e.txn, e.trace]).sort()).toEqual([
      [5000, 'ci-job-7', null],
      [5001, 'ci-job-7', null],
    ]);
    // each short-lived sh's write, resolved in the kernel, stored through the agent's dictionary
    const path = realpathSync(file);
    expect(events.map((e) => [e.target_kind, e.target])).toEqual([
      [targetKindCode('file'), path],
      [targetKindCode('file'), path],
    ]);
    expect(new Set(events.map((e) => e.pid)).size).toBe(2);
  });

  it('attributes HTTP heads with traceparent written to a socket', async () => {
    const server: Server = createServer((s) => s.resume());
    await new Promise<void>((r) => server.listen(0, '127.0.0.1', r));
    const port = (server.address() as { port: number }).port;
    try {
      const script = `
        const net = require('node:net'); const fs = require('node:fs');
        const s = net.createConnection(${port}, '127.0.0.1', () => {
          const fd = s._handle.fd;
          const send = (head, pad) => fs.writeSync(fd, head + 'x'.repeat(pad));
          send('GET /a HTTP/1.1\\r\\ntraceparent: 00-${TRACE}-00f067aa0ba902b7-01\\r\\nX-Request-Id: req-1\\r\\n\\r\\n', 0);
          fs.writeSync(fd, Buffer.alloc(6100, 120));
          send('POST /b HTTP/1.1\\r\\nTraceparent: 00-aaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaa-00f067aa0ba902b7-01\\r\\n\\r\\n', 0);
          fs.writeSync(fd, Buffer.alloc(6200, 120));
          send('GET /c HTTP/1.1\\r\\ntraceparent: 00-zzzz-00f067aa0ba902b7-01\\r\\n\\r\\n', 0);
          fs.writeSync(fd, Buffer.alloc(6300, 120));
          s.end();
        });`;
      await inCgroup(process.execPath, ['-e', script]);
      const events = await waitFor(() => {
        const rows = readStoredEvents(store, 'e.bytes IN (6100, 6200, 6300)');
        return rows.length >= 3 ? rows : undefined;
      });
      const by = (bytes: number) => events.find((e) => e.bytes === bytes)!;
      expect([by(6100).txn, by(6100).trace]).toEqual(['req-1', TRACE]);
      expect([by(6100).target_kind, by(6100).target]).toEqual([
        targetKindCode('socket'),
        `tcp 127.0.0.1:${port}`,
      ]);
      expect([by(6200).txn, by(6200).trace]).toEqual(['a'.repeat(32), 'a'.repeat(32)]);
      // a malformed traceparent changes nothing: still the previous head's context
      expect([by(6300).txn, by(6300).trace]).toEqual(['a'.repeat(32), 'a'.repeat(32)]);
    } finally {
      server.close();
    }
  });

  it('counts a malformed marker and changes nothing', async () => {
    const file = join(dir, 'malformed.out');
    await inCgroup('/bin/sh', [
      '-c',
      `printf 'KREPLAY-CTX txn=good\\n' > /dev/null; printf 'KREPLAY-CTX txn=bad value!\\n' > /dev/null; ${oneWrite(7000)} >> ${file}`,
    ]);
    const [event] = await waitFor(() => {
      const rows = readStoredEvents(store, 'e.bytes = 7000');
      return rows.length ? rows : undefined;
    });
    expect(event!.txn).toBe('good');
    // counters reach the store with each status line (every second here)
    await waitFor(() => (storedCounter(store, 'malformed_markers') >= 1 ? true : undefined));
  });
});

describe('attribution of block I/O (real kernel, loop device)', () => {
  let loop: LoopDevice;
  beforeAll(() => {
    loop = createLoopDevice();
  });
  afterAll(() => loop?.remove());

  it('gives O_DIRECT writes after a marker the marker transaction', async () => {
    const target = join(loop.mountPoint, 'direct.bin');
    await inCgroup('/bin/sh', [
      '-c',
      `printf 'KREPLAY-CTX txn=io-txn-1\\n' > /dev/null; dd if=/dev/zero of=${target} bs=4096 count=32 oflag=direct status=none`,
    ]);
    const dev = loop.major * 0x100000 + loop.minor;
    const blocks = await waitFor(() => {
      const rows = readStoredEvents(store, `e.type = 2 AND e.dev = ${dev} AND e.op = 1`).filter(
        (e) => e.comm === 'dd',
      );
      return rows.length >= 32 ? rows : undefined;
    });
    expect(blocks.every((e) => e.txn === 'io-txn-1')).toBe(true);
    expect(blocks.reduce((sum, e) => sum + e.bytes, 0)).toBeGreaterThanOrEqual(32 * 4096);
  });
});
