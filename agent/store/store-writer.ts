/** The one writer of a node's store: runs, counters and event batches. */
import { KreplayError } from '../../core/errors';
import type Database from 'better-sqlite3';
import { accessSync, constants, mkdirSync, statSync } from 'node:fs';
import { dirname, join, resolve } from 'node:path';
import {
  corruptStoreError,
  isCorruption,
  newStorePageBytes,
  NEXT_CONTEXT_ID_META,
  NEXT_TARGET_ID_META,
  openWriteStore,
  type StoreInfo,
} from '../../core/store/schema';
import type { EventBatch } from '../ingest/event-batch';
import {
  CheckpointPolicy,
  DEFAULT_CHECKPOINT_POLICY,
  type CheckpointPolicyOptions,
} from './checkpoint-policy';
import {
  ContextDictionary,
  NameDictionary,
  TargetDictionary,
  countNewNames,
  takeNewNames,
  type ContextEntry,
  type NameEntry,
  type NewNames,
  type TargetEntry,
} from '../ingest/dictionary';
import { ContextInsert } from './context-insert';
import { IdHighWater } from './id-high-water';
import { EventInsert } from './event-insert';
import {
  checkpointPolicyFor,
  Pruner,
  resolvePolicy,
  transactionRowsFor,
  type PruneStep,
  type RetentionOptions,
  type RetentionPolicy,
  walAllowanceFor,
} from './retention';
import { acquireWriterLock } from './writer-lock';
import { epochNs } from '../../core/epoch-ns';

export interface RunStart {
  node: string;
  startedNs: bigint;
  kernel: string;
  agentVersion: string;
  attachPoints: string[];
  clockOffsetNs: bigint;
  clockErrorNs: number;
  /** why this run began: 'start', or the event that made a fresh store necessary */
  startReason?: string;
  /** --sample-background 1/N: N (1: every write) */
  sampleBackground?: number;
  /** --include/--exclude as JSON, null when everything is captured */
  filter?: string | null;
}

/** The file a writer has open: the path names another file once this one is deleted or replaced. */
export interface FileIdentity {
  dev: number;
  ino: number;
}

const CONTAINERS_SQL = 'SELECT id, info FROM containers';

/* A target's stamp `column` merged with `value`: the later of the two, either when the other is NULL. */
const laterStamp = (column: string, value: string) =>
  `${column} = max(coalesce(${column}, ${value}), coalesce(${value}, ${column}))`;

const NO_NAMES: NewNames = { services: [], comms: [], contexts: [], targets: [], containers: [] };

function joinNames(a: NewNames, b: NewNames): NewNames {
  if (countNewNames(a) === 0) return b;
  return {
    services: [...a.services, ...b.services],
    comms: [...a.comms, ...b.comms],
    contexts: [...a.contexts, ...b.contexts],
    targets: [...a.targets, ...b.targets],
    containers: [...a.containers, ...b.containers],
  };
}

export class StoreWriterError extends KreplayError {
  declare readonly code: 'E_DATA_DIR';
  constructor(code: 'E_DATA_DIR', message: string) {
    super(code, message);
  }
}

export interface StoreWriterOptions {
  checkpoint?: CheckpointPolicyOptions;
  /** SQLite's page cache, KiB (default WRITER_CACHE_KIB) */
  cacheKib?: number;
  /** no retention when absent: the store keeps everything */
  retention?: RetentionOptions;
  now?: () => bigint;
}

export function storePath(dataDir: string, node: string): string {
  return join(dataDir, `${node}.db`);
}

/* Node 20's recursive mkdir spins forever under /proc, so create parents one at a time. */
function makeDirs(path: string): void {
  try {
    if (statSync(path).isDirectory()) return;
  } catch {
    makeDirs(dirname(path));
    mkdirSync(path);
  }
}

function ensureWritableDir(dataDir: string): void {
  try {
    makeDirs(resolve(dataDir));
    if (!statSync(dataDir).isDirectory()) throw new Error('not a directory');
    accessSync(dataDir, constants.W_OK);
  } catch (err) {
    throw new StoreWriterError(
      'E_DATA_DIR',
      `data dir ${dataDir} is not a writable directory: ${(err as Error).message}`,
    );
  }
}

