/**
 * Contexts that do not live on a thread (real kernel, real agent): a connection's, which every
 * call on it carries whatever thread makes it, and a runtime unit's, which a hook's signal
 * switches. Small programs pin each rule; nginx, unmodified, proxies 256 requests 64 at a time
 * through one event-loop worker and a keep-alive upstream pool, and every one of its calls on a
 * client or upstream connection is its request's or no request's, never another's.
 */
import { execFileSync, spawn, type ChildProcess } from 'node:child_process';
import { mkdirSync, mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { createServer, request, Agent, type Server } from 'node:http';
import { connect, createServer as createTcpServer, type Socket, type AddressInfo } from 'node:net';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { RecordType, UnitOp, UnitSignalLayout } from '../../core/model';
import { startAgent, type AgentProcess } from '../support/agent-process';
import {
  createCgroup,
  runInCgroup,
  serverInCgroup,
  type CgroupServer,
  type TestCgroup,
} from '../support/cgroup';
import { nginxListening, writeNginxConf } from '../support/nginx';
import { readStoredEvents, storedCounter, type StoredEvent } from '../support/store-rows';
import { waitFor } from '../support/wait';

const trace = (n: number) => n.toString(16).padStart(32, 'c');
const head = (id: string, n: number) =>
  `GET /${id} HTTP/1.1\r\nHost: t\r\ntraceparent: 00-${trace(n)}-00f067aa0ba902b7-01\r\nx-request-id: ${id}\r\n\r\n`;

let dir: string;
let cgroup: TestCgroup;
let agent: AgentProcess;
let store: string;
const children: ChildProcess[] = [];

beforeAll(async () => {
  dir = mkdtempSync(join(tmpdir(), 'kreplay-conn-'));
  cgroup = createCgroup(`kreplay-conn-${process.pid}`);
  store = join(dir, 'data', 'conn.db');
  // reads of threads without a context too: an event loop's reads are its connections' requests'
  agent = await startAgent([
    '--data-dir',
    join(dir, 'data'),
    '--node',
    'conn',
    '--cgroup-id',
    String(cgroup.id),
    '--capture-reads',
  ]);
});

afterAll(async () => {
  for (const c of children) c.kill('SIGKILL');
  await agent?.stop();
  cgroup?.remove();
  rmSync(dir, { recursive: true, force: true });
});

/** A Python program (Debian's python3) run in the test cgroup with `args`, to its end. */
function python(source: string, args: string[]): Promise<string> {
  const file = join(dir, `p${children.length}-${Math.random().toString(36).slice(2)}.py`);
  writeFileSync(file, source);
  return runInCgroup(cgroup, '/usr/bin/python3', [file, ...args]);
}

/** A Python server in the test cgroup: resolves with the process and the port it prints first. */
function pythonServer(source: string, args: string[]): Promise<CgroupServer> {
  const file = join(dir, `s${children.length}.py`);
  writeFileSync(file, source);
  return serverInCgroup(cgroup, '/usr/bin/python3', [file, ...args], { children });
}

const events = (where: string) => readStoredEvents(store, where);
const waitEvents = (where: string, n: number): Promise<StoredEvent[]> =>
  waitFor(() => {
    const rows = events(where);
    return rows.length >= n ? rows : undefined;
  });
const byTarget = (rows: StoredEvent[], suffix: string) => rows.filter((e) => e.target?.endsWith(suffix));

/** Reads from `socket` until `n` bytes came. */
function readBytes(socket: Socket, n: number): Promise<Buffer> {
  const chunks: Buffer[] = [];
  let got = 0;
  return new Promise((resolve, reject) => {
    const onData = (c: Buffer) => {
      chunks.push(c);
      got += c.length;
      if (got >= n) {
        socket.off('data', onData);
        resolve(Buffer.concat(chunks));
      }
    };
    socket.on('data', onData).once('error', reject);
  });
}

const connected = (port: number): Promise<Socket> =>
  new Promise((resolve, reject) => {
    const s = connect(port, '127.0.0.1', () => resolve(s)).once('error', reject);
  });

describe('connection and unit contexts (real kernel)', () => {
  it("a hook's unit signals open and switch units, and are never recorded", async () => {
    const out = join(dir, 'units');
    mkdirSync(out);
    const signal = (op: number, unit: number, data = '', fd = 'SIGNAL_FD') =>
      `send(${fd}, b'${UnitSignalLayout.magic}' + struct.pack('<IQ', ${op}, ${unit}) + ${JSON.stringify(data)}.encode())`;
    const pid = await python(
      `import os, struct, sys
SIGNAL_FD = ${UnitSignalLayout.fd}
null = os.open('/dev/null', os.O_WRONLY)
def send(fd, data):
    try:
        os.write(fd, data)
    except OSError:
        pass
def w(name):
    fd = os.open(os.path.join(sys.argv[1], name), os.O_WRONLY | os.O_CREAT)
    os.write(fd, b'x'); os.close(fd)
${signal(UnitOp.Open, 7, head('unit-7', 7))}
w('a')
${signal(UnitOp.Open, 8, head('unit-8', 8))}
w('b')
${signal(UnitOp.Enter, 7)}
w('c')
${signal(UnitOp.Enter, 0)}
w('d')
${signal(UnitOp.Enter, 8)}
w('e')
${signal(UnitOp.Enter, 9)}
w('f')
${signal(UnitOp.Enter, 7)}
${signal(UnitOp.Enter, 8, '', 'null')}
w('g')
print(os.getpid())
`,
      [out],
    );
    const writes = await waitEvents(`e.type = ${RecordType.SysWrite} AND t.value LIKE '${out}/%'`, 7);
    expect(writes.map((e) => [e.target!.slice(out.length + 1), e.txn, e.trace])).toEqual([
      ['a', 'unit-7', trace(7)],
      ['b', 'unit-8', trace(8)],
      ['c', 'unit-7', trace(7)],
      ['d', null, null],
      ['e', 'unit-8', trace(8)],
      // a unit no signal opened has no context
      ['f', null, null],
      // the same bytes written to a file (/dev/null) are the program's own: they switch nothing
      ['g', 'unit-7', trace(7)],
    ]);
    // the signals themselves are the hook's, not the program's; that write to /dev/null its own
    const own = events(`e.pid = ${Number(pid)} AND (t.value = '/dev/null' OR e.fd = ${UnitSignalLayout.fd})`);
    expect(own.map((e) => [e.target, e.bytes, e.txn])).toEqual([
      ['/dev/null', UnitSignalLayout.bytes, 'unit-7'],
    ]);
  });

  it("a hook's mailbox signals, read at its getpriority(PRIO_PROCESS, 0), open, switch and close units without a write", async () => {
    const out = join(dir, 'mailbox');
    mkdirSync(out);
    const { magic, fd, bytes, unit, mailbox, mailboxLength } = UnitSignalLayout;
    const pid = await python(
      `import os, struct, sys
MAGIC = b'${magic}'
box = bytearray(${mailbox + bytes} + 1024)
view = memoryview(box)  # the bytearray cannot move while the view holds it
box[0:${bytes}] = MAGIC + struct.pack('<IQ', ${UnitOp.Watch}, 0)
try:
    os.write(${fd}, view[:${mailbox + bytes}])
except OSError:
    pass
def slot(u):
    struct.pack_into('<Q', box, ${unit}, u)
def put(op, u, data=''):
    sig = MAGIC + struct.pack('<IQ', op, u) + data.encode()
    box[${mailbox}:${mailbox} + len(sig)] = sig
    return len(sig)
def mail(op, u, data='', who=0, length=None):
    n = put(op, u, data)
    struct.pack_into('<Q', box, ${mailboxLength}, n if length is None else length)
    os.getpriority(os.PRIO_PROCESS, who)
    struct.pack_into('<Q', box, ${mailboxLength}, 0)
def w(name):
    f = os.open(os.path.join(sys.argv[1], name), os.O_WRONLY | os.O_CREAT)
    os.write(f, b'x'); os.close(f)
slot(7); mail(${UnitOp.Open}, 7, ${JSON.stringify(head('mail-7', 7))})
w('a')
slot(8); mail(${UnitOp.Open}, 8, ${JSON.stringify(head('mail-8', 8))})
w('b')
slot(7)
w('c')
slot(0)
w('d')
# an empty mailbox (the program's own getpriority), and another getpriority than the hook's: nothing
slot(9); mail(${UnitOp.Open}, 9, ${JSON.stringify(head('mail-9', 9))}, length=0)
w('e')
mail(${UnitOp.Open}, 9, ${JSON.stringify(head('mail-9', 9))}, who=os.getpid())
w('f')
mail(${UnitOp.Open}, 9, ${JSON.stringify(head('mail-9', 9))})
w('g')
mail(${UnitOp.Close}, 7)
slot(7)
w('h')
print(os.getpid())
`,
      [out],
    );
    const writes = await waitEvents(`e.type = ${RecordType.SysWrite} AND t.value LIKE '${out}/%'`, 8);
    expect(writes.map((e) => [e.target!.slice(out.length + 1), e.txn, e.trace])).toEqual([
      ['a', 'mail-7', trace(7)],
      ['b', 'mail-8', trace(8)],
      ['c', 'mail-7', trace(7)],
      ['d', null, null],
      ['e', null, null],
      ['f', null, null],
      ['g', 'mail-9', trace(9)],
      // closed: its request ended, the unit runs with none
      ['h', null, null],
    ]);
    // the WATCH is the hook's, not the program's
    expect(events(`e.pid = ${Number(pid)} AND e.fd = ${fd}`)).toEqual([]);
  });

  it("a program a unit's thread execs runs no unit; one it spawns keeps the unit's request", async () => {
    const out = join(dir, 'exec');
    mkdirSync(out);
    await python(
      `import os, struct, subprocess, sys
try:
    os.write(${UnitSignalLayout.fd}, b'${UnitSignalLayout.magic}' + struct.pack('<IQ', ${UnitOp.Open}, 5) + ${JSON.stringify(head('unit-5', 5))}.encode())
except OSError:
    pass
subprocess.run(['/bin/sh', '-c', 'echo x > ' + os.path.join(sys.argv[1], 'spawned')], check=True)
os.execv('/bin/sh', ['sh', '-c', 'echo x > ' + os.path.join(sys.argv[1], 'execd')])
`,
      [out],
    );
    const writes = await waitEvents(`e.type = ${RecordType.SysWrite} AND t.value LIKE '${out}/%'`, 2);
    expect(writes.map((e) => [e.target!.slice(out.length + 1), e.txn])).toEqual([
      ['spawned', 'unit-5'],
      ['execd', null],
    ]);
  });

  it("an event loop's calls on each connection carry that connection's request; its other writes none", async () => {
    const upstream = createTcpServer((s) => s.once('data', () => s.end('u'.repeat(1301))));
    await new Promise<void>((r) => upstream.listen(0, '127.0.0.1', r));
    const upstreamPort = (upstream.address() as AddressInfo).port;
    const out = join(dir, 'loop');
    mkdirSync(out);
    // one thread, three connections: reads a head from each, then answers them in reverse order
    const { port } = await pythonServer(
      `import os, socket, sys
srv = socket.socket(); srv.bind(('127.0.0.1', 0)); srv.listen(8)
print(srv.getsockname()[1], flush=True)
conns = [srv.accept()[0] for _ in range(3)]
for c in conns:
    c.recv(4096)
for k in (3, 2, 1):
    conns[k - 1].sendall(b'x' * (1200 + k))
fd = os.open(os.path.join(sys.argv[1], 'loop-file'), os.O_WRONLY | os.O_CREAT); os.write(fd, b'x'); os.close(fd)
# a head it sends goes with its connection, not with the thread
up = socket.create_connection(('127.0.0.1', int(sys.argv[2])))
up.sendall(${JSON.stringify(head('proxied-9', 9))}.encode())
up.recv(4096)
fd = os.open(os.path.join(sys.argv[1], 'after-proxy'), os.O_WRONLY | os.O_CREAT); os.write(fd, b'x'); os.close(fd)
`,
      [out, String(upstreamPort)],
    );
    try {
      const sockets: Socket[] = [];
      for (let k = 1; k <= 3; k++) sockets.push(await connected(port));
      for (let k = 1; k <= 3; k++) sockets[k - 1]!.write(head(`loop-${k}`, 20 + k));
      await Promise.all(sockets.map((s, i) => readBytes(s, 1201 + i)));
      for (const s of sockets) s.destroy();
      const sends = await waitEvents(`e.type = ${RecordType.SysWrite} AND e.bytes BETWEEN 1201 AND 1203`, 3);
      expect(sends.map((e) => [e.bytes, e.txn])).toEqual([
        [1203, 'loop-3'],
        [1202, 'loop-2'],
        [1201, 'loop-1'],
      ]);
      const files = await waitEvents(`e.type = ${RecordType.SysWrite} AND t.value LIKE '${out}/%'`, 2);
      expect(files.map((e) => [e.target!.slice(out.length + 1), e.txn])).toEqual([
        ['loop-file', null],
        ['after-proxy', null],
      ]);
      const up = byTarget(events(`e.pid = ${sends[0]!.pid}`), `:${upstreamPort}`);
      expect(up.map((e) => [e.type, e.txn])).toEqual([
        [RecordType.SysConnect, null],
        [RecordType.SysWrite, 'proxied-9'],
        [RecordType.SysRead, 'proxied-9'],
      ]);
    } finally {
      upstream.close();
    }
  });

  it('a client connection shared by threads carries the request its last send started', async () => {
    const upstream = createTcpServer((s) => {
      let n = 0;
      s.on('data', () => s.write('r'.repeat(1401 + n++)));
    });
    await new Promise<void>((r) => upstream.listen(0, '127.0.0.1', r));
    const upstreamPort = (upstream.address() as AddressInfo).port;
    try {
      await python(
        `import os, socket, sys, threading
up = socket.create_connection(('127.0.0.1', int(sys.argv[1])))
null = os.open('/dev/null', os.O_WRONLY)
def as_txn(txn, work):
    def run():
        os.write(null, ('KREPLAY-CTX txn=%s\\n' % txn).encode()); work()
    t = threading.Thread(target=run); t.start(); t.join()
as_txn('pool-a', lambda: up.sendall(b'GET /a HTTP/1.1\\r\\nHost: u\\r\\n\\r\\n'))
as_txn('pool-b', lambda: up.recv(1401))
as_txn('pool-b', lambda: up.sendall(b'GET /b HTTP/1.1\\r\\nHost: u\\r\\n\\r\\n'))
as_txn('pool-a', lambda: up.recv(1402))
`,
        [String(upstreamPort)],
      );
      const reads = await waitEvents(`e.type = ${RecordType.SysRead} AND e.bytes IN (1401, 1402)`, 2);
      expect(reads.map((e) => [e.bytes, e.txn])).toEqual([
        [1401, 'pool-a'],
        [1402, 'pool-b'],
      ]);
    } finally {
      upstream.close();
    }
  });

  it("a datagram socket's reads are no send's request", async () => {
    await python(
      `import os, socket, threading
null = os.open('/dev/null', os.O_WRONLY)
echo = socket.socket(socket.AF_INET, socket.SOCK_DGRAM); echo.bind(('127.0.0.1', 0))
udp = socket.socket(socket.AF_INET, socket.SOCK_DGRAM); udp.connect(echo.getsockname())
def as_txn(txn, work):
    def run():
        os.write(null, ('KREPLAY-CTX txn=%s\\n' % txn).encode()); work()
    t = threading.Thread(target=run); t.start(); t.join()
as_txn('dgram-a', lambda: udp.send(b'a' * 1701))
as_txn('dgram-b', lambda: udp.send(b'b' * 1702))
for _ in range(2):
    data, peer = echo.recvfrom(4096); echo.sendto(data, peer)
udp.recv(4096); udp.recv(4096)
`,
      [],
    );
    const reads = await waitEvents(`e.type = ${RecordType.SysRead} AND e.ret IN (1701, 1702)`, 4);
    // the echo's reads and the client's: no thread of them has a context, no socket carries one
    expect(reads.map((e) => [e.ret, e.txn])).toEqual([
      [1701, null],
      [1702, null],
      [1701, null],
      [1702, null],
    ]);
  });

  it("a server's read of one byte of a head is joined with the next read (Go peeks so)", async () => {
    const out = join(dir, 'peek');
    mkdirSync(out);
    const { port } = await pythonServer(
      `import os, socket, sys
srv = socket.socket(); srv.bind(('127.0.0.1', 0)); srv.listen(1)
print(srv.getsockname()[1], flush=True)
c = srv.accept()[0]
c.recv(1); c.sendall(b'!')
c.recv(4096)
fd = os.open(os.path.join(sys.argv[1], 'after-peek'), os.O_WRONLY | os.O_CREAT); os.write(fd, b'x'); os.close(fd)
c.sendall(b'y' * 1501)
`,
      [out],
    );
    const s = await connected(port);
    const text = head('peeked-1', 31);
    s.write(text.slice(0, 1));
    await readBytes(s, 1);
    s.write(text.slice(1));
    await readBytes(s, 1501);
    s.destroy();
    const [file] = await waitEvents(`e.type = ${RecordType.SysWrite} AND t.value LIKE '${out}/%'`, 1);
    expect([file!.txn, file!.trace]).toEqual(['peeked-1', trace(31)]);
    const reads = await waitEvents(
      `e.type = ${RecordType.SysRead} AND e.pid = ${file!.pid} AND t.value LIKE 'tcp accepted%'`,
      2,
    );
    // the byte that began the head is no request's yet; the rest is the request's
    expect(reads.map((e) => [e.ret, e.txn])).toEqual([
      [1, null],
      [text.length - 1, 'peeked-1'],
    ]);
    await waitFor(() => storedCounter(store, 'unsure_read') > 0, { what: 'the peeked read counted' });
  });

  // the shape of an h2c Upgrade: a head, then the preface on the same connection, read by one thread
  it("an HTTP/2 connection's calls, and its reader's after the preface, carry no request, whatever it served before", async () => {
    const out = join(dir, 'h2server');
    mkdirSync(out);
    const { port } = await pythonServer(
      `import os, socket, sys
srv = socket.socket(); srv.bind(('127.0.0.1', 0)); srv.listen(1)
print(srv.getsockname()[1], flush=True)
c = srv.accept()[0]
c.recv(4096); c.sendall(b'a' * 1601)
c.recv(4096)
fd = os.open(os.path.join(sys.argv[1], 'after-preface'), os.O_WRONLY | os.O_CREAT); os.write(fd, b'x'); os.close(fd)
c.sendall(b'b' * 1602)
`,
      [out],
    );
    const s = await connected(port);
    s.write(head('h1-first', 41));
    await readBytes(s, 1601);
    s.write('PRI * HTTP/2.0\r\n\r\nSM\r\n\r\n');
    await readBytes(s, 1602);
    s.destroy();
    const sends = await waitEvents(`e.type = ${RecordType.SysWrite} AND e.bytes IN (1601, 1602)`, 2);
    expect(sends.map((e) => [e.bytes, e.txn])).toEqual([
      [1601, 'h1-first'],
      [1602, null],
    ]);
    // the thread now serves the connection's streams, none of them the upgrading request
    const [file] = await waitEvents(`e.type = ${RecordType.SysWrite} AND t.value LIKE '${out}/%'`, 1);
    expect(file!.txn).toBeNull();
    await waitFor(() => storedCounter(store, 'multiplexed_call') > 0, { what: 'the HTTP/2 calls counted' });
  });
  it("a client's HTTP/2 connection carries no request, though its thread has one", async () => {
    const upstream = createTcpServer((c) =>
      c.on('data', (d) => c.write(Buffer.alloc(1800 + (d.length % 2), 0x61))),
    );
    await new Promise<void>((r) => upstream.listen(0, '127.0.0.1', r));
    const out = join(dir, 'h2client');
    mkdirSync(out);
    try {
      await python(
        `import os, socket, sys
null = os.open('/dev/null', os.O_WRONLY)
os.write(null, b'KREPLAY-CTX txn=h2-client\\n')
c = socket.create_connection(('127.0.0.1', int(sys.argv[1])))
c.sendall(b'PRI * HTTP/2.0\\r\\n\\r\\nSM\\r\\n\\r\\n'); c.recv(4096)
c.sendall(b'x' * 1801); c.recv(4096)
fd = os.open(os.path.join(sys.argv[2], 'h2-file'), os.O_WRONLY | os.O_CREAT); os.write(fd, b'x'); os.close(fd)
`,
        [String((upstream.address() as AddressInfo).port), out],
      );
      const [file] = await waitEvents(`e.type = ${RecordType.SysWrite} AND t.value LIKE '${out}/%'`, 1);
      expect(file!.txn).toBe('h2-client');
      const calls = events(
        `e.pid = ${file!.pid} AND t.value = 'tcp 127.0.0.1:${(upstream.address() as AddressInfo).port}'`,
      );
      expect(calls.map((e) => [e.type, e.txn])).toEqual([
        [RecordType.SysConnect, 'h2-client'],
        [RecordType.SysWrite, null],
        [RecordType.SysRead, null],
        [RecordType.SysWrite, null],
        [RecordType.SysRead, null],
      ]);
    } finally {
      upstream.close();
    }
  });
});

describe('nginx proxying through one event-loop worker (real program)', () => {
  const LEVEL = 64;
  const REQUESTS = 256;
  let upstream: Server;
  let nginx: ChildProcess;

  afterAll(() => {
    nginx?.kill('SIGKILL');
    upstream?.close();
  });

  it("every call on a client or upstream connection is its request's, never another's", async () => {
    // the upstream (outside the cgroup) answers request i with 1000 + i bytes: the ground truth
    upstream = createServer((req, res) => res.end('u'.repeat(1000 + Number(/\/r(\d+)/.exec(req.url!)![1]))));
    upstream.keepAliveTimeout = 60_000;
    await new Promise<void>((r) => upstream.listen(0, '127.0.0.1', r));
    const upstreamPort = (upstream.address() as AddressInfo).port;
    const probe = createTcpServer();
    await new Promise<void>((r) => probe.listen(0, '127.0.0.1', r));
    const port = (probe.address() as AddressInfo).port;
    await new Promise<void>((r) => probe.close(() => r()));
    const prefix = join(dir, 'nginx');
    const conf = writeNginxConf(prefix, {
      workerConnections: 1024,
      accessLog: true,
      http: `  upstream up { server 127.0.0.1:${upstreamPort}; keepalive 8; }
  server {
    listen 127.0.0.1:${port};
    location / { proxy_pass http://up; proxy_http_version 1.1; proxy_set_header Connection ""; }
  }`,
    });
    execFileSync('/usr/sbin/nginx', ['-t', '-p', prefix, '-c', conf], {
      stdio: 'ignore',
    });
    nginx = spawn(
      '/bin/sh',
      ['-c', `${cgroup.enter} "$@"`, 'sh', '/usr/sbin/nginx', '-p', prefix, '-c', conf, '-g', 'daemon off;'],
      { stdio: 'ignore' },
    );
    children.push(nginx);
    await nginxListening(port);

    const pool = new Agent({ keepAlive: true, maxSockets: LEVEL });
    const id = (i: number) => `r${100 + i}`;
    const get = (i: number) =>
      new Promise<void>((resolve, reject) => {
        request(
          {
            agent: pool,
            host: '127.0.0.1',
            port,
            path: `/${id(i)}`,
            headers: { 'x-request-id': id(i), traceparent: `00-${trace(5000 + i)}-00f067aa0ba902b7-01` },
          },
          (res) => res.resume().once('end', () => resolve()),
        )
          .once('error', reject)
          .end();
      });
    let next = 0;
    await Promise.all(
      Array.from({ length: LEVEL }, async () => {
        while (next < REQUESTS) await get(next++);
      }),
    );
    pool.destroy();

    const ofRequest = (txn: string | null) => (txn === null ? null : Number(txn.slice(1)));
    // the worker's answers to its clients: every request's, each once, its size its own
    const answers = await waitFor(() => {
      const rows = events(
        `e.type = ${RecordType.SysWrite} AND m.name = 'nginx' AND t.value = 'tcp accepted 127.0.0.1:${port}'`,
      ).filter((e) => e.bytes > 1000);
      return rows.length >= REQUESTS && rows;
    });
    const residuals = new Set(answers.map((e) => e.bytes - ofRequest(e.txn)!));
    expect({ unattributed: answers.filter((e) => e.txn === null).length, residuals: residuals.size }).toEqual(
      {
        unattributed: 0,
        residuals: 1,
      },
    );
    expect(new Set(answers.map((e) => e.txn)).size).toBe(REQUESTS);
    // its requests to the upstream, sent on pooled connections: each request's once
    const proxied = events(
      `e.type = ${RecordType.SysWrite} AND m.name = 'nginx' AND t.value = 'tcp 127.0.0.1:${upstreamPort}'`,
    );
    expect(proxied.length).toBe(REQUESTS);
    expect(new Set(proxied.map((e) => e.txn))).toEqual(new Set(answers.map((e) => e.txn)));
    // the upstream's answers, read on those connections: each carries the request it answers
    const reads = events(
      `e.type = ${RecordType.SysRead} AND m.name = 'nginx' AND t.value = 'tcp 127.0.0.1:${upstreamPort}' AND e.ret > 1000`,
    );
    expect(reads.length).toBeGreaterThanOrEqual(REQUESTS);
    const readResiduals = new Set(reads.map((e) => e.ret! - ofRequest(e.txn)!));
    expect({
      unattributed: reads.filter((e) => e.txn === null).length,
      residuals: readResiduals.size,
    }).toEqual({
      unattributed: 0,
      residuals: 1,
    });
  }, 120_000);
});
