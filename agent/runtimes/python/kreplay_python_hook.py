"""kreplay's Python hook: tells the kernel which request each asyncio task, greenlet, gRPC call and
thread-pool work item serves, so that the side effects of unmodified WSGI, ASGI, aiohttp, grpcio and
ThreadPoolExecutor code carry their request's transaction (docs/operate.md, "The Python hook").

The agent queues this source into a running CPython 3.11+ (Py_AddPendingCall(PyRun_SimpleString),
agent/runtimes/python/); the interpreter runs it once on its main thread, in a namespace of its own.
It speaks to the kernel with struct kr_unit_signal (bpf/capture.h). A thread registers its slot with
a write of a WATCH signal to KR_UNIT_SIGNAL_FD, a descriptor number no file can have: the write fails
with EBADF (caught here) after the kernel's tracepoint has read its bytes, so no signal ever lands in
a file the program opened, and kreplay never records them. A thread with a slot puts its other
signals in the mailbox beside it (KR_UNIT_MAILBOX_AT) and calls getpriority(PRIO_PROCESS, 0), at
whose start the kernel reads it (no exception, no file), then empties it; a thread without one
registers the mailbox alone, once (MAILBOX: its unit untouched); a process under a seccomp filter
(SIGNAL["mailbox"] false: a filter might refuse that call) writes them all as the WATCH:
  WATCH u         this thread keeps the unit it runs in these very bytes' unit field (8 bytes of
                  its own memory, u now): a switch is a store there, which the kernel reads at each
                  call the thread makes
  OPEN u + head   unit u serves the request whose HTTP/1.x-style head follows; this thread runs u
  HANDOFF u       unit u carries this thread's current context (work it hands to a pool thread)
  CLOSE u         unit u's request ended: what still runs in u, or was handed it, carries none
  ADOPT u         this thread takes what HANDOFF u gave u (0: none), unless it serves its own request
  MAILBOX         these bytes, laid out as a WATCH's, hold this thread's mailbox; it runs no unit
Units:
  - an aiohttp request: RequestHandler._handle_request opens one from the request's traceparent and
    x-request-id (and closes it when it returns: the handler ran and its response was written), and
    keeps it in a context variable, which asyncio copies into the tasks and
    callbacks the request starts; asyncio.events.Handle._run enters the unit of each callback's
    context before it runs (callbacks of the loop and of transports run as none: they serve
    connections, whose calls the kernel attributes by connection);
  - a grpcio call: the function grpc._server runs on its pool for each call opens one from the call's
    metadata (traceparent and x-request-id; grpcio's core keeps grpc-trace-bin to itself), and closes
    it when it returns (the response, or the stream's last message, was sent);
  - a WSGI call (Flask's, Django's application) or an ASGI call with an http scope (uvicorn's request
    cycle, Starlette's and Django's application) opens one from the request's traceparent and
    x-request-id, unless its context runs one already (a framework inside a server), and closes it
    when it returns; in a thread that runs greenlets, each switch enters the unit of the greenlet
    switched to (greenlet.settrace), or of the one that spawned it;
  - a threading.Thread started in a unit is handed its context (HANDOFF), which the thread takes
    (ADOPT) first thing;
  - a ThreadPoolExecutor work item takes the submitter's unit (or its thread's context) when it is
    made, in the submitter's thread, and runs in it and leaves it when done;
  - a job put on a queue.Queue or LifoQueue is handed the putter's context (HANDOFF), and the thread
    that gets it takes that (ADOPT); a PriorityQueue's hands none.
Each wrapper is guarded: the hook never raises into the application, and it signals nothing in a
program that serves no request through these (a thread started outside any unit costs a lookup).
The program sees none of it: the wrappers sit above the frames
that catch the program's exceptions and drop their own frame from any exception that passes through
them, so the program's tracebacks are what they are without the hook; modules imported later are
watched through importlib's own _find_and_load (not sys.meta_path), put back once all are patched;
the hook opens no descriptor, starts no thread, and leaves nothing in sys.modules or the program's
globals. Queued again (a restarted agent), it makes every thread register its slot anew; it does
the same in a forked child.
"""

# posix, not os: it is loaded in every interpreter (importlib's own), os is not (python -S)
import posix
import sys

