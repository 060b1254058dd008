package java.util.concurrent;

import java.io.FileDescriptor;
import java.io.FileOutputStream;
import java.io.IOException;
import java.lang.reflect.Field;
import java.lang.reflect.Method;
import java.nio.ByteBuffer;
import java.nio.ByteOrder;
import java.nio.channels.FileChannel;
import java.nio.charset.StandardCharsets;
import java.util.HashMap;
import java.util.Map;
import java.util.concurrent.atomic.AtomicLong;

/**
 * Which request each thread serves, told to the kernel as the Node and Python hooks tell it
 * (docs/internals.md): writes of struct kr_unit_signal to KR_UNIT_SIGNAL_FD, a descriptor no file
 * can have (each write fails with EBADF after the kernel's tracepoint read its bytes):
 * <ul>
 *   <li>WATCH u: this thread keeps the unit it runs in these very bytes' unit field, a direct
 *       buffer's memory that never moves; a switch is a store there, read by the kernel at each of
 *       the thread's calls;
 *   <li>OPEN u + head: unit u serves the request whose HTTP/1.x head follows;
 *   <li>CLOSE u: unit u's request ended: what still runs in it carries none.
 * </ul>
 * Work handed to a pool (an executor's, a fork-join pool's, a new thread's) is kept with the
 * submitter's unit, by the task's identity, and runs in it. Called from the code Hook rewrote;
 * nothing here throws into the program.
 *
 * <p>Defined into java.base by the hook's Agent (in this package, which it opens to itself only):
 * every class loader sees it, the JDK's own code and a container's servlets alike, without the
 * boot class path appended (which HotSpot warns of on the program's output); and in this package
 * it calls ForkJoinTask.exec, which is protected. Its members are the package's, not private:
 * defined one by one, its nested classes reach them without nestmate checks.
 */
public final class KreplayUnits {
  private KreplayUnits() {}

  /** The most tasks waiting with a unit; past it those are forgotten (they run as none, never wrong). */
  static final int HANDED_MAX = 1 << 16;
  static final int VALUE_MAX = 256;
  static final int PATH_MAX = 512;

  static byte[] magic;
  static int opOpen;
  static int opWatch;
  static int opClose;
  static int unitAt;
  static int signalBytes;
  static int headMax;
  static FileOutputStream out;
  static FileChannel channel;

  static final AtomicLong IDS = new AtomicLong();
  /** bumped when the kernel may have lost the threads' slots (the hook loaded again by a new agent) */
  static volatile int generation;

  static final ConcurrentHashMap<Key, Long> HANDED = new ConcurrentHashMap<>();
  /** async servlet requests, by their Request: their unit, open until the container recycles it */
  static final ConcurrentHashMap<Key, Long> ASYNC = new ConcurrentHashMap<>();
  static final ThreadLocal<Slot> SLOTS = new ThreadLocal<>();

  /** A thread's slot: its WATCH signal's bytes, and the units it left to enter others. */
  static final class Slot {
    ByteBuffer watch;
    int generation = -1;
    long unit;
    /** the pool task beforeExecute entered the unit of, until its afterExecute */
    Object task;
    long[] outer = new long[8];
    int depth;
  }

  /** A task by identity (a task may define equals). */
  static final class Key {
    final Object task;
    final int hash;

    Key(Object task) {
      this.task = task;
      this.hash = System.identityHashCode(task);
    }

    @Override
    public boolean equals(Object other) {
      return other instanceof Key && ((Key) other).task == task;
    }

    @Override
    public int hashCode() {
      return hash;
    }
  }

