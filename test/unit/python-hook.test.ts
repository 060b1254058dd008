/**
 * The Python hook (agent/runtimes/python/kreplay_python_hook.py) in Debian's python3, without a
 * kernel: test/support/python-hook-driver.py records its signals by thread and models what the
 * kernel makes of them, so each side effect of an aiohttp-like request, a pool hand-off and a
 * grpcio-like call says which request it would carry. And the code the agent queues: the hook in a
 * namespace of its own, patching modules imported later, idempotent, silent when broken.
 */
import { execFileSync } from 'node:child_process';
import { join } from 'node:path';
import {
  pythonBootstrap,
  PYTHON_HOOK_SIGNAL,
  readPythonHookSource,
  type PythonHookSignal,
} from '../../agent/runtimes/python/hook-source';

const PYTHON = '/usr/bin/python3';
const DRIVER = join(__dirname, '..', 'support', 'python-hook-driver.py');
const SOURCE = join(__dirname, '..', '..', 'agent', 'runtimes', 'python', 'kreplay_python_hook.py');

type Marks = [string, string | null][];
/** the driver's count of the hook's signals by op, read from a mailbox and written */
type Ops = Record<'open' | 'handoff' | 'watch' | 'close' | 'adopt' | 'mailboxOp', number>;
interface Signals {
  mailed: Ops;
  written: Ops;
  'mailboxes left empty': boolean;
}