# importlib's own file name: CPython trims frames of that file from import tracebacks, and warnings
# skips them when it looks for the frame a warning is about (the import watch's frame)
IMPORTLIB = "<frozen importlib._bootstrap>"
# longer values are no valid traceparent or request id (agent/attribution/context-parser.ts)
VALUE_MAX = 256
PATH_MAX = 512
HEADERS = ("traceparent", "x-request-id")
# their keys in a WSGI environ
WSGI_HEADERS = tuple((name, "HTTP_" + name.upper().replace("-", "_")) for name in HEADERS)


def http_head(method, path, headers, limit):
    """The head OPEN carries: the request line, then traceparent and x-request-id when valid-looking;
    empty past `limit` bytes (the kernel would cut its end off). Once a request: its common case (a
    path of printable ASCII without a space) takes no step per character."""
    if not (isinstance(method, str) and 0 < len(method) <= 16 and method.isascii() and method.isalpha()):
        method = "GET"
    if not isinstance(path, str):
        path = path.decode("latin-1") if isinstance(path, bytes) else "/"
    path = path[:PATH_MAX]
    if not (path.isascii() and path.isprintable()) or " " in path:
        path = "".join(c if "!" <= c <= "~" else "%%%02X" % (ord(c) & 0xFF) for c in path)
    head = "%s %s HTTP/1.1\r\n" % (method.upper(), path[:PATH_MAX] or "/")
    for name, value in headers:
        if isinstance(value, str) and len(value) <= VALUE_MAX and value.isascii() and value.isprintable():
            head += "%s: %s\r\n" % (name, value.strip())
    head = (head + "\r\n").encode("ascii")
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
    magic = signal["magic"].encode("ascii")
    if signal["opAt"] != len(magic) or signal["unitAt"] != len(magic) + 4 or signal["bytes"] != len(magic) + 12:
        raise ValueError("a unit signal laid out otherwise than magic, u32 op, u64 unit")
    if signal["unitAt"] % 8:
        raise ValueError("a unit field a slot of 8-byte words cannot hold")
    return lambda op, unit: magic + op.to_bytes(4, "little") + unit.to_bytes(8, "little")


def imported_quietly(name):
    """Module `name`, imported; left out of sys.modules when it was not there (a built-in module: the
    program importing it later gets one of its own, over the same types)."""
    there = name in sys.modules
    module = __import__(name)
    if not there:
        sys.modules.pop(name, None)
    return module


def passing(exc):
    """An exception leaving the wrapper that calls this: the wrapper's own frame, which heads its
    traceback, is dropped, and a bare `raise` (which adds no frame) passes it on as if the wrapper
    were not there."""
    tb = exc.__traceback__
    if tb is not None and tb.tb_frame is sys._getframe(1):
        exc.__traceback__ = tb.tb_next


# the import watch: importlib calls _find_and_load for each module not imported yet, from an import
# statement or importlib.import_module; compiled as importlib's own code (IMPORTLIB)
WATCH_SOURCE = """
def _find_and_load(name, import_):
    try:
        module = _find_and_load._kreplay_wraps(name, import_)
    except BaseException as exc:
        passing(exc)
        raise
    if name in waited:
        loaded(name, module)
    return module
"""


