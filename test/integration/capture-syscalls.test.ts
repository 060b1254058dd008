/**
 * sys_read, sys_fsync, sys_connect and sends as sys_write against the real
 * kernel, on real programs (python3, sqlite3, curl), every slowness real:
 * exact records, checked against strace where it sees the same calls.
 */
import { execFile, spawn } from 'node:child_process';
import { join } from 'node:path';
import { promisify } from 'node:util';
import {
  SYSCALL_NAMES,
  targetText,
  EVENT_CONTEXT_ONLY,
  REQUEST_DATA_LEN,
  SYSCALL_FLAGS,
} from '../../core/model';
import type { DecodedContext, DecodedRecord, DecodedSyscall, DecodedTarget } from '../support/decode-records';
import { useTempDir } from '../support/temp-dir';
import { KREPLAY_BIN } from '../support/agent-process';
import { isLibcLookup } from '../support/libc-lookups';
import { straced } from '../support/strace';
import { captureAround, describeKernel } from './capture-harness';

const run = promisify(execFile);
/* A command under `kreplay run --txn`: its calls are that transaction's. */
const underTransaction = (txn: string, command: string[]) =>
  run(process.execPath, [KREPLAY_BIN, 'run', '--txn', txn, '--', ...command]);
const dir = useTempDir();
const MS = 1_000_000n;
const ECONNREFUSED = -111;
const ENOENT = -2;
const ENETUNREACH = -101;
const EBADF = -9;

function syscallName(r: DecodedSyscall): string {
  return SYSCALL_NAMES[r.syscall & ~SYSCALL_FLAGS] ?? `syscall_${r.syscall}`;
}

/** The syscall events of `type` with their target's text, in start order. */
function calls(
  records: DecodedRecord[],
  type: DecodedSyscall['type'],
): (DecodedSyscall & { target: string | null })[] {
  const targets = new Map(
    records.filter((r): r is DecodedTarget => r.type === 'target').map((t) => [t.targetId, targetText(t)]),
  );
  return records
    .filter((r): r is DecodedSyscall => r.type === type)
    .map((r) => ({ ...r, target: targets.get(r.targetId) ?? null }))
    .sort((a, b) => (a.startNs < b.startNs ? -1 : 1));
}

/** Runs python3 -c `code` with args; its stdout lines. */
async function python(code: string, args: string[] = []): Promise<string[]> {
  const { stdout } = await run('python3', ['-c', code, ...args]);
  return stdout.trim().split('\n');
}

const FSYNCS = `
import ctypes, os, sys
libc = ctypes.CDLL(None, use_errno=True)
fd = os.open(sys.argv[1], os.O_WRONLY | os.O_CREAT | os.O_TRUNC)
os.write(fd, b"x" * 8192)
os.fsync(fd)
os.fdatasync(fd)
libc.sync_file_range(fd, ctypes.c_longlong(0), ctypes.c_longlong(4096), 2)
libc.syncfs(fd)
try:
    os.fsync(987654)
except OSError:
    pass
print(os.getpid())
print(fd)
`;

describeKernel('syscall types (real kernel)', () => {
  it('records fsync, fdatasync, sync_file_range and syncfs of any process, failed ones with their errno', async () => {
    const file = join(dir.path, 'synced');
    const { records, value } = await captureAround({}, () => python(FSYNCS, [file]));
    const [pid, fd] = value.map(Number);
    const mine = calls(records, 'sys_fsync').filter((r) => r.pid === pid);
    expect(mine.map((r) => [syscallName(r), r.fd, r.ret, r.count, r.target])).toEqual([
      ['fsync', fd, 0, 0, file],
      ['fdatasync', fd, 0, 0, file],
      ['sync_file_range', fd, 0, 4096, file],
      ['syncfs', fd, 0, 0, file],
      ['fsync', 987654, EBADF, 0, null],
    ]);
    for (const r of mine) expect(r.responseNs).toBe(0n);
  });

  it("records sqlite3's fdatasync calls under synchronous=FULL, exactly as strace sees them", async () => {
    const db = join(dir.path, 'full.db');
    const sql =
      'PRAGMA journal_mode=WAL; PRAGMA synchronous=FULL; CREATE TABLE t (v TEXT);' +
      ' INSERT INTO t VALUES (randomblob(5000)); INSERT INTO t VALUES (randomblob(5000)); SELECT 1;';
    const { records, value } = await captureAround({ include: [{ comm: 'sqlite3' }] }, () =>
      straced(dir.path, 'fsync,fdatasync,sync_file_range,syncfs', ['sqlite3', db, sql]),
    );
    const traced = [...value.byTid.values()].flat();
    expect(traced.length).toBeGreaterThan(0);
    const mine = calls(records, 'sys_fsync').filter((r) => r.comm === 'sqlite3');
    expect(mine.map((r) => [syscallName(r), r.fd, r.ret])).toEqual(
      traced.map(([name, fd, , ret]) => [name, fd, ret]),
    );
    expect(mine.map((r) => r.syscall)).toContain(SYSCALL_NAMES.indexOf('fdatasync'));
    // the database, its journal or WAL, and the directory (synced after a file is created in it)
    for (const r of mine) expect([db, `${db}-journal`, `${db}-wal`, dir.path]).toContain(r.target);
  });
});