describe('the Python hook', () => {
  const drive = (signal: PythonHookSignal) =>
    JSON.parse(
      execFileSync(PYTHON, [DRIVER, SOURCE, JSON.stringify(signal)], { encoding: 'utf8' }),
    ) as Record<string, unknown>;
  let results: Record<string, unknown>;
  beforeAll(() => {
    results = drive(PYTHON_HOOK_SIGNAL);
  });

  it("gives an aiohttp request's task, its child tasks and its executor work the request; loop callbacks none", () => {
    const marks = results.aiohttp as Marks;
    // 8 requests interleaved on one loop: start, after a sleep, in the executor, in a child task, end
    expect(marks.filter(([label]) => /^r\d /.test(label))).toHaveLength(40);
    for (const [label, request] of marks) {
      const owner = /^(r\d) /.exec(label)?.[1] ?? null;
      expect({ label, request }).toEqual({ label, request: owner });
    }
    expect(marks.filter(([label]) => label === 'loop callback')).toHaveLength(8);
  });

  it('opens a unit per WSGI call from its environ; a thread the request starts carries it, and the thread none after', () => {
    expect(results.wsgi).toEqual(
      ['w0', 'w1', 'w2'].flatMap((rid) => [
        [`${rid} in its view`, rid],
        [`${rid} in a thread it started`, rid],
        [`${rid} after its call`, null],
      ]),
    );
  });

  it("opens one unit per request of wsgiref's handler, a bare function's too, and none again for a framework's call inside", () => {
    const [marks, opens] = results.wsgiref as [Marks, number];
    expect(opens).toBe(3);
    expect(marks).toEqual(
      ['e0', 'e1', 'e2'].flatMap((rid) => [
        [`${rid} in its view`, rid],
        [`${rid} in a thread it started`, rid],
        [`${rid} after its call`, null],
      ]),
    );
  });

  it("opens one unit per request of gunicorn's workers (sync, gthread, async), its response written in it, and none again for a framework's call inside", () => {
    const [marks, opens] = results.gunicorn as [Marks, number];
    expect(opens).toBe(3);
    expect(marks).toEqual(
      ['g0', 'g1', 'g2'].flatMap((rid) => [
        [`${rid} in its view`, rid],
        [`${rid} in a thread it started`, rid],
        [`${rid} writing its response`, rid],
        [`${rid} after its call`, null],
      ]),
    );
  });

  it("opens one unit per ASGI http call, the server's (uvicorn's cycle), not again the framework's inside it", () => {
    const [marks, opens] = results.asgi as [Marks, number];
    expect(opens).toBe(3);
    expect(marks).toHaveLength(6);
    for (const [label, request] of marks)
      expect({ label, request }).toEqual({ label, request: label.split(' ')[0] });
  });

  it("runs work a plain thread hands to a ThreadPoolExecutor in that thread's request, and leaves it after", () => {
    // the four threads submit at once: their work runs in any order
    const marks = results.executor as Marks;
    expect([...marks.slice(0, 4)].sort()).toEqual([
      ['t0 in the pool', 't0'],
      ['t1 in the pool', 't1'],
      ['t2 in the pool', 't2'],
      ['t3 in the pool', 't3'],
    ]);
    expect(marks.slice(4)).toEqual([['from a thread without a request', null]]);
  });

  it("opens a grpcio call's unit from its metadata on the pool thread, and leaves it after", () => {
    expect(results.grpc).toEqual([
      ['grpc call', 'g0'],
      ['grpc call', 'g1'],
      ['grpc call', 'g2'],
      ['after the calls', null],
    ]);
    expect(results['grpc handoffs']).toBe(true);
  });

  it("hands a queue.Queue job's request to the worker that gets it, in the queue's order; none for a PriorityQueue's", () => {
    expect(results.queue).toEqual([
      ["q0's job", 'q0'],
      ["q1's job", 'q1'],
      ["q2's job", 'q2'],
      ["l1's job", 'l1'],
      ["l0's job", 'l0'],
      ["a PriorityQueue's job", null],
      ["its own request, after a get of q9's job", 'h'],
    ]);
  });

  it('switches units by a store into its slot; queued again, wraps nothing twice and registers each slot anew', () => {
    // callbacks that switch units write nothing; after the second queuing, the next one registers its slot
    expect(results['signals anew']).toEqual([0, 1]);
    expect(results['wrapped once']).toBe(true);
    expect(results['import machinery']).toEqual([true, false]);
  });

  it("signals through the thread's mailbox and getpriority, emptied after; writes a slot's WATCH, and a slotless thread's first signal and its MAILBOX", () => {
    const { mailed, written, ...rest } = results.signals as Signals;
    // every request's OPEN and CLOSE is mailed: their threads run units
    expect(mailed.open).toBeGreaterThan(0);
    expect(mailed.close).toBe(mailed.open);
    expect(mailed.handoff).toBeGreaterThan(0);
    expect([written.open, written.close, mailed.watch, mailed.mailboxOp]).toEqual([0, 0, 0, 0]);
    // a plain thread writes its first signal (a started thread's one ADOPT, a submitter's HANDOFF
    // outside any unit), then registers its mailbox alone: the queue's worker mails its 5 other gets
    expect(written.adopt).toBeGreaterThan(0);
    expect(written.handoff).toBeGreaterThan(0);
    expect(written.mailboxOp).toBe(1);
    expect(mailed.adopt).toBe(5);
    expect(rest).toEqual({ 'mailboxes left empty': true });
  });

  it('attributes the same with every signal written, as in a process under a seccomp filter', () => {
    const writesOnly = drive({ ...PYTHON_HOOK_SIGNAL, mailbox: false });
    const { mailed, written } = writesOnly.signals as Signals;
    expect(Object.values(mailed)).toEqual([0, 0, 0, 0, 0, 0]);
    expect(written.open).toBe((results.signals as Signals).mailed.open);
    // each scenario's side effects and their requests, in an order the pool threads' timing cannot move
    const attributed = (all: Record<string, unknown>) =>
      Object.entries(all)
        .filter(([scenario]) => scenario !== 'signals')
        .map(([scenario, marks]) => [
          scenario,
          Array.isArray(marks) ? marks.map((m) => JSON.stringify(m)).sort() : marks,
        ]);
    expect(attributed(writesOnly)).toEqual(attributed(results));
  });

  it('writes its signals to the descriptor no file can have, and to no other', () => {
    expect(results.fds).toEqual([PYTHON_HOOK_SIGNAL.fd]);
    expect(PYTHON_HOOK_SIGNAL.fd).toBe(0x7fffffff);
  });

  it('raises nothing into the program when its signals fail', () => {
    expect(results.failing).toEqual([
      [
        ['ok', false],
        ['ok', false],
      ],
      'pool answer',
    ]);
  });

  it('writes a head the kernel keeps whole: a request line, printable traceparent and x-request-id only', () => {
    expect(results.heads).toEqual([
      'GET /a%20b%E9 HTTP/1.1\r\ntraceparent: 00-1-2-01\r\n\r\n',
      'GET /ppppppppppppppp',
      0,
    ]);
  });
});

