"""Runs kreplay's Python hook (agent/runtimes/python/kreplay_python_hook.py) in this process without
a kernel: its signal writes are recorded with the writing thread, and a model of what the kernel
does with them (bpf/capture/units.h) says which request each side effect of the scenarios below
would carry. Prints one JSON object: scenario -> [[side effect, its request or null], ...].
Args: the hook's source, the signal layout (JSON, hook-source.ts's PYTHON_HOOK_SIGNAL).
"""
import asyncio
import ctypes
import importlib
import io
import json
import os
import posix
import queue
import sys
import threading
import types
from concurrent.futures import ThreadPoolExecutor

SOURCE, SIGNAL = open(sys.argv[1]).read(), json.loads(sys.argv[2])
MAGIC = SIGNAL["magic"].encode()

# ---- the kernel, as far as the hook's signals go --------------------------------------------------

# (thread, bytes, the thread's slot before the call, the slot a WATCH signal registers) in call order:
# at each call the kernel reads the slot the thread registered (units.h, unit_refresh)
record = []
slots = {}  # thread -> the address of the slot it registered
boxes = {}  # thread -> the address of its mailbox (a WATCH's or a MAILBOX's unit field)
failing = [False]
fds = set()  # the descriptors the hook wrote to


def slot_value(thread):
    address = slots.get(thread)
    return None if address is None else ctypes.c_uint64.from_address(address).value


def recording_write(fd, data):
    fds.add(fd)
    if failing[0]:
        raise OSError(9, "Bad file descriptor")
    thread, buffer, data = threading.get_ident(), data, bytes(data)
    before, registered = slot_value(thread), None
    if data.startswith(MAGIC) and op_of(data) in (SIGNAL["watch"], SIGNAL["mailboxOp"]):
        # the slot and the mailbox are at the written bytes' own unit field; a MAILBOX's is no slot
        boxes[thread] = ctypes.addressof(ctypes.c_char.from_buffer(buffer)) + SIGNAL["unitAt"]
        if op_of(data) == SIGNAL["watch"]:
            slots[thread] = boxes[thread]
            registered = slot_value(thread)
    if data.startswith(MAGIC):
        written[SIGNAL_OPS[op_of(data)]] += 1
    record.append((thread, data, before, registered))
    return len(data)


def recording_getpriority(which, who):
    """getpriority(PRIO_PROCESS, 0): the signal in the mailbox the thread registered (with its slot or
    alone), if any, as if written (bpf/capture/heads.h, sys_enter_getpriority)."""
    if failing[0]:
        raise OSError(1, "Operation not permitted")
    thread = threading.get_ident()
    address = boxes.get(thread)
    if which == 0 and who == 0 and address is not None:
        signal_at = address - SIGNAL["unitAt"]
        length = ctypes.c_uint64.from_address(signal_at + SIGNAL["mailboxLengthAt"]).value
        if length:
            data = ctypes.string_at(signal_at + SIGNAL["mailboxAt"], length)
            record.append((thread, data, slot_value(thread), None))
            mailed[SIGNAL_OPS[op_of(data)]] += 1
    return 0


def op_of(data):
    return int.from_bytes(data[SIGNAL["opAt"] : SIGNAL["opAt"] + 4], "little")


SIGNAL_OPS = {SIGNAL[name]: name for name in ("open", "handoff", "watch", "close", "adopt", "mailboxOp")}
# signals by op, read from a mailbox and written
mailed, written = dict.fromkeys(SIGNAL_OPS.values(), 0), dict.fromkeys(SIGNAL_OPS.values(), 0)


def mark(label):
    """A side effect: the model says whose request it carries."""
    thread = threading.get_ident()
    record.append((thread, b"MARK " + label.encode(), slot_value(thread), None))


def head_read(rid):
    """The thread read request rid's head: as a plain thread, the kernel gives it that context."""
    record.append((threading.get_ident(), b"HEAD " + rid.encode(), None, None))


