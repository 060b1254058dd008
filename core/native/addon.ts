/**
 * The compiled addon (native/), loaded once, with the types of what it
 * exports. Neutral ground: the capture and the replay clock both use it, each
 * turning the coded errors of its own calls into its own error class.
 */
import fs from 'node:fs';
import path from 'node:path';
import { KreplayError } from '../errors';
import { repoRoot } from '../repo-root';

/** Tasks named by an include or exclude list, as the kernel sees them. */
export interface NativeFilterSet {
  pids: number[];
  comms: string[];
  cgroupIds: bigint[];
}

/** --include/--exclude in the kernel. */
export interface NativeCaptureFilter {
  include: NativeFilterSet;
  exclude: NativeFilterSet;
  /** an include list is in force, even while empty */
  includes: boolean;
  /** cgroup ids come later too (setCgroupFilter) */
  cgroupFilter: boolean;
  /** excluded tasks lose their transaction events too */
  transactions: boolean;
}

/** What startCapture hands the addon: every field present and already validated. */
export interface NativeCaptureConfig {
  ringBufferBytes: number;
  wakeupBytes: number;
  pollTimeoutMs: number;
  selfTgid: number;
  filter: NativeCaptureFilter;
  /** keep one in this many writes without a context; 1: all */
  sampleBackground: number;
  minDurationNs: number;
  attribution: boolean;
  targets: boolean;
  /** reads of threads without a context too */
  captureReads: boolean;
}

export interface ProgramStats {
  name: string;
  runTimeNs: number;
  runCount: number;
}

export interface NativeCaptureSession {
  attachPoints(): string[];
  /** enum kr_counter order, summed over CPUs */
  readCounters(): number[];
  /** highest fill seen by the poll thread before draining, since the last call (0..1, -1 unknown) */
  ringFill(): number;
  /** per loaded program; run time and count stay 0 unless bpf_stats are on (kernel.bpf_stats_enabled, or an enableBpfStats fd held) */
  programStats(): ProgramStats[];
  /** replaces the filter's cgroup ids (an id in both lists is excluded) */
  setCgroupFilter(include: bigint[], exclude: bigint[]): void;
  /** probes the libuv threadpool of process `pid`'s executable (or libuv.so) from now on, when it has the symbols */
  followLibuv(pid: number): void;
  /** marks process `pid` a JVM: the threads it makes from now on inherit no request in the kernel */
  markJvm(pid: number): void;
  /**
   * the pids of the processes that started, exec'd or exited since the last call (the kernel's news,
   * bpf/capture/tasks.h); null when some were lost; undefined when the kernel's pids are not /proc's
   */
  processChanges(): number[] | null | undefined;
  /** Asks the poll thread to drain and finish; onClosed follows. */
  stop(): void;
}

/**
 * One recorded (call kind, target) of `kreplay replay --exec`: the names it answers to, a hold (or
 * release offset) per call; the errno each call fails with; a stream's byte ends (cli/exec/exec-plan.ts).
 */
export interface NativeExecTarget {
  call: 'write' | 'fsync' | 'connect' | 'response';
  keys: string[];
  holdsNs: BigInt64Array;
  errnos?: Int32Array;
  bytesEnd?: BigInt64Array;
  spansNs?: BigInt64Array;
  /** responses: per exchange, the key of the request it answered (0: not recorded) */
  requestKeys?: Uint32Array;
  /** responses: per exchange, 1 when another exchange of its key took another time: its response is not held */
  ambiguous?: Uint8Array;
}

/** The recorded requests' keys, per connection (a string naming it): each knows the statements its connection named. */
export interface NativeRequestKeys {
  key(connection: string, bytes: Uint8Array): number;
}

