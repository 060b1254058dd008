/**
 * The shipper's work, on its own thread (agent/ship/ship-thread.ts): its
 * own connection to the node file reads batches in commit order from the
 * cursor kept in ship_cursors, and moves the cursor only after ClickHouse
 * acknowledged the batch. A crash between the two re-sends the batch, which
 * the fleet tables collapse (see core/clickhouse/schema.ts). ClickHouse
 * down, slow or refusing: the loop retries with exponential backoff and
 * catches up in full batches. It tells its owner each change of progress.
 */
import Database from 'better-sqlite3';
import { DEFAULT_SHIP_CODEC, type ClickHouseHttp } from '../../core/clickhouse/http-client';
import { eventsTable, migrateClickHouse } from '../../core/clickhouse/schema';
import { readStoreInfo } from '../../core/store/schema';
import { ShipBatchReader, type ShipBatch } from './ship-batch';
import { LAST_SEQ_SQL } from './ship-sql';
import { WakeableSleep } from '../wakeable-sleep';
import { epochNs } from '../../core/epoch-ns';

export interface ShipLoopOptions {
  /** ships once this many events wait (default 10,000) */
  batchRows?: number;
  /**
   * a batch when more than batchRows wait: up to this many (default 100,000), so a backlog
   * goes in fewer, larger inserts (ClickHouse makes a part of each, then merges them)
   */
  maxBatchRows?: number;
  /** or once the oldest waiting event has waited this long (default 1 s) */
  maxDelayMs?: number;
  retryInitialMs?: number;
  retryMaxMs?: number;
}

/** What the loop tells its owner after each batch, retry and stop. */
export interface ShipProgress {
  state: 'starting' | 'shipping' | 'retrying' | 'stopped';
  /** the first seq not acknowledged yet */
  cursor: number;
  shipped: number;
  retries: number;
  lastError: string | null;
}

const IDLE_POLL_MS = 100;

export class ShipLoop {
  private readonly db: Database.Database;
  private readonly reader: ShipBatchReader;
  private readonly batchRows: number;
  private readonly maxBatchRows: number;
  private readonly maxDelayMs: number;
  private readonly retryInitialMs: number;
  private readonly retryMaxMs: number;
  private readonly lastSeq: Database.Statement<[], number | null>;
  private readonly writeCursor: Database.Statement<[string, number, number, bigint]>;
  private stopping = false;
  private readonly pause = new WakeableSleep();
  private loop: Promise<void> | null = null;

  constructor(
    storePath: string,
    private readonly clickhouse: ClickHouseHttp,
    private readonly destination: string,
    private readonly progress: ShipProgress,
    private readonly report: (progress: ShipProgress) => void,
    options: ShipLoopOptions = {},
  ) {
    this.batchRows = options.batchRows ?? 10_000;
    this.maxBatchRows = Math.max(this.batchRows, options.maxBatchRows ?? 100_000);
    this.maxDelayMs = options.maxDelayMs ?? 1000;
    this.retryInitialMs = options.retryInitialMs ?? 500;
    this.retryMaxMs = options.retryMaxMs ?? 30_000;
    // the agent's writer has created and migrated the file; this connection writes only ship_cursors
    this.db = new Database(storePath, { fileMustExist: true });
    this.db.pragma('busy_timeout = 5000');
    // the writer checkpoints the WAL on its own policy (agent/store/checkpoint-policy.ts): with
    // SQLite's default, each cursor commit past 1,000 pages of WAL made this thread checkpoint
    // (15% of its time, fsyncs included). A cursor commit lost to a power cut re-sends a batch,
    // which collapses as any re-sent batch does: no fsync per batch either
    this.db.pragma('wal_autocheckpoint = 0');
    this.db.pragma('synchronous = NORMAL');
    this.reader = new ShipBatchReader(
      this.db,
      readStoreInfo(this.db),
      undefined,
      clickhouse.endpoint.compression ?? DEFAULT_SHIP_CODEC,
    );
    // whether a batch is due: the seqs past the cursor, from the newest one (one index lookup, where
    // counting rows scanned up to a batch's worth of the index on every poll); retention's gaps only
    // make a batch smaller than that
    this.lastSeq = this.db.prepare<[], number | null>(LAST_SEQ_SQL).pluck();
    this.writeCursor = this.db.prepare(
      `INSERT INTO ship_cursors (destination, next_seq, shipped, updated_ns) VALUES (?, ?, ?, ?)
       ON CONFLICT (destination) DO UPDATE SET next_seq = excluded.next_seq, shipped = excluded.shipped, updated_ns = excluded.updated_ns`,
    );
  }

