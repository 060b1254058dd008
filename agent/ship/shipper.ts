/**
 * Ships a node store's committed events to ClickHouse. The node file stays
 * the source of truth and the outbox; the work (read from the cursor,
 * encode, compress, send, move the cursor once acknowledged) runs on a
 * thread of its own (agent/ship/ship-loop.ts), so shipping never takes the
 * thread that decodes the capture. This side learns the progress and
 * counts the lag on its own read connection when asked. ClickHouse down,
 * slow or refusing: capture and local storage go on, the thread retries and
 * catches up in full batches.
 */
import Database from 'better-sqlite3';
import type { Worker } from 'node:worker_threads';
import type { ClickHouseHttp } from '../../core/clickhouse/http-client';
import { startThread } from '../../core/threads/start-thread';
import type { ShipLoopOptions, ShipProgress } from './ship-loop';
import { LAST_SEQ_SQL } from './ship-sql';
import type { ShipThreadData, ToShipThread } from './ship-protocol';
import { epochNs } from '../../core/epoch-ns';

export interface ShipperOptions extends ShipLoopOptions {
  /** wall-clock nanoseconds: the first waiting event's age by its stamp, when first seen */
  nowNs?: () => bigint;
}

/** The loop's progress as the status line and metrics show it, with the lag the owner counts. */
export interface ShipStatus extends Pick<ShipProgress, 'state' | 'shipped' | 'retries' | 'lastError'> {
  destination: string;
  lagEvents: number;
  lagSeconds: number;
}

/** Waiting events counted one by one up to this many (see measureLag). */
const LAG_COUNT_LIMIT = 10_000;

export class Shipper {
  private readonly db: Database.Database;
  private readonly nowNs: () => bigint;
  private readonly lastSeq: Database.Statement<[], number | null>;
  private readonly countUpTo: Database.Statement<[number, number], number>;
  private readonly firstFrom: Database.Statement<[number], { seq: bigint; ts: bigint }>;
  private readonly destination: string;
  private progress: ShipProgress;
  private lag = { events: 0, seconds: 0 };
  /**
   * The first waiting event, and when it was stamped on performance.now()'s clock (its age by the
   * wall clock when first seen): a wall clock step while it waits does not change its lag (by its
   * stamp alone, stepped back an hour, a stalled shipper read a lag of 0 s for the hour).
   */
  private first: { seq: bigint; stampedMs: number } | null = null;
  private worker: Worker | null = null;
  private stopped: Promise<void> | null = null;
  private restartTimer: NodeJS.Timeout | null = null;

  constructor(
    private readonly storePath: string,
    private readonly clickhouse: ClickHouseHttp,
    private readonly options: ShipperOptions = {},
  ) {
    this.nowNs = options.nowNs ?? epochNs;
    // read only here: the shipper's thread writes ship_cursors on its own connection
    this.db = new Database(storePath, { fileMustExist: true });
    this.db.pragma('busy_timeout = 5000');
    this.lastSeq = this.db.prepare<[], number | null>(LAST_SEQ_SQL).pluck();
    this.countUpTo = this.db
      .prepare<[number, number], number>(
        'SELECT count(*) FROM (SELECT 1 FROM events INDEXED BY events_by_seq WHERE seq >= ? LIMIT ?)',
      )
      .pluck();
    this.firstFrom = this.db
      .prepare<[number], { seq: bigint; ts: bigint }>(
        'SELECT seq, ts FROM events INDEXED BY events_by_seq WHERE seq >= ? ORDER BY seq LIMIT 1',
      )
      .safeIntegers(true);
    const { database, cluster } = clickhouse.endpoint;
    // a cluster is another destination than its entry server alone: its cursor starts afresh
    this.destination = `clickhouse://${clickhouse.name}/${database}${cluster ? `?cluster=${cluster}` : ''}`;
    const saved = this.db
      .prepare<[string], { next_seq: number; shipped: number }>(
        'SELECT next_seq, shipped FROM ship_cursors WHERE destination = ?',
      )
      .get(this.destination);
    this.progress = {
      state: 'starting',
      cursor: saved?.next_seq ?? 1,
      shipped: saved?.shipped ?? 0,
      retries: 0,
      lastError: null,
    };
  }