  /**
   * Set up once from the agent's arguments (`name=value` pairs joined by commas:
   * agent/runtimes/jvm/jvm-hooks.ts); a later load makes every thread register anew.
   */
  public static synchronized void install(String text) throws ReflectiveOperationException {
    if (out != null) {
      generation++;
      return;
    }
    Map<String, String> args = new HashMap<>();
    for (String pair : text.split(",")) {
      int eq = pair.indexOf('=');
      if (eq > 0) args.put(pair.substring(0, eq), pair.substring(eq + 1));
    }
    magic = args.get("magic").getBytes(StandardCharsets.US_ASCII);
    opOpen = Integer.parseInt(args.get("open"));
    opWatch = Integer.parseInt(args.get("watch"));
    opClose = Integer.parseInt(args.get("close"));
    int opAt = Integer.parseInt(args.get("opAt"));
    unitAt = Integer.parseInt(args.get("unitAt"));
    signalBytes = Integer.parseInt(args.get("bytes"));
    headMax = Integer.parseInt(args.get("maxHead"));
    if (opAt != magic.length || unitAt != opAt + 4 || signalBytes != unitAt + 8)
      throw new IllegalArgumentException("a unit signal laid out otherwise than magic, u32 op, u64 unit");
    FileDescriptor fd = new FileDescriptor();
    Field number = FileDescriptor.class.getDeclaredField("fd");
    number.setAccessible(true);
    number.setInt(fd, Integer.parseInt(args.get("fd")));
    // no cleaner is registered for a stream made on a descriptor: nothing ever closes it
    FileOutputStream stream = new FileOutputStream(fd);
    channel = stream.getChannel();
    out = stream;
  }

  static byte[] signal(int op, long unit, int extra) {
    byte[] bytes = new byte[signalBytes + extra];
    System.arraycopy(magic, 0, bytes, 0, magic.length);
    ByteBuffer.wrap(bytes).order(ByteOrder.LITTLE_ENDIAN).putInt(magic.length, op).putLong(unitAt, unit);
    return bytes;
  }

  static void send(byte[] bytes) {
    try {
      out.write(bytes);
    } catch (IOException expected) {
      // EBADF: the kernel read the bytes at the call's entry
    }
  }

  /** This thread's slot, registered with the kernel (once, and again after a new agent's load). */
  static Slot slot() {
    Slot slot = SLOTS.get();
    if (slot == null) {
      slot = new Slot();
      SLOTS.set(slot);
    }
    int now = generation;
    if (slot.generation != now) {
      if (slot.watch == null) {
        slot.watch = ByteBuffer.allocateDirect(signalBytes).order(ByteOrder.LITTLE_ENDIAN);
        slot.watch.put(signal(opWatch, 0, 0));
      }
      slot.watch.putLong(unitAt, slot.unit);
      try {
        // a direct buffer is written from its own memory: the kernel keeps the unit field's address
        channel.write(slot.watch.duplicate().clear());
      } catch (IOException expected) {
        // EBADF, as every signal
      }
      slot.generation = now;
    }
    return slot;
  }

  static void enter(Slot slot, long unit) {
    if (slot.depth == slot.outer.length) slot.outer = java.util.Arrays.copyOf(slot.outer, slot.depth * 2);
    slot.outer[slot.depth++] = slot.unit;
    store(slot, unit);
  }

  static long leave(Slot slot) {
    long unit = slot.unit;
    store(slot, slot.depth > 0 ? slot.outer[--slot.depth] : 0);
    return unit;
  }

  static void store(Slot slot, long unit) {
    slot.unit = unit;
    slot.watch.putLong(unitAt, unit);
  }

  /** The unit this thread runs (0: none). */
  static long current() {
    Slot slot = SLOTS.get();
    return slot == null ? 0 : slot.unit;
  }

  // ---- a server's request: opened where the server hands it to the program, closed when that returns

  /** Opens a unit for the request and enters it (the thread's unit until `close`). */
  public static void open(String method, String path, String traceparent, String requestId) {
    try {
      Slot slot = slot();
      long unit = IDS.incrementAndGet();
      enter(slot, unit);
      byte[] head = head(method, path, traceparent, requestId);
      byte[] bytes = signal(opOpen, unit, head.length);
      System.arraycopy(head, 0, bytes, signalBytes, head.length);
      send(bytes);
    } catch (RuntimeException | Error ignored) {
      // never into the program
    }
  }

