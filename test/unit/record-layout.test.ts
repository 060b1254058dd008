/**
 * bpf/capture.h and core/model/record-layout.ts describe the same bytes:
 * compile the header with gcc, print every offset, size and constant, and
 * compare them with the TypeScript mirror.
 */
import { execFileSync } from 'node:child_process';
import { writeFileSync } from 'node:fs';
import { join, resolve } from 'node:path';
import {
  BlockIoLayout,
  COMM_LEN,
  CONTEXT_DATA_LEN,
  ContextKind,
  UnitKind,
  UnitOp,
  UnitSignalLayout,
  ContextLayout,
  EventLayout,
  KERNEL_COUNTER_COUNT,
  KernelCounter,
  MAX_FILTER_PIDS,
  MAX_FILTER_COMMS,
  MAX_FILTER_CGROUPS,
  MAX_MMSG,
  EVENT_CONTEXT_ONLY,
  EVENT_SAMPLE_IN_USER,
  RecordHead,
  RecordType,
  SYSCALL_NAMES,
  SyscallLayout,
  RequestLayout,
  REQUEST_DATA_LEN,
  TARGET_DATA_LEN,
  TARGET_ID_WINDOW,
  TARGET_KINDS,
  TARGET_NAME_MAX,
  TARGET_PATH_MAX,
  TargetFlag,
  TargetLayout,
} from '../../core/model';
import { decodeRecords } from '../support/decode-records';
import { useTempDir } from '../support/temp-dir';

const dir = useTempDir();

