"""kreplay's Python hook: tells the kernel which request each asyncio task, gRPC call and thread-pool
work item serves, so that the side effects of unmodified aiohttp, grpcio and ThreadPoolExecutor code
carry their request's transaction (docs/operate.md, "The Python hook").

The agent queues this source into a running CPython 3.11+ (Py_AddPendingCall(PyRun_SimpleString),
agent/runtimes/python/); the interpreter runs it once on its main thread, in a namespace of its own.
It speaks to the kernel with writes of struct kr_unit_signal (bpf/capture.h) to /dev/null, which
kreplay never records:
  WATCH u         this thread keeps the unit it runs in these very bytes' unit field (8 bytes of
                  its own memory, u now): a switch is a store there, which the kernel reads at each
                  call the thread makes
  OPEN u + head   unit u serves the request whose HTTP/1.x-style head follows; this thread runs u
  HANDOFF u       unit u carries this thread's current context (work it hands to a pool thread)
Units:
  - an aiohttp request: RequestHandler._handle_request opens one from the request's traceparent and
    x-request-id, and keeps it in a context variable, which asyncio copies into the tasks and
    callbacks the request starts; asyncio.events.Handle._run enters the unit of each callback's
    context before it runs (callbacks of the loop and of transports run as none: they serve
    connections, whose calls the kernel attributes by connection);
  - a grpcio call: the function grpc._server runs on its pool for each call opens one from the call's
    metadata (traceparent and x-request-id; grpcio's core keeps grpc-trace-bin to itself);
  - ThreadPoolExecutor.submit hands the submitter's unit (or its thread's context) to the work item,
    which runs in it and leaves it when done.
Each wrapper is guarded: the hook never raises into the application, and it does nothing in a
program that imports none of these. Queued again (a restarted agent), it makes every thread register
its slot anew; it does the same in a forked child.
"""

import os
import sys

NAME = "_kreplay_python_hook"
# longer values are no valid traceparent or request id (agent/attribution/context-parser.ts)
VALUE_MAX = 256
PATH_MAX = 512
HEADERS = ("traceparent", "x-request-id")


def _printable(text):
    return text.isascii() and text.isprintable()


def http_head(method, path, headers, limit):
    """The head OPEN carries: the request line, then traceparent and x-request-id when valid-looking;
    empty past `limit` bytes (the kernel would cut its end off)."""
    if not (isinstance(method, str) and 0 < len(method) <= 16 and method.isascii() and method.isalpha()):
        method = "GET"
    if not isinstance(path, str):
        path = path.decode("latin-1") if isinstance(path, bytes) else "/"
    path = "".join(c if "!" <= c <= "~" else "%%%02X" % (ord(c) & 0xFF) for c in path[:PATH_MAX]) or "/"
    lines = ["%s %s HTTP/1.1" % (method.upper(), path[:PATH_MAX])]
    for name, value in headers:
        if isinstance(value, str) and len(value) <= VALUE_MAX and _printable(value):
            lines.append("%s: %s" % (name, value.strip()))
    head = ("\r\n".join(lines) + "\r\n\r\n").encode("ascii")
    return head if len(head) <= limit else b""


def grpc_headers(metadata):
    """traceparent and x-request-id from a call's metadata (grpcio's core keeps grpc-trace-bin)."""
    found = {}
    for key, value in metadata or ():
        key = key.lower() if isinstance(key, str) else key
        if key in HEADERS and key not in found:
            found[key] = value
    return [(name, found[name]) for name in HEADERS if name in found]


def signal_packer(signal):
    """pack(op, unit) -> the bytes of struct kr_unit_signal, as `signal` lays it out (core/model)."""
    import _struct

    magic = signal["magic"].encode("ascii")
    if signal["opAt"] != len(magic) or signal["unitAt"] != len(magic) + 4 or signal["bytes"] != len(magic) + 12:
        raise ValueError("a unit signal laid out otherwise than magic, u32 op, u64 unit")
    if signal["unitAt"] % 8:
        raise ValueError("a unit field a slot of 8-byte words cannot hold")
    pack = _struct.Struct("<%dsIQ" % len(magic)).pack
    return lambda op, unit: pack(magic, op, unit)