export class StoreWriter {
  readonly services: NameDictionary;
  readonly comms: NameDictionary;
  readonly contexts: ContextDictionary;
  readonly targets: TargetDictionary;
  readonly containers: NameDictionary;
  readonly checkpoints: CheckpointPolicy;
  rowsWritten = 0;
  readonly identity: FileIdentity;
  private nextSeq: number;
  /* dictionary entries of batches that failed to commit: the decoder's ids already refer to them */
  private unsavedNames: NewNames = NO_NAMES;
  private readonly pruner: Pruner | null;
  /*
   * Contexts retention removed that the decoder may still refer to, until it
   * acknowledges having forgotten them: a batch that does gets them back.
   */
  private readonly tombstones = new Map<number, { entry: ContextEntry; epoch: number }>();
  private forgetEpoch = 0;
  /* steps taken between the transactions of a batch, reported by the next prune() */
  private pruneSteps: PruneStep[] = [];
  /** the last checkpoint that failed, for the caller to report */
  checkpointFailure: Error | null = null;
  private runId = 0;
  private readonly lastCounters = new Map<string, number>();
  /** a transaction's events, every record type in one statement */
  private readonly insertEvents: EventInsert;
  private readonly setNextSeq: Database.Statement<[string]>;
  private readonly insertService: Database.Statement<NameEntry>;
  private readonly insertComm: Database.Statement<NameEntry>;
  private readonly insertContexts: ContextInsert;
  private readonly insertTarget: Database.Statement<TargetEntry>;
  /* a target the decoder forgot, used again by a write the kernel still names it in: its stamps by id */
  private readonly stampTarget: Database.Statement<
    [{ id: number; background: bigint | null; context: bigint | null }]
  >;
  /** events stored without their target: the decoder had forgotten it and retention had removed its row */
  lostTargets = 0;
  private readonly targetIds: IdHighWater;
  private readonly contextIds: IdHighWater;
  private readonly insertContainer: Database.Statement<NameEntry>;
  private readonly insertCounter: Database.Statement<[number, bigint, string, number]>;
  private readonly commitBatch: (batch: EventBatch, names: NewNames, start: number, end: number) => number;
  /* rows per transaction: a small store cap needs a small WAL, so shorter transactions */
  private readonly transactionRows: number;

  private constructor(
    readonly db: Database.Database,
    readonly info: StoreInfo,
    readonly path: string,
    private readonly releaseLock: () => void,
    options: StoreWriterOptions,
    /** options.retention resolved against the store's filesystem; null: no retention */
    policy: RetentionPolicy | null,
  ) {
    this.services = new NameDictionary(
      db.prepare('SELECT id, name FROM services').raw().all() as NameEntry[],
    );
    this.comms = new NameDictionary(db.prepare('SELECT id, name FROM comms').raw().all() as NameEntry[]);
    this.targetIds = new IdHighWater(db, 'targets', NEXT_TARGET_ID_META);
    this.contextIds = new IdHighWater(db, 'contexts', NEXT_CONTEXT_ID_META);
    this.contexts = new ContextDictionary([], this.contextIds.firstFree);
    this.targets = new TargetDictionary(this.targetIds.firstFree);
    this.insertService = db.prepare('INSERT INTO services (id, name) VALUES (?, ?)');
    this.insertComm = db.prepare('INSERT INTO comms (id, name) VALUES (?, ?)');
    // a target the batch used: new, stamped anew, or back after retention removed it with its last events
    this.insertTarget = db.prepare(
      `INSERT INTO targets (id, kind, value, last_background_ns, last_context_ns) VALUES (?, ?, ?, ?, ?)
       ON CONFLICT (id) DO UPDATE SET
         ${laterStamp('last_background_ns', 'excluded.last_background_ns')},
         ${laterStamp('last_context_ns', 'excluded.last_context_ns')}`,
    );
    this.stampTarget = db.prepare(
      `UPDATE targets SET ${laterStamp('last_background_ns', '@background')}, ${laterStamp('last_context_ns', '@context')}
       WHERE id = @id`,
    );
    this.containers = new NameDictionary(db.prepare(CONTAINERS_SQL).raw().all() as NameEntry[]);
    this.insertContainer = db.prepare('INSERT INTO containers (id, info) VALUES (?, ?)');
    const checkpoint =
      options.checkpoint ?? (policy ? checkpointPolicyFor(policy) : DEFAULT_CHECKPOINT_POLICY);
    this.checkpoints = new CheckpointPolicy(db, `${path}-wal`, checkpoint);
    this.transactionRows = policy ? transactionRowsFor(policy) : Number.POSITIVE_INFINITY;
    this.pruner = policy
      ? new Pruner(
          db,
          policy,
          walAllowanceFor(policy, checkpoint),
          () => this.checkpoints.walBytes(),
          options.now ?? epochNs,
        )
      : null;
    EventInsert.prepareConnection(db);
    this.insertContexts = new ContextInsert(db);
    this.insertEvents = new EventInsert(db);
    this.nextSeq = Number(
      (db.prepare(`SELECT value FROM meta WHERE key = 'next_seq'`).get() as { value: string }).value,
    );
    this.setNextSeq = db.prepare(`UPDATE meta SET value = ? WHERE key = 'next_seq'`);
    this.insertCounter = db.prepare(
      'INSERT OR REPLACE INTO counters (run_id, at_ns, name, value) VALUES (?, ?, ?, ?)',
    );
    this.commitBatch = db.transaction((batch: EventBatch, names: NewNames, start: number, end: number) => {
      for (const entry of names.services) this.insertService.run(...entry);
      for (const entry of names.comms) this.insertComm.run(...entry);
      this.insertContexts.run(names.contexts);
      this.contextIds.wrote(names.contexts.map((entry) => entry[0]));
      for (const entry of names.targets) {
        const [id, , value, background, context] = entry;
        if (value !== null) this.insertTarget.run(...entry);
        else if (this.stampTarget.run({ id, background, context }).changes === 0)
          this.lostTargets += batch.forgetTarget(id, start);
      }
      this.targetIds.wrote(names.targets.map((entry) => entry[0]));
      for (const entry of names.containers) this.insertContainer.run(...entry);
      const seq = this.insertEvents.run(batch, this.nextSeq, start, end);
      this.setNextSeq.run(String(seq));
      return seq;
    });
    const stat = statSync(path);
    this.identity = { dev: stat.dev, ino: stat.ino };
  }