/** C expression -> the value the TypeScript side expects. */
const EXPECTED: Record<string, number> = {
  KR_COMM_LEN: COMM_LEN,
  KR_MAX_FILTER_PIDS: MAX_FILTER_PIDS,
  KR_MAX_FILTER_COMMS: MAX_FILTER_COMMS,
  KR_MAX_FILTER_CGROUPS: MAX_FILTER_CGROUPS,
  KR_EVENT_CONTEXT_ONLY: EVENT_CONTEXT_ONLY,
  KR_EVENT_SAMPLE_IN_USER: EVENT_SAMPLE_IN_USER,
  KR_CTX_DATA_LEN: CONTEXT_DATA_LEN,
  KR_RECORD_SYS_WRITE: RecordType.SysWrite,
  KR_RECORD_BLOCK_IO: RecordType.BlockIo,
  KR_RECORD_CONTEXT: RecordType.Context,
  KR_RECORD_TARGET: RecordType.Target,
  KR_RECORD_SYS_READ: RecordType.SysRead,
  KR_RECORD_SYS_FSYNC: RecordType.SysFsync,
  KR_RECORD_SYS_CONNECT: RecordType.SysConnect,
  KR_MAX_MMSG: MAX_MMSG,
  KR_TARGET_PATH_MAX: TARGET_PATH_MAX,
  KR_TARGET_NAME_MAX: TARGET_NAME_MAX,
  KR_TARGET_DATA_LEN: TARGET_DATA_LEN,
  KR_TARGET_ID_WINDOW: TARGET_ID_WINDOW,
  KR_TARGET_FILE: TARGET_KINDS.indexOf('file') + 1,
  KR_TARGET_SOCKET: TARGET_KINDS.indexOf('socket') + 1,
  KR_TARGET_PIPE: TARGET_KINDS.indexOf('pipe') + 1,
  KR_TARGET_CHAR: TARGET_KINDS.indexOf('char') + 1,
  KR_TARGET_ANON: TARGET_KINDS.indexOf('anon') + 1,
  KR_TARGET_OTHER: TARGET_KINDS.indexOf('other') + 1,
  KR_TARGET_TRUNCATED: TargetFlag.Truncated,
  KR_TARGET_DELETED: TargetFlag.Deleted,
  KR_TARGET_ANON_PIPE: TargetFlag.AnonPipe,
  KR_TARGET_ACCEPTED: TargetFlag.Accepted,
  KR_CONTEXT_MARKER: ContextKind.Marker,
  KR_CONTEXT_HTTP: ContextKind.Http,
  KR_CONTEXT_HTTP_REQUEST: ContextKind.HttpRequest,
  KR_CONTEXT_RUNTIME: ContextKind.Runtime,
  KR_UNIT_HOOK: UnitKind.Hook,
  KR_UNIT_GOROUTINE: UnitKind.Goroutine,
  KR_UNIT_WORK: UnitKind.Work,
  KR_UNIT_ENTER: UnitOp.Enter,
  KR_UNIT_OPEN: UnitOp.Open,
  KR_UNIT_HANDOFF: UnitOp.Handoff,
  KR_UNIT_CLOSE: UnitOp.Close,
  KR_UNIT_ADOPT: UnitOp.Adopt,
  KR_UNIT_MAILBOX: UnitOp.Mailbox,
  KR_UNIT_WATCH: UnitOp.Watch,
  KR_SYS_WRITE: SYSCALL_NAMES.indexOf('write'),
  KR_SYS_WRITEV: SYSCALL_NAMES.indexOf('writev'),
  KR_SYS_PWRITE64: SYSCALL_NAMES.indexOf('pwrite64'),
  KR_SYS_PWRITEV: SYSCALL_NAMES.indexOf('pwritev'),
  KR_SYS_PWRITEV2: SYSCALL_NAMES.indexOf('pwritev2'),
  KR_SYS_SENDTO: SYSCALL_NAMES.indexOf('sendto'),
  KR_SYS_SENDMSG: SYSCALL_NAMES.indexOf('sendmsg'),
  KR_SYS_SENDMMSG: SYSCALL_NAMES.indexOf('sendmmsg'),
  KR_SYS_SENDFILE: SYSCALL_NAMES.indexOf('sendfile'),
  KR_SYS_READ: SYSCALL_NAMES.indexOf('read'),
  KR_SYS_READV: SYSCALL_NAMES.indexOf('readv'),
  KR_SYS_PREAD64: SYSCALL_NAMES.indexOf('pread64'),
  KR_SYS_PREADV: SYSCALL_NAMES.indexOf('preadv'),
  KR_SYS_PREADV2: SYSCALL_NAMES.indexOf('preadv2'),
  KR_SYS_RECVFROM: SYSCALL_NAMES.indexOf('recvfrom'),
  KR_SYS_RECVMSG: SYSCALL_NAMES.indexOf('recvmsg'),
  KR_SYS_RECVMMSG: SYSCALL_NAMES.indexOf('recvmmsg'),
  KR_SYS_FSYNC: SYSCALL_NAMES.indexOf('fsync'),
  KR_SYS_FDATASYNC: SYSCALL_NAMES.indexOf('fdatasync'),
  KR_SYS_SYNC_FILE_RANGE: SYSCALL_NAMES.indexOf('sync_file_range'),
  KR_SYS_SYNCFS: SYSCALL_NAMES.indexOf('syncfs'),
  KR_SYS_CONNECT: SYSCALL_NAMES.indexOf('connect'),
  KR_COUNTER_SYS_WRITE_EMITTED: KernelCounter.sysWriteEmitted,
  KR_COUNTER_SYS_WRITE_DROPPED: KernelCounter.sysWriteDropped,
  KR_COUNTER_BLOCK_IO_EMITTED: KernelCounter.blockIoEmitted,
  KR_COUNTER_BLOCK_IO_DROPPED: KernelCounter.blockIoDropped,
  KR_COUNTER_CONTEXT_EMITTED: KernelCounter.contextEmitted,
  KR_COUNTER_CONTEXT_DROPPED: KernelCounter.contextDropped,
  KR_COUNTER_THREAD_ENTRY_LOST: KernelCounter.threadEntryLost,
  KR_COUNTER_REQUEST_TABLE_FULL: KernelCounter.requestTableFull,
  KR_COUNTER_TARGET_DROPPED: KernelCounter.targetDropped,
  KR_COUNTER_TARGET_EMITTED: KernelCounter.targetEmitted,
  KR_COUNTER_SYS_WRITE_SAMPLED_OUT: KernelCounter.sysWriteSampledOut,
  KR_COUNTER_SYS_READ_EMITTED: KernelCounter.sysReadEmitted,
  KR_COUNTER_SYS_READ_DROPPED: KernelCounter.sysReadDropped,
  KR_COUNTER_SYS_FSYNC_EMITTED: KernelCounter.sysFsyncEmitted,
  KR_COUNTER_SYS_FSYNC_DROPPED: KernelCounter.sysFsyncDropped,
  KR_COUNTER_SYS_CONNECT_EMITTED: KernelCounter.sysConnectEmitted,
  KR_COUNTER_SYS_CONNECT_DROPPED: KernelCounter.sysConnectDropped,
  KR_COUNTER_CONNECT_TABLE_FULL: KernelCounter.connectTableFull,
  KR_COUNTER_INTERLEAVED_HEAD: KernelCounter.interleavedHead,
  KR_COUNTER_OUTLIVED_THREAD: KernelCounter.outlivedThread,
  KR_COUNTER_MULTIPLEXED_CALL: KernelCounter.multiplexedCall,
  KR_COUNTER_UNSURE_READ: KernelCounter.unsureRead,
  KR_COUNTER_OUTLIVED_PROCESS: KernelCounter.outlivedProcess,
  KR_COUNTER_OUTLIVED_GOROUTINE: KernelCounter.outlivedGoroutine,
  KR_COUNTER_OUTLIVED_UNIT: KernelCounter.outlivedUnit,
  KR_COUNTER_RESTARTED_CALL: KernelCounter.restartedCall,
  KR_COUNTER_AGENT_INTERRUPTED_CALL: KernelCounter.agentInterruptedCall,
  KR_COUNTER_UNINHERITED_JVM_THREAD: KernelCounter.uninheritedJvmThread,
  KR_COUNTER_MAX: KERNEL_COUNTER_COUNT,

  'offsetof(struct kr_event, type)': RecordHead.type,
  'offsetof(struct kr_event, size)': RecordHead.size,
  'offsetof(struct kr_event, start_ns)': EventLayout.startNs,
  'offsetof(struct kr_event, duration_ns)': EventLayout.durationNs,
  'offsetof(struct kr_event, cgroup_id)': EventLayout.cgroupId,
  'offsetof(struct kr_event, context_id)': EventLayout.contextId,
  'offsetof(struct kr_event, pid)': EventLayout.pid,
  'offsetof(struct kr_event, tid)': EventLayout.tid,
  'offsetof(struct kr_event, comm)': EventLayout.comm,
  'sizeof(((struct kr_event *)0)->comm)': COMM_LEN,
  'sizeof(struct kr_event)': EventLayout.bytes,
  'offsetof(struct kr_unit_signal, op)': UnitSignalLayout.op,
  'offsetof(struct kr_unit_signal, unit)': UnitSignalLayout.unit,
  'sizeof(struct kr_unit_signal)': UnitSignalLayout.bytes,
  'sizeof(((struct kr_unit_signal *)0)->magic)': UnitSignalLayout.magic.length,
  'sizeof(KR_UNIT_MAGIC) - 1': UnitSignalLayout.magic.length,
  KR_UNIT_SIGNAL_FD: UnitSignalLayout.fd,
  KR_UNIT_MAILBOX_LEN_AT: UnitSignalLayout.mailboxLength,
  KR_UNIT_MAILBOX_AT: UnitSignalLayout.mailbox,

  'offsetof(struct kr_event, call.ret)': SyscallLayout.ret,
  'offsetof(struct kr_event, call.count)': SyscallLayout.count,
  'offsetof(struct kr_event, call.fd)': SyscallLayout.fd,
  'offsetof(struct kr_event, call.syscall)': SyscallLayout.syscall,
  'offsetof(struct kr_event, call.target_id)': SyscallLayout.targetId,
  'offsetof(struct kr_event, call.response_ns)': SyscallLayout.responseNs,

  'offsetof(struct kr_request_event, request.len)': RequestLayout.len,
  'offsetof(struct kr_request_event, request.data)': RequestLayout.data,
  'sizeof(((struct kr_request_event *)0)->request.data)': REQUEST_DATA_LEN,
  'sizeof(struct kr_request_event)': RequestLayout.bytes,

  'offsetof(struct kr_event, block.sector)': BlockIoLayout.sector,
  'offsetof(struct kr_event, block.bytes)': BlockIoLayout.bytes,
  'offsetof(struct kr_event, block.dev_major)': BlockIoLayout.devMajor,
  'offsetof(struct kr_event, block.dev_minor)': BlockIoLayout.devMinor,
  'offsetof(struct kr_event, block.op)': BlockIoLayout.op,
  'offsetof(struct kr_event, block.status)': BlockIoLayout.status,
  'offsetof(struct kr_event, block.flags)': BlockIoLayout.flags,

  'offsetof(struct kr_context, type)': RecordHead.type,
  'offsetof(struct kr_context, size)': RecordHead.size,
  'offsetof(struct kr_context, context_id)': ContextLayout.contextId,
  'offsetof(struct kr_context, parent_id)': ContextLayout.parentId,
  'offsetof(struct kr_context, at_ns)': ContextLayout.atNs,
  'offsetof(struct kr_context, pid)': ContextLayout.pid,
  'offsetof(struct kr_context, tid)': ContextLayout.tid,
  'offsetof(struct kr_context, kind)': ContextLayout.kind,
  'offsetof(struct kr_context, len)': ContextLayout.len,
  'offsetof(struct kr_context, data)': ContextLayout.data,
  'sizeof(((struct kr_context *)0)->data)': CONTEXT_DATA_LEN,
  'sizeof(struct kr_context)': ContextLayout.bytes,

  'offsetof(struct kr_target, type)': RecordHead.type,
  'offsetof(struct kr_target, size)': RecordHead.size,
  'offsetof(struct kr_target, target_id)': TargetLayout.targetId,
  'offsetof(struct kr_target, kind)': TargetLayout.kind,
  'offsetof(struct kr_target, flags)': TargetLayout.flags,
  'offsetof(struct kr_target, family)': TargetLayout.family,
  'offsetof(struct kr_target, protocol)': TargetLayout.protocol,
  'offsetof(struct kr_target, port)': TargetLayout.port,
  'offsetof(struct kr_target, len)': TargetLayout.len,
  'offsetof(struct kr_target, addr)': TargetLayout.addr,
  'sizeof(((struct kr_target *)0)->addr)': TargetLayout.data - TargetLayout.addr,
  'offsetof(struct kr_target, data)': TargetLayout.data,
  'sizeof(struct kr_target)': TargetLayout.maxBytes,
};

