/**
 * The agent checkpoints the WAL itself (wal_autocheckpoint is off): a
 * PASSIVE checkpoint whenever the WAL has grown by passiveBytes never waits
 * for readers; if readers kept the WAL from restarting and it passed
 * restartBytes, a RESTART checkpoint waits briefly for them so the next
 * commit writes from the start of the WAL again. journal_size_limit then
 * truncates the file, so its size stays bounded while the daemon reads.
 */
import type Database from 'better-sqlite3';
import { statSync } from 'node:fs';

export interface CheckpointPolicyOptions {
  passiveBytes: number;
  restartBytes: number;
  restartWaitMs: number;
}

export const DEFAULT_CHECKPOINT_POLICY: CheckpointPolicyOptions = {
  passiveBytes: 64 * 1024 * 1024,
  restartBytes: 512 * 1024 * 1024,
  restartWaitMs: 200,
};

interface CheckpointResult {
  busy: number;
  log: number;
  checkpointed: number;
}

export class CheckpointPolicy {
  private lastPassiveAt = 0;
  checkpoints = 0;

  constructor(
    private readonly db: Database.Database,
    private readonly walPath: string,
    private readonly options: CheckpointPolicyOptions = DEFAULT_CHECKPOINT_POLICY,
  ) {
    db.pragma(`journal_size_limit = ${options.passiveBytes}`);
  }

  walBytes(): number {
    try {
      return statSync(this.walPath).size;
    } catch {
      return 0;
    }
  }

  /** Call after each commit. */
  afterCommit(): void {
    const size = this.walBytes();
    if (size >= this.options.restartBytes) {
      const previous = this.db.pragma('busy_timeout', { simple: true }) as number;
      this.db.pragma(`busy_timeout = ${this.options.restartWaitMs}`);
      try {
        this.checkpoint('RESTART');
      } finally {
        this.db.pragma(`busy_timeout = ${previous}`);
      }
      this.lastPassiveAt = 0;
    } else if (size - this.lastPassiveAt >= this.options.passiveBytes) {
      this.checkpoint('PASSIVE');
      this.lastPassiveAt = size;
    } else if (size < this.lastPassiveAt) {
      this.lastPassiveAt = 0; // the WAL restarted
    }
  }

  private checkpoint(mode: 'PASSIVE' | 'RESTART'): CheckpointResult {
    this.checkpoints++;
    return (this.db.pragma(`wal_checkpoint(${mode})`) as CheckpointResult[])[0]!;
  }
}
