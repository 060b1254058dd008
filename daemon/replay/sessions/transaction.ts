/**
 * A transaction's events in replay order, (timestamp_ns, event_id) across
 * every node, pinned to the span it had when the session was created.
 * Nothing is loaded up front: everything is read through the
 * TransactionReader (the query workers, or ClickHouse), a page at a time,
 * so the main thread never waits on a store and no transaction is held
 * whole. A playing session reads a page ahead of what it needs, a window
 * of time at a time.
 */
import type { Logger } from '../../../core/log/logger';
import type { EventPosition } from '../../store/event-filter';
import { Fifo } from '../fifo';
import { fromReplayChunk, type ReplayEvent } from '../replay-event';
import type { TransactionRange, TransactionReader } from '../transaction-reader';

/** Events per read ahead, and how few left start the next one (at least). */
export const PREFETCH_CHUNK = 2048;
export const PREFETCH_LOW = 2048;
/** A read that failed (the workers busy, say) is tried again after this, doubling up to the max. */
const RETRY_MS = 50;
const MAX_RETRY_MS = 2000;

/** Events read ahead: the next one, null at the end, undefined while the next page is on its way. */
export interface EventCursor {
  next(): ReplayEvent | null | undefined;
  /**
   * Resolves once an event is read ahead, or all there are; rejects with the
   * store's error when a read fails meanwhile (the cursor tries again by
   * itself all the same).
   */
  ready(): Promise<void>;
  /** Stops reading ahead (the replay moved elsewhere). */
  close(): void;
  /** called each time a page arrives */
  onReady: () => void;
}

/** Where reading starts: the first event at or after (ts, eventId); no eventId means any at ts. */
export interface EventStart {
  ts: bigint;
  eventId?: string;
}

export class Transaction {
  constructor(
    private readonly reader: TransactionReader,
    readonly id: string,
    readonly firstTs: bigint,
    readonly lastTs: bigint,
    readonly total: number,
    /** where failed reads ahead are told */
    private readonly log: Logger,
  ) {}

  /** The transaction as it is in the store now, or null when it has no events. */
  static async find(reader: TransactionReader, id: string, log: Logger): Promise<Transaction | null> {
    const { count, firstTs, lastTs } = await reader.summarize(id);
    if (count === 0 || firstTs === null || lastTs === null) return null;
    return new Transaction(reader, id, firstTs, lastTs, count, log);
  }

  get durationNs(): bigint {
    return this.lastTs - this.firstTs;
  }

  private range(fromNs: bigint): TransactionRange {
    return { transactionId: this.id, fromNs, toNs: this.lastTs + 1n };
  }

  /**
   * The events from `start` (inclusive) on, a page at a time, each page no
   * larger than `most()` says is still wanted (a resuming stream's history
   * reads no more than it sends).
   */
  async *events(start: EventStart | undefined, most: () => number): AsyncGenerator<ReplayEvent> {
    const range = this.range(start?.ts ?? this.firstTs);
    let after: EventPosition | undefined;
    for (;;) {
      const limit = Math.min(PREFETCH_CHUNK, Math.max(1, most()));
      const chunk = await this.reader.page(range, limit, after);
      for (const event of fromReplayChunk(chunk)) if (!before(event, range.fromNs, start)) yield event;
      if (!chunk.next) return;
      after = chunk.next;
    }
  }

  /** Events from `start` on, read ahead a page at a time. */
  cursor(start: EventStart | undefined): EventCursor {
    // a page's window: twice the time a page's worth of events takes at the transaction's mean rate
    const windowNs = ((this.durationNs + 1n) * BigInt(2 * PREFETCH_CHUNK)) / BigInt(this.total) + 1n;
    return new PrefetchCursor(this.reader, this.log, this.range(start?.ts ?? this.firstTs), start, windowNs);
  }

  /** Index (in replay order) of the first event at or after `ts`. */
  indexAt(ts: bigint): Promise<number> {
    return ts <= this.firstTs ? Promise.resolve(0) : this.reader.indexAt(this.id, this.firstTs, ts);
  }
}