def install(signal):
    """Wraps what is imported and what will be; returns the function that makes every thread
    register anew. `signal`: the layout of struct kr_unit_signal, its ops and the descriptor the
    signals go to (agent/runtimes/python/hook-source.ts)."""
    _contextvars = imported_quietly("_contextvars")

    OPEN, HANDOFF, WATCH, CLOSE = signal["open"], signal["handoff"], signal["watch"], signal["close"]
    ADOPT, MAILBOX = signal["adopt"], signal["mailboxOp"]
    _weakref = imported_quietly("_weakref")
    deque = imported_quietly("_collections").deque
    head_max = signal["maxHead"]
    unit_var = _contextvars.ContextVar("kreplay_unit", default=0)
    pack = signal_packer(signal)
    # a C iterator: next() on it is atomic, as the pool's submitting threads need
    ids = iter(range(1, 1 << 63))
    write, fd = posix.write, signal["fd"]
    # getpriority(PRIO_PROCESS, 0), or None: the write for every signal (a getpriority that raised is
    # left for good)
    ring = [posix.getpriority if signal["mailbox"] else None]
    pack_into = imported_quietly("_struct").pack_into
    # a mailbox's op and unit, its format parsed once
    pack_mail = imported_quietly("_struct").Struct("<IQ").pack_into
    clock = imported_quietly("time").monotonic

    def write_signal(data):
        """A signal written: the write always fails (EBADF), after the kernel read its bytes."""
        try:
            write(fd, data)
        except OSError:
            pass

    # bumped when the kernel's view may have been lost (queued again, a fork): each thread registers anew
    generation = [0]

    slot_at = signal["unitAt"] // 8
    # the mailbox: its length (a u64 of the slot's words), the signal it holds, the WATCH that has one
    mail_at, mail_length_at = signal["mailboxAt"], signal["mailboxLengthAt"] // 8
    mail_op_at, watch_bytes, signal_bytes = mail_at + signal["opAt"], mail_at + signal["bytes"], signal["bytes"]
    if mail_at % 8 or signal["mailboxLengthAt"] % 8 or signal["opAt"] + 4 != signal["unitAt"]:
        raise ValueError("a mailbox laid out otherwise than 8-byte words, u32 op then u64 unit")

    def send(op, unit, head=b""):
        """Signal `op` for `unit` (an OPEN with its head): through this thread's mailbox when the kernel
        has its slot, then the mailbox is empty again (a getpriority of the program's own finds
        nothing there); else written."""
        mine = state
        if ring[0] is not None and (mine.generation == generation[0] or mailbox(mine)):
            view = mine.words
            pack_mail(mine.data, mail_op_at, op, unit)
            if head:
                mine.data[watch_bytes : watch_bytes + len(head)] = head
            view[mail_length_at] = signal_bytes + len(head)
            try:
                ring[0](0, 0)
                return
            except Exception:
                ring[0] = None
            finally:
                view[mail_length_at] = 0
        write_signal(pack(op, unit) + head)

    class ThreadSlot(original("_thread", "_local")):
        """A thread's slot: a WATCH signal whose unit field holds the unit the thread runs, which the
        kernel reads at each call (KR_UNIT_WATCH). Kept for the thread's life: an agent holds its
        address."""

        # its bytes as u64 words once it registered its slot (None: a thread that runs no units)
        slot = None
        # the slot's bytes: the WATCH signal, then the mailbox (its length and the signal it holds)
        data = words = None
        generation = -1
        # the generation its mailbox alone was registered in (KR_UNIT_MAILBOX), and the last one it
        # wrote a signal in: a thread without a slot
        boxed = wrote = -1
        # when it last registered (time.monotonic)
        registered = 0.0
        # the greenlet switch trace this thread had before the hook's (None: none, False: not traced yet)
        traced = False

    state = ThreadSlot()

    def allocate(mine):
        """This thread's slot and mailbox, made once: the kernel keeps their address."""
        if mine.data is None:
            # the bytearray cannot move or resize while the views hold it
            data = bytearray(pack(WATCH, 0)).ljust(mail_at, b"\0") + pack(0, 0)
            data += bytes(-(len(data) + head_max) % 8 + head_max)
            mine.data, mine.words = memoryview(data), memoryview(data).cast("Q")

    def slot():
        """This thread's slot, registered with the kernel (once, and again after a resync)."""
        mine = state
        if mine.generation != generation[0]:
            allocate(mine)
            register(mine)
            mine.slot = mine.words
        return mine.slot

    def mailbox(mine):
        """A thread that has not registered its slot (gunicorn's main thread, which accepts and hands
        each connection to the pool outside any unit) registers its mailbox alone, once: a slot would
        make it a thread that runs units, whose reads and heads the kernel takes otherwise. At its
        second signal: a thread that signals once (a started thread's ADOPT) writes it, one write."""
        if mine.wrote != generation[0]:
            mine.wrote = generation[0]
            return False
        if mine.boxed != generation[0]:
            allocate(mine)
            pack_into("<I", mine.data, signal["opAt"], MAILBOX)
            try:
                write_signal(mine.data[:watch_bytes])
            finally:
                pack_into("<I", mine.data, signal["opAt"], WATCH)
            mine.boxed = generation[0]
        return True

    def register(mine):
        write_signal(mine.data[:watch_bytes])
        mine.generation = generation[0]
        mine.registered = clock()

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
        send(OPEN, unit, head)
        return unit

    def close_unit(unit):
        """Unit `unit`'s request ended: this thread leaves it first (its next call carries none, not the
        ended request counted as outlived), then what was handed it loses it."""
        try:
            slot()[slot_at] = 0
        except Exception:
            pass
        try:
            if unit:
                send(CLOSE, unit)
        except Exception:
            pass

    def resync():
        """Every thread registers its slot again at its next switch: the kernel's view may have been lost."""
        generation[0] += 1

    # asyncio: a callback runs in the unit of its context, unless it serves a connection or the loop
    # (a client's transport made inside a request too): those run in none. Those read the request
    # heads, and the kernel of an agent started since the thread registered knows nothing of its
    # slot (it sees a loop reading many connections' heads, which sets no context) until the thread
    # registers again: they do so at most every REGISTER_AGAIN seconds, not at each callback (a
    # write each), and the new agent's queuing of the hook (resync) makes it register at once.
    REGISTER_AGAIN = 0.1

    def wrap_handle_run(run, neutral):
        def _run(self):
            try:
                if unpatched:
                    retry_unpatched()
                mine = state
                if mine.generation != generation[0]:
                    slot()
                # what a callback serves is looked at only when it matters: a callback outside any
                # request runs in none either way
                unit = self._context.get(unit_var, 0)
                if unit:
                    if isinstance(getattr(self._callback, "__self__", None), neutral):
                        unit = 0
                elif clock() - mine.registered >= REGISTER_AGAIN and isinstance(
                    getattr(self._callback, "__self__", None), neutral
                ):
                    register(mine)
                mine.slot[slot_at] = unit
            except Exception:
                pass
            try:
                return run(self)
            except BaseException as exc:
                passing(exc)
                raise

        return _run

    # the loops whose callbacks go through the wrapped Handle._run (not uvloop's, for one): a tuple
    # for isinstance, in a list the patch sets it in
    switching_loops = [()]

    def patch_asyncio(selector_events):
        events = sys.modules.get("asyncio.events")
        base_events = sys.modules.get("asyncio.base_events")
        if events is None or base_events is None:
            return False
        neutral = [base_events.BaseEventLoop, selector_events._SelectorTransport]
        sslproto = sys.modules.get("asyncio.sslproto")
        if sslproto is not None:
            neutral += [sslproto.SSLProtocol, sslproto._SSLProtocolTransport]
        if not replace(events.Handle, "_run", sign(lambda run: wrap_handle_run(run, tuple(neutral)))):
            return False
        switching_loops[0] = (base_events.BaseEventLoop,)
        return True

    # ThreadPoolExecutor: a work item takes the submitter's unit, or its thread's context, when it is
    # made (in the submitter's thread); it runs in it. The work item's run, not its function, is
    # wrapped: run catches the function's exceptions, so no traceback of the program's passes here.
    # A work item that serves a request of its own opens that request's unit and takes nothing: the
    # hook's own call wrappers (_kreplay_opens_unit), and the method serving[0] (gunicorn gthread's
    # handle, submitted by a main thread that runs no request: a HANDOFF each would hand the pool
    # none, or the context the worker inherited, to the reads of another request's head). Compared
    # by identity: a callable's __func__ may be anything.
    serving = [None]

    def wrap_work_item(init):
        def __init__(self, future, fn, *args, **kwargs):
            init(self, future, fn, *args, **kwargs)
            try:
                if unpatched:
                    retry_unpatched()
                if not getattr(fn, "_kreplay_opens_unit", False) and getattr(fn, "__func__", False) is not serving[0]:
                    unit = unit_var.get()
                    if not unit:
                        unit = next(ids)
                        send(HANDOFF, unit)
                    self._kreplay_unit = unit
            except Exception:
                pass

        return __init__

    def wrap_work_run(run):
        def _run(self, *args, **kwargs):
            unit = 0
            try:
                unit = vars(self).get("_kreplay_unit", 0)
                if unit:
                    switch(unit)
            except Exception:
                pass
            try:
                return run(self, *args, **kwargs)
            except BaseException as exc:
                passing(exc)
                raise
            finally:
                if unit:
                    leave()

        return _run

    def patch_executor(thread):
        item = thread._WorkItem
        return replace(item, "__init__", wrap_work_item) and replace(item, "run", wrap_work_run)

    # queue: a job carries its putter's context (a HANDOFF to a unit made for it) to the thread that
    # gets it (ADOPT), as Go's channel probes do. The units ride in a deque per queue beside the
    # queue's own items, kept in step under the queue's mutex (_put and _get run holding it); a
    # queue whose order the hook does not know (a PriorityQueue, a subclass with a _put or _get of
    # its own) hands none. Kept here, not on the queue: the program sees nothing of it.
    queues = {}  # id(queue) -> (weak reference to it, its units)
    orders = {}  # (_put, _get) of a class the hook wrapped -> the deque method _get takes with

    def units_of(queue, held):
        """The queue's units, `held` of them (the items it holds): all none when out of step (items
        put before the hook, a put or a get that raised)."""
        key = id(queue)
        entry = queues.get(key)
        if entry is None or entry[0]() is not queue:

            def forget(ref):
                if queues.get(key, (None,))[0] is ref:
                    queues.pop(key, None)

            entry = queues[key] = (_weakref.ref(queue, forget), deque())
        units = entry[1]
        if len(units) != held:
            units.clear()
            units.extend([0] * held)
        return units

    def order_of(queue):
        cls = type(queue)
        return orders.get((cls._put, cls._get))

    def wrap_queue_put(put):
        def _put(self, item):
            try:
                put(self, item)
            except BaseException as exc:
                passing(exc)
                raise
            try:
                if order_of(self) is not None:
                    units = units_of(self, self._qsize() - 1)
                    unit = next(ids)
                    send(HANDOFF, unit)
                    units.append(unit)
            except Exception:
                pass

        return _put

    def wrap_queue_get(get):
        def _get(self):
            held = -1
            try:
                held = self._qsize()
            except Exception:
                pass
            try:
                item = get(self)
            except BaseException as exc:
                passing(exc)
                raise
            try:
                unit = 0
                end = order_of(self)
                if end is not None and held > 0:
                    unit = getattr(units_of(self, held), end)()
                # a thread running units (a loop's, a pool's) takes none: the kernel keeps its unit's
                if state.slot is None:
                    send(ADOPT, unit)
            except Exception:
                pass
            return item

        return _get

    def patch_queue(queue):
        for cls, end in ((queue.Queue, "popleft"), (queue.LifoQueue, "pop"), (queue.PriorityQueue, None)):
            if not (replace(cls, "_put", wrap_queue_put) and replace(cls, "_get", wrap_queue_get)):
                return False
            if end:
                orders[(cls.__dict__["_put"], cls.__dict__["_get"])] = end
        return True

    # greenlets (gevent): many requests on one thread, each in a greenlet of its own. Once a thread
    # opens a unit its greenlet switches are traced, and each switch enters the unit of the greenlet
    # switched to (the unit in its context: greenlet gives each its own).
    def greenlet_unit(greenlet):
        context = greenlet.gr_context
        return context.get(unit_var, 0) if context is not None else 0

    def greenlet_switched(event, args):
        try:
            if event == "switch" or event == "throw":
                target = args[1]
                unit = greenlet_unit(target)
                if not unit:
                    # a greenlet a request spawned (gevent's spawn, a monkey-patched Thread) serves it
                    spawner = getattr(target, "spawning_greenlet", None)
                    spawner = spawner() if spawner is not None else None
                    if spawner is not None:
                        unit = greenlet_unit(spawner)
                slot()[slot_at] = unit
        except Exception:
            pass
        previous = state.traced
        if previous:
            previous(event, args)

    greenlet_switched._kreplay_resync = resync

    def greenlets_followed():
        """Whether this thread's greenlet switches (if any can happen) leave and enter units."""
        greenlet = sys.modules.get("greenlet")
        if greenlet is None:
            return True
        mine = state
        if mine.traced is False:
            previous = greenlet.gettrace()
            if getattr(previous, "_kreplay_resync", None) is not None:
                # an earlier hook's (a restarted agent): it follows the switches already
                mine.traced = None
                return True
            greenlet.settrace(greenlet_switched)
            mine.traced = previous
        return True

    def open_request(head_of, request):
        """A unit for the request this thread (or task, or greenlet) serves from now on, its head made by
        head_of(request): (unit, token), (0, None) when it serves one already (a server's call and its
        framework's inside it both call here: the inner one makes no head)."""
        if unit_var.get():
            return 0, None
        if not greenlets_followed():
            return 0, None
        unit = open_unit(http_head(*head_of(request), head_max))
        return unit, unit_var.set(unit)

    def close_request(unit, token):
        if unit:
            close_unit(unit)
            try:
                unit_var.reset(token)
            except Exception:
                unit_var.set(0)

    def wsgi_head(environ):
        path = environ.get("RAW_URI") or (environ.get("SCRIPT_NAME", "") + environ.get("PATH_INFO", ""))
        query = environ.get("QUERY_STRING")
        if query and "?" not in path:
            path += "?" + query
        headers = [(name, value) for name, key in WSGI_HEADERS if (value := environ.get(key)) is not None]
        return environ.get("REQUEST_METHOD"), path, headers

    # WSGI: a unit per call of the application, closed when it returns (a framework's __call__ runs
    # the view and builds the response). Patched on the class: a server holding the application
    # object (gunicorn's worker, uWSGI's C side) calls through it.
    def wrap_wsgi_call(call):
        def __call__(self, environ, start_response, *args, **kwargs):
            unit, token = 0, None
            try:
                if unpatched:
                    retry_unpatched()
                unit, token = open_request(wsgi_head, environ)
            except Exception:
                pass
            try:
                return call(self, environ, start_response, *args, **kwargs)
            except BaseException as exc:
                passing(exc)
                raise
            finally:
                close_request(unit, token)

        return __call__

    # WSGI servers that make the environ inside the method that serves the whole request (gunicorn's
    # workers' handle_request, wsgiref's BaseHandler.run): any application, a bare callable too. The
    # method is the unit's scope: the unit is opened when the environ is made (gunicorn.http.wsgi.create,
    # BaseHandler.setup_environ) and closed when the method returns (the response written).
    scope_var = _contextvars.ContextVar("kreplay_wsgi_scope", default=None)

    def wrap_wsgi_scope(method):
        def serve(*args, **kwargs):
            opened, token = [], None
            try:
                token = scope_var.set(opened)
            except Exception:
                pass
            try:
                return method(*args, **kwargs)
            except BaseException as exc:
                passing(exc)
                raise
            finally:
                for unit, unit_token in opened:
                    close_request(unit, unit_token)
                if token is not None:
                    try:
                        scope_var.reset(token)
                    except Exception:
                        scope_var.set(None)

        return serve

    def open_in_scope(environ):
        """The unit of the request whose environ was just made, once a scope, inside one."""
        opened = scope_var.get()
        if opened is None or opened:
            return
        if unpatched:
            retry_unpatched()
        opened.append(open_request(wsgi_head, environ))

    def environ_maker(environ_of):
        """Wraps what makes a request's environ: its unit opens once it is made."""

        def wrap(make):
            def _make(*args, **kwargs):
                try:
                    made = make(*args, **kwargs)
                except BaseException as exc:
                    passing(exc)
                    raise
                try:
                    open_in_scope(environ_of(made, args))
                except Exception:
                    pass
                return made

            return _make

        return wrap

    # gunicorn.http.wsgi.create returns (response, environ); BaseHandler.setup_environ sets self.environ
    wrap_wsgi_create = environ_maker(lambda made, args: made[1])
    wrap_setup_environ = environ_maker(lambda made, args: args[0].environ)

    def patch_wsgiref(handlers):
        handler = handlers.BaseHandler
        return replace(handler, "setup_environ", wrap_setup_environ) and replace(handler, "run", wrap_wsgi_scope)

    def asgi_head(scope):
        path = scope.get("raw_path") or scope.get("path", "/")
        if isinstance(path, str) and scope.get("query_string") and "?" not in path:
            path += "?" + scope["query_string"].decode("latin-1")
        found = {}
        for key, value in scope.get("headers") or ():
            name = key.decode("latin-1").lower() if isinstance(key, bytes) else key
            if name in HEADERS and name not in found:
                found[name] = value.decode("latin-1") if isinstance(value, bytes) else value
        return scope.get("method"), path, [(name, found[name]) for name in HEADERS if name in found]

    def asgi_request(scope):
        """A unit for an ASGI call with an http scope, on a loop that switches units."""
        if not isinstance(scope, dict) or scope.get("type") != "http":
            return 0, None
        events = sys.modules["asyncio.events"]
        if not isinstance(events.get_running_loop(), switching_loops[0]):
            return 0, None
        return open_request(asgi_head, scope)

    # ASGI: a unit per call with an http scope, in the call's own task, closed when it returns (the
    # response sent, background tasks run). uvicorn's request cycle is wrapped (any application:
    # its scope is the cycle's), and Starlette's and Django's application (any server: hypercorn,
    # daphne; the call's scope is its first argument).
    def asgi_wrapper(scope_of):
        def wrap(call):
            async def __call__(self, first, *args, **kwargs):
                unit, token = 0, None
                try:
                    if unpatched:
                        retry_unpatched()
                    unit, token = asgi_request(scope_of(self, first))
                except Exception:
                    pass
                try:
                    return await call(self, first, *args, **kwargs)
                except BaseException as exc:
                    passing(exc)
                    raise
                finally:
                    close_request(unit, token)

            return __call__

        return wrap

    wrap_asgi_call = asgi_wrapper(lambda app, scope: scope)
    wrap_run_asgi = asgi_wrapper(lambda cycle, app: cycle.scope)

    def patcher(attribute, wrap):
        """Patches class `attribute` (a dotted path in the module) with `wrap`."""
        cls_name, _, name = attribute.rpartition(".")

        def patch_module(module):
            return replace(getattr(module, cls_name), name, wrap)

        return patch_module

    def patch_gthread(gthread):
        worker = gthread.ThreadWorker
        if not replace(worker, "handle_request", wrap_wsgi_scope):
            return False
        # its handle reads a connection's request and serves it in the request's own unit (a
        # gunicorn without one hands each connection off, as any pool's submitter)
        serving[0] = worker.__dict__.get("handle", None)
        return True

    # threading: a thread started inside a unit (a request's) carries its context, handed to a unit
    # made for it (HANDOFF) in the starting thread and taken (ADOPT) by the thread first thing: its
    # lease ends with the request. Kept here by the thread's id, not on it: the program sees nothing.
    started = {}

    def wrap_thread_start(start):
        def start_in_unit(self, *args, **kwargs):
            try:
                if unit_var.get():
                    unit = next(ids)
                    send(HANDOFF, unit)
                    started[id(self)] = unit
            except Exception:
                pass
            try:
                return start(self, *args, **kwargs)
            except BaseException as exc:
                started.pop(id(self), None)
                passing(exc)
                raise

        return start_in_unit

    # above the frame that catches the thread's exceptions (threading's excepthook prints from there)
    def wrap_thread_bootstrap(bootstrap):
        def _bootstrap_inner(self, *args, **kwargs):
            try:
                unit = started.pop(id(self), 0)
                # a greenlet (gevent's Thread) runs on a thread that follows units: its spawner's
                if unit and state.slot is None:
                    send(ADOPT, unit)
            except Exception:
                pass
            try:
                return bootstrap(self, *args, **kwargs)
            except BaseException as exc:
                passing(exc)
                raise

        return _bootstrap_inner

    def patch_threading(threading):
        thread = threading.Thread
        return replace(thread, "_bootstrap_inner", wrap_thread_bootstrap) and replace(
            thread, "start", wrap_thread_start
        )

    # aiohttp: a unit per request, opened in the request's own task, on a loop that switches units
    def wrap_handle_request(handle_request):
        async def _handle_request(self, request, *args, **kwargs):
            unit = 0
            try:
                if not isinstance(self._loop, switching_loops[0]):
                    raise LookupError("this loop's callbacks would not leave the unit")
                headers = request.headers
                # a header it lacks is None, which http_head leaves out
                picked = [(name, headers.get(name)) for name in HEADERS]
                unit = open_unit(http_head(request.method, request.raw_path, picked, head_max))
                unit_var.set(unit)
            except Exception:
                pass
            try:
                return await handle_request(self, request, *args, **kwargs)
            except BaseException as exc:
                passing(exc)
                raise
            finally:
                # it returns once the response was written (finish_response): the request ended
                if unit:
                    close_unit(unit)

        return _handle_request

    def patch_aiohttp(web_protocol):
        return replace(web_protocol.RequestHandler, "_handle_request", wrap_handle_request)

    # grpcio: a unit per call, opened on the pool thread that runs it
    def wrap_grpc_call(function):
        def in_call(rpc_event, *args, **kwargs):
            unit = 0
            try:
                method = rpc_event.call_details.method
                unit = open_unit(http_head("POST", method, grpc_headers(rpc_event.invocation_metadata), head_max))
            except Exception:
                leave()
            try:
                return function(rpc_event, *args, **kwargs)
            except BaseException as exc:
                passing(exc)
                raise
            finally:
                # it returns once the response (or the stream's last message) was sent: the call ended
                close_unit(unit)

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
        "queue": patch_queue,
        "threading": patch_threading,
        "flask.app": patcher("Flask.__call__", wrap_wsgi_call),
        "django.core.handlers.wsgi": patcher("WSGIHandler.__call__", wrap_wsgi_call),
        "gunicorn.http.wsgi": lambda module: replace(module, "create", wrap_wsgi_create),
        "gunicorn.workers.sync": patcher("SyncWorker.handle_request", wrap_wsgi_scope),
        "gunicorn.workers.gthread": patch_gthread,
        "gunicorn.workers.base_async": patcher("AsyncWorker.handle_request", wrap_wsgi_scope),
        "wsgiref.handlers": patch_wsgiref,
        "uvicorn.protocols.http.h11_impl": patcher("RequestResponseCycle.run_asgi", wrap_run_asgi),
        "uvicorn.protocols.http.httptools_impl": patcher("RequestResponseCycle.run_asgi", wrap_run_asgi),
        "starlette.applications": patcher("Starlette.__call__", wrap_asgi_call),
        "django.core.handlers.asgi": patcher("ASGIHandler.__call__", wrap_asgi_call),
    }
    # the modules not patched yet, which the import watch waits for
    waited = set(patches)
    # imported but not patched yet (caught in the middle of its import: the agent queues the hook as
    # soon as the interpreter is up, often while the application still imports): retried at each
    # import, and at each loop callback and pool submission, since a server that has finished
    # starting may import nothing again
    unpatched = set()
    importlib = sys.modules["_frozen_importlib"]

    def patch(name, module):
        try:
            done = patches[name](module)
        except Exception:
            done = False
        if done:
            unpatched.discard(name)
            waited.discard(name)
            if not waited:
                unwatch()
        else:
            unpatched.add(name)

    def retry_unpatched():
        for name in list(unpatched):
            module = sys.modules.get(name)
            if module is not None:
                patch(name, module)

    def loaded(name, module):
        try:
            if unpatched:
                retry_unpatched()
            if name in waited:
                patch(name, module)
        except Exception:
            pass

    def unwatch():
        """Every module patched: importlib gets its own _find_and_load back."""
        current = importlib.__dict__.get("_find_and_load")
        if getattr(current, "_kreplay_resync", None) is resync:
            importlib._find_and_load = current._kreplay_wraps

    def sign(wrap):
        """A wrapper that says whose it is: a hook queued again finds this one's resync there."""

        def signed(current):
            wrapped = wrap(current)
            wrapped._kreplay_resync = resync
            return wrapped

        return signed

    for name in patches:
        module = sys.modules.get(name)
        if module is not None:
            patch(name, module)
    if waited:
        scope = {"passing": passing, "waited": waited, "loaded": loaded}
        exec(compile(WATCH_SOURCE, IMPORTLIB, "exec"), scope)
        replace(importlib, "_find_and_load", sign(lambda original: scope["_find_and_load"]))
    posix.register_at_fork(after_in_child=resync)
    return resync


