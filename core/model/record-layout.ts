/**
 * Byte layout of the records the kernel side writes into the ring buffer.
 * Mirrors bpf/capture.h field for field; test/unit/record-layout.test.ts
 * compiles that header and fails when an offset here drifts.
 */
export const RecordType = {
  SysWrite: 1,
  BlockIo: 2,
  Context: 3,
  Target: 4,
  SysRead: 5,
  SysFsync: 6,
  SysConnect: 7,
} as const;
export type RecordTypeValue = (typeof RecordType)[keyof typeof RecordType];

export const COMM_LEN = 16;
export const MAX_FILTER_PIDS = 1024;
export const MAX_FILTER_COMMS = 1024;
export const MAX_FILTER_CGROUPS = 16384;
/** KR_EVENT_CONTEXT_ONLY: an excluded task's event, kept for its context (in syscall or block flags). */
export const EVENT_CONTEXT_ONLY = 0x8000_0000;
/** KR_EVENT_SAMPLE_IN_USER: a write of a thread with a context, to sample when that context holds nothing. */
export const EVENT_SAMPLE_IN_USER = 0x4000_0000;
/** The record types of struct kr_syscall events (all events but block_io). */
export const SYSCALL_RECORD_TYPES = [
  RecordType.SysWrite,
  RecordType.SysRead,
  RecordType.SysFsync,
  RecordType.SysConnect,
] as const;
export type SyscallRecordType = (typeof SYSCALL_RECORD_TYPES)[number];

export function isSyscallRecord(type: number): type is SyscallRecordType {
  return type === RecordType.SysWrite || (type >= RecordType.SysRead && type <= RecordType.SysConnect);
}

/** The flag bits of kr_syscall.syscall. */
export const SYSCALL_FLAGS = EVENT_CONTEXT_ONLY | EVENT_SAMPLE_IN_USER;
export const CONTEXT_DATA_LEN = 1024;
export const TARGET_PATH_MAX = 1024;
export const TARGET_NAME_MAX = 256;
export const TARGET_DATA_LEN = TARGET_PATH_MAX + TARGET_NAME_MAX;
/** Events reuse a target id only while fewer ids than this were handed out after it. */
export const TARGET_ID_WINDOW = 1 << 18;

/** Offsets of the common head of every record. */
export const RecordHead = { type: 0, size: 4, bytes: 8 } as const;

/** struct kr_event */
export const EventLayout = {
  startNs: 8,
  durationNs: 16,
  cgroupId: 24,
  contextId: 32,
  pid: 40,
  tid: 44,
  comm: 48,
  bytes: 104,
} as const;

/** struct kr_syscall, inside kr_event's union: every event type but block_io */
export const SyscallLayout = {
  ret: 64,
  count: 72,
  fd: 80,
  syscall: 84,
  targetId: 88,
  responseNs: 96,
} as const;

/** KR_REQUEST_DATA_LEN: the first bytes of a request kept with the send that starts it */
export const REQUEST_DATA_LEN = 128;

/** struct kr_request_event: a sys_write's kr_event, then struct kr_request_bytes */
export const RequestLayout = {
  len: 104,
  data: 112,
  bytes: 240,
} as const;

/** KR_MAX_MMSG: the messages of a sendmmsg/recvmmsg whose bytes are counted */
export const MAX_MMSG = 64;

/** struct kr_block_io, inside kr_event's union */
export const BlockIoLayout = {
  sector: 64,
  bytes: 72,
  devMajor: 76,
  devMinor: 80,
  op: 84,
  status: 88,
  flags: 92,
} as const;

/** struct kr_context */
export const ContextLayout = {
  contextId: 8,
  parentId: 16,
  atNs: 24,
  pid: 32,
  tid: 36,
  kind: 40,
  len: 44,
  data: 48,
  bytes: 48 + CONTEXT_DATA_LEN,
} as const;

/** enum kr_context_kind: Http is a head written or sent, HttpRequest a request head read from a socket. */
export const ContextKind = { Marker: 1, Http: 2, HttpRequest: 3, Runtime: 4 } as const;

/** enum kr_unit_kind: what a runtime schedules on its threads. */
export const UnitKind = { Hook: 1, Goroutine: 2, Work: 3 } as const;
/** enum kr_unit_op */
export const UnitOp = { Enter: 1, Open: 2, Watch: 3, Handoff: 4, Close: 5, Adopt: 6, Mailbox: 7 } as const;
/**
 * struct kr_unit_signal: a runtime hook's write that switches its thread's unit; a head follows an
 * open. `fd`: KR_UNIT_SIGNAL_FD, the descriptor the hooks write it to, which no file can have.
 * `mailboxLength`, `mailbox`: where a WATCH or a KR_UNIT_MAILBOX written with a mailbox keeps the
 * length of the signal it holds and the signal, read at the thread's getpriority(PRIO_PROCESS, 0).
 */
export const UnitSignalLayout = {
  magic: 'KREPLAY-UNIT',
  op: 12,
  unit: 16,
  bytes: 24,
  fd: 0x7fffffff,
  mailboxLength: 24,
  mailbox: 32,
} as const;

/** struct kr_target: a head, then `len` bytes of data; `size` is rounded up to 8. */
export const TargetLayout = {
  targetId: 8,
  kind: 16,
  flags: 20,
  family: 24,
  protocol: 26,
  port: 28,
  len: 30,
  addr: 32,
  data: 48,
  maxBytes: 48 + TARGET_DATA_LEN,
} as const;

/** enum kr_target_flag */
export const TargetFlag = { Truncated: 1, Deleted: 2, AnonPipe: 4, Accepted: 8 } as const;

