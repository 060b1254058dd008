/**
 * Write targets against the real kernel: a process that writes once to a
 * file, a pipe, /dev/null, TCP over v4 and v6 loopback, UDP, unix sockets
 * and an unlinked file, then exits at once. Every write names its target
 * exactly, resolved in the kernel at the write (the process is gone before
 * anyone could look at /proc), and each target's record comes first.
 */
import { execFileSync } from 'node:child_process';
import { createSocket, type Socket as UdpSocket } from 'node:dgram';
import { realpathSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { createServer, type Server } from 'node:net';
import { basename, join, resolve } from 'node:path';
import type { DecodedRecord, DecodedSysWrite, DecodedTarget } from '../support/decode-records';
import { targetKindName, targetText } from '../../core/model';
import { useTempDir } from '../support/temp-dir';
import { captureAround, describeKernel, runToExit } from './capture-harness';

const dir = useTempDir();

/** Size of each write of target-writer.c -> the target it must carry. */
function expectedTargets(
  file: string,
  unixPath: string,
  ports: { tcp4: number; tcp6: number; udp4: number },
  abstract: string,
): Record<number, [string, string]> {
  return {
    11: ['file', file],
    12: ['pipe', 'pipe'],
    13: ['char', '/dev/null'],
    14: ['socket', `tcp 127.0.0.1:${ports.tcp4}`],
    15: ['socket', `tcp [::1]:${ports.tcp6}`],
    16: ['socket', `unix ${unixPath}`],
    17: ['socket', `udp 127.0.0.1:${ports.udp4}`],
    18: ['socket', `unix @${abstract}`],
    19: ['file', `${file}.unlinked (deleted)`],
    8: ['anon', 'anon_inode:[eventfd]'],
    20: ['socket', `unix ${unixPath}2`],
    21: ['socket', `unix ${unixPath}.d1`],
    22: ['socket', `unix ${unixPath}.d2`],
  };
}

function listen(server: Server, ...args: unknown[]): Promise<number> {
  return new Promise((done, fail) => {
    server.once('error', fail);
    server.listen(...(args as []), () => {
      const address = server.address();
      done(typeof address === 'object' && address ? address.port : 0);
    });
  });
}

/** The targets of `pid`'s writes by write size, checking each record arrives before its first use. */
function targetsBySize(
  records: DecodedRecord[],
  pid: number,
  comm: string,
): Record<number, [string, string]> {
  const defined = new Map<number, DecodedTarget>();
  const out: Record<number, [string, string]> = {};
  for (const r of records) {
    if (r.type === 'target') defined.set(r.targetId, r);
    // the forked child's first write, before exec, goes to node's own pipe
    if (r.type !== 'sys_write' || r.pid !== pid || r.comm !== comm) continue;
    const target = defined.get((r as DecodedSysWrite).targetId);
    if (!target) throw new Error(`write of ${r.count} bytes names target ${r.targetId} before its record`);
    out[r.count] = [targetKindName(target.kind), targetText(target)];
  }
  return out;
}

describeKernel('write targets', () => {
  const servers: Server[] = [];
  let udp: UdpSocket | undefined;
  let writer: string;

  beforeAll(() => {
    writer = join(realpathSync(tmpdir()), `kreplay-target-writer-${process.pid}`);
    execFileSync('gcc', [
      '-O2',
      '-Wall',
      '-Werror',
      '-o',
      writer,
      resolve(__dirname, '../support/target-writer.c'),
    ]);
  });

  afterAll(() => rmSync(writer, { force: true }));

  afterEach(async () => {
    await Promise.all(servers.splice(0).map((s) => new Promise((done) => s.close(done))));
    udp?.close();
    udp = undefined;
  });

  const server = (): Server => {
    const s = createServer((socket) => socket.resume());
    servers.push(s);
    return s;
  };

  it('names the file, pipe, device or socket peer of every write of a process that exits at once', async () => {
    const base = realpathSync(dir.path);
    const file = join(base, 'wal.log');
    const unixPath = join(base, 'app.sock');
    const abstract = `kreplay-test-${process.pid}`;
    const ports = {
      tcp4: await listen(server(), 0, '127.0.0.1'),
      tcp6: await listen(server(), 0, '::1'),
      udp4: 0,
    };
    await listen(server(), unixPath);
    await listen(server(), `${unixPath}2`);
    await listen(server(), `\0${abstract}`);
    const socket = createSocket('udp4');
    udp = socket;
    ports.udp4 = await new Promise<number>((done) =>
      socket.bind(0, '127.0.0.1', () => done(socket.address().port)),
    );

    const args = [
      file,
      unixPath,
      String(ports.tcp4),
      String(ports.tcp6),
      String(ports.udp4),
      abstract,
      `${unixPath}2`,
    ];
    const { records, value: pid } = await captureAround({}, () => runToExit(writer, args));

    expect(targetsBySize(records, pid, basename(writer).slice(0, 15))).toEqual(
      expectedTargets(file, unixPath, ports, abstract),
    );
  });

  it('sends each target once while it stays cached, and follows a rename', async () => {
    const base = realpathSync(dir.path);
    const script = [
      `exec 3>${base}/a`,
      'for i in 1 2 3 4 5; do echo x >&3; echo y >/dev/null; done',
      `mv ${base}/a ${base}/b`,
      'echo renamed >&3',
    ].join('; ');
    const { records, value: pid } = await captureAround({}, () => runToExit('sh', ['-c', script]));
    const writes = records.filter(
      (r): r is DecodedSysWrite => r.type === 'sys_write' && r.pid === pid && r.comm === 'sh',
    );
    const texts = new Map(
      records.filter((r): r is DecodedTarget => r.type === 'target').map((t) => [t.targetId, targetText(t)]),
    );
    expect(writes.map((w) => texts.get(w.targetId))).toEqual([
      ...Array.from({ length: 5 }, () => [`${base}/a`, '/dev/null']).flat(),
      `${base}/b`,
    ]);
    const fileIds = new Set(
      writes
        .slice(0, 10)
        .filter((_, i) => i % 2 === 0)
        .map((w) => w.targetId),
    );
    expect(fileIds.size).toBe(1);
  });

  it('a thread going back and forth between a file and a UDP socket it reconnects: each send names the peer it went to', async () => {
    const file = join(realpathSync(dir.path), 'alternate.log');
    const peers = await Promise.all(
      [0, 1].map(async () => {
        const socket = createSocket('udp4');
        await new Promise<void>((done) => socket.bind(0, '127.0.0.1', done));
        return socket;
      }),
    );
    const [a, b] = peers.map((p) => p.address().port);
    // each write a size of its own; the socket's last peer is a target the thread used two calls before
    const script = [
      'import os, socket, sys',
      's = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)',
      `f = os.open("${file}", os.O_WRONLY | os.O_CREAT)`,
      `s.connect(("127.0.0.1", ${a})); s.send(b"x" * 101)`,
      'os.write(f, b"x" * 102)',
      `s.connect(("127.0.0.1", ${b})); s.send(b"x" * 103)`,
      'os.write(f, b"x" * 104)',
      's.send(b"x" * 105)',
      `s.connect(("127.0.0.1", ${a})); s.send(b"x" * 106)`,
      'os.write(f, b"x" * 107)',
    ].join('\n');
    try {
      const { records, value: pid } = await captureAround({}, () =>
        runToExit('/usr/bin/python3', ['-c', script]),
      );
      const byPeer = (port: number): [string, string] => ['socket', `udp 127.0.0.1:${port}`];
      expect(targetsBySize(records, pid, 'python3')).toEqual({
        101: byPeer(a!),
        102: ['file', file],
        103: byPeer(b!),
        104: ['file', file],
        105: byPeer(b!),
        106: byPeer(a!),
        107: ['file', file],
      });
    } finally {
      for (const p of peers) p.close();
    }
  });

  it('sends a file once, however many processes write it, while it stays cached', async () => {
    const file = join(realpathSync(dir.path), 'shared.log');
    const writeTwice = `echo a >> ${file}; echo b >> ${file}`;
    const { records, value: pids } = await captureAround({}, async () => [
      await runToExit('sh', ['-c', writeTwice]),
      await runToExit('sh', ['-c', writeTwice]),
    ]);
    const sent = records.filter((r): r is DecodedTarget => r.type === 'target' && targetText(r) === file);
    expect(sent).toHaveLength(1);
    const writes = records.filter(
      (r): r is DecodedSysWrite => r.type === 'sys_write' && pids.includes(r.pid) && r.comm === 'sh',
    );
    expect(writes.map((w) => w.targetId)).toEqual(Array(4).fill(sent[0]!.targetId));
  });

  it('leaves targets out when they are turned off', async () => {
    const { records, value: pid } = await captureAround({ targets: false }, () =>
      runToExit('sh', ['-c', 'echo x >/dev/null']),
    );
    const writes = records.filter(
      (r): r is DecodedSysWrite => r.type === 'sys_write' && r.pid === pid && r.comm === 'sh',
    );
    expect(writes).toHaveLength(1);
    expect(writes[0]!.targetId).toBe(0);
  });
});