  static open(dataDir: string, node: string, options: StoreWriterOptions = {}): StoreWriter {
    ensureWritableDir(dataDir);
    const path = storePath(dataDir, node);
    const releaseLock = acquireWriterLock(path);
    let db: Database.Database | undefined;
    try {
      const policy = options.retention ? resolvePolicy(dirname(path), options.retention) : null;
      const opened = openWriteStore(
        path,
        node,
        options.cacheKib,
        newStorePageBytes(policy?.maxStoreBytes ?? 0),
      );
      db = opened.db;
      return new StoreWriter(db, opened.info, path, releaseLock, options, policy);
    } catch (err) {
      db?.close();
      releaseLock();
      throw isCorruption(err) ? corruptStoreError(path, err) : err;
    }
  }

  /** Targets are not loaded (a host may write a new file a request): new ones start above every id a row ever had. */
  static firstFreeTargetId(db: Database.Database): number {
    return IdHighWater.firstFree(db, 'targets', NEXT_TARGET_ID_META);
  }

  /** Contexts are not loaded (there is one per transaction ever seen): new ones start above every id a row ever had. */
  static firstFreeContextId(db: Database.Database): number {
    return IdHighWater.firstFree(db, 'contexts', NEXT_CONTEXT_ID_META);
  }

  /** Whether `path` still names the file this writer has open (an operator may rm or replace it). */
  stillAtPath(): boolean {
    try {
      const stat = statSync(this.path);
      return stat.ino === this.identity.ino && stat.dev === this.identity.dev;
    } catch {
      return false;
    }
  }

  /**
   * Every dictionary entry of this store: a fresh store that replaces it
   * needs them all, because the decoder's ids refer to them.
   */
  allNames(): NewNames {
    return {
      services: this.db.prepare('SELECT id, name FROM services').raw().all() as NameEntry[],
      comms: this.db.prepare('SELECT id, name FROM comms').raw().all() as NameEntry[],
      contexts: this.db
        .prepare('SELECT id, transaction_id, trace_id, parent_span_id, trace_flags FROM contexts')
        .raw()
        .all() as ContextEntry[],
      // each batch brings the targets it used
      targets: [],
      containers: this.db.prepare(CONTAINERS_SQL).raw().all() as NameEntry[],
    };
  }

  /** Dictionary entries to write with the next batch (see allNames). */
  carryNames(names: NewNames): void {
    this.unsavedNames = joinNames(this.unsavedNames, names);
  }

  beginRun(run: RunStart): number {
    const row = this.db
      .prepare(
        `INSERT INTO runs (node, started_ns, kernel, agent_version, attach_points, clock_offset_ns, clock_error_ns, start_reason, sample_background, filter)
         VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?) RETURNING id`,
      )
      .get(
        run.node,
        run.startedNs,
        run.kernel,
        run.agentVersion,
        JSON.stringify(run.attachPoints),
        run.clockOffsetNs,
        Math.round(run.clockErrorNs),
        run.startReason ?? 'start',
        run.sampleBackground ?? 1,
        run.filter ?? null,
      ) as { id: number };
    this.runId = row.id;
    return row.id;
  }

  endRun(stoppedNs: bigint, reason: string): void {
    this.db
      .prepare('UPDATE runs SET stopped_ns = ?, exit_reason = ? WHERE id = ?')
      .run(stoppedNs, reason, this.runId);
  }