  /** The request `open` opened ended: this thread leaves its unit first, then what was handed it loses it. */
  public static void close() {
    try {
      Slot slot = SLOTS.get();
      if (slot == null || slot.watch == null) return;
      long unit = leave(slot);
      if (unit != 0) send(signal(opClose, unit, 0));
    } catch (RuntimeException | Error ignored) {
      // never into the program
    }
  }

  /**
   * Where a servlet container's request leaves the servlet: closed, unless the servlet started async
   * processing: then this thread leaves its unit, which stays open for the work the request goes on
   * with until `recycled` (the response complete).
   */
  public static void finish(Object request, boolean async) {
    if (!async || request == null || ASYNC.size() >= HANDED_MAX) {
      close();
      return;
    }
    try {
      Slot slot = SLOTS.get();
      if (slot == null || slot.watch == null) return;
      long unit = leave(slot);
      if (unit != 0) ASYNC.put(new Key(request), unit);
    } catch (RuntimeException | Error ignored) {
      // never into the program
    }
  }

  /** A container recycles `request`: an async request it served ended. */
  public static void recycled(Object request) {
    try {
      if (ASYNC.isEmpty()) return;
      Long unit = ASYNC.remove(new Key(request));
      if (unit != null) send(signal(opClose, unit, 0));
    } catch (RuntimeException | Error ignored) {
      // never into the program
    }
  }

  /** The head OPEN carries; empty past the kernel's bound (it would cut its end off). */
  static byte[] head(String method, String path, String traceparent, String requestId) {
    StringBuilder text = new StringBuilder();
    text.append(validMethod(method) ? method.toUpperCase(java.util.Locale.ROOT) : "GET").append(' ');
    if (path == null || path.isEmpty()) path = "/";
    int n = Math.min(path.length(), PATH_MAX);
    for (int i = 0; i < n; i++) {
      char c = path.charAt(i);
      if (c >= '!' && c <= '~') text.append(c);
      else text.append('%').append(String.format("%02X", c & 0xff));
    }
    text.append(" HTTP/1.1\r\n");
    header(text, "traceparent", traceparent);
    header(text, "x-request-id", requestId);
    text.append("\r\n");
    byte[] bytes = text.toString().getBytes(StandardCharsets.US_ASCII);
    return bytes.length <= headMax ? bytes : new byte[0];
  }

  static boolean validMethod(String method) {
    if (method == null || method.isEmpty() || method.length() > 16) return false;
    for (int i = 0; i < method.length(); i++) {
      char c = method.charAt(i);
      if (!(c >= 'A' && c <= 'Z' || c >= 'a' && c <= 'z')) return false;
    }
    return true;
  }

  static void header(StringBuilder text, String name, String value) {
    if (value == null || value.length() > VALUE_MAX) return;
    for (int i = 0; i < value.length(); i++) {
      char c = value.charAt(i);
      if (c < ' ' || c > '~') return;
    }
    text.append(name).append(": ").append(value.strip()).append("\r\n");
  }

  // ---- hand-offs: a task keeps its submitter's unit, and runs in it

  /** Task `task` is handed to another thread: it carries this thread's unit (none: nothing kept). */
  public static void hand(Object task) {
    try {
      long unit = current();
      if (unit == 0 || task == null) return;
      // tasks handed and never run (rejected, cancelled, a pool shut down) are forgotten all at
      // once past the bound: those still waiting then run as none, never another's
      if (HANDED.size() >= HANDED_MAX) HANDED.clear();
      HANDED.put(new Key(task), unit);
    } catch (RuntimeException | Error ignored) {
      // never into the program
    }
  }

  /** The unit `task` was handed (0: none), taken: a task runs once per hand-off. */
  static long taken(Object task) {
    if (HANDED.isEmpty()) return 0;
    try {
      Long unit = HANDED.remove(new Key(task));
      return unit == null ? 0 : unit;
    } catch (RuntimeException | Error ignored) {
      return 0;
    }
  }

