/**
 * Ships a node store's committed events to ClickHouse. The node file stays
 * the source of truth and the outbox: the shipper has its own connection,
 * reads batches in commit order from the cursor kept in ship_cursors, and
 * moves the cursor only after ClickHouse acknowledged the batch. A crash
 * between the two re-sends the batch, which the fleet tables collapse (see
 * core/clickhouse/schema.ts). ClickHouse down, slow or refusing: capture
 * and local storage go on, the shipper retries with exponential backoff
 * and catches up in full batches.
 */
import Database from 'better-sqlite3';
import type { ClickHouseHttp } from '../../core/clickhouse/http-client';
import { eventsTable, migrateClickHouse } from '../../core/clickhouse/schema';
import { readStoreInfo } from '../../core/store/schema';
import { ShipBatchReader, type ShipBatch } from './ship-batch';

export interface ShipperOptions {
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
  /** wall-clock nanoseconds, for the lag in seconds */
  nowNs?: () => bigint;
}

export interface ShipStatus {
  destination: string;
  state: 'starting' | 'shipping' | 'retrying' | 'stopped';
  shipped: number;
  lagEvents: number;
  lagSeconds: number;
  retries: number;
  lastError: string | null;
}

const IDLE_POLL_MS = 100;
/** Waiting events counted one by one up to this many (see measureLag). */
const LAG_COUNT_LIMIT = 10_000;

export class Shipper {
  private readonly db: Database.Database;
  private readonly reader: ShipBatchReader;
  private readonly batchRows: number;
  private readonly maxBatchRows: number;
  private readonly maxDelayMs: number;
  private readonly retryInitialMs: number;
  private readonly retryMaxMs: number;
  private readonly nowNs: () => bigint;
  private readonly lastSeq: Database.Statement<[], number | null>;
  private readonly countUpTo: Database.Statement<[number, number], number>;
  private readonly readCursor: Database.Statement<[string], { next_seq: number; shipped: number }>;
  private readonly writeCursor: Database.Statement<[string, number, number, bigint]>;
  private readonly tsOfSeq: Database.Statement<[number], { ts: bigint }>;
  private cursor: number;
  private stopping = false;
  private wake: (() => void) | null = null;
  private loop: Promise<void> | null = null;
  private readonly current: ShipStatus;

  constructor(
    storePath: string,
    private readonly clickhouse: ClickHouseHttp,
    options: ShipperOptions = {},
  ) {
    this.batchRows = options.batchRows ?? 10_000;
    this.maxBatchRows = Math.max(this.batchRows, options.maxBatchRows ?? 100_000);
    this.maxDelayMs = options.maxDelayMs ?? 1000;
    this.retryInitialMs = options.retryInitialMs ?? 500;
    this.retryMaxMs = options.retryMaxMs ?? 30_000;
    this.nowNs = options.nowNs ?? (() => BigInt(Date.now()) * 1_000_000n);
    // the agent's writer has created and migrated the file; this connection writes only ship_cursors
    this.db = new Database(storePath, { fileMustExist: true });
    this.db.pragma('busy_timeout = 5000');
    this.reader = new ShipBatchReader(this.db, readStoreInfo(this.db));
    this.lastSeq = this.db.prepare<[], number | null>('SELECT max(seq) FROM events').pluck();
    // whether a batch is due needs at most a batch's count: a backlog of millions is not counted per batch
    this.countUpTo = this.db
      .prepare<[number, number], number>(
        'SELECT count(*) FROM (SELECT 1 FROM events INDEXED BY events_by_seq WHERE seq >= ? LIMIT ?)',
      )
      .pluck();
    this.readCursor = this.db.prepare('SELECT next_seq, shipped FROM ship_cursors WHERE destination = ?');
    this.writeCursor = this.db.prepare(
      `INSERT INTO ship_cursors (destination, next_seq, shipped, updated_ns) VALUES (?, ?, ?, ?)
       ON CONFLICT (destination) DO UPDATE SET next_seq = excluded.next_seq, shipped = excluded.shipped, updated_ns = excluded.updated_ns`,
    );
    this.tsOfSeq = this.db
      .prepare<[number], { ts: bigint }>(
        'SELECT ts FROM events INDEXED BY events_by_seq WHERE seq >= ? ORDER BY seq LIMIT 1',
      )
      .safeIntegers(true);
    const { database, cluster } = clickhouse.endpoint;
    // a cluster is another destination than its entry server alone: its cursor starts afresh
    const destination = `clickhouse://${clickhouse.name}/${database}${cluster ? `?cluster=${cluster}` : ''}`;
    const saved = this.readCursor.get(destination);
    this.cursor = saved?.next_seq ?? 1;
    this.current = {
      destination,
      state: 'starting',
      shipped: saved?.shipped ?? 0,
      lagEvents: 0,
      lagSeconds: 0,
      retries: 0,
      lastError: null,
    };
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
    this.wake?.();
    await this.loop;
    if (flushMs > 0 && this.current.state === 'shipping') await this.flush(Date.now() + flushMs);
    this.current.state = 'stopped';
    this.db.close();
  }