/** enum kr_counter: per-CPU counters kept by the kernel side. */
export const KernelCounter = {
  sysWriteEmitted: 0,
  sysWriteDropped: 1,
  blockIoEmitted: 2,
  blockIoDropped: 3,
  contextEmitted: 4,
  contextDropped: 5,
  threadEntryLost: 6,
  requestTableFull: 7,
  targetDropped: 8,
  targetEmitted: 9,
  sysWriteSampledOut: 10,
  sysReadEmitted: 11,
  sysReadDropped: 12,
  sysFsyncEmitted: 13,
  sysFsyncDropped: 14,
  sysConnectEmitted: 15,
  sysConnectDropped: 16,
  connectTableFull: 17,
  interleavedHead: 18,
  outlivedThread: 19,
  multiplexedCall: 20,
  unsureRead: 21,
  outlivedProcess: 22,
  outlivedGoroutine: 23,
  outlivedUnit: 24,
  restartedCall: 25,
  agentInterruptedCall: 26,
  uninheritedJvmThread: 27,
} as const;
export type KernelCounterName = keyof typeof KernelCounter;
export const KERNEL_COUNTER_NAMES = Object.keys(KernelCounter) as KernelCounterName[];
export const KERNEL_COUNTER_COUNT = KERNEL_COUNTER_NAMES.length;

/** Kernel counters by name from the addon's values in enum kr_counter order (0 for a missing one). */
export function kernelCounters(values: readonly number[]): Record<KernelCounterName, number> {
  const out = {} as Record<KernelCounterName, number>;
  for (const name of KERNEL_COUNTER_NAMES) out[name] = values[KernelCounter[name]] ?? 0;
  return out;
}

/**
 * The size the record at `at` must have, or -1 for a type kreplay does not
 * know: fixed per type (a sys_write's either with or without its request's
 * bytes), and for a target record, or a context record cut after its data,
 * its head and its data rounded up to 8 (the head's size when the head
 * itself is cut short).
 */
export function recordBytes(buf: Buffer, at: number): number {
  const type = buf.readUInt32LE(at + RecordHead.type);
  // a send that started a request carries its first bytes
  if (type === RecordType.SysWrite && buf.readUInt32LE(at + RecordHead.size) === RequestLayout.bytes)
    return RequestLayout.bytes;
  if (type === RecordType.BlockIo || isSyscallRecord(type)) return EventLayout.bytes;
  if (type === RecordType.Context) {
    // whole as the kernel reserved it, or as the capture session passes it on: cut after its valid
    // bytes, rounded up to 8 (native/capture/capture_session.cc)
    if (buf.readUInt32LE(at + RecordHead.size) === ContextLayout.bytes) return ContextLayout.bytes;
    if (buf.length - at < ContextLayout.data) return ContextLayout.data;
    return (
      (ContextLayout.data + Math.min(buf.readUInt32LE(at + ContextLayout.len), CONTEXT_DATA_LEN) + 7) & ~7
    );
  }
  if (type !== RecordType.Target) return -1;
  if (buf.length - at < TargetLayout.data) return TargetLayout.data;
  return (TargetLayout.data + Math.min(buf.readUInt16LE(at + TargetLayout.len), TARGET_DATA_LEN) + 7) & ~7;
}

/** Why a record cannot be trusted; None when it can. */
export const RecordProblem = { None: 0, TruncatedHead: 1, UnknownType: 2, PastEnd: 3, WrongSize: 4 } as const;
export type RecordProblemCode = (typeof RecordProblem)[keyof typeof RecordProblem];

/**
 * The one rule of every walker over a batch (the ingest decoder and the
 * tests' decoder): a whole head, a known type, within the batch, exactly
 * its size. A code, not an object, so the ingest path allocates nothing.
 */
export function recordProblem(buf: Buffer, at: number): RecordProblemCode {
  if (buf.length - at < RecordHead.bytes) return RecordProblem.TruncatedHead;
  const expected = recordBytes(buf, at);
  if (expected === -1) return RecordProblem.UnknownType;
  const size = buf.readUInt32LE(at + RecordHead.size);
  if (at + size > buf.length) return RecordProblem.PastEnd;
  return size === expected ? RecordProblem.None : RecordProblem.WrongSize;
}

/** Reads a u64 that is known to fit in 2^53 (counters, ids, sizes). */
export function readU53(buf: Buffer, offset: number): number {
  return buf.readUInt32LE(offset + 4) * 0x1_0000_0000 + buf.readUInt32LE(offset);
}

/**
 * readU53 and readI53 through a DataView over the batch: the decoder's hot
 * path reads every field this way, which V8 compiles to plain loads where
 * Buffer's read methods check their arguments on every call.
 */
export function viewU53(view: DataView, offset: number): number {
  return view.getUint32(offset + 4, true) * 0x1_0000_0000 + view.getUint32(offset, true);
}

export function viewI53(view: DataView, offset: number): number {
  return view.getInt32(offset + 4, true) * 0x1_0000_0000 + view.getUint32(offset, true);
}

/** Reads a NUL-terminated fixed-size C string. */
export function readCString(buf: Buffer, offset: number, length: number): string {
  const end = buf.indexOf(0, offset);
  return buf.toString('latin1', offset, end === -1 || end > offset + length ? offset + length : end);
}

/** Reads an s64 that is known to fit in ±2^53 (return values). */
export function readI53(buf: Buffer, offset: number): number {
  return buf.readInt32LE(offset + 4) * 0x1_0000_0000 + buf.readUInt32LE(offset);
}