const CONNECTS = `
import os, select, socket, sys
srv = socket.socket(); srv.bind(("127.0.0.1", 0)); srv.listen(16)
closed = socket.socket(); closed.bind(("127.0.0.1", 0)); closed_port = closed.getsockname()[1]; closed.close()
port = srv.getsockname()[1]
unix = socket.socket(socket.AF_UNIX); unix.bind(sys.argv[1]); unix.listen(4)
out = [os.getpid(), port, closed_port]
def blocking(addr, family=socket.AF_INET):
    s = socket.socket(family)
    out.append(s.fileno())
    s.connect_ex(addr)
    return s
def nonblocking(addr):
    s = socket.socket(); s.setblocking(False)
    out.append(s.fileno())
    s.connect_ex(addr)
    select.select([], [s], [], 5)
    return s
keep = [blocking(("127.0.0.1", port)), blocking(("127.0.0.1", closed_port)),
        nonblocking(("127.0.0.1", port)), nonblocking(("127.0.0.1", closed_port)),
        blocking(sys.argv[1], socket.AF_UNIX)]
print(" ".join(map(str, out)))
`;

/* Unix connects that fail before the socket has a peer: a missing path, a bound path that does not listen, an unheard abstract name. */
const FAILED_UNIX = `
import os, socket, sys
deaf = socket.socket(socket.AF_UNIX); deaf.bind(sys.argv[2])
out = [os.getpid()]
for addr in [sys.argv[1], sys.argv[2], "\\0kreplay-nobody-" + str(os.getpid())]:
    s = socket.socket(socket.AF_UNIX)
    out.append(s.fileno())
    out.append(-s.connect_ex(addr))
    s.close()
print(" ".join(map(str, out)))
`;

/*
 * A server whose accept queue is full (backlog 0, one connection queued): a
 * client's SYNs are dropped until it accepts, 2.5 s after it saw the client
 * in SYN_SENT (the client's retransmission then gets in).
 */
const FULL_BACKLOG = `
import socket, subprocess, time
srv = socket.socket(); srv.bind(("127.0.0.1", 0)); srv.listen(0)
filler = socket.create_connection(srv.getsockname())
print(srv.getsockname()[1], flush=True)
port = srv.getsockname()[1]
while not subprocess.run(["ss", "-Htn", "state", "syn-sent", f"( dport = :{port} )"], capture_output=True, text=True).stdout.strip():
    time.sleep(0.01)
time.sleep(2.5)
srv.accept()
conn, _ = srv.accept()
conn.recv(65536)
conn.sendall(b"HTTP/1.1 200 OK\\r\\nContent-Length: 2\\r\\nConnection: close\\r\\n\\r\\nok")
conn.close()
`;

/* An upstream that answers each request 1.5 s after it arrived. */
const SLOW_UPSTREAM = `
import socket, time
srv = socket.socket(); srv.bind(("127.0.0.1", 0)); srv.listen(4)
print(srv.getsockname()[1], flush=True)
conn, _ = srv.accept()
conn.recv(65536)
time.sleep(1.5)
conn.sendall(b"HTTP/1.1 200 OK\\r\\nContent-Length: 2\\r\\nConnection: close\\r\\n\\r\\nok")
conn.close()
`;

/* A keep-alive upstream: each request answered 0.3 s after it came, on one connection. */
const KEEP_ALIVE_UPSTREAM = `
import socket, time
srv = socket.socket(); srv.bind(("127.0.0.1", 0)); srv.listen(1)
print(srv.getsockname()[1], flush=True)
conn, _ = srv.accept()
while conn.recv(65536):
    time.sleep(0.3)
    conn.sendall(b"HTTP/1.1 200 OK\\r\\nContent-Length: 2\\r\\n\\r\\nok")
`;

