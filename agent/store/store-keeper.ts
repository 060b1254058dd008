/**
 * Keeps a node's store writable through what production does to it: a full
 * disk (batches are counted as dropped, reason disk_full, until space
 * returns), the file deleted or replaced under the agent (a fresh store at
 * the same path, the gap recorded as a run boundary) and a damaged file
 * (moved aside with --on-corrupt rename, or refused by name).
 * Capture never stops for the store: what cannot be stored is counted.
 */
import { existsSync, renameSync, statfsSync } from 'node:fs';
import { isCorruption, StoreError } from '../../core/store/schema';
import type { EventBatch } from '../ingest/event-batch';
import type { ContextEntry, NameEntry, NewNames } from '../ingest/dictionary';
import type { RetentionOptions } from './retention';
import { StoreWriter, storePath, type RunStart } from './store-writer';
import { epochNs } from '../../core/epoch-ns';

export type OnCorrupt = 'refuse' | 'rename';

/** Why events reached the store but not its file. */
export type StoreDropReason = 'disk_full' | 'store_error';

export type NoticeLevel = 'info' | 'warn' | 'error';

export interface StoreKeeperOptions {
  dataDir: string;
  node: string;
  onCorrupt: OnCorrupt;
  /** none: keep everything */
  retention?: RetentionOptions;
  /** SQLite's page cache, KiB (default WRITER_CACHE_KIB) */
  cacheKib?: number;
  notify: (level: NoticeLevel, text: string) => void;
  now?: () => bigint;
}

/* Room a batch needs before a write is tried again on a disk that was full: rows in the WAL and the B-trees. */
const BYTES_PER_ROW_NEEDED = 256;
const BYTES_FREE_MARGIN = 1024 * 1024;

export function isDiskFull(err: unknown): boolean {
  const code = (err as { code?: unknown }).code;
  return code === 'SQLITE_FULL' || code === 'ENOSPC';
}

function freeBytes(dir: string): number {
  try {
    const fs = statfsSync(dir);
    return fs.bavail * fs.bsize;
  } catch {
    return Number.POSITIVE_INFINITY;
  }
}

/** Moves a store file and its WAL aside; returns the new name of the main file. */
export function moveStoreAside(path: string, label: string): string {
  const aside = `${path}.${label}-${new Date().toISOString().replace(/[:.]/g, '')}`;
  for (const suffix of ['-wal', '-shm', '']) {
    if (existsSync(path + suffix)) renameSync(path + suffix, aside + suffix);
  }
  return aside;
}

export class StoreKeeper {
  readonly path: string;
  private writer: StoreWriter | null;
  private run: RunStart | null = null;
  private runRecorded = false;
  private diskFull = false;
  private lastError = '';
  private droppedWhileFull = 0;
  private reportedCheckpointFailure: Error | null = null;
  /* dictionary entries not yet handed to a writer (no writer could be opened, or the batch was skipped) */
  private pendingNames: NewNames[] = [];
  readonly dropped: Record<StoreDropReason, number> = { disk_full: 0, store_error: 0 };
  /** fresh stores opened because the file vanished, was replaced or was damaged */
  replacements = 0;
  rowsWritten = 0;
  /** events removed by retention */
  pruned = 0;
  /** of those, events the cap removed before they were shipped */
  unshippedPruned = 0;
  /** events stored without their target (StoreWriter.lostTargets) */
  lostTargets = 0;

  private constructor(
    private readonly options: StoreKeeperOptions,
    writer: StoreWriter,
  ) {
    this.writer = writer;
    this.path = writer.path;
  }

  /** Opens the store; a damaged one is moved aside (rename) or refused with a StoreError naming it. */
  static open(options: StoreKeeperOptions): StoreKeeper {
    return new StoreKeeper(options, StoreKeeper.openWriter(options));
  }

