/**
 * Whether a Node process has its own SIGUSR1 listener (process.on('SIGUSR1')): libuv then owns
 * the signal and Node's inspector no longer opens on it, so sending it would run the
 * application's handler instead (a log rotation, a reload). libuv keeps every active signal
 * handle in a red-black tree (uv__signal_tree); each node is a uv_signal_t whose signum and child
 * links sit at fixed offsets in libuv 1.x's public struct on 64-bit targets. Read through
 * /proc/PID/mem; anything unexpected answers "cannot tell", which the caller treats as a refusal.
 */
import { closeSync, openSync, readSync } from 'node:fs';

/** uv_signal_t: UV_HANDLE_FIELDS (96 bytes), signal_cb, then signum, then tree_entry's left and right. */
const SIGNUM_AT = 0x68n;
const LEFT_AT = 0x70n;
const RIGHT_AT = 0x78n;
/** A process has a handful of signal handles; past this the memory read is not what it seems. */
const MAX_NODES = 64;
const MAX_SIGNAL = 64;

export type ListenerAnswer = 'listener' | 'none' | 'unknown';

/** Reads `bytes` at `address` of a process's memory; throws when it cannot. */
export type MemoryReader = (address: bigint, bytes: number) => Buffer;

export function processMemory(pid: number): { read: MemoryReader; close(): void } {
  const fd = openSync(`/proc/${pid}/mem`, 'r');
  return {
    read(address, bytes) {
      const buf = Buffer.alloc(bytes);
      if (readSync(fd, buf, 0, bytes, address) !== bytes) throw new Error('short read');
      return buf;
    },
    close: () => closeSync(fd),
  };
}

/** Walks the tree at `treeAddress` for a handle of `signal`. */
export function findSignalListener(read: MemoryReader, treeAddress: bigint, signal: number): ListenerAnswer {
  try {
    const stack = [read(treeAddress, 8).readBigUInt64LE(0)];
    const seen = new Set<bigint>();
    while (stack.length > 0) {
      const node = stack.pop()!;
      if (node === 0n || seen.has(node)) continue;
      if (seen.size >= MAX_NODES) return 'unknown';
      seen.add(node);
      const signum = read(node + SIGNUM_AT, 4).readInt32LE(0);
      if (signum < 1 || signum > MAX_SIGNAL) return 'unknown';
      if (signum === signal) return 'listener';
      stack.push(read(node + LEFT_AT, 8).readBigUInt64LE(0), read(node + RIGHT_AT, 8).readBigUInt64LE(0));
    }
    return 'none';
  } catch {
    return 'unknown';
  }
}