/* Three requests on that connection, each read whole; prints each exchange's time, in ns. */
const KEEP_ALIVE_CLIENT = `
import socket, sys, time
c = socket.create_connection(("127.0.0.1", int(sys.argv[1])))
took = []
for i in range(3):
    start = time.monotonic_ns()
    c.sendall(b"GET /%d HTTP/1.1\\r\\nHost: upstream\\r\\n\\r\\n" % i)
    got = b""
    while not got.endswith(b"ok"):
        got += c.recv(65536)
    took.append(time.monotonic_ns() - start)
c.close()
print(" ".join(map(str, took)))
`;

/* A sendall client and a server thread that carries a context (a marker): 3 MiB in partial sends. */
const SENDALL = `
import os, socket, threading
srv = socket.socket(); srv.bind(("127.0.0.1", 0)); srv.listen(1)
def serve():
    with open("/dev/null", "w") as null:
        os.write(null.fileno(), b"KREPLAY-CTX txn=sendall-server\\n")
    conn, _ = srv.accept()
    got = 0
    while got < 3 << 20:
        got += len(conn.recv(100000))
    conn.sendall(b"done")
server = threading.Thread(target=serve); server.start()
c = socket.create_connection(srv.getsockname())
c.setsockopt(socket.SOL_SOCKET, socket.SO_SNDBUF, 65536)
c.settimeout(30)  # sendall then polls and sends what fits: partial sends
c.sendall(b"s" * (3 << 20))
c.recv(4)
server.join()
print(os.getpid())
`;

/** Spawns python3 -c code; resolves with the process and its first stdout line. */
function startPython(code: string): Promise<{ child: ReturnType<typeof spawn>; line: string }> {
  const child = spawn('python3', ['-c', code], { stdio: ['pipe', 'pipe', 'inherit'] });
  return new Promise((resolve, reject) => {
    child.once('error', reject);
    child.once('exit', (code) => reject(new Error(`python3 exited ${code} before its first line`)));
    child.stdout!.once('data', (chunk: Buffer) => resolve({ child, line: chunk.toString().trim() }));
  });
}

function exited(child: ReturnType<typeof spawn>): Promise<void> {
  return new Promise((resolve) =>
    child.exitCode !== null ? resolve() : child.once('exit', () => resolve()),
  );
}

/**
 * Whether an event is in the transaction a marker with txn=`txn` opened:
 * its context is that one, or one opened under it (an HTTP head the
 * program sent holds no transaction of its own, so the marker's counts).
 */
function inTransaction(records: DecodedRecord[], txn: string): (r: DecodedSyscall) => boolean {
  const contexts = records.filter((r): r is DecodedContext => r.type === 'context');
  const opened = contexts.find((r) => r.data.toString('latin1').includes(`txn=${txn}`));
  if (!opened) throw new Error(`no context record for txn=${txn}`);
  const parent = new Map(contexts.map((c) => [c.contextId, c.parentId]));
  return (r) => {
    for (let id = r.contextId; id !== 0; id = parent.get(id) ?? 0) if (id === opened.contextId) return true;
    return false;
  };
}