def original(module, name):
    """module.name as the interpreter made it: gevent's monkey-patching replaces _thread's local with
    a greenlet's, and the hook's slots are the thread's."""
    monkey = sys.modules.get("gevent.monkey")
    if monkey is not None:
        try:
            return monkey.get_original(module, name)
        except Exception:
            pass
    return getattr(__import__(module), name)


def replace(owner, name, wrap):
    """owner.name = wrap(owner.name), once: False when owner has no such attribute yet. The wrapper
    keeps what it wraps in _kreplay_wraps."""
    current = (owner.__dict__ if isinstance(owner, type) else vars(owner)).get(name)
    if current is None:
        return False
    if getattr(current, "_kreplay_wraps", None) is not None:
        return True
    wrapped = wrap(current)
    wrapped._kreplay_wraps = current
    setattr(owner, name, wrapped)
    return True


def installed():
    """The resync of the hook this process runs already (queued by an earlier agent), or None: on
    importlib's _find_and_load while modules are waited for, else (every module patched, asyncio's
    too) on asyncio's Handle._run."""
    places = [sys.modules["_frozen_importlib"].__dict__.get("_find_and_load")]
    events = sys.modules.get("asyncio.events")
    if events is not None:
        places.append(events.Handle.__dict__.get("_run"))
    for place in places:
        resync = getattr(place, "_kreplay_resync", None)
        if resync is not None:
            return resync
    return None


def main(signal):
    resync = installed()
    if resync is not None:
        resync()
    else:
        install(signal)


# queued by the agent: run with the signal's layout (hook-source.ts); imported, it does nothing
if __name__ == "_kreplay_python_hook_boot":
    main(SIGNAL)  # noqa: F821
