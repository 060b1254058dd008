/**
 * The kernel side of attribution: context markers and HTTP heads open a
 * context, later writes of the thread and of the tasks it creates carry it,
 * and a context record always comes before the events that name it.
 */
import { spawn } from 'node:child_process';
import { closeSync, existsSync, openSync, readFileSync, writeSync, writevSync } from 'node:fs';
import { request } from 'node:http';
import { connect, type Socket } from 'node:net';
import { join } from 'node:path';
import type {
  DecodedContext,
  DecodedRecord,
  DecodedSyscall,
  DecodedSysWrite,
} from '../support/decode-records';
import { CONTEXT_DATA_LEN, ContextKind } from '../../core/model';
import { startNginx } from '../support/nginx';
import { useTempDir } from '../support/temp-dir';
import { waitFor } from '../support/wait';
import { captureAround, describeKernel, runToExit } from './capture-harness';

const dir = useTempDir();

const contexts = (records: DecodedRecord[], pid: number): DecodedContext[] =>
  records.filter((r): r is DecodedContext => r.type === 'context' && r.pid === pid);
const writes = (records: DecodedRecord[], pid: number): DecodedSysWrite[] =>
  records.filter((r): r is DecodedSysWrite => r.type === 'sys_write' && r.pid === pid);
/* The reads of thread `tid` that brought data. */
const reads = (records: DecodedRecord[], tid: number): DecodedSyscall[] =>
  records.filter((r): r is DecodedSyscall => r.type === 'sys_read' && r.tid === tid && r.ret > 0);
/* A send that started a request by its first line, any other write by its size; and its context. */
const sent = (w: DecodedSysWrite): [string | number, number] => [
  w.request?.toString().split('\r\n')[0] ?? w.count,
  w.contextId,
];

/* Sends `head` on a keep-alive connection and resolves once its whole answer (ending `body`) came. */
function ask(socket: Socket, head: string, body: string): Promise<void> {
  return new Promise((resolve) => {
    let got = '';
    const onData = (d: Buffer): void => {
      got += d.toString('latin1');
      if (!got.endsWith(body)) return;
      socket.off('data', onData);
      resolve();
    };
    socket.on('data', onData);
    socket.write(head);
  });
}

function expectContextsBeforeUse(records: DecodedRecord[]): void {
  const seen = new Set<number>();
  for (const r of records) {
    if (r.type === 'context') seen.add(r.contextId);
    else if (r.type === 'target') continue;
    else if (r.contextId !== 0 && !seen.has(r.contextId)) {
      throw new Error(`${r.type} at offset ${r.offset} names context ${r.contextId} before its record`);
    }
  }
}

