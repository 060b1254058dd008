/**
 * <data-dir>/.replay/sessions.json: every session, so that they survive a
 * daemon restart. Replaced atomically (temp file, fsync, rename), written off
 * the event loop, and saves asked for during a write coalesce into one more.
 * The node-store scanner only opens *.db files, so it never sees this.
 */
import { readFileSync, renameSync } from 'node:fs';
import { mkdir, open, rename } from 'node:fs/promises';
import { dirname, join } from 'node:path';
import { z } from 'zod';
import type { Logger } from '../../../core/log/logger';
import { sessionSnapshotSchema, type RestoredSession, type SessionSnapshot } from './session-snapshot';

const FILE_VERSION = 1;
const fileSchema = z.object({ version: z.literal(FILE_VERSION), sessions: z.array(z.unknown()) });

export class SessionFile {
  readonly path: string;
  private dirty = false;
  private writing: Promise<void> | null = null;

  constructor(
    dataDir: string,
    private readonly log: Logger,
    private readonly take: () => SessionSnapshot[],
  ) {
    this.path = join(dataDir, '.replay', 'sessions.json');
  }

  /** The saved sessions; an unreadable file is moved aside (and logged), not fatal. */
  load(): RestoredSession[] {
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
      const parsed = sessionSnapshotSchema.safeParse(entry);
      if (parsed.success) return [parsed.data];
      this.log.warn('skipping an unreadable saved replay session', { error: parsed.error.message });
      return [];
    });
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

  private async writeWhileDirty(): Promise<void> {
    while (this.dirty) {
      this.dirty = false;
      try {
        await this.write(JSON.stringify({ version: FILE_VERSION, sessions: this.take() }));
      } catch (err) {
        this.log.warn('cannot save replay sessions', { file: this.path, error: (err as Error).message });
      }
    }
  }

  private async write(text: string): Promise<void> {
    await mkdir(dirname(this.path), { recursive: true });
    const temp = `${this.path}.${process.pid}.tmp`;
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
