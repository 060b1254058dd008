/**
 * The TCP sockets a process listens on, from its own descriptors and its network namespace's
 * listening table (sock_diag, or /proc/PID/net/tcp{,6}): where the inspector a SIGUSR1 opened
 * really is (whatever --inspect-port said), and that it is on loopback.
 */
import { readdirSync, readFileSync, readlinkSync, statSync } from 'node:fs';
import { nativeAddon } from '../../../core/native/addon';

export interface ListeningSocket {
  inode: number;
  port: number;
  /** bound to 127.0.0.0/8 or ::1 only */
  loopback: boolean;
}

const LISTEN = '0A';

/** The LISTEN entries of a /proc/net/tcp or tcp6 table. */
export function parseListening(table: string): ListeningSocket[] {
  const out: ListeningSocket[] = [];
  for (const line of table.split('\n').slice(1)) {
    const f = line.trim().split(/\s+/);
    if (f.length < 10 || f[3] !== LISTEN) continue;
    const [address, port] = f[1]!.split(':');
    if (!address || !port) continue;
    // IPv4 as one little-endian word; IPv6 as four (::1 ends in 01000000, ::ffff:127.x in FFFF0000 then 7F)
    const loopback =
      address.length === 8
        ? address.endsWith('7F')
        : address === '00000000000000000000000001000000' ||
          (address.startsWith('0000000000000000FFFF0000') && address.endsWith('7F'));
    out.push({ inode: Number(f[9]), port: parseInt(port, 16), loopback });
  }
  return out;
}

/** Whether process `pid` is in the agent's own network namespace (false when it is gone). */
function inOurNetns(pid: number): boolean {
  try {
    const ours = statSync('/proc/self/ns/net');
    const theirs = statSync(`/proc/${pid}/ns/net`);
    return ours.dev === theirs.dev && ours.ino === theirs.ino;
  } catch {
    return false;
  }
}

/**
 * Every socket listening in the process's network namespace, whoever holds it: in the agent's own
 * namespace by sock_diag, which reads the listening table alone; elsewhere (a container's) from
 * /proc/PID/net/tcp{,6}, whose every read formats all of the namespace's connections.
 */
export function namespaceListening(pid: number): ListeningSocket[] {
  const listeners = inOurNetns(pid) ? nativeAddon().tcpListeners() : null;
  return listeners ?? procListening(pid);
}

/** The LISTEN entries of the process's /proc/PID/net/tcp{,6}. */
function procListening(pid: number): ListeningSocket[] {
  return ['tcp', 'tcp6'].flatMap((table) => {
    try {
      return parseListening(readFileSync(`/proc/${pid}/net/${table}`, 'utf8'));
    } catch {
      return [];
    }
  });
}

/** The inodes of the sockets among the process's descriptors (empty when it is gone). */
export function socketInodes(pid: number): Set<number> {
  const own = new Set<number>();
  try {
    for (const fd of readdirSync(`/proc/${pid}/fd`)) {
      try {
        const m = /^socket:\[(\d+)\]$/.exec(readlinkSync(`/proc/${pid}/fd/${fd}`));
        if (m) own.add(Number(m[1]));
      } catch {
        // closed while we looked
      }
    }
  } catch {
    // gone, or not readable
  }
  return own;
}

/**
 * The sockets the process itself listens on, among `table` (its namespace's, read when not given).
 */
export function processListening(pid: number, table?: ListeningSocket[]): ListeningSocket[] {
  const own = socketInodes(pid);
  return own.size === 0 ? [] : (table ?? namespaceListening(pid)).filter((s) => own.has(s.inode));
}