def fresh():
    """A new thread: Python reuses a joined thread's ident, the kernel never reuses a live tid (nor
    its slot: the thread that registered it ended)."""
    slots.pop(threading.get_ident(), None)
    boxes.pop(threading.get_ident(), None)
    record.append((threading.get_ident(), b"FRESH", None, None))


def model():
    """Each mark's request: a thread in a unit carries the unit's; a plain one its own, or the one a
    queue's job handed it."""
    units, current, thread_request, owned, out = {}, {}, {}, set(), []
    for thread, data, before, registered in record:
        if before is not None:
            current[thread] = before
        if data == b"FRESH":
            thread_request.pop(thread, None)
            owned.discard(thread)
            current.pop(thread, None)
            continue
        if data.startswith(b"HEAD "):
            thread_request[thread] = data[5:].decode()
            owned.add(thread)
            continue
        if data.startswith(b"MARK "):
            unit = current.get(thread)
            out.append([data[5:].decode(), units.get(unit) if unit is not None else thread_request.get(thread)])
            continue
        assert data.startswith(MAGIC), data
        op = int.from_bytes(data[SIGNAL["opAt"] : SIGNAL["opAt"] + 4], "little")
        unit = int.from_bytes(data[SIGNAL["unitAt"] : SIGNAL["unitAt"] + 8], "little")
        if op == SIGNAL["watch"]:
            current[thread] = registered
        elif op == SIGNAL["mailboxOp"]:
            pass  # the thread keeps what it ran
        elif op == SIGNAL["open"]:
            head = data[SIGNAL["bytes"] :].decode()
            assert head.endswith("\r\n\r\n"), head
            lines = dict(line.split(": ", 1) for line in head.split("\r\n")[1:] if ": " in line)
            units[unit] = lines.get("x-request-id")
            current[thread] = unit
        elif op == SIGNAL["handoff"]:
            mine = current.get(thread)
            units[unit] = units.get(mine) if mine is not None else thread_request.get(thread)
        elif op == SIGNAL["close"]:
            units[unit] = None
        elif op == SIGNAL["adopt"]:
            handed = units.pop(unit, None)
            if thread not in owned and current.get(thread) is None:
                thread_request[thread] = handed
    record.clear()
    return out


# ---- stand-ins for aiohttp's and grpcio's modules, patched by the hook as the real ones are --------

web_protocol = types.ModuleType("aiohttp.web_protocol")


class RequestHandler:
    def __init__(self, loop):
        self._loop = loop

    async def _handle_request(self, request, start_time, request_handler):
        return await request_handler(request), False


web_protocol.RequestHandler = RequestHandler
grpc_server = types.ModuleType("grpc._server")


def _unary_response_in_pool(rpc_event, state, behavior, *args):
    behavior(rpc_event)


grpc_server._unary_response_in_pool = _unary_response_in_pool
grpc_server._stream_response_in_pool = _unary_response_in_pool
sys.modules.update({"aiohttp": types.ModuleType("aiohttp"), "aiohttp.web_protocol": web_protocol})
sys.modules.update({"grpc": types.ModuleType("grpc"), "grpc._server": grpc_server})


# ---- stand-ins for the WSGI and ASGI applications and server the hook patches ---------------------


class Flask:
    """A WSGI application: its view marks, and starts a thread that marks."""

    def __call__(self, environ, start_response):
        rid = environ["HTTP_X_REQUEST_ID"]
        mark(rid + " in its view")
        thread = threading.Thread(target=marked_thread, args=(rid + " in a thread it started",))
        thread.start()
        thread.join()
        if start_response is not None:
            start_response("200 OK", [])
        return [b"ok"]


def marked_thread(label):
    mark(label)
    # its ident may be reused by the next thread, whose tid the kernel never saw
    fresh()


