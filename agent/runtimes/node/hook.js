// The Node hook: what kreplay's agent evaluates in a Node process through its inspector
// (agent/runtimes/node/injector.ts), as `(<this function's text>)(signal, options)`; nothing outside the
// function is sent. It tells the kernel which
// request the event loop's JavaScript works for, so the process's events carry that request's
// transaction across awaits, timers, promises and callbacks:
//   - each request a server receives (http/https 'request', http2 'stream', which grpc-js and
//     express are built on) runs in an AsyncLocalStorage store of its own, a unit id;
//   - the unit the event loop runs now (0: none) is kept in a slot, 8 bytes of a Buffer whose
//     address the kernel learnt once (a WATCH signal, a write of those bytes) and
//     reads at each of the thread's calls: set when a request starts and ends, before and after
//     each async callback (async_hooks; a stack, as they nest), and around the events of a
//     request's own objects (a request body's data, an HTTP/2 stream's frames, which arrive in the
//     connection's callbacks). No call per switch: between callbacks, in libuv, the slot says 0;
//   - a write of an OPEN signal gives a unit the request's context (the head that follows the
//     signal: method, path, traceparent, x-request-id), once per request, and a CLOSE signal ends
//     it when the response is done (a timer the request left keeps running in its unit, with none),
//     sent by the response's emit wrapper before the program's own `close` listeners run;
//   - a client socket written for two requests (a pooled connection of a database or cache
//     client) runs its callbacks in no unit: they would run in the unit of whoever opened it.
//     Node's own HTTP client is exact (it gives a reused socket the request it serves).
// Signals go in a mailbox beside the slot (KR_UNIT_MAILBOX_AT, bpf/capture.h), registered by the
// same WATCH, and a call of Node's os.getPriority(0) (getpriority(PRIO_PROCESS, 0)) has the kernel
// read it: a call that cannot fail and touches no file, so a signal costs no exception and no libuv
// pool request (about a tenth of a write's cost). The WATCH itself, and any signal once getPriority
// threw, are written to signal.fd (KR_UNIT_SIGNAL_FD), a descriptor number no file can have: each
// write fails with EBADF (caught here) after the kernel's tracepoint read its bytes, so no signal
// lands in a file the program opened, whatever descriptors it closes and reuses; the hook opens
// none. The kernel never records the signal writes (bpf/capture/heads.h). Evaluating it again replaces
// the previous install (the originals are kept under a global symbol). It never throws into the
// application: a failure leaves the process unattributed. Returns what it did, as a string.
'use strict';
module.exports = function kreplayNodeHook(signal, options) {
  'use strict';
  const load = typeof process.getBuiltinModule === 'function' ? process.getBuiltinModule : require;
  const fs = load('fs');
  const net = load('net');
  const os = load('os');
  const http = load('http');
  const { AsyncLocalStorage, createHook } = load('async_hooks');
  const { promiseHooks } = load('v8');
  // a client socket's unit: the one that connected it, or SHARED once another wrote to it
  const SHARED = -1;
  // non-enumerable: no spread or Object.assign of globalThis copies it
  const KEY = Symbol.for('kreplay.node-hook');
  if (!Object.prototype.hasOwnProperty.call(globalThis, KEY))
    Object.defineProperty(globalThis, KEY, {
      value: { originals: new Map(), nextUnit: 1 },
      configurable: true,
    });
  const state = globalThis[KEY];
  // an object's unit (a request's, its response's, an HTTP/2 stream's) and a client socket's owner,
  // kept beside the objects, not on them: the program's util.inspect of a request shows nothing
  const units = (state.units ??= new WeakMap());
  const owners = (state.owners ??= new WeakMap());
  // the object whose `close` ends a unit (a response, an HTTP/2 stream), until it closes
  const closing = (state.closing ??= new WeakMap());
  const wrappedEmits = new WeakSet();

  // undo a previous install: this one starts from Node's own functions
  if (state.asyncHook) state.asyncHook.disable();
  state.stopPromiseHooks?.();
  for (const [target, keys] of state.originals) for (const [key, original] of keys) target[key] = original;
  const original = (target, key) => {
    let keys = state.originals.get(target);
    if (!keys) state.originals.set(target, (keys = new Map()));
    if (!keys.has(key)) keys.set(key, target[key]);
    return keys.get(key);
  };
  const patch = (target, key, wrap) => {
    const before = original(target, key);
    target[key] = wrap(before);
  };

  // struct kr_unit_signal: magic, u32 op, u64 unit; an OPEN's head follows it. The slot and the
  // mailbox are one Buffer of their own (never pooled, never moved, kept in `state`): a WATCH signal,
  // whose unit field is the slot, then the mailbox's length (u64) and the signal it holds.
  const MAIL = signal.mailboxAt;
  // the kernel reads the previous install's slot until this one's WATCH: it stays alive meanwhile
  state.previousSlot = state.slot;
  const slot = (state.slot = Buffer.alloc(MAIL + signal.bytes + signal.maxHead));
  slot.write(signal.magic, 0, 'latin1');
  slot.writeUInt32LE(signal.watch, signal.opAt);
  slot.write(signal.magic, MAIL, 'latin1');
  // The slot's and the mailbox's numbers as the kernel reads them, in the host's order, stored
  // through a view of the slot's words: the unit is set twice around most callbacks and a signal's
  // op and length three times a signal, where Buffer's checked writes cost several times the store.
  // Buffer.alloc gives the slot an ArrayBuffer of its own, so its words are aligned.
  const words = new Uint32Array(slot.buffer, slot.byteOffset, slot.length >>> 2);
  const [low, high] = os.endianness() === 'LE' ? [0, 1] : [1, 0];
  const setU64 = (at, value) => {
    const word = at >>> 2;
    words[word + low] = value >>> 0;
    words[word + high] = Math.floor(value / 0x100000000);
  };
  const setUnit = (at, unit) => setU64(at + signal.unitAt, unit);
  const setMailLength = (length) => setU64(signal.mailboxLengthAt, length);
  // The WATCH, and a signal the mailbox could not carry: writevSync of one buffer is one write(2) on
  // this thread, and its error (EBADF, always: the kernel read the signal at the write's start) is
  // made in C++, where a stackTraceLimit of 0 spares the stack. The limit is lowered only when it is
  // a plain writable value, and given back at once.
  const write = (from, to) => {
    const limit = Object.getOwnPropertyDescriptor(Error, 'stackTraceLimit');
    const lowered = limit?.writable === true;
    try {
      if (lowered) Error.stackTraceLimit = 0;
      fs.writevSync(signal.fd, [slot.subarray(from, to)]);
    } catch {
      // EBADF
    } finally {
      if (lowered) Error.stackTraceLimit = limit.value;
    }
  };
  // Node's own getpriority(PRIO_PROCESS, 0): the kernel reads the mailbox at its start. No
  // exception, no file, no libuv pool request. Not in a process under a seccomp filter (the agent
  // says so: one might kill it for a call it does not expect); a getPriority that throws is left
  // for good, for the write.
  let ring = options?.mailbox === true ? os.getPriority : null;
  // Signal `op` for `unit` (an OPEN with its head, `text`), then the mailbox is empty again: a
  // getpriority of the program's own finds nothing in it.
  const send = (op, unit, text) => {
    words[(MAIL + signal.opAt) >>> 2] = op;
    setUnit(MAIL, unit);
    const length = signal.bytes + (text === undefined ? 0 : slot.write(text, MAIL + signal.bytes, 'latin1'));
    if (ring) {
      setMailLength(length);
      try {
        ring(0);
        return;
      } catch {
        ring = null;
      } finally {
        setMailLength(0);
      }
    }
    write(MAIL, MAIL + length);
  };

  const als = new AsyncLocalStorage();
  // the unit in the slot
  let running = 0;
  const current = () => als.getStore() ?? 0;
  const enter = (unit) => {
    if (unit === running) return;
    running = unit;
    setUnit(0, unit);
  };
  // Runs fn in `unit`, then the caller's unit again.
  const runIn = (unit, fn, self, args) => {
    const outer = running;
    if (outer === unit && current() === unit) return Reflect.apply(fn, self, args);
    enter(unit);
    try {
      return als.run(unit, Reflect.apply, fn, self, args);
    } finally {
      enter(outer);
    }
  };

  // A header's value as one string, or undefined.
  const one = (value) => (Array.isArray(value) ? value[0] : value);
  // anything but printable ASCII (a space, a control character): none may stand in a head's line
  const CONTROL = /[^\x21-\x7e]/;
  // gRPC's binary trace context (OpenCensus): version 0, then field 0 (16-byte trace id), field 1
  // (8-byte span id), field 2 (1-byte options)
  const fromGrpcTraceBin = (value) => {
    const bin = typeof value === 'string' ? Buffer.from(value, 'base64') : null;
    if (!bin || bin.length < 29 || bin[0] !== 0 || bin[1] !== 0 || bin[18] !== 1) return undefined;
    const flags = bin.length >= 29 && bin[27] === 2 ? bin[28] : 0;
    return `00-${bin.toString('hex', 2, 18)}-${bin.toString('hex', 19, 27)}-${flags.toString(16).padStart(2, '0')}`;
  };
  // A header line the kernel can hand on whole, or '' (a value is never cut: a cut id would name
  // another request).
  const line = (name, value) =>
    typeof value === 'string' && value.length <= 128 && !CONTROL.test(value) ? `${name}: ${value}\r\n` : '';
  // The request head the kernel parses for the unit's context (its traceparent, or gRPC's binary
  // one, and its x-request-id): none without either. A path too long is cut.
  const head = (method, path, headers) => {
    const fields =
      line('traceparent', one(headers.traceparent) ?? fromGrpcTraceBin(one(headers['grpc-trace-bin']))) +
      line('x-request-id', one(headers['x-request-id']));
    if (fields === '') return null;
    let target = typeof path === 'string' && path !== '' ? path : '/';
    if (target.length > 512 || CONTROL.test(target)) target = '/';
    return `${typeof method === 'string' && !CONTROL.test(method) ? method.slice(0, 16) : 'GET'} ${target} HTTP/1.1\r\n${fields}\r\n`;
  };
  // A new unit for a request; its context when it carries a trace context or a request id, until
  // `done` (the response or stream) closes.
  const open = (method, path, headers, done) => {
    const unit = state.nextUnit++;
    const text = head(method, path, headers ?? {});
    if (text === null) return unit;
    // the kernel reads the slot when the write begins: the unit must be there already
    const outer = running;
    enter(unit);
    send(signal.open, unit, text);
    enter(outer);
    // an object whose emit is not ours (a response class of the program's that overrides it) is
    // given a listener
    if (done && wrappedEmits.has(done.emit)) closing.set(done, unit);
    else done?.once?.('close', () => send(signal.close, unit));
    return unit;
  };

  // The events of a request's own objects (its body, its response, an HTTP/2 stream) run in its unit:
  // those that have listeners ('error' always: its errorMonitor listeners are not counted, and with
  // none it throws); an event nobody listens to runs nothing of the program. The `close` of the
  // object that ends a unit signals CLOSE first, before any listener of the program runs, from this
  // wrapper rather than a listener of ours: the program's response keeps the listeners it was given.
  // The wrappers here, run for each event of a request's objects and sockets, hand Node's function
  // their own `arguments`: a rest parameter is an array more a call, and spreading it into another
  // (`[event, ...args]`) cost ~0.12–0.18 µs a call on Node 24, three times the call itself.
  const inUnit = (emit) => {
    const closeThenEmit = function () {
      const unit = closing.get(this);
      closing.delete(this);
      send(signal.close, unit);
      return Reflect.apply(emit, this, arguments);
    };
    const wrapped = function (event) {
      const unit = units.get(this);
      if (unit === undefined) return Reflect.apply(emit, this, arguments);
      if (event === 'close' && closing.has(this)) return runIn(unit, closeThenEmit, this, arguments);
      return event !== 'error' && this.listenerCount(event) === 0
        ? Reflect.apply(emit, this, arguments)
        : runIn(unit, emit, this, arguments);
    };
    wrappedEmits.add(wrapped);
    return wrapped;
  };
  const patchedStreams = new Set();
  const REQUEST_EVENTS = new Set(['request', 'checkContinue', 'checkExpectation']);
  patch(
    net.Server.prototype,
    'emit',
    (emit) =>
      function (event, first, second) {
        if (event === 'stream') {
          // HTTP/2 (and gRPC): (stream, headers)
          const stream = first;
          const headers = second;
          if (!stream || typeof stream !== 'object') return Reflect.apply(emit, this, arguments);
          const proto = Object.getPrototypeOf(stream);
          if (!patchedStreams.has(proto)) {
            patchedStreams.add(proto);
            patch(proto, 'emit', inUnit);
          }
          const h = headers ?? {};
          const unit = open(h[':method'], h[':path'], h, stream);
          units.set(stream, unit);
          return runIn(unit, emit, this, arguments);
        }
        if (!REQUEST_EVENTS.has(event)) return Reflect.apply(emit, this, arguments);
        // HTTP/1.x (req, res); or HTTP/2's compatibility API, whose stream has its unit already
        const req = first;
        const res = second;
        if (!req || typeof req !== 'object') return Reflect.apply(emit, this, arguments);
        const stream = req.stream;
        const unit = (stream && units.get(stream)) ?? open(req.method, req.url, req.headers, res);
        units.set(req, unit);
        if (res && typeof res === 'object') units.set(res, unit);
        return runIn(unit, emit, this, arguments);
      },
  );
  patch(http.IncomingMessage.prototype, 'emit', inUnit);
  patch(http.ServerResponse.prototype, 'emit', inUnit);

  // Client sockets: a socket's callbacks run in the unit that connected it, which is right only
  // while no other unit uses it. Node's HTTP client gives each request's socket its own (it
  // resets a reused socket's async context), so a socket serving one (_httpMessage) is left alone.
  patch(
    net.Socket.prototype,
    'connect',
    (connect) =>
      function () {
        owners.set(this, current());
        return Reflect.apply(connect, this, arguments);
      },
  );
  const used = (socket) => {
    const owner = owners.get(socket);
    if (owner !== undefined && owner !== SHARED && owner !== current()) owners.set(socket, SHARED);
  };
  for (const key of ['write', 'end'])
    patch(
      net.Socket.prototype,
      key,
      (write) =>
        function (data) {
          if (key === 'write' || (data != null && typeof data !== 'function')) used(this);
          return Reflect.apply(write, this, arguments);
        },
    );
  patch(
    net.Socket.prototype,
    'emit',
    (emit) =>
      function () {
        return owners.get(this) === SHARED && !this._httpMessage
          ? runIn(0, emit, this, arguments)
          : Reflect.apply(emit, this, arguments);
      },
  );

  // Around each callback (timers, I/O, promise continuations, ticks), the unit it runs in; they
  // nest (a callback run in another's scope), so each after gives back what its before found.
  const outers = [];
  const callbacks = {
    before() {
      try {
        // an unbalanced before (an exception that skipped afters) cannot grow it for ever
        if (outers.length > 1000) outers.length = 0;
        outers.push(running);
        enter(current());
      } catch {
        // an async hook that throws ends the process: never
      }
    },
    after() {
      try {
        enter(outers.pop() ?? 0);
      } catch {
        // likewise
      }
    },
  };
  // Promise continuations through V8's own promise hooks when async_hooks can leave promises alone
  // (createHook's trackPromises, whose Node refuses it beside a promiseResolve callback): its own
  // give each promise the program awaits an async id in two symbol properties and push an async
  // context per continuation, none of which the slot needs: V8's before hook already runs in the
  // continuation's async context frame, where an AsyncLocalStorage keeps its store since Node 24.
  const untracked = (() => {
    // a store async_hooks keeps (an AsyncLocalStorage that propagates itself: Node before 24, or
    // --no-async-context-frame) is the promise's only once async_hooks' own promise hook ran
    if (typeof AsyncLocalStorage.prototype._propagate === 'function') return false;
    try {
      createHook({ promiseResolve() {}, trackPromises: false });
      return false;
    } catch {
      return typeof promiseHooks?.onBefore === 'function';
    }
  })();
  state.asyncHook = createHook(untracked ? { ...callbacks, trackPromises: false } : callbacks).enable();
  const stops = untracked
    ? [promiseHooks.onBefore(callbacks.before), promiseHooks.onAfter(callbacks.after)]
    : [];
  state.stopPromiseHooks = () => stops.forEach((stop) => stop());
  running = current();
  setUnit(0, running);
  write(0, MAIL + signal.bytes);
  return `kreplay-node-hook ${process.pid}`;
};