describeKernel('sys_connect (real kernel)', () => {
  it('times blocking and non-blocking TCP connects, refused ones with ECONNREFUSED, and unix connects', async () => {
    const path = join(dir.path, 'unix.sock');
    const { records, value } = await captureAround({}, () => python(CONNECTS, [path]));
    const [pid, port, closed, ...fds] = value[0]!.split(' ').map(Number);
    const mine = calls(records, 'sys_connect').filter((r) => r.pid === pid && !isLibcLookup(r.target));
    expect(mine.map((r) => [syscallName(r), r.fd, r.ret, r.count, r.target])).toEqual([
      ['connect', fds[0], 0, 0, `tcp 127.0.0.1:${port}`],
      ['connect', fds[1], ECONNREFUSED, 0, `tcp 127.0.0.1:${closed}`],
      ['connect', fds[2], 0, 0, `tcp 127.0.0.1:${port}`],
      ['connect', fds[3], ECONNREFUSED, 0, `tcp 127.0.0.1:${closed}`],
      ['connect', fds[4], 0, 0, `unix ${path}`],
    ]);
    for (const r of mine) expect(r.durationNs).toBeGreaterThan(0n);
  });

  it('names the address a failed unix connect asked for, as strace does, not the peerless socket', async () => {
    const missing = join(dir.path, 'missing.sock');
    const deaf = join(dir.path, 'deaf.sock');
    const { records, value } = await captureAround({}, () => python(FAILED_UNIX, [missing, deaf]));
    const [pid, ...fdsAndRets] = value[0]!.split(' ').map(Number);
    const mine = calls(records, 'sys_connect').filter((r) => r.pid === pid && !isLibcLookup(r.target));
    expect(mine.map((r) => [r.fd, r.ret, r.target])).toEqual([
      [fdsAndRets[0], fdsAndRets[1], `unix ${missing}`],
      [fdsAndRets[2], fdsAndRets[3], `unix ${deaf}`],
      [fdsAndRets[4], fdsAndRets[5], `unix @kreplay-nobody-${pid}`],
    ]);
    expect(fdsAndRets.filter((_, i) => i % 2 === 1)).toEqual([ENOENT, ECONNREFUSED, ECONNREFUSED]);
  });

  it('names the address a TCP connect asked for when it failed before a SYN (no route)', async () => {
    // a fresh network namespace has no route at all: the connect fails at once, the socket never has a peer
    const code =
      'import os, socket; s = socket.socket(); print(os.getpid(), s.fileno(), -s.connect_ex(("10.1.2.3", 8080)))';
    const { records, value } = await captureAround({}, () => run('unshare', ['-n', 'python3', '-c', code]));
    const [pid, fd, ret] = value.stdout.trim().split(' ').map(Number);
    expect(ret).toBe(ENETUNREACH);
    const mine = calls(records, 'sys_connect').filter((r) => r.pid === pid && !isLibcLookup(r.target));
    expect(mine.map((r) => [r.fd, r.ret, r.target])).toEqual([[fd, ENETUNREACH, 'tcp 10.1.2.3:8080']]);
  });

  it('records the connect a curl under kreplay run waited on while the accept queue was full', async () => {
    const server = await startPython(FULL_BACKLOG);
    const url = `http://127.0.0.1:${server.line}/`;
    const { records, value } = await captureAround({}, async () => {
      const curl = await underTransaction('slow-connect', [
        'curl',
        '-s',
        '-o',
        '/dev/null',
        '-w',
        '%{time_connect} %{time_total}',
        url,
      ]);
      await exited(server.child);
      return curl.stdout.split(' ').map((s) => BigInt(Math.round(Number(s) * 1e9)));
    });
    const [, total] = value;
    const inTxn = inTransaction(records, 'slow-connect');
    // to this server only: curl may try the unix sockets of name services first, and another test's
    // curl may connect elsewhere meanwhile
    const connects = calls(records, 'sys_connect').filter(
      (r) => r.comm === 'curl' && r.target === `tcp 127.0.0.1:${server.line}`,
    );
    expect(connects.map((r) => [r.ret, r.target, inTxn(r)])).toEqual([
      [0, `tcp 127.0.0.1:${server.line}`, true],
    ]);
    // the server let it in after 2.5 s; curl saw the whole of it
    expect(connects[0]!.durationNs).toBeGreaterThanOrEqual(2500n * MS);
    expect(connects[0]!.durationNs).toBeLessThanOrEqual(total!);
  });
});

