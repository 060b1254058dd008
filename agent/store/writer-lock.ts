/**
 * One writer per store: dictionary ids and sequence numbers are assigned in
 * the writer's memory, so a second agent on the same file would collide. The
 * writer holds an exclusive flock(2) on the store file itself for as long as
 * it runs: the kernel drops it with the holder, however it died, so a
 * reused pid cannot block a restart, and there is no side file whose
 * deletion would let a second writer in. Within one process the lock is
 * shared (a store reopened after a failure, or by a test).
 */
import { readFileSync, statSync } from 'node:fs';
import { KreplayError } from '../../core/errors';
import { nativeAddon } from '../../core/native/addon';

export class StoreLockedError extends KreplayError {
  constructor(message: string) {
    super('E_STORE_LOCKED', message);
  }
}

/** This process's locks by store path: the descriptor and how many writers share it. */
const held = new Map<string, { fd: number; users: number }>();

/** The pid holding an flock on the file of device `dev` and inode `ino`, from /proc/locks, if any. */
export function flockHolder(
  dev: number,
  ino: number,
  locks = readFileSync('/proc/locks', 'utf8'),
): number | null {
  const major = Math.floor(dev / 256) & 0xfff;
  const minor = (dev & 0xff) | ((dev >> 12) & 0xfff00);
  for (const line of locks.split('\n')) {
    // e.g. "1: FLOCK  ADVISORY  WRITE 4242 08:02:1310745 0 EOF"
    const m = /^\d+:\s+FLOCK\s+\S+\s+WRITE\s+(\d+)\s+([0-9a-f]+):([0-9a-f]+):(\d+)\s/.exec(line);
    if (m && parseInt(m[2]!, 16) === major && parseInt(m[3]!, 16) === minor && Number(m[4]) === ino)
      return Number(m[1]);
  }
  return null;
}

export function acquireWriterLock(storePath: string): () => void {
  let lock = held.get(storePath);
  if (!lock) {
    let fd: number;
    try {
      fd = nativeAddon().lockFileExclusive(storePath);
    } catch (err) {
      if ((err as { code?: unknown }).code !== 'E_STORE_LOCKED') throw err;
      throw new StoreLockedError(
        `${storePath} is being written by another kreplay agent${holderText(storePath)}`,
      );
    }
    lock = { fd, users: 0 };
    held.set(storePath, lock);
  }
  lock.users++;
  let released = false;
  return () => {
    if (released) return;
    released = true;
    if (--lock.users > 0) return;
    held.delete(storePath);
    nativeAddon().unlockFile(lock.fd);
  };
}

/** " (pid N)" of the process holding the store's lock, where /proc/locks tells. */
function holderText(storePath: string): string {
  try {
    const { dev, ino } = statSync(storePath);
    const pid = flockHolder(dev, ino);
    return pid === null ? '' : ` (pid ${pid})`;
  } catch {
    return '';
  }
}