describe("the code the agent queues (PyRun_SimpleString's)", () => {
  const run = (code: string) =>
    execFileSync(PYTHON, ['-I', '-c', code], { encoding: 'utf8', stdio: ['ignore', 'pipe', 'pipe'] });
  const bootstrap = pythonBootstrap(readPythonHookSource());

  it('installs the hook in a namespace of its own, patches a module imported later, once, and leaves no trace in sys', () => {
    const probe = (hook: string) =>
      run(`import sys
meta_path, fds = list(sys.meta_path), __import__("os").listdir("/proc/self/fd")
${hook}
import concurrent.futures.thread as thread
print(sorted(k for k in globals() if not k.startswith("__")))
print(hasattr(thread._WorkItem.run, "_kreplay_wraps"), hasattr(getattr(thread._WorkItem.run, "_kreplay_wraps", None), "_kreplay_wraps"))
print(type(thread.__loader__).__name__, type(thread.__spec__.loader).__name__)
print(sys.meta_path == meta_path, __import__("os").listdir("/proc/self/fd") == fds, __import__("threading").active_count())
print(sorted(sys.modules))
`).split('\n');
    const hooked = probe(`${bootstrap}${bootstrap}`);
    expect(hooked.slice(0, 4)).toEqual([
      "['fds', 'meta_path', 'sys', 'thread']",
      'True False',
      'SourceFileLoader SourceFileLoader',
      'True True 1',
    ]);
    // the same modules as without the hook: it registers none, and none of its imports shows
    expect(hooked[4]).toBe(probe('')[4]);
  });

  it('patches a module it caught in the middle of its import at the next loop callback or pool submission', () => {
    // what the agent meets when it queues the hook while the server still imports: aiohttp's
    // web_protocol (and grpcio's _server) in sys.modules before their functions are defined; once
    // the server runs, it imports nothing more that would retry them
    const out = run(`import asyncio, sys, types
from concurrent.futures import ThreadPoolExecutor
for name in ("aiohttp", "aiohttp.web_protocol", "grpc", "grpc._server"):
    sys.modules[name] = types.ModuleType(name)
loop = asyncio.new_event_loop()
pool = ThreadPoolExecutor(max_workers=1)
${bootstrap}
class RequestHandler:
    async def _handle_request(self, request, *args):
        return "ok"
sys.modules["aiohttp.web_protocol"].RequestHandler = RequestHandler
server = sys.modules["grpc._server"]
server._unary_response_in_pool = server._stream_response_in_pool = lambda *args: None
print(hasattr(RequestHandler._handle_request, "_kreplay_wraps"), hasattr(server._unary_response_in_pool, "_kreplay_wraps"))
loop.run_until_complete(asyncio.sleep(0))
print(hasattr(RequestHandler._handle_request, "_kreplay_wraps"))
pool.submit(print, "submitted").result()
print(hasattr(server._unary_response_in_pool, "_kreplay_wraps"))
`);
    expect(out.split('\n')).toEqual(['False False', 'True', 'submitted', 'True', '']);
  });

  it("costs a real aiohttp request's loop thread the hook's wrappers and eight calls of its own: none per character, per callback or per header", () => {
    // Debian's aiohttp, served on a loop thread whose calls into the hook's functions (its
    // namespace's) are counted by sys.setprofile; requests from another thread, keep-alive
    const out = run(`import asyncio, collections, http.client, sys, threading
${bootstrap}
from aiohttp import web
calls, N = collections.Counter(), 200
def profile(frame, event, arg):
    if event == "call" and frame.f_globals.get("__name__") == "_kreplay_python_hook_boot":
        calls[frame.f_code.co_name] += 1
async def handle(request):
    return web.Response(text="ok")
def client(port, loop, warm, done):
    connection = http.client.HTTPConnection("127.0.0.1", port)
    for i in range(20 + N):
        if i == 20:
            loop.call_soon_threadsafe(warm.set)
            warm_seen.wait()
        connection.request("GET", "/items?page=%d" % i, headers={"traceparent": "00-%032x-%016x-01" % (i + 1, i + 1), "x-request-id": "r%d" % i})
        connection.getresponse().read()
    loop.call_soon_threadsafe(done.set)
warm_seen = threading.Event()
async def main():
    # aiohttp's low-level server: the same RequestHandler as an application's, no router
    listening = await asyncio.get_running_loop().create_server(web.Server(handle), "127.0.0.1", 0)
    warm, done = asyncio.Event(), asyncio.Event()
    port = listening.sockets[0].getsockname()[1]
    threading.Thread(target=client, args=(port, asyncio.get_running_loop(), warm, done)).start()
    await warm.wait()
    sys.setprofile(profile)
    warm_seen.set()
    await done.wait()
    sys.setprofile(None)
    listening.close()
asyncio.run(main())
# the slot's re-registration, at most every 0.1 s, rounds to none a request
print(__import__("json").dumps({name: round(n / N, 1) for name, n in calls.items() if round(n / N, 1)}))
`);
    // each loop callback's wrapper (_run) calls none of the hook's functions; the request's opens its
    // unit (its head made, its slot set, its OPEN mailed) and closes it (its slot cleared, its CLOSE
    // mailed)
    const { _run: callbacks, ...perRequest } = JSON.parse(out) as Record<string, number>;
    expect(perRequest).toEqual({
      _handle_request: 1,
      '<listcomp>': 1,
      http_head: 1,
      open_unit: 1,
      slot: 2,
      send: 2,
      close_unit: 1,
    });
    // the connection's read, its task's steps: aiohttp's own count
    expect(callbacks).toBeGreaterThanOrEqual(3);
  });

  it("costs a real gunicorn gthread + Flask request one head: Flask's call inside gunicorn's unit makes none", () => {
    // Debian's gunicorn (its master, then the worker it forks, the hook queued before the fork) and
    // Flask; the calls into the hook's functions (its namespace's) counted by sys.setprofile on the
    // worker's threads, over keep-alive requests of a client thread in the master
    const out = run(`import collections, http.client, json, os, signal, sys, threading
${bootstrap}
from flask import Flask
from gunicorn.app.base import BaseApplication
calls, N = collections.Counter(), 200
def profile(frame, event, arg):
    if event == "call" and frame.f_globals.get("__name__") == "_kreplay_python_hook_boot":
        calls[frame.f_code.co_name] += 1
app = Flask("counted")
@app.get("/")
def index():
    return "ok"
@app.get("/reset")
def reset():
    calls.clear()
    return "ok"
@app.get("/calls")
def counted():
    return json.dumps({name: round(n / N, 1) for name, n in calls.items() if round(n / N, 1)})
def client(port, printed):
    connection = http.client.HTTPConnection("127.0.0.1", port)
    def get(path, i=0):
        connection.request("GET", path, headers={"traceparent": "00-%032x-%016x-01" % (i + 1, i + 1), "x-request-id": "r%d" % i})
        return connection.getresponse().read().decode()
    for i in range(20):
        get("/", i)
    get("/reset")
    for i in range(N):
        get("/", i)
    printed.append(get("/calls"))
    os.kill(os.getpid(), signal.SIGTERM)
class Server(BaseApplication):
    def load_config(self):
        for key, value in {"bind": "127.0.0.1:0", "worker_class": "gthread", "workers": 1, "threads": 4, "loglevel": "critical",
                           "post_fork": lambda server, worker: (sys.setprofile(profile), threading.setprofile(profile)),
                           "when_ready": lambda server: threading.Thread(target=client, args=(server.LISTENERS[0].sock.getsockname()[1], printed)).start()}.items():
            self.cfg.set(key, value)
    def load(self):
        return app
printed = []
try:
    Server().run()
except SystemExit:
    pass
print(printed[0])
`);
    // gunicorn's handle_request opens the unit when wsgi.create makes the environ, and Flask's call
    // inside it makes no head of its own (on main: wsgi_head twice, four list comprehensions)
    expect(JSON.parse(out)).toEqual({
      __init__: 1,
      _run: 1,
      serve: 1,
      _make: 1,
      '<lambda>': 1,
      open_in_scope: 1,
      __call__: 1,
      open_request: 2,
      greenlets_followed: 1,
      wsgi_head: 1,
      '<listcomp>': 1,
      http_head: 1,
      open_unit: 1,
      slot: 2,
      send: 2,
      close_request: 2,
      close_unit: 1,
    });
  });

  it("costs a real uvicorn + Starlette request one head: Starlette's call inside uvicorn's unit makes none", () => {
    // Debian's uvicorn (h11, asyncio) and Starlette on the main thread, whose calls into the hook's
    // functions are counted by sys.setprofile; keep-alive requests from a client thread
    const out = run(`import collections, http.client, socket, sys, threading
${bootstrap}
import uvicorn
from starlette.applications import Starlette
from starlette.responses import PlainTextResponse
from starlette.routing import Route
calls, N, counting = collections.Counter(), 200, [False]
def profile(frame, event, arg):
    if counting[0] and event == "call" and frame.f_globals.get("__name__") == "_kreplay_python_hook_boot":
        calls[frame.f_code.co_name] += 1
async def index(request):
    return PlainTextResponse("ok")
listening = socket.socket()
# the accepted connection's small writes are not held for the client's delayed ACK (40 ms a request)
listening.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
listening.bind(("127.0.0.1", 0))
server = uvicorn.Server(uvicorn.Config(Starlette(routes=[Route("/", index)]), log_level="critical", loop="asyncio", http="h11"))
def client():
    while not server.started:
        threading.Event().wait(0.01)
    connection = http.client.HTTPConnection(*listening.getsockname())
    for i in range(20 + N):
        counting[0] = i >= 20
        connection.request("GET", "/", headers={"traceparent": "00-%032x-%016x-01" % (i + 1, i + 1), "x-request-id": "r%d" % i, "accept": "*/*"})
        connection.getresponse().read()
    counting[0] = False
    server.should_exit = True
threading.Thread(target=client).start()
sys.setprofile(profile)
server.run(sockets=[listening])
sys.setprofile(None)
print(__import__("json").dumps({name: round(n / N, 1) for name, n in calls.items() if round(n / N, 1)}))
`);
    // uvicorn's cycle opens the unit from the scope; Starlette's call inside it makes no head (on
    // main: asgi_head twice, a header dictionary's list comprehension twice)
    // (the loop thread's slot registers again at most every 0.1 s: a matter of the requests' pace)
    const {
      _run: callbacks,
      register: _register,
      write_signal: _written,
      ...perRequest
    } = JSON.parse(out) as Record<string, number>;
    expect(perRequest).toEqual({
      __call__: 2,
      '<lambda>': 2,
      asgi_request: 2,
      open_request: 2,
      greenlets_followed: 1,
      asgi_head: 1,
      '<listcomp>': 1,
      http_head: 1,
      open_unit: 1,
      slot: 2,
      send: 2,
      close_request: 2,
      close_unit: 1,
    });
    expect(callbacks).toBeGreaterThanOrEqual(1);
  });

  it('raises nothing, and prints nothing, when the hook is broken', () => {
    expect(run(`${pythonBootstrap('def broken(:\n')}print("still running")`)).toBe('still running\n');
    expect(() => pythonBootstrap('caf\u00e9 = 1\n')).toThrow('printable ASCII');
  });
});