class Starlette:
    """An ASGI application, called inside the server's request cycle (one unit, not two)."""

    async def __call__(self, scope, receive, send):
        rid = dict(scope["headers"])[b"x-request-id"].decode()
        mark(rid + " in its endpoint")
        await asyncio.sleep(0)
        mark(rid + " after a sleep")


class RequestResponseCycle:
    def __init__(self, rid):
        headers = [(b"x-request-id", rid.encode()), (b"traceparent", b"00-%032x-00f067aa0ba902b7-01" % len(rid))]
        self.scope = {"type": "http", "method": "GET", "path": "/", "raw_path": b"/", "headers": headers}

    async def run_asgi(self, app):
        await app(self.scope, None, None)


def stand_in(name, **attributes):
    module = types.ModuleType(name)
    vars(module).update(attributes)
    sys.modules[name] = module


for name in ("flask", "django", "django.core", "django.core.handlers", "uvicorn", "uvicorn.protocols"):
    stand_in(name)
stand_in("uvicorn.protocols.http")
stand_in("starlette")
stand_in("flask.app", Flask=Flask)
stand_in("django.core.handlers.wsgi", WSGIHandler=type("WSGIHandler", (Flask,), {"__call__": Flask.__call__}))
stand_in("starlette.applications", Starlette=Starlette)
stand_in("django.core.handlers.asgi", ASGIHandler=type("ASGIHandler", (Starlette,), {"__call__": Starlette.__call__}))
gunicorn_wsgi = types.ModuleType("gunicorn.http.wsgi")
gunicorn_wsgi.create = lambda req, sock, client, server, cfg: (None, {"REQUEST_METHOD": "GET", "RAW_URI": "/", "HTTP_X_REQUEST_ID": req})


class Worker:
    """gunicorn's worker: its handle_request makes the environ (wsgi.create) and calls the application."""

    def __init__(self, application):
        self.wsgi = application

    def handle_request(self, req, conn):
        resp, environ = gunicorn_wsgi.create(req, conn, None, None, None)
        for data in self.wsgi(environ, lambda status, headers: None):
            mark(req + " writing its response")


for name in ("gunicorn", "gunicorn.http", "gunicorn.workers"):
    stand_in(name)
sys.modules["gunicorn.http.wsgi"] = gunicorn_wsgi
for module, cls in (("sync", "SyncWorker"), ("gthread", "ThreadWorker"), ("base_async", "AsyncWorker")):
    stand_in("gunicorn.workers." + module, **{cls: type(cls, (Worker,), {"handle_request": Worker.handle_request})})
for impl in ("h11_impl", "httptools_impl"):
    stand_in(
        "uvicorn.protocols.http." + impl,
        RequestResponseCycle=type("RequestResponseCycle", (RequestResponseCycle,), {"run_asgi": RequestResponseCycle.run_asgi}),
    )


class Request:
    method = "GET"

    def __init__(self, rid):
        self.raw_path = "/x?id=" + rid
        self.headers = {"x-request-id": rid, "traceparent": "00-%032x-00f067aa0ba902b7-01" % (1 + len(rid))}


class Loop(asyncio.SelectorEventLoop):
    def loop_callback(self):
        mark("loop callback")


posix.write = recording_write
posix.getpriority = recording_getpriority
namespace = {"__name__": "kreplay_python_hook_test"}
exec(SOURCE, namespace)
meta_path = list(sys.meta_path)
namespace["install"](SIGNAL)
results = {}

# ---- scenarios ------------------------------------------------------------------------------------


async def child(rid):
    mark(rid + " in a child task")


async def handler(request):
    rid = request.headers["x-request-id"]
    loop = asyncio.get_running_loop()
    mark(rid + " start")
    await asyncio.sleep(0.001 * (hash(rid) % 5))
    mark(rid + " after sleep")
    await loop.run_in_executor(None, mark, rid + " in the executor")
    await asyncio.create_task(child(rid))
    loop.call_soon(loop.loop_callback)
    await asyncio.sleep(0)
    mark(rid + " end")
    return "ok"