describeKernel('sys_read and sends (real kernel)', () => {
  it('gives the read of a curl under kreplay run the 1.5 s its upstream took to answer', async () => {
    const server = await startPython(SLOW_UPSTREAM);
    const target = `tcp 127.0.0.1:${server.line}`;
    const { records, value } = await captureAround({}, async () => {
      const curl = await underTransaction('slow-upstream', [
        'curl',
        '-s',
        '-o',
        '/dev/null',
        '-w',
        '%{time_total}',
        `http://127.0.0.1:${server.line}/`,
      ]);
      await exited(server.child);
      return BigInt(Math.round(Number(curl.stdout) * 1e9));
    });
    const inTxn = inTransaction(records, 'slow-upstream');
    const sends = calls(records, 'sys_write').filter((r) => r.comm === 'curl' && r.target === target);
    expect(sends.map((r) => [syscallName(r), inTxn(r), r.ret === r.count])).toEqual([['sendto', true, true]]);
    // the send started the request: its record carries the request's first bytes, as curl sent them
    const request = sends[0]!.request!;
    expect(request.length).toBe(Math.min(sends[0]!.ret, REQUEST_DATA_LEN));
    expect(request.toString('latin1')).toMatch(
      new RegExp(`^GET / HTTP/1\\.1\r\nHost: 127\\.0\\.0\\.1:${server.line}\r\n`),
    );
    const reads = calls(records, 'sys_read').filter((r) => r.comm === 'curl' && r.target === target);
    // the first read after the request carries the wait; later ones none
    const timed = reads.filter((r) => r.responseNs > 0n);
    expect(timed).toHaveLength(1);
    expect(timed[0]).toBe(reads[0]);
    expect(inTxn(timed[0]!)).toBe(true);
    expect(syscallName(timed[0]!)).toBe('recvfrom');
    expect(timed[0]!.ret).toBeGreaterThan(0);
    expect(timed[0]!.responseNs).toBeGreaterThanOrEqual(1500n * MS);
    expect(timed[0]!.responseNs).toBeLessThanOrEqual(value);
    // the read itself is short: the wait was in poll
    expect(timed[0]!.durationNs).toBeLessThan(timed[0]!.responseNs);
  });

  it('times each answer on a keep-alive connection from its own request, and each request starts one', async () => {
    const server = await startPython(KEEP_ALIVE_UPSTREAM);
    const target = `tcp 127.0.0.1:${server.line}`;
    const { records, value } = await captureAround({}, async () => {
      const client = await underTransaction('keep-alive', ['python3', '-c', KEEP_ALIVE_CLIENT, server.line]);
      await exited(server.child);
      return client.stdout.trim().split(' ').map(BigInt);
    });
    const mine = (r: ReturnType<typeof calls>[number]) => r.comm === 'python3' && r.target === target;
    const sends = calls(records, 'sys_write').filter(mine);
    // every send follows an answer (or none yet): each starts a request and carries its first bytes
    expect(sends.map((r) => r.request?.toString('latin1').split('\r\n')[0])).toEqual([
      'GET /0 HTTP/1.1',
      'GET /1 HTTP/1.1',
      'GET /2 HTTP/1.1',
    ]);
    const reads = calls(records, 'sys_read').filter(mine);
    // the first read after each send carries that request's wait, no other read one
    const timed = reads.filter((r) => r.responseNs > 0n);
    expect(timed.map((r) => sends.filter((s) => s.startNs < r.startNs).length)).toEqual([1, 2, 3]);
    timed.forEach((r, i) => {
      expect(r.responseNs).toBeGreaterThanOrEqual(300n * MS);
      expect(r.responseNs).toBeLessThanOrEqual(value[i]!);
    });
  });

  it("records a sendall client's sends and a server thread's reads exactly as strace sees them", async () => {
    const { records, value } = await captureAround({}, () =>
      straced(dir.path, 'sendto,recvfrom', ['python3', '-c', SENDALL]),
    );
    const pid = Number(value.out.trim());
    const inTxn = inTransaction(records, 'sendall-server');
    // (python3 may start helper processes of its own: the server thread is the one that receives)
    const serverTid = [...value.byTid].find(
      ([tid, lines]) => tid !== pid && lines.some(([n]) => n === 'recvfrom'),
    )![0];
    const traced = (tid: number, name: string) => value.byTid.get(tid)!.filter(([n]) => n === name);
    const seen = (type: DecodedSyscall['type'], tid: number, name: string) =>
      calls(records, type)
        .filter((r) => r.pid === pid && r.tid === tid && syscallName(r) === name)
        .map((r) => [syscallName(r), r.fd, r.count, r.ret]);
    // the client's sendall: 3 MiB in partial sends
    expect(traced(pid, 'sendto').length).toBeGreaterThan(1);
    expect(seen('sys_write', pid, 'sendto')).toEqual(traced(pid, 'sendto'));
    expect(traced(pid, 'sendto').reduce((sum, [, , , ret]) => sum + ret, 0)).toBe(3 << 20);
    // the server thread carries a context: its reads too, none of the client's
    expect(seen('sys_write', serverTid, 'sendto')).toEqual([...traced(serverTid, 'sendto')]);
    expect(seen('sys_read', serverTid, 'recvfrom')).toEqual(traced(serverTid, 'recvfrom'));
    expect(traced(serverTid, 'recvfrom').length).toBeGreaterThan(1);
    expect(calls(records, 'sys_read').filter((r) => r.tid === pid)).toEqual([]);
    const serverEvents = calls(records, 'sys_read').filter((r) => r.tid === serverTid);
    expect(serverEvents.every((r) => inTxn(r) && (r.syscall & EVENT_CONTEXT_ONLY) === 0)).toBe(true);
  });
});