/** The C side's value of every key of EXPECTED. */
function compileAndRun(): Record<string, number> {
  const lines = Object.keys(EXPECTED).map(
    (expr) => `  printf("%s\\t%ld\\n", ${JSON.stringify(expr)}, (long)(${expr}));`,
  );
  const source = [
    '#include <stddef.h>',
    '#include <stdio.h>',
    '#include <linux/types.h>',
    '#include "capture.h"',
    'int main(void) {',
    ...lines,
    '  return 0;',
    '}',
  ].join('\n');
  writeFileSync(join(dir.path, 'layout.c'), source);
  const exe = join(dir.path, 'layout');
  const include = resolve(__dirname, '../../bpf');
  execFileSync('gcc', ['-Wall', '-Werror', '-I', include, '-o', exe, join(dir.path, 'layout.c')]);
  const actual: Record<string, number> = {};
  for (const line of execFileSync(exe, { encoding: 'utf8' }).trim().split('\n')) {
    const [expr, value] = line.split('\t');
    actual[expr as string] = Number(value);
  }
  return actual;
}

describe('record layout', () => {
  it('matches bpf/capture.h field for field', () => {
    expect(compileAndRun()).toEqual(EXPECTED);
  });

  it('keeps every record a multiple of 8 bytes, as the ring buffer aligns them', () => {
    expect(EventLayout.bytes % 8).toBe(0);
    expect(ContextLayout.bytes % 8).toBe(0);
  });
});

