/**
 * What a write went to: the kinds, and the text of a target as the API
 * shows it, built from a kr_target record (bpf/capture.h).
 */
import { readU53, TargetFlag, TargetLayout } from './record-layout';

/** enum kr_target_kind, index = code */
export const TARGET_KINDS = ['file', 'socket', 'pipe', 'char', 'anon', 'other'] as const;
export type TargetKind = (typeof TARGET_KINDS)[number];

export function targetKindCode(kind: TargetKind): number {
  return TARGET_KINDS.indexOf(kind) + 1;
}

export function targetKindName(code: number): TargetKind {
  return TARGET_KINDS[code - 1] ?? 'other';
}

/** The fields of a kr_target record that its text is made of. */
export interface TargetRecordFields {
  kind: number;
  flags: number;
  family: number;
  protocol: number;
  port: number;
  /** 16 bytes */
  addr: Uint8Array;
  /** the record's `len` bytes of data */
  data: Buffer;
}

/** The target record at `off` of `buf` (its addr and data are views into buf). */
export function readTargetRecord(buf: Buffer, off: number): TargetRecordFields & { targetId: number } {
  const data = off + TargetLayout.data;
  return {
    targetId: readU53(buf, off + TargetLayout.targetId),
    kind: buf.readUInt32LE(off + TargetLayout.kind),
    flags: buf.readUInt32LE(off + TargetLayout.flags),
    family: buf.readUInt16LE(off + TargetLayout.family),
    protocol: buf.readUInt16LE(off + TargetLayout.protocol),
    port: buf.readUInt16LE(off + TargetLayout.port),
    addr: buf.subarray(off + TargetLayout.addr, data),
    data: buf.subarray(data, data + buf.readUInt16LE(off + TargetLayout.len)),
  };
}

const AF_UNIX = 1;
const AF_INET = 2;
const AF_INET6 = 10;
const FAMILY_NAMES: Record<number, string> = { 16: 'netlink', 17: 'packet', 40: 'vsock' };
const IP_PROTOCOLS: Record<number, string> = {
  1: 'icmp',
  6: 'tcp',
  17: 'udp',
  58: 'icmpv6',
  132: 'sctp',
  136: 'udplite',
  255: 'raw',
  262: 'mptcp',
};
const KIND_SOCKET = targetKindCode('socket');
const KIND_PIPE = targetKindCode('pipe');
const KIND_ANON = targetKindCode('anon');

function ipv4(addr: Uint8Array, at: number): string {
  return `${addr[at]}.${addr[at + 1]}.${addr[at + 2]}.${addr[at + 3]}`;
}

/** RFC 5952 text: lowercase, the longest run of two or more zero groups as "::"; v4-mapped as v4. */
function ipv6(addr: Uint8Array): string {
  const groups = Array.from({ length: 8 }, (_, i) => (addr[2 * i]! << 8) | addr[2 * i + 1]!);
  let best = -1;
  let bestLen = 1;
  for (let i = 0; i < 8;) {
    let j = i;
    while (j < 8 && groups[j] === 0) j++;
    if (j - i > bestLen) [best, bestLen] = [i, j - i];
    i = j === i ? i + 1 : j;
  }
  const hex = groups.map((g) => g.toString(16));
  if (best === -1) return hex.join(':');
  return `${hex.slice(0, best).join(':')}::${hex.slice(best + bestLen).join(':')}`;
}

function isV4Mapped(addr: Uint8Array): boolean {
  for (let i = 0; i < 10; i++) if (addr[i] !== 0) return false;
  return addr[10] === 0xff && addr[11] === 0xff;
}

/**
 * The word between protocol and address of a connection a listener accepted
 * (`tcp accepted 10.0.0.5:8080`): named by the service's listening address,
 * which a test build of the service shares, never by the client's port.
 * native/exec/exec_target.cc names the build's sockets the same way.
 */
export const ACCEPTED_SOCKET = 'accepted';

function socketText(r: TargetRecordFields): string {
  if (r.family === AF_UNIX) {
    const path = r.data;
    if (path.length === 0) return 'unix';
    // an abstract name starts with a NUL and may hold more: shown with "@" as ss(8) does
    if (path[0] === 0) return `unix @${path.toString('latin1', 1).replaceAll('\0', '@')}`;
    const end = path.indexOf(0);
    return `unix ${path.toString('utf8', 0, end === -1 ? path.length : end)}`;
  }
  if (r.family === AF_INET || r.family === AF_INET6) {
    const proto = IP_PROTOCOLS[r.protocol] ?? `ip${r.protocol}`;
    // not connected: no peer to show (getpeername(2) fails likewise)
    if (r.port === 0 && r.addr.every((byte) => byte === 0)) return proto;
    // a connection a listener accepted is named by the address it was accepted on (ACCEPTED_SOCKET)
    const head = r.flags & TargetFlag.Accepted ? `${proto} ${ACCEPTED_SOCKET}` : proto;
    if (r.family === AF_INET) return `${head} ${ipv4(r.addr, 0)}:${r.port}`;
    if (isV4Mapped(r.addr)) return `${head} ${ipv4(r.addr, 12)}:${r.port}`;
    return `${head} [${ipv6(r.addr)}]:${r.port}`;
  }
  return FAMILY_NAMES[r.family] ?? `af${r.family}`;
}

/** Names leaf first, each NUL-terminated, as the kernel side walks them: "null\0dev\0" is /dev/null. */
function pathText(r: TargetRecordFields): string {
  const names = r.data.toString('utf8').split('\0');
  if (names[names.length - 1] === '') names.pop();
  const path = `/${names.reverse().join('/')}`;
  const shown = r.flags & TargetFlag.Truncated ? `...${path}` : path;
  // as /proc/PID/fd shows an unlinked file
  return r.flags & TargetFlag.Deleted ? `${shown} (deleted)` : shown;
}

/** The `target` text of a target record. */
export function targetText(r: TargetRecordFields): string {
  if (r.kind === KIND_SOCKET) return socketText(r);
  if (r.kind === KIND_PIPE && r.flags & TargetFlag.AnonPipe) return 'pipe';
  const path = pathText(r);
  // anonymous inodes have one name, such as [eventfd]: shown as /proc/PID/fd shows them
  return r.kind === KIND_ANON ? `anon_inode:${path.slice(1)}` : path;
}
