/** The one writer of a node's store: runs, counters and event batches. */
import { KreplayError } from '../../core/errors';
import type Database from 'better-sqlite3';
import { accessSync, constants, mkdirSync, statSync } from 'node:fs';
import { dirname, join, resolve } from 'node:path';
import { openWriteStore, type StoreInfo } from '../../core/store/schema';
import { RecordType } from '../../core/model';
import type { EventBatch } from '../ingest/event-batch';
import { CheckpointPolicy, type CheckpointPolicyOptions } from './checkpoint-policy';
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
import { EventInsert } from './event-insert';
import { acquireWriterLock } from './writer-lock';

export interface RunStart {
  node: string;
  startedNs: bigint;
  kernel: string;
  agentVersion: string;
  attachPoints: string[];
  clockOffsetNs: bigint;
  clockErrorNs: number;
}

export class StoreWriterError extends KreplayError {
  declare readonly code: 'E_DATA_DIR';
  constructor(code: 'E_DATA_DIR', message: string) {
    super(code, message);
  }
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
  readonly checkpoints: CheckpointPolicy;
  rowsWritten = 0;
  private nextSeq: number;
  private runId = 0;
  private readonly lastCounters = new Map<string, number>();
  private readonly sysWrites: EventInsert;
  private readonly blockIos: EventInsert;
  private readonly setNextSeq: Database.Statement<[string]>;
  private readonly insertService: Database.Statement<NameEntry>;
  private readonly insertComm: Database.Statement<NameEntry>;
  private readonly insertContext: Database.Statement<ContextEntry>;
  private readonly insertTarget: Database.Statement<TargetEntry>;
  private readonly insertCounter: Database.Statement<[number, bigint, string, number]>;
  private readonly commitBatch: (batch: EventBatch, names: NewNames) => void;

  private constructor(
    readonly db: Database.Database,
    readonly info: StoreInfo,
    readonly path: string,
    private readonly releaseLock: () => void,
    checkpointOptions?: CheckpointPolicyOptions,
  ) {
    this.services = new NameDictionary(
      db.prepare('SELECT id, name FROM services').raw().all() as NameEntry[],
    );
    this.comms = new NameDictionary(db.prepare('SELECT id, name FROM comms').raw().all() as NameEntry[]);
    this.contexts = new ContextDictionary(
      db.prepare('SELECT id, transaction_id, trace_id FROM contexts').raw().all() as ContextEntry[],
    );
    this.targets = new TargetDictionary(
      db.prepare('SELECT id, kind, value FROM targets').raw().all() as TargetEntry[],
    );
    this.insertService = db.prepare('INSERT INTO services (id, name) VALUES (?, ?)');
    this.insertComm = db.prepare('INSERT INTO comms (id, name) VALUES (?, ?)');
    this.insertContext = db.prepare('INSERT INTO contexts (id, transaction_id, trace_id) VALUES (?, ?, ?)');
    this.insertTarget = db.prepare('INSERT INTO targets (id, kind, value) VALUES (?, ?, ?)');
    this.checkpoints = new CheckpointPolicy(db, `${path}-wal`, checkpointOptions);
    this.sysWrites = new EventInsert(db, RecordType.SysWrite);
    this.blockIos = new EventInsert(db, RecordType.BlockIo);
    this.nextSeq = Number(
      (db.prepare(`SELECT value FROM meta WHERE key = 'next_seq'`).get() as { value: string }).value,
    );
    this.setNextSeq = db.prepare(`UPDATE meta SET value = ? WHERE key = 'next_seq'`);
    this.insertCounter = db.prepare(
      'INSERT OR REPLACE INTO counters (run_id, at_ns, name, value) VALUES (?, ?, ?, ?)',
    );
    this.commitBatch = db.transaction((batch: EventBatch, names: NewNames) => {
      for (const entry of names.services) this.insertService.run(...entry);
      for (const entry of names.comms) this.insertComm.run(...entry);
      for (const entry of names.contexts) this.insertContext.run(...entry);
      for (const entry of names.targets) this.insertTarget.run(...entry);
      let seq = this.sysWrites.run(batch, this.nextSeq);
      seq = this.blockIos.run(batch, seq);
      this.setNextSeq.run(String(seq));
      this.nextSeq = seq;
    });
  }

  static open(dataDir: string, node: string, checkpointOptions?: CheckpointPolicyOptions): StoreWriter {
    ensureWritableDir(dataDir);
    const path = storePath(dataDir, node);
    const releaseLock = acquireWriterLock(path);
    try {
      const { db, info } = openWriteStore(path, node);
      return new StoreWriter(db, info, path, releaseLock, checkpointOptions);
    } catch (err) {
      releaseLock();
      throw err;
    }
  }

  beginRun(run: RunStart): number {
    const row = this.db
      .prepare(
        `INSERT INTO runs (node, started_ns, kernel, agent_version, attach_points, clock_offset_ns, clock_error_ns)
         VALUES (?, ?, ?, ?, ?, ?, ?) RETURNING id`,
      )
      .get(
        run.node,
        run.startedNs,
        run.kernel,
        run.agentVersion,
        JSON.stringify(run.attachPoints),
        run.clockOffsetNs,
        Math.round(run.clockErrorNs),
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
      for (const [name, value] of changed) {
        this.insertCounter.run(this.runId, atNs, name, value);
        this.lastCounters.set(name, value);
      }
    })();
  }

  /**
   * Commits the batch and the dictionary entries new since the last one in
   * one transaction. A writer in another thread passes the entries its
   * decoder's dictionaries assigned.
   */
  writeBatch(batch: EventBatch, names: NewNames = takeNewNames(this)): void {
    if (batch.count === 0 && countNewNames(names) === 0) return;
    this.commitBatch(batch, names);
    this.rowsWritten += batch.count;
    this.checkpoints.afterCommit();
  }

  dbBytes(): number {
    return statSync(this.path).size + this.checkpoints.walBytes();
  }

  close(): void {
    if (this.db.open) {
      this.db.pragma('wal_checkpoint(PASSIVE)');
      this.db.close();
      this.releaseLock();
    }
  }
}