  private static openWriter(options: StoreKeeperOptions): StoreWriter {
    const open = () =>
      StoreWriter.open(options.dataDir, options.node, {
        retention: options.retention,
        cacheKib: options.cacheKib,
      });
    try {
      return open();
    } catch (err) {
      if (!(err instanceof StoreError && err.code === 'E_STORE_CORRUPT') || options.onCorrupt !== 'rename')
        throw err;
      const aside = moveStoreAside(storePath(options.dataDir, options.node), 'corrupt');
      options.notify('warn', `${err.message.split(';')[0]}; moved it to ${aside} and started a fresh store`);
      return open();
    }
  }

  get info() {
    return this.writer?.info;
  }

  /** The dictionaries the decoder starts from: every service and comm, and where context and target ids go on. */
  names(): {
    services: NameEntry[];
    comms: NameEntry[];
    containers: NameEntry[];
    firstFreeContextId: number;
    firstFreeTargetId: number;
  } {
    const { services, comms, containers } = this.writer!.allNames();
    return {
      services,
      comms,
      containers,
      firstFreeContextId: StoreWriter.firstFreeContextId(this.writer!.db),
      firstFreeTargetId: StoreWriter.firstFreeTargetId(this.writer!.db),
    };
  }

  private now(): bigint {
    return (this.options.now ?? epochNs)();
  }

  beginRun(run: RunStart): void {
    this.run = run;
    this.runRecorded = false;
    try {
      this.recordRun();
    } catch (err) {
      this.failed(err, 0); // recorded with the first batch that fits
    }
  }

  private recordRun(): void {
    if (this.runRecorded || !this.run || !this.writer) return;
    this.writer.beginRun(this.run);
    this.runRecorded = true;
  }

  /** Commits the batch, or counts its events as dropped with the reason. */
  writeBatch(batch: EventBatch, names: NewNames, forgottenEpoch = 0): void {
    this.writer?.acknowledgeForgotten(forgottenEpoch);
    const writer = this.usableWriter(batch.count);
    if (!writer) {
      this.writerless(names);
      this.drop(batch.count, this.diskFull ? 'disk_full' : 'store_error');
      return;
    }
    const before = writer.rowsWritten;
    const lostBefore = writer.lostTargets;
    try {
      this.recordRun();
      writer.writeBatch(batch, names);
    } catch (err) {
      this.lostTargets += writer.lostTargets - lostBefore;
      // a batch is committed in parts under a small cap: what was committed stays stored
      this.rowsWritten += writer.rowsWritten - before;
      this.failed(err, batch.count - (writer.rowsWritten - before));
      return;
    }
    this.rowsWritten += batch.count;
    this.lostTargets += writer.lostTargets - lostBefore;
    this.stored();
    if (writer.checkpointFailure && writer.checkpointFailure !== this.reportedCheckpointFailure) {
      this.reportedCheckpointFailure = writer.checkpointFailure;
      if (!isDiskFull(writer.checkpointFailure))
        this.options.notify('warn', `checkpoint of ${this.path} failed: ${writer.checkpointFailure.message}`);
    }
  }

  /** Names of a batch that never reached a writer still belong in the next store written. */
  private writerless(names: NewNames): void {
    this.pendingNames.push(names);
  }

  /**
   * The writer to try this batch with, or null when trying is futile: the
   * disk was full and still has no room for it. Opens a fresh store when
   * the file was deleted or replaced.
   */
  private usableWriter(rows: number): StoreWriter | null {
    if (this.writer && !this.writer.stillAtPath()) this.replace('the store file was deleted or replaced');
    if (!this.writer) this.reopen();
    if (!this.writer) return null;
    if (this.diskFull && freeBytes(this.options.dataDir) < rows * BYTES_PER_ROW_NEEDED + BYTES_FREE_MARGIN)
      return null;
    for (const names of this.pendingNames.splice(0)) this.writer.carryNames(names);
    return this.writer;
  }

  private replace(reason: string): void {
    const old = this.writer!;
    let names: NewNames | null = null;
    try {
      names = old.allNames();
      old.endRun(this.now(), reason);
    } catch {
      // the old file may be beyond reach; the fresh store records the boundary
    }
    try {
      old.close();
    } catch {
      // nothing more can be saved into a file that is gone
    }
    this.writer = null;
    if (names) this.pendingNames.unshift(names);
    // A file someone else put at our path is theirs: keep it, under another name.
    if (existsSync(this.path)) moveStoreAside(this.path, 'replaced');
    this.options.notify(
      'warn',
      `${reason} (${this.path}) while the agent ran; storing into a fresh store at the same path, the gap is recorded as a run boundary`,
    );
    if (this.run) this.run = { ...this.run, startedNs: this.now(), startReason: reason };
    this.reopen();
  }