async def serve(n):
    loop = asyncio.get_running_loop()
    protocol = RequestHandler(loop)
    answers = await asyncio.gather(*(protocol._handle_request(Request("r%d" % i), 0, handler) for i in range(n)))
    mark("between requests")
    return answers


loop = Loop()
asyncio.set_event_loop(loop)
answers = loop.run_until_complete(serve(8))
results["aiohttp"] = model()
assert answers == [("ok", False)] * 8, answers



def wsgi_request(rid):
    fresh()
    Flask()({"REQUEST_METHOD": "GET", "PATH_INFO": "/", "HTTP_X_REQUEST_ID": rid}, None)
    mark(rid + " after its call")
    fresh()


wsgi_threads = [threading.Thread(target=wsgi_request, args=("w%d" % i,)) for i in range(3)]
for t in wsgi_threads:
    t.start()
    t.join()
results["wsgi"] = model()

# wsgiref's own handler (imported after the hook: the import watch patches it): its run is the
# request's scope for any application, a bare function's; a framework's call inside opens none
from wsgiref.handlers import SimpleHandler  # noqa: E402


def bare(environ, start_response):
    rid = environ["HTTP_X_REQUEST_ID"]
    mark(rid + " in its view")
    thread = threading.Thread(target=marked_thread, args=(rid + " in a thread it started",))
    thread.start()
    thread.join()
    start_response("200 OK", [])
    return [b"ok"]


def wsgiref_request(rid, application):
    fresh()
    environ = {"REQUEST_METHOD": "GET", "PATH_INFO": "/", "SERVER_NAME": "h", "SERVER_PORT": "80", "SERVER_PROTOCOL": "HTTP/1.1"}
    out, errors = io.BytesIO(), io.StringIO()
    SimpleHandler(io.BytesIO(), out, errors, dict(environ, HTTP_X_REQUEST_ID=rid)).run(application)
    assert out.getvalue().endswith(b"ok") and not errors.getvalue(), (out.getvalue(), errors.getvalue())
    mark(rid + " after its call")
    fresh()


for i, application in enumerate([bare, Flask(), bare]):
    t = threading.Thread(target=wsgiref_request, args=("e%d" % i, application))
    t.start()
    t.join()
opens = sum(data.startswith(MAGIC) and data[SIGNAL["opAt"]] == SIGNAL["open"] for _, data, _b, _r in record)
results["wsgiref"] = [model(), opens]

# gunicorn's workers: handle_request is the scope, the unit opened when wsgi.create makes the environ


def gunicorn_request(rid, worker):
    fresh()
    worker.handle_request(rid, None)
    mark(rid + " after its call")
    fresh()


workers = [sys.modules["gunicorn.workers." + m] for m in ("sync", "gthread", "base_async")]
for i, worker in enumerate([workers[0].SyncWorker(bare), workers[1].ThreadWorker(Flask()), workers[2].AsyncWorker(bare)]):
    t = threading.Thread(target=gunicorn_request, args=("g%d" % i, worker))
    t.start()
    t.join()
opens = sum(data.startswith(MAGIC) and data[SIGNAL["opAt"]] == SIGNAL["open"] for _, data, _b, _r in record)
results["gunicorn"] = [model(), opens]


async def asgi(n):
    await asyncio.gather(*(RequestResponseCycle("a%d" % i).run_asgi(Starlette()) for i in range(n)))


loop.run_until_complete(asgi(3))
opens = sum(data.startswith(MAGIC) and data[SIGNAL["opAt"]] == SIGNAL["open"] for _, data, _b, _r in record)
results["asgi"] = [model(), opens]

pool = ThreadPoolExecutor(max_workers=2)


def thread_per_request(rid):
    head_read(rid)
    pool.submit(mark, rid + " in the pool").result()