function sysWriteRecord(): Buffer {
  const buf = Buffer.alloc(EventLayout.bytes);
  buf.writeUInt32LE(RecordType.SysWrite, RecordHead.type);
  buf.writeUInt32LE(EventLayout.bytes, RecordHead.size);
  buf.writeBigUInt64LE(1_234_567_890_123n, EventLayout.startNs);
  buf.writeBigUInt64LE(4_321n, EventLayout.durationNs);
  buf.writeBigUInt64LE(2n ** 63n + 5n, EventLayout.cgroupId);
  buf.writeBigUInt64LE(7n, EventLayout.contextId);
  buf.writeUInt32LE(100, EventLayout.pid);
  buf.writeUInt32LE(101, EventLayout.tid);
  buf.write('postgres', EventLayout.comm, 'latin1');
  buf.writeBigInt64LE(-9n, SyscallLayout.ret);
  buf.writeBigUInt64LE(64n, SyscallLayout.count);
  buf.writeInt32LE(3, SyscallLayout.fd);
  buf.writeUInt32LE(2, SyscallLayout.syscall);
  buf.writeBigUInt64LE(12n, SyscallLayout.targetId);
  buf.writeBigUInt64LE(1_500_000_123n, SyscallLayout.responseNs);
  return buf;
}

function contextRecord(data: string): Buffer {
  const buf = Buffer.alloc(ContextLayout.bytes);
  buf.writeUInt32LE(RecordType.Context, RecordHead.type);
  buf.writeUInt32LE(ContextLayout.bytes, RecordHead.size);
  buf.writeBigUInt64LE(8n, ContextLayout.contextId);
  buf.writeBigUInt64LE(7n, ContextLayout.parentId);
  buf.writeUInt32LE(ContextKind.Marker, ContextLayout.kind);
  buf.writeUInt32LE(data.length, ContextLayout.len);
  buf.write(data, ContextLayout.data, 'latin1');
  return buf;
}