  start(): void {
    if (this.worker || this.stopped) return;
    const { nowNs: _, ...loopOptions } = this.options;
    const data: ShipThreadData = {
      storePath: this.storePath,
      endpoint: this.clickhouse.endpoint,
      timeoutMs: this.clickhouse.timeoutMs,
      destination: this.destination,
      progress: this.progress,
      options: loopOptions,
    };
    const worker = startThread(__dirname, 'ship-thread', { workerData: data, name: 'shipper' });
    this.worker = worker;
    worker.on('message', (progress: ShipProgress) => (this.progress = progress));
    worker.on('error', (err) => {
      // the thread could not open the file or its extension, or failed outside the loop's retries:
      // reported like a failed batch, and a new thread starts from the cursor after the longest backoff
      this.worker = null;
      this.progress = {
        ...this.progress,
        state: 'retrying',
        retries: this.progress.retries + 1,
        lastError: err.message,
      };
      if (!this.stopped)
        this.restartTimer = setTimeout(() => {
          this.restartTimer = null;
          this.start();
        }, this.options.retryMaxMs ?? 30_000);
    });
  }

  /**
   * Stops after the batch in flight (acknowledged or not: the cursor says which). With `flushMs`,
   * when ClickHouse took the last batch, what is stored by then is shipped first, for at most that
   * long (the agent drains its store before): a clean stop leaves no tail for the next run.
   */
  stop(flushMs = 0): Promise<void> {
    this.stopped ??= this.shutDown(flushMs);
    return this.stopped;
  }

  private async shutDown(flushMs: number): Promise<void> {
    if (this.restartTimer) clearTimeout(this.restartTimer);
    const worker = this.worker;
    if (worker) {
      const exited = new Promise<void>((resolve) => worker.once('exit', () => resolve()));
      const stopped = new Promise<void>((resolve) =>
        worker.on('message', (p: ShipProgress) => p.state === 'stopped' && resolve()),
      );
      worker.postMessage({ op: 'stop', flushMs } satisfies ToShipThread);
      // its last message says the loop closed its connection; idle keep-alive sockets may hold it
      await Promise.race([stopped, exited]);
      await worker.terminate();
    }
    this.progress = { ...this.progress, state: 'stopped' };
    this.db.close();
  }

  /** `measureLag`: count the events waiting now (a scan from the cursor), else the last count. */
  status(measureLag = true): ShipStatus {
    if (measureLag && this.db.open) this.measureLag();
    const { state, shipped, retries, lastError } = this.progress;
    return {
      destination: this.destination,
      state,
      shipped,
      lagEvents: this.lag.events,
      lagSeconds: this.lag.seconds,
      retries,
      lastError,
    };
  }

  private measureLag(): void {
    // the events waiting, not the seqs: retention (the store cap) may have removed unshipped
    // ones, up to the newest, and a cursor past every remaining seq then has nothing to send.
    // Counted up to a bound, so a status line costs the same under a backlog of millions; past
    // it, the seqs from the cursor to the newest (an upper bound when retention removed some).
    const cursor = this.progress.cursor;
    const counted = this.countUpTo.get(cursor, LAG_COUNT_LIMIT)!;
    const events =
      counted < LAG_COUNT_LIMIT ? counted : Math.max(counted, (this.lastSeq.get() ?? 0) - cursor + 1);
    const oldest = events > 0 ? this.firstFrom.get(cursor) : undefined;
    if (!oldest) this.first = null;
    else if (this.first?.seq !== oldest.seq) {
      const ageMs = Math.max(0, Number(this.nowNs() - oldest.ts) / 1e6);
      this.first = { seq: oldest.seq, stampedMs: performance.now() - ageMs };
    }
    this.lag = { events, seconds: this.first ? (performance.now() - this.first.stampedMs) / 1000 : 0 };
  }
}
