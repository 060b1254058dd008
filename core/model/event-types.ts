/** Names the API and the store give to the kernel's numeric codes. */
import { RecordType } from './record-layout';

/** Every event_type, in record type order. All but block_io are syscall types with the same fields. */
export const EVENT_TYPES = ['sys_write', 'block_io', 'sys_read', 'sys_fsync', 'sys_connect'] as const;
export type EventType = (typeof EVENT_TYPES)[number];
export type SyscallEventType = Exclude<EventType, 'block_io'>;

export const EVENT_TYPE_CODE: Record<EventType, number> = {
  sys_write: RecordType.SysWrite,
  block_io: RecordType.BlockIo,
  sys_read: RecordType.SysRead,
  sys_fsync: RecordType.SysFsync,
  sys_connect: RecordType.SysConnect,
};

const TYPE_BY_CODE: Record<number, EventType> = Object.fromEntries(
  EVENT_TYPES.map((type) => [EVENT_TYPE_CODE[type], type]),
);

export function eventTypeName(code: number): EventType {
  return TYPE_BY_CODE[code] ?? 'sys_write';
}

/** enum kr_syscall_code, index = code; send(2) is sendto in the kernel, sendfile is sendfile64 */
export const SYSCALL_NAMES = [
  'unknown',
  'write',
  'writev',
  'pwrite64',
  'pwritev',
  'pwritev2',
  'sendto',
  'sendmsg',
  'sendmmsg',
  'sendfile',
  'read',
  'readv',
  'pread64',
  'preadv',
  'preadv2',
  'recvfrom',
  'recvmsg',
  'recvmmsg',
  'fsync',
  'fdatasync',
  'sync_file_range',
  'syncfs',
  'connect',
] as const;

export function syscallName(code: number): string {
  return SYSCALL_NAMES[code] ?? `syscall_${code}`;
}

/** REQ_OP_* of include/linux/blk_types.h */
const BLOCK_OPS: Record<number, string> = {
  0: 'read',
  1: 'write',
  2: 'flush',
  3: 'discard',
  5: 'secure_erase',
  9: 'write_zeroes',
  10: 'zone_open',
  11: 'zone_close',
  12: 'zone_finish',
  13: 'zone_append',
  15: 'zone_reset',
  17: 'zone_reset_all',
  34: 'drv_in',
  35: 'drv_out',
};

/** The REQ_OP_* codes with a name. */
export const BLOCK_OP_CODES = Object.keys(BLOCK_OPS).map(Number);

export function blockOpName(code: number): string {
  return BLOCK_OPS[code] ?? `op_${code}`;
}

/**
 * blk_status_t -> negative errno, as blk_status_to_errno() maps it on
 * Linux 6.x, so block_io.error reads like sys_write.ret.
 */
const BLK_STATUS_ERRNO: Record<number, number> = {
  0: 0,
  1: -95, // NOTSUPP -> EOPNOTSUPP
  2: -110, // TIMEOUT -> ETIMEDOUT
  3: -28, // NOSPC
  4: -67, // TRANSPORT -> ENOLINK
  5: -121, // TARGET -> EREMOTEIO
  6: -52, // RESV_CONFLICT -> EBADE
  7: -61, // MEDIUM -> ENODATA
  8: -84, // PROTECTION -> EILSEQ
  9: -12, // RESOURCE -> ENOMEM
  10: -5, // IOERR -> EIO
  12: -11, // AGAIN -> EAGAIN
  13: -16, // DEV_RESOURCE -> EBUSY
  16: -19, // OFFLINE -> ENODEV
};

export function blockStatusErrno(status: number): number {
  return BLK_STATUS_ERRNO[status] ?? -5;
}

/** Linux dev_t as MKDEV() builds it, so one integer column holds major:minor. */
export function encodeDevice(major: number, minor: number): number {
  return major * 0x100000 + minor;
}

export function deviceName(dev: number): string {
  return `${Math.floor(dev / 0x100000)}:${dev % 0x100000}`;
}