  private async flush(deadline: number): Promise<void> {
    try {
      while (Date.now() < deadline) {
        const batch = this.reader.read(this.cursor, this.batchRows);
        if (batch.count === 0) return;
        await this.send(batch, deadline - Date.now());
      }
    } catch {
      // not acknowledged: it stays in the store, and the next run ships it from the cursor
    }
  }

  /** Inserts a batch and, once ClickHouse acknowledged it, moves the cursor past it. */
  private async send(batch: ShipBatch, timeoutMs?: number): Promise<void> {
    const table = eventsTable(this.clickhouse.endpoint);
    await this.clickhouse.exec(this.reader.insert(table), batch.rows, undefined, timeoutMs);
    this.cursor = batch.nextSeq;
    this.current.shipped += batch.count;
    this.writeCursor.run(this.current.destination, this.cursor, this.current.shipped, this.nowNs());
  }

  /** `measureLag`: count the events waiting now (a scan from the cursor), else the last count. */
  status(measureLag = true): ShipStatus {
    if (measureLag && this.db.open) this.measureLag();
    return { ...this.current };
  }

  private measureLag(): void {
    // the events waiting, not the seqs: retention (the store cap) may have removed unshipped
    // ones, up to the newest, and a cursor past every remaining seq then has nothing to send.
    // Counted up to a bound, so a status line costs the same under a backlog of millions; past
    // it, the seqs from the cursor to the newest (an upper bound when retention removed some).
    const counted = this.countUpTo.get(this.cursor, LAG_COUNT_LIMIT)!;
    this.current.lagEvents =
      counted < LAG_COUNT_LIMIT ? counted : Math.max(counted, (this.lastSeq.get() ?? 0) - this.cursor + 1);
    const oldest = this.current.lagEvents > 0 ? this.tsOfSeq.get(this.cursor) : undefined;
    this.current.lagSeconds = oldest ? Math.max(0, Number(this.nowNs() - oldest.ts) / 1e9) : 0;
  }

  private sleep(ms: number): Promise<void> {
    return new Promise((resolve) => {
      const timer = setTimeout(done, ms);
      function done(): void {
        clearTimeout(timer);
        resolve();
      }
      this.wake = done;
    });
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
        const waiting = this.countUpTo.get(this.cursor, this.batchRows)!;
        if (waiting === 0) waitingSince = null;
        else waitingSince ??= Date.now();
        const due =
          waiting >= this.batchRows || (waiting > 0 && Date.now() - waitingSince! >= this.maxDelayMs);
        if (!due) {
          await this.sleep(IDLE_POLL_MS);
          continue;
        }
        const batch = this.reader.read(
          this.cursor,
          waiting >= this.batchRows ? this.maxBatchRows : this.batchRows,
        );
        await this.send(batch);
        this.current.state = 'shipping';
        this.current.lastError = null;
        backoff = this.retryInitialMs;
        // a full batch means more may wait: go on at once
        if (batch.count < this.batchRows) waitingSince = null;
      } catch (err) {
        this.current.state = 'retrying';
        this.current.retries++;
        this.current.lastError = (err as Error).message;
        await this.sleep(backoff);
        backoff = Math.min(backoff * 2, this.retryMaxMs);
      }
    }
  }
}