  start(): void {
    this.loop ??= this.run();
  }

  /**
   * Stops after the batch in flight (acknowledged or not: the cursor says which). With `flushMs`,
   * when ClickHouse took the last batch, what is stored by then is shipped first, for at most that
   * long (the agent drains its store before): a clean stop leaves no tail for the next run.
   */
  async stop(flushMs = 0): Promise<void> {
    this.stopping = true;
    this.pause.wake();
    await this.loop;
    if (flushMs > 0 && this.progress.state === 'shipping') await this.flush(performance.now() + flushMs);
    this.progress.state = 'stopped';
    this.db.close();
    this.report(this.progress);
  }

  /** deadline: performance.now()'s, as every wait of the loop (a wall clock step neither ends it nor stretches it) */
  private async flush(deadline: number): Promise<void> {
    try {
      while (performance.now() < deadline) {
        const batch = this.reader.read(this.progress.cursor, this.batchRows);
        if (batch.count === 0) return;
        await this.send(batch, deadline - performance.now());
      }
    } catch (err) {
      // not acknowledged: it stays in the store, and the next run ships it from the cursor
      this.progress.lastError = `the stop's flush left its tail for the next run: ${(err as Error).message}`;
    }
  }

  /** Inserts a batch and, once ClickHouse acknowledged it, moves the cursor past it. */
  private async send(batch: ShipBatch, timeoutMs?: number): Promise<void> {
    const table = eventsTable(this.clickhouse.endpoint);
    await this.clickhouse.exec(this.reader.insert(table), batch.rows, undefined, timeoutMs);
    this.progress.cursor = batch.nextSeq;
    this.progress.shipped += batch.count;
    this.progress.state = 'shipping';
    this.progress.lastError = null;
    this.writeCursor.run(this.destination, batch.nextSeq, this.progress.shipped, epochNs());
    this.report(this.progress);
  }

  private async run(): Promise<void> {
    let backoff = this.retryInitialMs;
    let migrated = false;
    let waitingSince: number | null = null;
    while (!this.stopping) {
      try {
        if (!migrated) {
          await migrateClickHouse(this.clickhouse);
          migrated = true;
        }
        const waiting = Math.max(0, (this.lastSeq.get() ?? 0) - this.progress.cursor + 1);
        if (waiting === 0) waitingSince = null;
        else waitingSince ??= performance.now();
        const due =
          waiting >= this.batchRows || (waiting > 0 && performance.now() - waitingSince! >= this.maxDelayMs);
        if (!due) {
          await this.pause.sleep(IDLE_POLL_MS);
          continue;
        }
        const batch = this.reader.read(
          this.progress.cursor,
          waiting >= this.batchRows ? this.maxBatchRows : this.batchRows,
        );
        // none when retention removed the rows meanwhile: the cursor stays, the next poll sees
        if (batch.count > 0) await this.send(batch);
        backoff = this.retryInitialMs;
        // a full batch means more may wait: go on at once
        if (batch.count < this.batchRows) waitingSince = null;
      } catch (err) {
        this.progress.state = 'retrying';
        this.progress.retries++;
        this.progress.lastError = (err as Error).message;
        this.report(this.progress);
        await this.pause.sleep(backoff);
        backoff = Math.min(backoff * 2, this.retryMaxMs);
      }
    }
  }
}