/** Events sharing the start's timestamp but ordered before it were emitted already. */
function before(
  event: Pick<ReplayEvent, 'timestamp_ns' | 'event_id'>,
  from: bigint,
  start: EventStart | undefined,
): boolean {
  return start?.eventId !== undefined && event.timestamp_ns === from && event.event_id < start.eventId;
}

/**
 * Reads a page ahead, and the next once fewer than PREFETCH_LOW are left.
 * Each read asks for a window of time from where the last one ended, not
 * for the rest of the transaction: a store that must read every row of the
 * range to find the first ones (ClickHouse 18.16's lookup subquery: 232 ms
 * a page at 1M events) reads a window's worth instead. A window that gave
 * less than half a page is doubled for the next.
 */
class PrefetchCursor implements EventCursor {
  private readonly buffer = new Fifo<ReplayEvent>();
  private after: EventPosition | undefined;
  /** where the next window starts when there is no `after` (the last one was read to its end) */
  private fromNs: bigint;
  private done = false;
  private reading = false;
  private closed = false;
  private retryMs = RETRY_MS;
  /** settled by the next read that lands or fails */
  private landed = settlement();
  onReady = () => undefined as void;

  constructor(
    private readonly reader: TransactionReader,
    private readonly log: Logger,
    private readonly range: TransactionRange,
    private readonly start: EventStart | undefined,
    private windowNs: bigint,
  ) {
    this.fromNs = range.fromNs;
    this.read();
  }

  next(): ReplayEvent | null | undefined {
    const event = this.buffer.shift();
    if (this.buffer.length < PREFETCH_LOW && !this.done && !this.reading) this.read();
    if (event) return event;
    return this.done ? null : undefined;
  }

  async ready(): Promise<void> {
    if (!this.reading && !this.done && this.buffer.length === 0) this.read();
    while (!this.closed && !this.done && this.buffer.length === 0) await this.landed.promise;
  }

  close(): void {
    this.closed = true;
    this.landed.resolve();
  }

  private read(): void {
    if (this.closed) return;
    this.reading = true;
    const fromNs = this.after?.ts ?? this.fromNs;
    const toNs = fromNs + this.windowNs < this.range.toNs ? fromNs + this.windowNs : this.range.toNs;
    this.reader.page({ ...this.range, fromNs, toNs }, PREFETCH_CHUNK, this.after).then(
      (chunk) => {
        if (this.closed) return;
        const events = fromReplayChunk(chunk);
        for (const event of events)
          if (!before(event, this.range.fromNs, this.start)) this.buffer.push(event);
        this.after = chunk.next ?? undefined;
        // a window read to its end: the next starts where it ended, wider if this one was sparse
        if (!chunk.next) this.fromNs = toNs;
        if (!chunk.next && events.length < PREFETCH_CHUNK / 2) this.windowNs *= 2n;
        this.done = chunk.next === null && toNs >= this.range.toNs;
        this.reading = false;
        this.retryMs = RETRY_MS;
        this.landed.resolve();
        this.landed = settlement();
        if (this.buffer.length < PREFETCH_LOW && !this.done) this.read();
        this.onReady();
      },
      (err: unknown) => {
        if (this.closed) return;
        // whoever waits for these events (a play, a seek) is told; a playing replay must not stop on a
        // busy pool or a slow query: it falls behind and says so instead
        this.landed.reject(err as Error);
        this.landed = settlement();
        this.log.warn('replay read-ahead failed; trying again', {
          error: (err as Error).message,
          retryMs: this.retryMs,
        });
        setTimeout(() => {
          this.reading = false;
          this.read();
        }, this.retryMs).unref();
        this.retryMs = Math.min(MAX_RETRY_MS, this.retryMs * 2);
      },
    );
  }
}

interface Settlement {
  promise: Promise<void>;
  resolve(): void;
  reject(err: Error): void;
}

function settlement(): Settlement {
  let resolve = () => undefined as void;
  let reject = (_err: Error) => undefined as void;
  const promise = new Promise<void>((done, fail) => ((resolve = done), (reject = fail)));
  // nobody may be waiting when a read fails
  promise.catch(() => undefined);
  return { promise, resolve, reject };
}