export interface NativeExecResults {
  targets: {
    matched: number;
    passed: number;
    /** matched calls failed with the incident's errno */
    failed: number;
    /** bytes of the matched calls */
    bytes: number;
    observedNs: BigInt64Array;
    intendedNs: BigInt64Array;
    /** responses: per matched response, the recorded exchange it took */
    exchanges: Uint32Array;
    /** responses: the exchanges taken without a hold (ambiguous: the incident made others like them, with other times) */
    ambiguous: Uint32Array;
  }[];
  unmatched: {
    call: 'write' | 'fsync' | 'connect' | 'response';
    target: string;
    kind: string;
    calls: number;
  }[];
  bypassed: number;
  /** socket peers read from /proc/<pid>/net because pidfd_getfd was denied */
  peersFromProc: number;
  /** whether the supervisor thread got SCHED_FIFO */
  realtime: boolean;
  /** CLOCK_MONOTONIC ns of the build's first call kreplay held (a matched call, or a held response's request); null: none */
  firstHeldNs: bigint | null;
}

/** A file the supervisor never holds a call to, by identity (the stdout and stderr kreplay hands the build). */
export interface NativeNeverHeld {
  dev: bigint;
  ino: bigint;
  /** the name the calls are counted under */
  label: string;
}

/** A call of the build as the supervisor sees it, for execMatch. */
export interface NativeExecCall {
  call: NativeExecTarget['call'];
  target: string;
  /** a socket: it may match a target by its port key */
  socket?: boolean;
  /** the bytes a write asks to write; absent: unknown (a stream then lets it pass) */
  bytes?: number;
}

/** What the plan says of one call: passes (held false), or held with its release time, errno and bytes. */
export interface NativeCallMatch {
  /** the plan index it matched, -1 for none */
  target: number;
  held: boolean;
  /** duration pace: its hold; timeline pace: its release offset */
  releaseNs: bigint;
  /** 0: it runs; else it fails with this errno */
  errno: number;
  /** a stream: the recorded bytes [from, to) it carried */
  from: number;
  to: number;
}

export interface NativeExecSupervisor {
  /** timeline pace: playing from `offsetNs`, or paused there */
  setTimeline(playing: boolean, offsetNs: number): void;
  /** releases every held call and lets every later one through */
  bypass(): void;
  /** releases every held call, joins the thread */
  stop(): void;
  /** after stop() */
  results(): NativeExecResults;
}

/** A doorbell pipe's read end polled on the loop (native/doorbell_watch.h). */
export interface NativeDoorbellWatch {
  /** keeps the loop alive while it polls */
  ref(): void;
  unref(): void;
  /** stops polling and closes the descriptor */
  close(): void;
}

/** One connect the inspector guard refused. */
export interface GuardIntrusion {
  pid: number;
  uid: number;
  port: number;
  /** the cookie of the network namespace it was refused in */
  netns: bigint;
  /** 4 or 6: the socket's family */
  family: number;
  comm: string;
}

/**
 * Connects to a guarded port of a local address, in the network namespace of the cookie given (the
 * agent's without one), pass from the agent alone.
 */
export interface NativeInspectorGuard {
  guard(port: number, netns?: bigint): void;
  unguard(port: number, netns?: bigint): void;
  /** how many connects the guard refused since it was loaded, whatever their port */
  refusedTotal(): number;
  /**
   * a socket that started listening on the guarded port since it was guarded listens still (or
   * the kernel cannot tell): the only time /proc is worth reading for it
   */
  listening(port: number, netns?: bigint): boolean;
  /** the cookie of process `pid`'s network namespace (entered by a thread of the agent's); throws E_NODE_GUARD */
  netnsOf(pid: number): bigint;
  /** a descriptor connected to 127.0.0.1:`port` in process `pid`'s network namespace; throws E_NODE_GUARD */
  connectIn(pid: number, port: number): number;
  /** the refusals recorded since the last call */
  drain(): GuardIntrusion[];
  close(): void;
}