  /** Where a pool thread (or a new thread) runs a Runnable: in the unit it was handed. */
  public static void run(Runnable task) {
    long unit = taken(task);
    if (unit == 0) {
      task.run();
      return;
    }
    Slot slot = entered(unit);
    try {
      task.run();
    } finally {
      left(slot);
    }
  }

  /**
   * ThreadPoolExecutor.beforeExecute: the worker enters the unit `task` was handed. An entry whose
   * afterExecute never came (a subclass's override that did not call it) is left first.
   */
  public static void before(Object task) {
    Slot slot = SLOTS.get();
    if (slot != null && slot.task != null) {
      slot.task = null;
      leave(slot);
    }
    long unit = taken(task);
    if (unit == 0) return;
    slot = entered(unit);
    if (slot != null) slot.task = task;
  }

  /** ThreadPoolExecutor.afterExecute: the worker leaves the unit of the task it ran. */
  public static void after(Object task) {
    Slot slot = SLOTS.get();
    if (slot != null && task != null && slot.task == task) {
      slot.task = null;
      leave(slot);
    }
  }

  /** Where a fork-join pool runs a task (ForkJoinTask.doExec): in the unit it was handed. */
  public static boolean exec(ForkJoinTask<?> task) {
    long unit = taken(task);
    if (unit == 0) return task.exec();
    Slot slot = entered(unit);
    try {
      return task.exec();
    } finally {
      left(slot);
    }
  }

  // ---- Netty: many connections per event-loop thread; a unit per HTTP request, kept by its channel

  static final int NETTY_READ = 0;
  static final int NETTY_WRITE = 1;
  static final int NETTY_FLUSH = 2;

  /** channels that read an HTTP request, until inactive */
  static final ConcurrentHashMap<Key, Conn> CONNS = new ConcurrentHashMap<>();
  static final Messages MESSAGES = new Messages();

  /** A channel's requests: the unit of the one it serves (0: none), and what it read and answered. */
  static final class Conn {
    long unit;
    /** the headers of the request it read last: an aggregated request shares its parts' */
    Object headers;
    /** requests read and not yet answered: past one (pipelined), the channel runs none */
    int pending;
    /** responses whose last content was written, ended at the flush that sends them */
    int answered;
  }

  /** What a Netty message's class is to the hook: an HTTP request (its accessors), a response's end. */
  static final class Message {
    Method method;
    Method uri;
    Method headers;
    Method header;
    boolean last;
  }

  /** Netty's classes by name, by reflection: java.base cannot link to them, and they may be absent. */
  static final class Messages extends ClassValue<Message> {
    @Override
    protected Message computeValue(Class<?> type) {
      Message kind = new Message();
      try {
        Class<?> request = implemented(type, "io.netty.handler.codec.http.HttpRequest");
        if (request != null) {
          kind.headers = request.getMethod("headers");
          kind.header = kind.headers.getReturnType().getMethod("get", String.class);
          kind.uri = request.getMethod("uri");
          kind.method = request.getMethod("method");
        }
      } catch (ReflectiveOperationException | RuntimeException | LinkageError unknown) {
        kind.headers = null;
      }
      kind.last = implemented(type, "io.netty.handler.codec.http.LastHttpContent") != null;
      return kind;
    }

    static Class<?> implemented(Class<?> type, String name) {
      for (Class<?> c = type; c != null; c = c.getSuperclass())
        for (Class<?> i : c.getInterfaces()) {
          if (i.getName().equals(name)) return i;
          Class<?> inner = implemented(i, name);
          if (inner != null) return inner;
        }
      return null;
    }
  }

