/** Packs kernel records the way capture.bpf.c writes them: the layout's inverse, for the ingest benchmark and the decoder tests. */
import {
  BlockIoLayout,
  ContextLayout,
  EventLayout,
  RecordHead,
  RecordType,
  REQUEST_DATA_LEN,
  RequestLayout,
  SyscallLayout,
  TargetLayout,
} from './record-layout';

export interface EventRecordFields {
  startNs: bigint;
  durationNs: number;
  cgroupId?: number;
  contextId?: number;
  pid: number;
  tid: number;
  comm: string;
}

function writeHead(buf: Buffer, off: number, type: number, size: number): void {
  buf.writeUInt32LE(type, off + RecordHead.type);
  buf.writeUInt32LE(size, off + RecordHead.size);
}

function writeEvent(buf: Buffer, off: number, type: number, f: EventRecordFields): void {
  writeHead(buf, off, type, EventLayout.bytes);
  buf.writeBigUInt64LE(f.startNs, off + EventLayout.startNs);
  buf.writeBigUInt64LE(BigInt(f.durationNs), off + EventLayout.durationNs);
  buf.writeBigUInt64LE(BigInt(f.cgroupId ?? 1), off + EventLayout.cgroupId);
  buf.writeBigUInt64LE(BigInt(f.contextId ?? 0), off + EventLayout.contextId);
  buf.writeUInt32LE(f.pid, off + EventLayout.pid);
  buf.writeUInt32LE(f.tid, off + EventLayout.tid);
  buf.fill(0, off + EventLayout.comm, off + EventLayout.comm + 16);
  buf.write(f.comm.slice(0, 15), off + EventLayout.comm, 'latin1');
}

/** A sys_write; with `request`, one that started a request, carrying its first bytes. */
export function sysWriteRecord(
  f: EventRecordFields & {
    fd: number;
    count: number;
    ret: number;
    syscall: number;
    targetId?: number;
    request?: Buffer;
  },
): Buffer {
  const buf = Buffer.alloc(f.request ? RequestLayout.bytes : EventLayout.bytes);
  writeEvent(buf, 0, RecordType.SysWrite, f);
  if (f.request) {
    buf.writeUInt32LE(RequestLayout.bytes, RecordHead.size);
    buf.writeUInt32LE(Math.min(f.request.length, REQUEST_DATA_LEN), RequestLayout.len);
    f.request.copy(buf, RequestLayout.data, 0, REQUEST_DATA_LEN);
  }
  buf.writeBigInt64LE(BigInt(f.ret), SyscallLayout.ret);
  buf.writeBigUInt64LE(BigInt(f.count), SyscallLayout.count);
  buf.writeInt32LE(f.fd, SyscallLayout.fd);
  buf.writeUInt32LE(f.syscall, SyscallLayout.syscall);
  buf.writeBigUInt64LE(BigInt(f.targetId ?? 0), SyscallLayout.targetId);
  return buf;
}

export function blockIoRecord(
  f: EventRecordFields & {
    sector: number;
    bytes: number;
    major: number;
    minor: number;
    op: number;
    status: number;
  },
): Buffer {
  const buf = Buffer.alloc(EventLayout.bytes);
  writeEvent(buf, 0, RecordType.BlockIo, f);
  buf.writeBigUInt64LE(BigInt(f.sector), BlockIoLayout.sector);
  buf.writeUInt32LE(f.bytes, BlockIoLayout.bytes);
  buf.writeUInt32LE(f.major, BlockIoLayout.devMajor);
  buf.writeUInt32LE(f.minor, BlockIoLayout.devMinor);
  buf.writeUInt32LE(f.op, BlockIoLayout.op);
  buf.writeInt32LE(f.status, BlockIoLayout.status);
  return buf;
}

export function contextRecord(f: {
  contextId: number;
  parentId: number;
  kind: number;
  data: string;
  tid?: number;
}): Buffer {
  const buf = Buffer.alloc(ContextLayout.bytes);
  writeHead(buf, 0, RecordType.Context, ContextLayout.bytes);
  buf.writeBigUInt64LE(BigInt(f.contextId), ContextLayout.contextId);
  buf.writeBigUInt64LE(BigInt(f.parentId), ContextLayout.parentId);
  buf.writeUInt32LE(f.tid ?? 1, ContextLayout.pid);
  buf.writeUInt32LE(f.tid ?? 1, ContextLayout.tid);
  buf.writeUInt32LE(f.kind, ContextLayout.kind);
  const len = buf.write(f.data, ContextLayout.data, 'latin1');
  buf.writeUInt32LE(len, ContextLayout.len);
  return buf;
}

/** A file target record: `path` split into names, leaf first, as the kernel walks them. */
export function fileTargetRecord(f: { targetId: number; kind: number; path: string }): Buffer {
  const data = Buffer.from(
    f.path
      .split('/')
      .filter(Boolean)
      .reverse()
      .map((name) => `${name}\0`)
      .join(''),
  );
  const size = (TargetLayout.data + data.length + 7) & ~7;
  const buf = Buffer.alloc(size);
  writeHead(buf, 0, RecordType.Target, size);
  buf.writeBigUInt64LE(BigInt(f.targetId), TargetLayout.targetId);
  buf.writeUInt32LE(f.kind, TargetLayout.kind);
  buf.writeUInt16LE(data.length, TargetLayout.len);
  data.copy(buf, TargetLayout.data);
  return buf;
}