export interface NativeAddon {
  ExecSupervisor: new (
    listenerFd: number,
    plan: { pace: 'duration' | 'timeline'; targets: NativeExecTarget[]; neverHeld?: NativeNeverHeld[] },
    onEnd: (error: (Error & { code: string }) | undefined) => void,
  ) => NativeExecSupervisor;
  /** a close-on-exec unix stream pair [ours, theirs]; throws E_EXEC_HANDOFF */
  execSocketPair(): [number, number];
  /** one message of the launcher and the fd it carries (else -1); throws E_EXEC_HANDOFF */
  receiveMessage(fd: number, timeoutMs: number): { text: string; fd: number };
  /** what the supervisor decides for each call in turn, without a build (native/exec/exec_match.h); throws E_EXEC_PLAN */
  execMatch(
    plan: { pace: 'duration' | 'timeline'; targets: NativeExecTarget[] },
    calls: NativeExecCall[],
  ): NativeCallMatch[];
  /** `tcp 10.0.0.5:5432` → `tcp *:5432`, the key sockets match on by port; null for targets without a port */
  portKey(target: string): string | null;
  /** per request of the build (its requestKey), the recorded exchange its response takes as the relay picks it, or null: passed through */
  execExchanges(recordedKeys: number[], requestKeys: number[]): (number | null)[];
  /** the name replay --exec gives socket `inode` from the text of a /proc/PID/net table (tcp, tcp6, udp, udp6, unix) and whether it is connected (named once), or null: not listed */
  execProcSocket(table: string, text: string, inode: number): { name: string; connected: boolean } | null;
  /** the /proc/PID/net tables replay --exec looks for a socket in, by its protocol's name (sockfs's system.sockprotoname) */
  execSocketTables(protocolName: string): string[];
  CaptureSession: new (
    config: NativeCaptureConfig,
    /** null once the records up to the stop are all delivered, before the probes detach */
    onBatch: (batch: Buffer | null) => void,
    onClosed: (error: Error | undefined) => void,
  ) => NativeCaptureSession;
  /** the kernel guard of the Node inspector (bpf/inspector_guard.bpf.c); throws E_NODE_GUARD */
  InspectorGuard: new () => NativeInspectorGuard;
  clockOffset(): { offsetNs: bigint; errorNs: number };
  /** calls onSet on the loop each time the wall clock is set (TFD_TIMER_CANCEL_ON_SET); throws E_CLOCK_WATCH */
  ClockSetWatch: new (onSet: () => void) => { close(): void };
  ensureTracefs(): boolean;
  /** [level, text] lines from libbpf and the addon since the last call */
  drainLog(): [string, string][];
  /** SCHED_FIFO at `priority` for thread `tid` of this process; throws E_SCHED_PERM or E_SCHED */
  setRealtimeScheduling(tid: number, priority: number): void;
  /**
   * The fair scheduler's shortest slice (0.1 ms) for thread `tid` of this process, its nice value
   * kept, and for it alone: threads it starts later begin at the kernel's defaults (slice, and
   * nice 0 where its nice is negative). True when granted; false where the kernel keeps its
   * default (custom slices need Linux 6.12; a thread not under SCHED_OTHER). Throws E_SCHED for a
   * tid that is not one.
   */
  setShortestSlice(tid: number): boolean;
  /** the slice setShortestSlice asks for, in ns (native/thread_scheduling.h) */
  shortestSliceNs: number;
  /**
   * The TCP sockets listening in the agent's own network namespace, by sock_diag (the listening
   * table alone); null when the kernel cannot say.
   */
  tcpListeners(): { inode: number; port: number; loopback: boolean }[] | null;
  /** a non-blocking pipe [readFd, writeFd]; throws E_PIPE */
  doorbellPipe(): [number, number];
  /**
   * Polls a doorbell pipe's read end (taking it) on the loop: each arrival of bytes is read whole
   * and calls onRing() once; a pipe that fails or loses its writer stops and calls onRing(error)
   * (code E_PIPE) once. It does not keep the loop alive until ref().
   */
  DoorbellWatch: new (readFd: number, onRing: (error?: Error) => void) => NativeDoorbellWatch;
  /** a close-on-exec duplicate of `fd` (the same open socket or file); throws E_DUP */
  duplicateFd(fd: number): number;
  /** the descriptor holding an exclusive flock on `path` (created if missing); throws E_STORE_LOCKED or E_STORE_OPEN */
  lockFileExclusive(path: string): number;
  /** closes a descriptor lockFileExclusive gave (not fs.closeSync: Node's fs did not open it); throws E_STORE_OPEN */
  unlockFile(fd: number): void;
  /** gives free heap pages back to the kernel (malloc_trim); true when some were */
  trimMemory(): boolean;
  /** what a request's first bytes ask, as a key (never 0) that `replay --exec` matches responses on (native/capture/request_key.h) */
  requestKey(bytes: Uint8Array): number;
  /** the same as text with literal values replaced: `redis GET`, `pg query SELECT * FROM t WHERE id = ?` */
  requestShape(bytes: Uint8Array): string;
  /** requestKey per connection: a prepared statement's later commands are keyed by its text (native/capture/request_key.h) */
  RequestKeys: new () => NativeRequestKeys;
  /** CAP_BPF and CAP_PERFMON, or CAP_SYS_ADMIN: the check the addon's E_CAPTURE_PERM uses */
  hasBpfCapabilities(): boolean;
  /** an fd keeping BPF run-time statistics (programStats) on until closed; throws E_CAPTURE_STATS */
  enableBpfStats(): number;
  /** the running libbpf's version, "v1.1" */
  libbpfVersion(): string;
  /**
   * The symbols of `names` (functions and data) an ELF file defines, with their values (relative
   * to its load address when relocatable: a shared object or a PIE); null when it is no ELF file.
   * `dynamicOnly`: only the symbols it exports (.dynsym), a quick look at a large program.
   */
  elfSymbols(
    path: string,
    names: string[],
    dynamicOnly?: boolean,
  ): { relocatable: boolean; values: Record<string, bigint> } | null;
  /** where process `pid`'s interpreter has what the Python hook needs (native/python/py_inject.h); throws E_PY_INJECT_SYMBOLS or E_PY_INJECT_GONE */
  pythonSymbols(pid: number): NativePythonSymbols;
  /** Py_AddPendingCall(PyRun_SimpleString, code) made by `pid`'s main thread: what it returned (0: queued); rejects with an E_PY_INJECT_ code */
  queuePythonCode(
    pid: number,
    symbols: NativePythonSymbols,
    code: string,
    timeoutMs: number,
  ): Promise<number>;
}

/** Absolute addresses in one process; runtime (_PyRuntime) is 0n when not exported. */
export interface NativePythonSymbols {
  /** the ELF that defines them, as the process maps it */
  file: string;
  addPendingCall: bigint;
  runSimpleString: bigint;
  runtime: bigint;
}

const ADDON_PATH = path.join('native', 'build', 'Release', 'kreplay_native.node');

/** The addon could not be loaded (not built, or built for another Node). */
export class NativeLoadError extends KreplayError {
  constructor(message: string) {
    super('E_NATIVE_LOAD', message);
  }
}

let addon: NativeAddon | undefined;

export function nativeAddon(): NativeAddon {
  if (!addon) {
    const file = path.join(repoRoot(), ADDON_PATH);
    if (!fs.existsSync(file)) {
      throw new NativeLoadError(`the native addon ${file} is not built: run \`make build\``);
    }
    const loaded = { exports: {} as NativeAddon };
    try {
      process.dlopen(loaded, file);
    } catch (err) {
      throw new NativeLoadError(`cannot load ${file}: ${(err as Error).message}; run \`make build\``);
    }
    addon = loaded.exports;
  }
  return addon;
}
