/**
 * <data-dir>/.replay/sessions.json: every session, so that they survive a
 * daemon restart. Replaced atomically (temp file, fsync, rename), written off
 * the event loop, and saves asked for during a write coalesce into one more.
 * The node-store scanner only opens *.db files, so it never sees this.
 *
 * Daemons sharing the data dir share the file: each entry names the daemon
 * that owns it (null once released by a daemon that stopped), each save
 * rewrites only the saver's own entries under a lock, and a starting daemon
 * takes the entries that are released or whose daemon's process is gone.
 */
import { mkdirSync, readFileSync, renameSync, writeFileSync } from 'node:fs';
import { mkdir, open, rename } from 'node:fs/promises';
import { dirname, join } from 'node:path';
import { z } from 'zod';
import type { Logger } from '../../../core/log/logger';
import { newDaemonIdentity, processAlive } from './daemon-identity';
import { FileLock } from './file-lock';
import { sessionSnapshotSchema, type RestoredSession, type SessionSnapshot } from './session-snapshot';

/** 1: one daemon's sessions; 2: entries carry their owning daemon (version 1 entries are released ones) */
const FILE_VERSION = 2;
const fileSchema = z.object({
  version: z.union([z.literal(1), z.literal(2)]),
  sessions: z.array(z.unknown()),
});
const ownedSchema = z.object({ daemon: z.string().nullable().default(null) }).loose();
type Entry = z.output<typeof ownedSchema>;

export class SessionFile {
  readonly path: string;
  /** this daemon, as its entries name it */
  readonly identity = newDaemonIdentity();
  private readonly lock: FileLock;
  private dirty = false;
  /** the last save gives the entries up for the next daemon to take */
  private releasing = false;
  private writing: Promise<void> | null = null;

  constructor(
    dataDir: string,
    private readonly log: Logger,
    private readonly take: () => SessionSnapshot[],
  ) {
    this.path = join(dataDir, '.replay', 'sessions.json');
    this.lock = new FileLock(`${this.path}.lock`, this.identity);
  }

  /**
   * Takes the saved sessions no running daemon owns; an unreadable file is
   * moved aside (and logged), not fatal. A data dir this daemon cannot write
   * to is read without the lock.
   */
  load(): RestoredSession[] {
    // zod compiles a schema's parser the first time it parses: here, not in the save a fresh
    // daemon's first play makes as its first event is due (issue 48)
    fileSchema.safeParse({ version: FILE_VERSION, sessions: [] });
    ownedSchema.safeParse({ daemon: null });
    const locked = this.lockSync();
    try {
      const entries = this.readEntries(true);
      const claimed = entries.filter((e) => e.daemon === null || !processAlive(e.daemon));
      if (locked && claimed.length > 0) {
        // marked as ours at once, so that a daemon starting next does not take them too
        for (const entry of claimed) entry.daemon = this.identity;
        this.writeSync(entries);
      }
      return claimed.flatMap((entry) => {
        const parsed = sessionSnapshotSchema.safeParse(entry);
        if (parsed.success) return [parsed.data];
        this.log.warn('skipping an unreadable saved replay session', { error: parsed.error.message });
        return [];
      });
    } finally {
      if (locked) this.lock.release();
    }
  }

  /** Every entry of the file; an unreadable file is moved aside at start (`atStart`), else read as empty. */
  private readEntries(atStart: boolean): Entry[] {
    let text: string;
    try {
      text = readFileSync(this.path, 'utf8');
    } catch (err) {
      if ((err as NodeJS.ErrnoException).code !== 'ENOENT')
        this.log.warn('cannot read replay sessions', { file: this.path, error: (err as Error).message });
      return [];
    }
    let file: z.output<typeof fileSchema>;
    try {
      file = fileSchema.parse(JSON.parse(text));
    } catch (err) {
      if (!atStart) return [];
      // kept for a human to look at; the next save starts a fresh file
      const aside = `${this.path}.unreadable-${Date.now()}`;
      try {
        renameSync(this.path, aside);
      } catch {
        // a read-only data dir: it stays where it is
      }
      this.log.warn('replay sessions file unreadable', {
        file: this.path,
        movedTo: aside,
        error: String(err),
      });
      return [];
    }
    return file.sessions.flatMap((entry) => {
      const owned = ownedSchema.safeParse(entry);
      return owned.success ? [owned.data] : [];
    });
  }

  private lockSync(): boolean {
    try {
      mkdirSync(dirname(this.path), { recursive: true });
      this.lock.acquireSync();
      return true;
    } catch (err) {
      this.log.warn('replay sessions file not locked: read only', {
        file: this.path,
        error: (err as Error).message,
      });
      return false;
    }
  }

  /** Saves the sessions as they are when the write starts. */
  save(): void {
    this.dirty = true;
    this.writing ??= this.writeWhileDirty().finally(() => {
      this.writing = null;
    });
  }

  /** Resolves once every save asked for so far is on disk. */
  async flush(): Promise<void> {
    while (this.writing) await this.writing;
  }

  /** The last save: this daemon's sessions, released for whichever daemon starts next. */
  async release(): Promise<void> {
    this.releasing = true;
    this.save();
    await this.flush();
  }

  private async writeWhileDirty(): Promise<void> {
    while (this.dirty) {
      this.dirty = false;
      try {
        await this.merge();
      } catch (err) {
        this.log.warn('cannot save replay sessions', { file: this.path, error: (err as Error).message });
      }
    }
  }

  /** Replaces this daemon's entries in the file, under the lock, keeping every other daemon's. */
  private async merge(): Promise<void> {
    await mkdir(dirname(this.path), { recursive: true });
    await this.lock.acquire();
    try {
      const owner = this.releasing ? null : this.identity;
      const mine = this.take().map((snapshot) => ({ daemon: owner, ...snapshot }));
      const ids = new Set(mine.map((entry) => entry.id));
      // this daemon's entries are replaced, including those it released in an earlier save
      const others = this.readEntries(false).filter(
        (e) => e.daemon !== this.identity && !ids.has(e.id as string),
      );
      await this.write(JSON.stringify({ version: FILE_VERSION, sessions: [...others, ...mine] }));
    } finally {
      this.lock.release();
    }
  }

  private writeSync(entries: Entry[]): void {
    const temp = `${this.path}.${this.identity}.tmp`;
    writeFileSync(temp, JSON.stringify({ version: FILE_VERSION, sessions: entries }));
    renameSync(temp, this.path);
  }

  private async write(text: string): Promise<void> {
    const temp = `${this.path}.${this.identity}.tmp`;
    const handle = await open(temp, 'w');
    try {
      await handle.writeFile(text);
      await handle.sync();
    } finally {
      await handle.close();
    }
    await rename(temp, this.path);
  }
}