  /**
   * Where a channel handler context invokes its handler (`what`: a read of `message`, a write of
   * it, a flush): the thread enters the unit of the request the channel serves, until `nettyLeft`.
   * A channel that never read an HTTP request keeps the thread's unit (a client's, called from a
   * request's handler).
   */
  public static void netty(Object channel, Object message, int what) {
    Slot slot;
    try {
      slot = slot();
    } catch (RuntimeException | Error ignored) {
      return;
    }
    long unit = slot.unit;
    try {
      unit = nettyUnit(channel, message, what, unit);
    } catch (RuntimeException | Error | ReflectiveOperationException ignored) {
      unit = 0;
    }
    enter(slot, unit);
  }

  static long nettyUnit(Object channel, Object message, int what, long current)
      throws ReflectiveOperationException {
    Key key = new Key(channel);
    Conn conn = CONNS.get(key);
    Message kind = message == null ? null : MESSAGES.get(message.getClass());
    if (what == NETTY_READ && kind != null && kind.headers != null) {
      Object headers = kind.headers.invoke(message);
      if (conn == null) {
        if (CONNS.size() >= HANDED_MAX) return 0;
        Conn fresh = new Conn();
        conn = CONNS.putIfAbsent(key, fresh);
        if (conn == null) conn = fresh;
      }
      synchronized (conn) {
        if (headers != conn.headers) {
          conn.headers = headers;
          conn.pending++;
          if (conn.unit != 0) send(signal(opClose, conn.unit, 0));
          conn.unit = 0;
          // a request read while another waits for its answer (pipelined): which one a write
          // serves is not known, so none until all are answered
          if (conn.pending == 1) conn.unit = opened(kind, message, headers);
        }
        return conn.unit;
      }
    }
    if (conn == null) return current;
    synchronized (conn) {
      if (what == NETTY_WRITE && kind != null && kind.last && conn.pending > conn.answered) conn.answered++;
      return conn.unit;
    }
  }

  static long opened(Message kind, Object message, Object headers) throws ReflectiveOperationException {
    String uri = String.valueOf(kind.uri.invoke(message));
    int query = uri.indexOf('?');
    String path = query < 0 ? uri : uri.substring(0, query);
    String method = String.valueOf(kind.method.invoke(message));
    String traceparent = (String) kind.header.invoke(headers, "traceparent");
    String requestId = (String) kind.header.invoke(headers, "x-request-id");
    long unit = IDS.incrementAndGet();
    byte[] head = head(method, path, traceparent, requestId);
    byte[] bytes = signal(opOpen, unit, head.length);
    System.arraycopy(head, 0, bytes, signalBytes, head.length);
    send(bytes);
    return unit;
  }

  /** The handler returned: the thread leaves the unit; after a flush, the responses it sent end their requests. */
  public static void nettyLeft(Object channel, int what) {
    try {
      Slot slot = SLOTS.get();
      if (slot == null || slot.watch == null) return;
      leave(slot);
      if (what != NETTY_FLUSH || CONNS.isEmpty()) return;
      Conn conn = CONNS.get(new Key(channel));
      if (conn == null) return;
      synchronized (conn) {
        if (conn.answered == 0) return;
        conn.pending -= conn.answered;
        conn.answered = 0;
        if (conn.unit != 0) send(signal(opClose, conn.unit, 0));
        conn.unit = 0;
      }
    } catch (RuntimeException | Error ignored) {
      // never into the program
    }
  }

  /** The channel closed: its request, if one is open, ended. */
  public static void nettyGone(Object channel) {
    try {
      if (CONNS.isEmpty()) return;
      Conn conn = CONNS.remove(new Key(channel));
      if (conn == null) return;
      synchronized (conn) {
        if (conn.unit != 0) send(signal(opClose, conn.unit, 0));
        conn.unit = 0;
      }
    } catch (RuntimeException | Error ignored) {
      // never into the program
    }
  }

  static Slot entered(long unit) {
    try {
      Slot slot = slot();
      enter(slot, unit);
      return slot;
    } catch (RuntimeException | Error ignored) {
      return null;
    }
  }

  static void left(Slot slot) {
    if (slot != null) leave(slot);
  }
}