threads = [threading.Thread(target=thread_per_request, args=("t%d" % i,)) for i in range(4)]
for t in threads:
    t.start()
for t in threads:
    t.join()
pool.submit(mark, "from a thread without a request").result()
results["executor"] = model()


class CallDetails:
    method = b"/kr.Files/Unary"


class RpcEvent:
    call_details = CallDetails()

    def __init__(self, rid):
        self.invocation_metadata = (("user-agent", "grpc-python"), ("x-request-id", rid))


for i in range(3):
    pool.submit(grpc_server._unary_response_in_pool, RpcEvent("g%d" % i), None, lambda e: mark("grpc call")).result()
pool.submit(mark, "after the calls").result()
results["grpc"] = [[label, rid] for label, rid in model()]
# the hook's own functions are not wrapped again on the way into the pool
results["grpc handoffs"] = grpc_server._unary_response_in_pool._kreplay_opens_unit

# queue.Queue: a plain worker takes each job's putter's request; LIFO in its order; a PriorityQueue's
# job none; a thread serving its own request keeps it
jobs, lifo, prio = queue.Queue(), queue.LifoQueue(), queue.PriorityQueue()


def putter(rid, into, item):
    head_read(rid)
    into.put(item)


def in_turn(*calls):
    for target, args in calls:
        t = threading.Thread(target=lambda target=target, args=args: (fresh(), target(*args)))
        t.start()
        t.join()


def worker():
    for _ in range(3):
        mark(jobs.get())
    for _ in range(2):
        mark(lifo.get())
    prio.get()
    mark("a PriorityQueue's job")


def own_request():
    head_read("h")
    mark("its own request, after a get of " + jobs.get())


in_turn(*[(putter, ("q%d" % i, jobs, "q%d's job" % i)) for i in range(3)])
in_turn((putter, ("l0", lifo, "l0's job")), (putter, ("l1", lifo, "l1's job")), (putter, ("p", prio, 1)))
in_turn((worker, ()), (putter, ("q9", jobs, "q9's job")), (own_request, ()))
results["queue"] = model()

# queued again: nothing is wrapped twice, and every thread signals its unit anew
signals = lambda: sum(data.startswith(MAGIC) for _, data, _b, _r in record)  # noqa: E731
loop.run_until_complete(asyncio.sleep(0))
before = signals()
exec(SOURCE, dict(namespace, __name__="_kreplay_python_hook_boot", SIGNAL=SIGNAL))
loop.run_until_complete(asyncio.sleep(0))
results["signals anew"] = [before, signals() - before]
results["wrapped once"] = asyncio.events.Handle._run._kreplay_wraps.__name__ == "_run"
# every module it waits for is patched: importlib has its own _find_and_load back
results["import machinery"] = [sys.meta_path == meta_path, hasattr(importlib._bootstrap._find_and_load, "_kreplay_wraps")]
record.clear()

# the mailbox's signals, and whether each mailbox the kernel knows was left empty
mailboxes = [ctypes.c_uint64.from_address(a - SIGNAL["unitAt"] + SIGNAL["mailboxLengthAt"]).value for a in boxes.values()]
results["signals"] = {"mailed": mailed, "written": written, "mailboxes left empty": not any(mailboxes)}

# a hook whose writes (and getpriority calls) fail raises nothing into the program
failing[0] = True
results["failing"] = [
    loop.run_until_complete(serve(2)),
    pool.submit(lambda: "pool answer").result(),
]
failing[0] = False
record.clear()

http_head = namespace["http_head"]
results["fds"] = sorted(fds)
results["heads"] = [
    http_head("GET", "/a b\u00e9", [("traceparent", "00-1-2-01"), ("x-request-id", "bad\r\nvalue")], 1024).decode(),
    http_head("get!", "/" + "p" * 600, [], 1024).decode()[:20],
    len(http_head("GET", "/", [("x-request-id", "r" * 200)] * 5, 512)),
]
print(json.dumps(results))
