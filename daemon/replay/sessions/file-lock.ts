/**
 * An exclusive lock between daemons on one data dir: a file created with
 * O_EXCL holding the owner's identity. A lock whose owner's process is gone
 * (a daemon killed while saving) is taken over.
 */
import { readFileSync, unlinkSync, writeFileSync } from 'node:fs';
import { processAlive } from './daemon-identity';

/** Long enough for any save (a small file, one fsync); a holder past it is stuck, and the caller says so. */
const WAIT_MS = 5000;
// the waits run on performance.now(): a wall clock stepped on timed them out at once, stepped back stretched them by the step
const RETRY_MS = 5;

export class FileLockTimeout extends Error {
  constructor(path: string, holder: string) {
    super(`${path} is held by daemon ${holder} for more than ${WAIT_MS / 1000} s`);
  }
}

export class FileLock {
  constructor(
    readonly path: string,
    private readonly identity: string,
  ) {}

  /** At start-up only: blocks the thread while another daemon holds the lock. */
  acquireSync(): void {
    const deadline = performance.now() + WAIT_MS;
    const pause = new Int32Array(new SharedArrayBuffer(4));
    while (!this.tryAcquire()) {
      if (performance.now() > deadline) throw new FileLockTimeout(this.path, this.holder() ?? '?');
      Atomics.wait(pause, 0, 0, RETRY_MS);
    }
  }

  async acquire(): Promise<void> {
    const deadline = performance.now() + WAIT_MS;
    while (!this.tryAcquire()) {
      if (performance.now() > deadline) throw new FileLockTimeout(this.path, this.holder() ?? '?');
      await new Promise((resolve) => setTimeout(resolve, RETRY_MS));
    }
  }

  release(): void {
    if (this.holder() === this.identity) unlinkSync(this.path);
  }

  private tryAcquire(): boolean {
    try {
      writeFileSync(this.path, this.identity, { flag: 'wx' });
      return true;
    } catch (err) {
      if ((err as NodeJS.ErrnoException).code !== 'EEXIST') throw err;
    }
    const holder = this.holder();
    // an empty file: its creator is between create and write; a dead holder's lock is free
    if (holder && !processAlive(holder)) this.removeIfHeldBy(holder);
    return false;
  }

  private holder(): string | null {
    try {
      return readFileSync(this.path, 'utf8');
    } catch {
      return null;
    }
  }

  private removeIfHeldBy(holder: string): void {
    if (this.holder() !== holder) return;
    try {
      unlinkSync(this.path);
    } catch {
      // another daemon took it over first
    }
  }
}