describe('decodeRecords', () => {
  it('reads every field at the layout offsets, record after record', () => {
    const records = decodeRecords(Buffer.concat([sysWriteRecord(), contextRecord('KREPLAY-CTX txn=a')]));
    expect(records).toEqual([
      {
        type: 'sys_write',
        offset: 0,
        startNs: 1_234_567_890_123n,
        durationNs: 4_321n,
        cgroupId: 2n ** 63n + 5n,
        contextId: 7,
        pid: 100,
        tid: 101,
        comm: 'postgres',
        ret: -9,
        count: 64,
        fd: 3,
        syscall: 2,
        targetId: 12,
        responseNs: 1_500_000_123n,
        request: null,
      },
      expect.objectContaining({ type: 'context', offset: EventLayout.bytes, contextId: 8, parentId: 7 }),
    ]);
    expect(records[1]).toMatchObject({ data: Buffer.from('KREPLAY-CTX txn=a') });
  });

  it.each<[string, (buf: Buffer) => Buffer, RegExp]>([
    [
      'a size below the head',
      (b) => (b.writeUInt32LE(4, RecordHead.size), b),
      new RegExp(`offset ${EventLayout.bytes} has size 4`),
    ],
    [
      'a size past the batch',
      (b) => (b.writeUInt32LE(4096, RecordHead.size), b),
      new RegExp(`offset ${EventLayout.bytes} of 4096 bytes runs past`),
    ],
    [
      'an unknown type',
      (b) => (b.writeUInt32LE(99, RecordHead.type), b),
      new RegExp(`offset ${EventLayout.bytes} has unknown type 99`),
    ],
    [
      'a size too small for the type',
      (b) => (b.writeUInt32LE(16, RecordHead.size), b),
      new RegExp(`offset ${EventLayout.bytes} .* needs ${EventLayout.bytes}`),
    ],
    [
      'a truncated head',
      (b) => b.subarray(0, 5),
      new RegExp(`truncated record head at offset ${EventLayout.bytes}`),
    ],
    [
      'a context longer than its data',
      () => contextRecord('x').fill(0xff, ContextLayout.len, ContextLayout.len + 4),
      new RegExp(`offset ${EventLayout.bytes} claims`),
    ],
  ])('throws a RangeError naming the offset for %s', (_, corrupt, message) => {
    const batch = Buffer.concat([sysWriteRecord(), corrupt(sysWriteRecord())]);
    expect(() => decodeRecords(batch)).toThrow(RangeError);
    expect(() => decodeRecords(batch)).toThrow(message);
  });
});