  private reopen(): void {
    try {
      this.writer = StoreKeeper.openWriter(this.options);
    } catch (err) {
      if (isDiskFull(err)) this.enterDiskFull();
      else this.reportError(err);
      return;
    }
    this.replacements++;
    this.runRecorded = false;
    for (const names of this.pendingNames.splice(0)) this.writer.carryNames(names);
    try {
      this.recordRun();
    } catch (err) {
      this.failed(err, 0);
    }
  }

  private failed(err: unknown, rows: number): void {
    if (isDiskFull(err)) {
      this.enterDiskFull();
      this.drop(rows, 'disk_full');
      return;
    }
    if (isCorruption(err)) {
      this.drop(rows, 'store_error');
      if (this.options.onCorrupt !== 'rename') throw err;
      this.replace(`the store file is damaged (${(err as Error).message})`);
      return;
    }
    this.reportError(err);
    this.drop(rows, 'store_error');
  }

  private drop(rows: number, reason: StoreDropReason): void {
    this.dropped[reason] += rows;
    if (this.diskFull) this.droppedWhileFull += rows;
  }

  private enterDiskFull(): void {
    if (this.diskFull) return;
    this.diskFull = true;
    this.droppedWhileFull = 0;
    this.options.notify(
      'warn',
      `disk full: no space left for ${this.path}. Capture goes on; events are counted as dropped ` +
        `(reason disk_full) and storing resumes by itself once space is freed.`,
    );
  }

  private reportError(err: unknown): void {
    const message = (err as Error).message;
    if (message === this.lastError) return;
    this.lastError = message;
    this.options.notify(
      'error',
      `storing into ${this.path} failed: ${message}; events are counted as dropped`,
    );
  }

  private stored(): void {
    this.lastError = '';
    if (!this.diskFull) return;
    this.diskFull = false;
    this.options.notify(
      'info',
      `space is back: storing into ${this.path} again (${this.droppedWhileFull} events were dropped while the disk was full)`,
    );
  }

  /**
   * Lets retention remove about `rows` rows, in steps. A full disk only
   * postpones it (deleting needs WAL space too); other failures are reported.
   */
  prune(rows: number): { epoch: number; forgotten: ContextEntry[] } | null {
    if (!this.writer || this.diskFull) return null;
    try {
      const { steps, forgotten, epoch } = this.writer.prune(rows);
      for (const step of steps) {
        this.pruned += step.background + step.context;
        this.unshippedPruned += step.unshipped;
        if (step.unshipped > 0)
          this.options.notify(
            'warn',
            `the store cap removed ${step.unshipped} events not yet shipped (the fleet store is behind); raise --max-store-bytes or fix shipping`,
          );
      }
      return forgotten.length > 0 ? { epoch, forgotten } : null;
    } catch (err) {
      if (isDiskFull(err)) this.enterDiskFull();
      else this.reportError(err);
      return null;
    }
  }

  /** Stores the counters that changed; on a full disk they wait for the next call. */
  recordCounters(atNs: bigint, counters: Record<string, number>): void {
    if (!this.writer || this.diskFull) return;
    try {
      this.recordRun();
      this.writer.recordCounters(atNs, counters);
    } catch (err) {
      this.failed(err, 0);
    }
  }

  endRun(stoppedNs: bigint, reason: string): void {
    if (!this.writer) return;
    try {
      this.recordRun();
      this.writer.endRun(stoppedNs, reason);
    } catch (err) {
      if (!isDiskFull(err)) throw err;
      this.options.notify('warn', `the run's end could not be recorded in ${this.path}: the disk is full`);
    }
  }

  close(): void {
    this.writer?.close();
    this.writer = null;
  }
}
