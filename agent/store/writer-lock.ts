/**
 * One writer per store: dictionary ids and sequence numbers are assigned in
 * the writer's memory, so a second agent on the same file would collide.
 * A lock file holds the owner's pid; a lock whose process is gone (SIGKILL)
 * is taken over.
 */
import { KreplayError } from '../../core/errors';
import { readFileSync, rmSync, writeFileSync } from 'node:fs';

export class StoreLockedError extends KreplayError {
  constructor(message: string) {
    super('E_STORE_LOCKED', message);
  }
}

function isAlive(pid: number): boolean {
  try {
    process.kill(pid, 0);
    return true;
  } catch (err) {
    return (err as NodeJS.ErrnoException).code === 'EPERM';
  }
}

export function acquireWriterLock(storePath: string): () => void {
  const lockPath = `${storePath}.lock`;
  for (let attempt = 0; attempt < 2; attempt++) {
    try {
      writeFileSync(lockPath, String(process.pid), { flag: 'wx' });
      return () => rmSync(lockPath, { force: true });
    } catch (err) {
      if ((err as NodeJS.ErrnoException).code !== 'EEXIST') throw err;
      const owner = Number(readFileSync(lockPath, 'utf8'));
      if (Number.isInteger(owner) && owner > 0 && owner !== process.pid && isAlive(owner)) {
        throw new StoreLockedError(`${storePath} is being written by another kreplay agent (pid ${owner})`);
      }
      rmSync(lockPath, { force: true });
    }
  }
  throw new StoreLockedError(`cannot take the writer lock ${lockPath}`);
}