  /** Stores the counters whose value changed since the last call. */
  recordCounters(atNs: bigint, counters: Record<string, number>): void {
    const changed = Object.entries(counters).filter(([name, value]) => this.lastCounters.get(name) !== value);
    if (changed.length === 0) return;
    this.db.transaction(() => {
      for (const [name, value] of changed) this.insertCounter.run(this.runId, atNs, name, value);
    })();
    for (const [name, value] of changed) this.lastCounters.set(name, value);
  }

  /**
   * Commits the batch and the dictionary entries new since the last one in
   * one transaction. A writer in another thread passes the entries its
   * decoder's dictionaries assigned. The targets the batch used go with each of its transactions:
   * a prune between two may remove one that the later rows refer to.
   */
  writeBatch(batch: EventBatch, names: NewNames = takeNewNames(this, batch.baseTs)): void {
    let all = joinNames(this.unsavedNames, names);
    const used = all.targets;
    if (batch.count === 0 && countNewNames(all) === 0) return;
    let start = 0;
    do {
      const end = Math.min(batch.count, start + this.transactionRows);
      // each transaction's rows, not the batch's once: a prune between two of them raises the floors
      if (end > start) this.pruner?.inserted(batch.minTs(start, end));
      if (this.tombstones.size > 0) all = joinNames(this.revived(batch, start, end), all);
      try {
        this.nextSeq = this.commitBatch(batch, all, start, end);
      } catch (err) {
        this.unsavedNames = all;
        throw err;
      }
      this.targetIds.committed();
      this.contextIds.committed();
      this.unsavedNames = NO_NAMES;
      all = { ...NO_NAMES, targets: used };
      this.rowsWritten += end - start;
      this.afterCommit();
      // under a small cap one batch outgrows the room left: prune between its transactions
      if (end < batch.count && this.pruner) this.collectPrune(end - start);
      start = end;
    } while (start < batch.count);
  }

  private afterCommit(): void {
    try {
      this.checkpoints.afterCommit();
    } catch (err) {
      // the commit stands; a checkpoint a full disk refuses is retried after a later one
      this.checkpointFailure = err as Error;
    }
  }

  /**
   * Removes about `rows` rows that retention says must go. Returns the steps
   * and the contexts removed with their last events, under a new epoch the
   * decoder acknowledges once it forgot them (acknowledgeForgotten).
   */
  prune(rows: number): { steps: PruneStep[]; forgotten: ContextEntry[]; epoch: number } {
    this.collectPrune(rows);
    const steps = this.pruneSteps;
    this.pruneSteps = [];
    return { steps, forgotten: steps.flatMap((step) => step.forgotten), epoch: this.forgetEpoch };
  }

  private collectPrune(rows: number): void {
    if (!this.pruner) return;
    const steps = this.pruner.run(rows, () => this.afterCommit());
    const forgotten = steps.flatMap((step) => step.forgotten);
    if (forgotten.length > 0) {
      const epoch = ++this.forgetEpoch;
      for (const entry of forgotten) this.tombstones.set(entry[0], { entry, epoch });
    }
    this.pruneSteps.push(...steps);
  }

  /** The decoder forgot the contexts of every epoch up to this one: they stay removed. */
  acknowledgeForgotten(epoch: number): void {
    for (const [id, tombstone] of this.tombstones) if (tombstone.epoch <= epoch) this.tombstones.delete(id);
  }

  /* Contexts of rows [start, end) that retention removed while the batch was being filled. */
  private revived(batch: EventBatch, start: number, end: number): NewNames {
    const contexts: ContextEntry[] = [];
    for (let i = start; i < end; i++) {
      const tombstone = batch.ctx[i] === 0 ? undefined : this.tombstones.get(batch.ctx[i]!);
      if (!tombstone) continue;
      contexts.push(tombstone.entry);
      this.tombstones.delete(tombstone.entry[0]);
    }
    return { services: [], comms: [], contexts, targets: [], containers: [] };
  }

  dbBytes(): number {
    return statSync(this.path).size + this.checkpoints.walBytes();
  }

  /** Closes the file; a checkpoint that fails (a full disk) is left in the WAL for the next open. */
  close(): void {
    if (!this.db.open) return;
    try {
      this.db.pragma('wal_checkpoint(PASSIVE)');
    } catch {
      // the WAL stays valid; SQLite replays it on the next open
    }
    try {
      // A reader that may not write (the daemon's unit, a read-only mount) cannot open a WAL
      // store whose -wal and -shm are gone, as they are once the last connection closed: a
      // stopped agent leaves its store in rollback mode, which such a reader can open, and
      // openWriteStore turns WAL on again. While a reader holds the store this fails (busy)
      // and the -wal and -shm stay, which serves the reader as well.
      this.db.pragma('journal_mode = DELETE');
    } catch {
      // kept in WAL mode, as above
    }
    this.db.close();
    this.releaseLock();
  }
}
