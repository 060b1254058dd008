/**
 * Byte layout of the records the kernel side writes into the ring buffer.
 * Mirrors bpf/capture.h field for field; test/unit/record-layout.test.ts
 * compiles that header and fails when an offset here drifts.
 */
export const RecordType = { SysWrite: 1, BlockIo: 2, Context: 3 } as const;
export type RecordTypeValue = (typeof RecordType)[keyof typeof RecordType];

export const COMM_LEN = 16;
export const MAX_FILTER_PIDS = 16;
export const CONTEXT_DATA_LEN = 1024;

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
  bytes: 96,
} as const;

/** struct kr_sys_write, inside kr_event's union */
export const SysWriteLayout = { ret: 64, count: 72, fd: 80, syscall: 84 } as const;

/** struct kr_block_io, inside kr_event's union */
export const BlockIoLayout = {
  sector: 64,
  bytes: 72,
  devMajor: 76,
  devMinor: 80,
  op: 84,
  status: 88,
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

export const ContextKind = { Marker: 1, Http: 2 } as const;

/** enum kr_counter: per-CPU counters kept by the kernel side. */
export const KernelCounter = {
  sysWriteEmitted: 0,
  sysWriteDropped: 1,
  blockIoEmitted: 2,
  blockIoDropped: 3,
  contextEmitted: 4,
  contextDropped: 5,
  threadTableFull: 6,
  requestTableFull: 7,
} as const;
export type KernelCounterName = keyof typeof KernelCounter;
export const KERNEL_COUNTER_NAMES = Object.keys(KernelCounter) as KernelCounterName[];
export const KERNEL_COUNTER_COUNT = KERNEL_COUNTER_NAMES.length;

/** Kernel counters by name from the addon's values in enum kr_counter order. */
export function kernelCounters(values: readonly number[]): Record<KernelCounterName, number> {
  const out = {} as Record<KernelCounterName, number>;
  for (const name of KERNEL_COUNTER_NAMES) out[name] = values[KernelCounter[name]] ?? 0;
  return out;
}

export function zeroKernelCounters(): Record<KernelCounterName, number> {
  return kernelCounters([]);
}

/** The size a record of `type` has, or -1 for a type kreplay does not know. */
export function recordBytes(type: number): number {
  if (type === RecordType.Context) return ContextLayout.bytes;
  return type === RecordType.SysWrite || type === RecordType.BlockIo ? EventLayout.bytes : -1;
}

/** Why a record cannot be trusted; None when it can. */
export const RecordProblem = { None: 0, TruncatedHead: 1, UnknownType: 2, PastEnd: 3, WrongSize: 4 } as const;
export type RecordProblemCode = (typeof RecordProblem)[keyof typeof RecordProblem];

/**
 * The one rule of every walker over a batch: a whole head, a known type,
 * within the batch, exactly its type's size. Returns a code, not an object,
 * so the ingest path allocates nothing per record.
 */
export function recordProblem(buf: Buffer, at: number): RecordProblemCode {
  if (buf.length - at < RecordHead.bytes) return RecordProblem.TruncatedHead;
  const expected = recordBytes(buf.readUInt32LE(at + RecordHead.type));
  if (expected === -1) return RecordProblem.UnknownType;
  const size = buf.readUInt32LE(at + RecordHead.size);
  if (at + size > buf.length) return RecordProblem.PastEnd;
  return size === expected ? RecordProblem.None : RecordProblem.WrongSize;
}

/** Reads a u64 that is known to fit in 2^53 (counters, ids, sizes). */
export function readU53(buf: Buffer, offset: number): number {
  return buf.readUInt32LE(offset + 4) * 0x1_0000_0000 + buf.readUInt32LE(offset);
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
