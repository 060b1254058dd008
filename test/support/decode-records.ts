/**
 * Records of a capture batch as plain objects, for tests: the store's
 * decoder in agent/ingest allocates nothing per event.
 * It walks a batch by the decoder's rule (recordProblem); corrupt input
 * throws a RangeError naming the offset.
 */
import {
  BlockIoLayout,
  COMM_LEN,
  ContextLayout,
  EventLayout,
  RecordHead,
  RequestLayout,
  RecordType,
  SyscallLayout,
  TargetLayout,
  readCString,
  readI53,
  readTargetRecord,
  readU53,
  recordBytes,
  recordProblem,
  RecordProblem,
  eventTypeName,
  isSyscallRecord,
  type SyscallEventType,
} from '../../core/model';

interface EventCommon {
  offset: number;
  /** CLOCK_BOOTTIME */
  startNs: bigint;
  durationNs: bigint;
  cgroupId: bigint;
  contextId: number;
  pid: number;
  tid: number;
  comm: string;
}

/** sys_write, sys_read, sys_fsync and sys_connect: one layout (struct kr_syscall). */
export interface DecodedSyscall extends EventCommon {
  type: SyscallEventType;
  ret: number;
  count: number;
  fd: number;
  /** the code and its flag bits, as the kernel wrote them */
  syscall: number;
  /** 0: unknown */
  targetId: number;
  /** 0: none */
  responseNs: bigint;
  /** a send that started a request: the first bytes it carried; null for other calls */
  request: Buffer | null;
}

export type DecodedSysWrite = DecodedSyscall & { type: 'sys_write' };

export interface DecodedBlockIo extends EventCommon {
  type: 'block_io';
  sector: number;
  bytes: number;
  devMajor: number;
  devMinor: number;
  op: number;
  status: number;
}

export interface DecodedContext {
  type: 'context';
  offset: number;
  contextId: number;
  parentId: number;
  /** CLOCK_BOOTTIME */
  atNs: bigint;
  pid: number;
  tid: number;
  kind: number;
  data: Buffer;
}

export interface DecodedTarget {
  type: 'target';
  offset: number;
  targetId: number;
  kind: number;
  flags: number;
  family: number;
  protocol: number;
  port: number;
  addr: Buffer;
  data: Buffer;
}

export type DecodedRecord = DecodedSyscall | DecodedBlockIo | DecodedContext | DecodedTarget;

function eventCommon(buf: Buffer, at: number): EventCommon {
  return {
    offset: at,
    startNs: buf.readBigUInt64LE(at + EventLayout.startNs),
    durationNs: buf.readBigUInt64LE(at + EventLayout.durationNs),
    cgroupId: buf.readBigUInt64LE(at + EventLayout.cgroupId),
    contextId: readU53(buf, at + EventLayout.contextId),
    pid: buf.readUInt32LE(at + EventLayout.pid),
    tid: buf.readUInt32LE(at + EventLayout.tid),
    comm: readCString(buf, at + EventLayout.comm, COMM_LEN),
  };
}

function decodeOne(buf: Buffer, at: number, type: number): DecodedRecord {
  if (isSyscallRecord(type)) {
    return {
      ...eventCommon(buf, at),
      type: eventTypeName(type) as SyscallEventType,
      ret: readI53(buf, at + SyscallLayout.ret),
      count: readU53(buf, at + SyscallLayout.count),
      fd: buf.readInt32LE(at + SyscallLayout.fd),
      syscall: buf.readUInt32LE(at + SyscallLayout.syscall),
      targetId: readU53(buf, at + SyscallLayout.targetId),
      responseNs: buf.readBigUInt64LE(at + SyscallLayout.responseNs),
      request:
        buf.readUInt32LE(at + RecordHead.size) === RequestLayout.bytes
          ? Buffer.from(
              buf.subarray(
                at + RequestLayout.data,
                at + RequestLayout.data + buf.readUInt32LE(at + RequestLayout.len),
              ),
            )
          : null,
    };
  }
  if (type === RecordType.BlockIo) {
    return {
      ...eventCommon(buf, at),
      type: 'block_io',
      sector: readU53(buf, at + BlockIoLayout.sector),
      bytes: buf.readUInt32LE(at + BlockIoLayout.bytes),
      devMajor: buf.readUInt32LE(at + BlockIoLayout.devMajor),
      devMinor: buf.readUInt32LE(at + BlockIoLayout.devMinor),
      op: buf.readUInt32LE(at + BlockIoLayout.op),
      status: buf.readInt32LE(at + BlockIoLayout.status),
    };
  }
  if (type === RecordType.Target) return decodeTarget(buf, at);
  const len = buf.readUInt32LE(at + ContextLayout.len);
  if (len > ContextLayout.bytes - ContextLayout.data) {
    throw new RangeError(`context record at offset ${at} claims ${len} data bytes`);
  }
  return {
    type: 'context',
    offset: at,
    contextId: readU53(buf, at + ContextLayout.contextId),
    parentId: readU53(buf, at + ContextLayout.parentId),
    atNs: buf.readBigUInt64LE(at + ContextLayout.atNs),
    pid: buf.readUInt32LE(at + ContextLayout.pid),
    tid: buf.readUInt32LE(at + ContextLayout.tid),
    kind: buf.readUInt32LE(at + ContextLayout.kind),
    data: Buffer.from(buf.subarray(at + ContextLayout.data, at + ContextLayout.data + len)),
  };
}

function decodeTarget(buf: Buffer, at: number): DecodedTarget {
  const len = buf.readUInt16LE(at + TargetLayout.len);
  if (TargetLayout.data + len > buf.readUInt32LE(at + RecordHead.size)) {
    throw new RangeError(`target record at offset ${at} claims ${len} data bytes`);
  }
  const record = readTargetRecord(buf, at);
  return {
    ...record,
    type: 'target',
    offset: at,
    addr: Buffer.from(record.addr),
    data: Buffer.from(record.data),
  };
}

export function decodeRecords(batch: Buffer): DecodedRecord[] {
  const out: DecodedRecord[] = [];
  for (let at = 0; at < batch.length;) {
    const problem = recordProblem(batch, at);
    if (problem === RecordProblem.TruncatedHead) {
      throw new RangeError(`truncated record head at offset ${at} (batch of ${batch.length} bytes)`);
    }
    const type = batch.readUInt32LE(at + RecordHead.type);
    const size = batch.readUInt32LE(at + RecordHead.size);
    if (problem === RecordProblem.UnknownType)
      throw new RangeError(`record at offset ${at} has unknown type ${type}`);
    if (problem === RecordProblem.PastEnd) {
      throw new RangeError(
        `record at offset ${at} of ${size} bytes runs past the batch (${batch.length} bytes)`,
      );
    }
    if (problem === RecordProblem.WrongSize) {
      throw new RangeError(
        `record at offset ${at} has size ${size}, needs ${recordBytes(batch, at)} for type ${type}`,
      );
    }
    out.push(decodeOne(batch, at, type));
    at += size;
  }
  return out;
}