describeKernel('context tracking', () => {
  it('opens contexts on markers and HTTP heads, and only on them', async () => {
    const fd = openSync(join(dir.path, 'out'), 'w');
    const big = `POST /upload HTTP/1.1\r\n\r\n${'x'.repeat(2000)}`;
    const send = (text: string): void => void writeSync(fd, text);
    const { records } = await captureAround(
      { excludeSelf: false, include: [{ pid: process.pid }], filterTransactions: true },
      () => {
        send('KREPLAY-CTX txn=t1 trace=abc');
        send('after the marker');
        send('KREPLAY-CTXY is no marker');
        send('GET'); // too short for a method token
        send('GET /orders HTTP/1.1\r\nHost: shop\r\n\r\n');
        writevSync(fd, [Buffer.alloc(0), Buffer.from('HTTP/1.1 200 OK\r\n'), Buffer.from('\r\n')]);
        send('KREPLAY-CTX');
        send(big);
      },
    );
    closeSync(fd);

    const opened = contexts(records, process.pid);
    expect(opened.map((c) => [c.kind, c.data.toString()])).toEqual([
      [ContextKind.Marker, 'KREPLAY-CTX txn=t1 trace=abc'],
      [ContextKind.Http, 'GET /orders HTTP/1.1\r\nHost: shop\r\n\r\n'],
      [ContextKind.Http, 'HTTP/1.1 200 OK\r\n'],
      [ContextKind.Marker, 'KREPLAY-CTX'],
      [ContextKind.Http, big.slice(0, CONTEXT_DATA_LEN)],
    ]);
    const [marker, request, response, bare, upload] = opened as [DecodedContext, ...DecodedContext[]];
    expect(request?.parentId).toBe(marker.contextId);
    expect(response?.parentId).toBe(request?.contextId);
    for (const c of opened) expect(c.tid).toBe(process.pid);

    const mine = writes(records, process.pid).filter((w) => w.fd === fd);
    expect(mine.map((w) => w.contextId)).toEqual([
      marker.contextId, // the marker's own write
      marker.contextId,
      marker.contextId,
      marker.contextId,
      request?.contextId,
      response?.contextId,
      bare?.contextId,
      upload?.contextId,
    ]);
    expectContextsBeforeUse(records);
  });

  it('hands the context to child processes, even short-lived ones', async () => {
    const hi = join(dir.path, 'hi');
    const pidFile = join(dir.path, 'child-pid');
    // `; true` keeps sh from exec'ing its last command: the inner sh must be a forked child.
    const script = `printf "KREPLAY-CTX txn=t1\\n" > /dev/null; echo hi > ${hi}; sh -c 'echo $$ > ${pidFile}'; true`;
    const { records, value: shPid } = await captureAround({}, () => runToExit('sh', ['-c', script]));
    const childPid = Number(readFileSync(pidFile, 'utf8'));

    const [marker] = contexts(records, shPid);
    expect(marker).toMatchObject({ kind: ContextKind.Marker, data: Buffer.from('KREPLAY-CTX txn=t1\n') });
    const id = marker?.contextId;
    // before its exec the child is still node (libuv reports to its parent): only sh's own writes
    const shWrites = writes(records, shPid).filter((w) => w.comm === 'sh');
    expect(shWrites.map((w) => [w.count, w.contextId])).toEqual([
      [19, id],
      [3, id],
    ]);
    expect(childPid).not.toBe(shPid);
    expect(writes(records, childPid).map((w) => [w.count, w.contextId])).toEqual([
      [`${childPid}\n`.length, id],
    ]);
    expectContextsBeforeUse(records);
  });

  it("a thread other than the main one execs (it takes the process's tid): the new program's writes carry the thread's context, not none", async () => {
    const out = join(dir.path, 'exec-out');
    // the main thread waits in join until the exec ends it; the marker is the exec'ing thread's own
    const script = [
      'import os, threading',
      'def run():',
      '    fd = os.open("/dev/null", os.O_WRONLY)',
      '    os.write(fd, b"KREPLAY-CTX txn=exec1")',
      `    os.execv("/bin/sh", ["sh", "-c", "echo after > ${out}"])`,
      't = threading.Thread(target=run); t.start(); t.join()',
    ].join('\n');
    const { records, value: pid } = await captureAround({}, () =>
      runToExit('/usr/bin/python3', ['-c', script]),
    );
    expect(readFileSync(out, 'utf8')).toBe('after\n');
    const marker = contexts(records, pid).find((c) => c.data.toString() === 'KREPLAY-CTX txn=exec1');
    expect(marker).toBeDefined();
    expect(marker!.tid).not.toBe(pid);
    // the same thread, now under the process's tid: sh's echo (6 bytes)
    expect(
      writes(records, pid)
        .filter((w) => w.comm === 'sh')
        .map((w) => [w.tid, w.count, w.contextId]),
    ).toEqual([[pid, 6, marker!.contextId]]);
    expectContextsBeforeUse(records);
  });

  it("a client connection a request head went out on: a later send by a thread without a context carries none, not the head's", async () => {
    // the plain thread is made before any context (a thread inherits its creator's)
    const script = [
      'import socket, threading',
      'srv = socket.socket(); srv.bind(("127.0.0.1", 0)); srv.listen()',
      'c = socket.create_connection(srv.getsockname()); peer, _ = srv.accept()',
      'go = threading.Event()',
      'def plain():',
      '    go.wait()',
      '    c.send(b"x" * 201)',
      't = threading.Thread(target=plain); t.start()',
      'c.send(b"GET /d HTTP/1.1\\r\\nHost: d\\r\\n\\r\\n")',
      'c.send(b"y" * 202)',
      'go.set(); t.join()',
    ].join('\n');
    const { records, value: pid } = await captureAround({}, () =>
      runToExit('/usr/bin/python3', ['-c', script]),
    );
    const head = contexts(records, pid).find((c) => c.data.toString().startsWith('GET /d '));
    expect(head).toBeDefined();
    const bySize = new Map(writes(records, pid).map((w) => [w.count, w.contextId]));
    expect([bySize.get(28), bySize.get(202), bySize.get(201)]).toEqual([head!.contextId, head!.contextId, 0]);
    expectContextsBeforeUse(records);
  });

  it("a thread-per-connection server's response head is not its thread's context: the request's lease goes on, and ends at the close (Python ThreadingHTTPServer, unhooked)", async () => {
    const log = join(dir.path, 'thread-server.log');
    // each request's thread writes 101 bytes before its response, 102 after it and 103 after the
    // server closed the connection (shutdown_request runs on the request's thread)
    const script = [
      'import os, sys',
      'from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer',
      'log = os.open(sys.argv[1], os.O_WRONLY | os.O_CREAT | os.O_APPEND)',
      'class Handler(BaseHTTPRequestHandler):',
      '    def do_GET(self):',
      '        os.write(log, b"b" * 101)',
      '        self.send_response(200)',
      '        if self.path == "/echo":',
      '            self.send_header("x-request-id", self.headers["x-request-id"])',
      '            self.send_header("traceparent", self.headers["traceparent"])',
      '        self.send_header("Content-Length", "3")',
      '        self.end_headers()',
      '        self.wfile.write(b"ok\\n")',
      '        os.write(log, b"a" * 102)',
      '    def log_message(self, *args):',
      '        pass',
      'class Server(ThreadingHTTPServer):',
      '    def shutdown_request(self, request):',
      '        super().shutdown_request(request)',
      '        os.write(log, b"c" * 103)',
      'server = Server(("127.0.0.1", 0), Handler)',
      'print(server.server_address[1], flush=True)',
      'server.serve_forever()',
    ].join('\n');
    const python = spawn('/usr/bin/python3', ['-c', script, log], { stdio: ['ignore', 'pipe', 'inherit'] });
    try {
      const port = await new Promise<number>((resolve) =>
        python.stdout!.once('data', (d: Buffer) => resolve(Number(d.toString().trim()))),
      );
      const get = (path: string, id: string): Promise<void> =>
        new Promise((resolve, reject) => {
          const traceparent = `00-${id.padEnd(32, '0')}-${'1'.repeat(16)}-01`;
          request({
            host: '127.0.0.1',
            port,
            path,
            agent: false,
            headers: { 'x-request-id': id, traceparent },
          })
            .once('response', (res) => res.resume().once('end', resolve))
            .once('error', reject)
            .end();
        });
      const paths = ['/echo', '/plain'];
      const { records, counters } = await captureAround({}, async () => {
        for (const [i, path] of paths.entries()) await get(path, `${i + 1}abc`);
        // every thread wrote its three lines: the last after its connection's close
        const written = paths.length * (101 + 102 + 103);
        await waitFor(() => existsSync(log) && readFileSync(log).length === written, {
          what: "the request threads' writes",
        });
      });
      const mine = contexts(records, python.pid!);
      const requests = mine.filter((c) => c.kind === ContextKind.HttpRequest);
      expect(requests.map((c) => c.data.toString().split('\r\n')[0])).toEqual(
        paths.map((p) => `GET ${p} HTTP/1.1`),
      );
      for (const head of requests) {
        const sends = writes(records, python.pid!).filter((w) => w.tid === head.tid);
        // before, the response head, its body, after: the request's; after the close: none
        expect(sends.map((w) => [w.request?.toString().slice(0, 15) ?? w.count, w.contextId])).toEqual([
          [101, head.contextId],
          ['HTTP/1.0 200 OK', head.contextId],
          [3, head.contextId],
          [102, head.contextId],
          [103, 0],
        ]);
      }
      // no response head opened a context of its own
      expect(
        mine.filter((c) => c.kind !== ContextKind.HttpRequest).map((c) => c.data.toString().split('\r\n')[0]),
      ).toEqual([]);
      // each thread's lease ended with its request (other processes may count too)
      expect(counters.outlivedThread).toBeGreaterThanOrEqual(paths.length);
      expectContextsBeforeUse(records);
    } finally {
      const exited = new Promise((r) => python.once('exit', r));
      python.kill('SIGKILL');
      await exited;
    }
  });

  it("a call out a thread-per-connection server's handler makes ends with the request it serves: the thread's writes after the close carry none (Python ThreadingHTTPServer and urllib to nginx)", async () => {
    const nginx = await startNginx(join(dir.path, 'nginx-upstream'));
    const log = join(dir.path, 'calling-server.log');
    // each request's thread writes 101 bytes, calls nginx, writes 102, answers, and writes 103
    // after the server closed the connection (shutdown_request runs on the request's thread)
    const script = [
      'import os, sys, urllib.request',
      'from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer',
      'log = os.open(sys.argv[1], os.O_WRONLY | os.O_CREAT | os.O_APPEND)',
      'upstream = "http://127.0.0.1:%s/" % sys.argv[2]',
      'class Handler(BaseHTTPRequestHandler):',
      '    def do_GET(self):',
      '        os.write(log, b"b" * 101)',
      '        call = urllib.request.Request(upstream, headers={"x-request-id": "call-" + self.path[1:]})',
      '        with urllib.request.urlopen(call) as answer:',
      '            answer.read()',
      '        os.write(log, b"a" * 102)',
      '        self.send_response(200)',
      '        self.send_header("Content-Length", "3")',
      '        self.end_headers()',
      '        self.wfile.write(b"ok\\n")',
      '    def log_message(self, *args):',
      '        pass',
      'class Server(ThreadingHTTPServer):',
      '    def shutdown_request(self, request):',
      '        super().shutdown_request(request)',
      '        os.write(log, b"c" * 103)',
      'server = Server(("127.0.0.1", 0), Handler)',
      'print(server.server_address[1], flush=True)',
      'server.serve_forever()',
    ].join('\n');
    const python = spawn('/usr/bin/python3', ['-c', script, log, String(nginx.port)], {
      stdio: ['ignore', 'pipe', 'inherit'],
    });
    try {
      const port = await new Promise<number>((resolve) =>
        python.stdout!.once('data', (d: Buffer) => resolve(Number(d.toString().trim()))),
      );
      const get = (id: string): Promise<void> =>
        new Promise((resolve, reject) => {
          request({ host: '127.0.0.1', port, path: `/${id}`, agent: false, headers: { 'x-request-id': id } })
            .once('response', (res) => res.resume().once('end', resolve))
            .once('error', reject)
            .end();
        });
      const ids = ['r1', 'r2'];
      const { records } = await captureAround({}, async () => {
        for (const id of ids) await get(id);
        const written = ids.length * (101 + 102 + 103);
        await waitFor(() => existsSync(log) && readFileSync(log).length === written, {
          what: "the request threads' writes",
        });
      });
      const mine = contexts(records, python.pid!);
      const requests = mine.filter((c) => c.kind === ContextKind.HttpRequest);
      expect(requests.map((c) => c.data.toString().split('\r\n')[0])).toEqual(
        ids.map((id) => `GET /${id} HTTP/1.1`),
      );
      for (const head of requests) {
        const [call, ...others] = mine.filter((c) => c.kind === ContextKind.Http && c.tid === head.tid);
        expect([others, call?.parentId, call?.data.toString().split('\r\n')[0]]).toEqual([
          [],
          head.contextId,
          'GET / HTTP/1.1',
        ]);
        const sends = writes(records, python.pid!).filter((w) => w.tid === head.tid);
        // the call's head and the write after it: the call's; the answer: the request's; after the
        // close: none (the call's, the request's transaction, before)
        expect(sends.map(sent)).toEqual([
          [101, head.contextId],
          ['GET / HTTP/1.1', call!.contextId],
          [102, call!.contextId],
          ['HTTP/1.0 200 OK', head.contextId],
          [3, head.contextId],
          [103, 0],
        ]);
        // its reads (from its first call on: the head's came before it had a context): nginx's
        // answer, the call's
        const answer = reads(records, head.tid).map((r) => r.contextId);
        expect(answer.length > 0 && answer.every((id) => id === call!.contextId)).toBe(true);
      }
      expectContextsBeforeUse(records);
    } finally {
      const exited = new Promise((r) => python.once('exit', r));
      python.kill('SIGKILL');
      await exited;
      await nginx.stop();
    }
  });

  it("a plain thread's call out ends with its connection: its later writes carry what it had before, none or its marker's (Python urllib to nginx, which closes it after the answer)", async () => {
    const nginx = await startNginx(join(dir.path, 'nginx-polled'));
    const log = join(dir.path, 'poller.log');
    // a poller with no context and a thread under a marker each call nginx, then write
    const script = [
      'import os, sys, threading, urllib.request',
      'log = os.open(sys.argv[1], os.O_WRONLY | os.O_CREAT | os.O_APPEND)',
      'null = os.open("/dev/null", os.O_WRONLY)',
      'upstream = "http://127.0.0.1:%s/" % sys.argv[2]',
      'def call(rid):',
      '    with urllib.request.urlopen(urllib.request.Request(upstream, headers={"x-request-id": rid})) as answer:',
      '        answer.read()',
      'def poller():',
      '    call("poll-1")',
      '    os.write(log, b"p" * 201)',
      'def marked():',
      '    os.write(null, b"KREPLAY-CTX txn=marked\\n")',
      '    call("marked-1")',
      '    os.write(log, b"m" * 202)',
      'for target in (poller, marked):',
      '    t = threading.Thread(target=target); t.start(); t.join()',
    ].join('\n');
    try {
      const { records, value: pid } = await captureAround({}, () =>
        runToExit('/usr/bin/python3', ['-c', script, log, String(nginx.port)]),
      );
      const mine = contexts(records, pid);
      const [poll, marker, marked, ...others] = mine;
      expect([
        others,
        ...[poll, marker, marked].map((c) => [c?.kind, c?.parentId, c?.data.toString().split('\r\n')[0]]),
      ]).toEqual([
        [],
        [ContextKind.Http, 0, 'GET / HTTP/1.1'],
        [ContextKind.Marker, 0, 'KREPLAY-CTX txn=marked\n'],
        [ContextKind.Http, marker!.contextId, 'GET / HTTP/1.1'],
      ]);
      const byThread = (c: DecodedContext) => writes(records, pid).filter((w) => w.tid === c.tid);
      // the call's head is the call's; the write after it: none (the call's before)
      expect(byThread(poll!).map(sent)).toEqual([
        ['GET / HTTP/1.1', poll!.contextId],
        [201, 0],
      ]);
      // under a marker: the marker's again (the call's before)
      expect(byThread(marked!).map(sent)).toEqual([
        [23, marker!.contextId],
        ['GET / HTTP/1.1', marked!.contextId],
        [202, marker!.contextId],
      ]);
      // nginx's answer, read by the poller: the call's
      const answer = reads(records, poll!.tid);
      expect(answer.length > 0 && answer.every((r) => r.contextId === poll!.contextId)).toBe(true);
      expectContextsBeforeUse(records);
    } finally {
      await nginx.stop();
    }
  });

  it('a response an event loop writes on an accepted connection opens no context: it carries its request, with its bytes (nginx, real program)', async () => {
    const nginx = await startNginx(join(dir.path, 'nginx'));
    const { port, worker } = nginx;
    const sockets: Socket[] = [];
    try {
      const heads = ['a1', 'b1', 'a2', 'b2'].map((id) => `GET /${id} HTTP/1.1\r\nHost: t\r\n\r\n`);
      const { records } = await captureAround({}, async () => {
        for (let i = 0; i < 2; i++) {
          const s = connect(port, '127.0.0.1');
          await new Promise((r) => s.once('connect', r));
          sockets.push(s);
        }
        // one worker, one request at a time: A's, B's (the worker now reads two connections), A's, B's
        for (const [i, head] of heads.entries()) await ask(sockets[i % 2]!, head, 'ok\n');
      });

      const mine = contexts(records, worker);
      const requests = mine.filter((c) => c.kind === ContextKind.HttpRequest);
      expect(requests.map((c) => c.data.toString().split('\r\n')[0])).toEqual(
        heads.map((h) => h.split('\r\n')[0]),
      );
      // each response carries its request, and a connection's first send after a read still keeps
      // its first bytes (once the worker reads a second connection it has no context, its reads are
      // not recorded: the later responses are no first send)
      const [a1, b1, a2, b2] = requests.map((c) => c.contextId);
      expect(
        writes(records, worker).map((w) => [w.contextId, w.request?.toString().slice(0, 15) ?? null]),
      ).toEqual([
        [a1, 'HTTP/1.1 200 OK'],
        [b1, 'HTTP/1.1 200 OK'],
        [a2, null],
        [b2, null],
      ]);
      // none opened a context, the first one either, written while the worker was still a plain
      // thread reading one connection: a response on a server's connection is no thread's context
      expect(mine.filter((c) => c.kind === ContextKind.Http)).toEqual([]);
      expectContextsBeforeUse(records);
    } finally {
      for (const s of sockets) s.destroy();
      await nginx.stop();
    }
  });
});