def install(fd, signal):
    """Wraps what is imported and what will be; returns the hook's module. `signal`: the layout of
    struct kr_unit_signal and its ops (agent/runtimes/python/hook-source.ts)."""
    import _contextvars
    import _thread
    import array
    import itertools
    import types

    OPEN, HANDOFF, WATCH = signal["open"], signal["handoff"], signal["watch"]
    head_max = signal["maxHead"]
    unit_var = _contextvars.ContextVar("kreplay_unit", default=0)
    pack = signal_packer(signal)
    ids = itertools.count(1)
    write = os.write
    # bumped when the kernel's view may have been lost (queued again, a fork): each thread registers anew
    generation = [0]

    slot_at = signal["unitAt"] // 8

    class ThreadSlot(_thread._local):
        """A thread's slot: a WATCH signal whose unit field holds the unit the thread runs, which the
        kernel reads at each call (KR_UNIT_WATCH). Kept for the thread's life: an agent holds its
        address."""

        slot = None
        generation = -1

    state = ThreadSlot()

    def slot():
        """This thread's slot, registered with the kernel (once, and again after a resync)."""
        mine = state
        if mine.generation != generation[0]:
            if mine.slot is None:
                mine.slot = array.array("Q")
                mine.slot.frombytes(pack(WATCH, 0))
            write(fd, mine.slot)
            mine.generation = generation[0]
        return mine.slot

    def switch(unit):
        slot()[slot_at] = unit

    def leave():
        try:
            switch(0)
        except Exception:
            pass

    def open_unit(head):
        unit = next(ids)
        slot()[slot_at] = unit
        write(fd, pack(OPEN, unit) + head)
        return unit

    def resync():
        """Every thread registers its slot again at its next switch: the kernel's view may have been lost."""
        generation[0] += 1

    # asyncio: a callback runs in the unit of its context, unless it serves a connection or the loop.
    # Those register their thread's slot every time: they read the request heads, and a head a thread
    # reads outside any unit sets the thread's context; the kernel of an agent started since the
    # thread registered knows nothing of it until it registers again.
    def wrap_handle_run(run, neutral):
        def _run(self):
            try:
                if unpatched:
                    retry_unpatched()
                if isinstance(getattr(self._callback, "__self__", None), neutral):
                    mine = slot()
                    mine[slot_at] = 0
                    write(fd, mine)
                else:
                    slot()[slot_at] = self._context.get(unit_var, 0)
            except Exception:
                pass
            return run(self)

        return _run

    # the loops whose callbacks go through the wrapped Handle._run (not uvloop's, for one)
    switching_loops = []

    def patch_asyncio(selector_events):
        events = sys.modules.get("asyncio.events")
        base_events = sys.modules.get("asyncio.base_events")
        if events is None or base_events is None:
            return False
        neutral = [base_events.BaseEventLoop, selector_events._SelectorTransport]
        sslproto = sys.modules.get("asyncio.sslproto")
        if sslproto is not None:
            neutral += [sslproto.SSLProtocol, sslproto._SSLProtocolTransport]
        if not replace(events.Handle, "_run", lambda run: wrap_handle_run(run, tuple(neutral))):
            return False
        switching_loops[:] = [base_events.BaseEventLoop]
        return True

    # ThreadPoolExecutor: the work item runs in the submitter's unit, or in its thread's context
    def in_unit(fn, unit):
        def run_in_unit(*args, **kwargs):
            try:
                switch(unit)
            except Exception:
                pass
            try:
                return fn(*args, **kwargs)
            finally:
                leave()

        return run_in_unit

    def wrap_submit(submit):
        def submit_in_unit(self, fn, /, *args, **kwargs):
            try:
                if unpatched:
                    retry_unpatched()
                if not getattr(fn, "_kreplay_opens_unit", False):
                    unit = unit_var.get()
                    if not unit:
                        unit = next(ids)
                        write(fd, pack(HANDOFF, unit))
                    fn = in_unit(fn, unit)
            except Exception:
                pass
            return submit(self, fn, *args, **kwargs)

        return submit_in_unit

    def patch_executor(thread):
        return replace(thread.ThreadPoolExecutor, "submit", wrap_submit)

    # aiohttp: a unit per request, opened in the request's own task, on a loop that switches units
    def wrap_handle_request(handle_request):
        async def _handle_request(self, request, *args, **kwargs):
            try:
                if not isinstance(self._loop, tuple(switching_loops)):
                    raise LookupError("this loop's callbacks would not leave the unit")
                headers = request.headers
                picked = [(name, headers.get(name)) for name in HEADERS if name in headers]
                unit_var.set(open_unit(http_head(request.method, request.raw_path, picked, head_max)))
            except Exception:
                pass
            return await handle_request(self, request, *args, **kwargs)

        return _handle_request

    def patch_aiohttp(web_protocol):
        return replace(web_protocol.RequestHandler, "_handle_request", wrap_handle_request)

    # grpcio: a unit per call, opened on the pool thread that runs it
    def wrap_grpc_call(function):
        def in_call(rpc_event, *args, **kwargs):
            try:
                method = rpc_event.call_details.method
                open_unit(http_head("POST", method, grpc_headers(rpc_event.invocation_metadata), head_max))
            except Exception:
                leave()
            try:
                return function(rpc_event, *args, **kwargs)
            finally:
                leave()

        in_call._kreplay_opens_unit = True
        return in_call

    def patch_grpc(server):
        unary = replace(server, "_unary_response_in_pool", wrap_grpc_call)
        return replace(server, "_stream_response_in_pool", wrap_grpc_call) and unary

    patches = {
        "asyncio.selector_events": patch_asyncio,
        "concurrent.futures.thread": patch_executor,
        "aiohttp.web_protocol": patch_aiohttp,
        "grpc._server": patch_grpc,
    }
    # imported but not patched yet (caught in the middle of its import: the agent queues the hook as
    # soon as the interpreter is up, often while the application still imports): retried at each
    # import, and at each loop callback and pool submission, since a server that has finished
    # starting may import nothing again
    unpatched = set()

    def patch(name, module):
        try:
            done = patches[name](module)
        except Exception:
            done = False
        if done:
            unpatched.discard(name)
        else:
            unpatched.add(name)

    def retry_unpatched():
        for name in list(unpatched):
            module = sys.modules.get(name)
            if module is not None:
                patch(name, module)

    class PatchingLoader:
        """The module's own loader, then the patch; the module keeps its own loader."""

        def __init__(self, loader, name):
            self._loader = loader
            self._name = name

        def create_module(self, spec):
            create = getattr(self._loader, "create_module", None)
            return create(spec) if create is not None else None

        def exec_module(self, module):
            self._loader.exec_module(module)
            try:
                if getattr(module.__spec__, "loader", None) is self:
                    module.__spec__.loader = self._loader
                if getattr(module, "__loader__", None) is self:
                    module.__loader__ = self._loader
            except Exception:
                pass
            patch(self._name, module)

        def __getattr__(self, name):
            return getattr(self._loader, name)

    class PatchingFinder:
        """Patches a module it knows once its import has run; finds nothing itself."""

        def find_spec(self, name, path=None, target=None):
            try:
                if unpatched:
                    retry_unpatched()
                if name not in patches or name in sys.modules:
                    return None
                for finder in sys.meta_path:
                    find = getattr(finder, "find_spec", None)
                    if finder is self or find is None:
                        continue
                    spec = find(name, path, target)
                    if spec is not None:
                        if spec.loader is not None and hasattr(spec.loader, "exec_module"):
                            spec.loader = PatchingLoader(spec.loader, name)
                        return spec
            except Exception:
                pass
            return None

    hook = types.ModuleType(NAME, __doc__)
    hook.resync = resync
    hook.unit = unit_var
    hook.fd = fd
    sys.meta_path.insert(0, PatchingFinder())
    for name in patches:
        module = sys.modules.get(name)
        if module is not None:
            patch(name, module)
    os.register_at_fork(after_in_child=resync)
    sys.modules[NAME] = hook
    return hook


def replace(owner, name, wrap):
    """owner.name = wrap(owner.name), once: False when owner has no such attribute yet."""
    current = (owner.__dict__ if isinstance(owner, type) else vars(owner)).get(name)
    if current is None:
        return False
    if getattr(current, "_kreplay_wraps", None) is not None:
        return True
    wrapped = wrap(current)
    wrapped._kreplay_wraps = current
    setattr(owner, name, wrapped)
    return True


def main(signal):
    hook = sys.modules.get(NAME)
    if hook is not None:
        hook.resync()
    else:
        install(os.open("/dev/null", os.O_WRONLY | os.O_CLOEXEC), signal)


# queued by the agent: run with the signal's layout (hook-source.ts); imported, it does nothing
if __name__ == "_kreplay_python_hook_boot":
    main(SIGNAL)  # noqa: F821
