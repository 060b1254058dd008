/**
 * A transaction's events in replay order, (timestamp_ns, event_id) across
 * every node, pinned to the span it had when the session was created.
 * Nothing is loaded up front: events are read lazily, a chunk at a time.
 * Where the daemon has query workers, replay reads ahead through them
 * (cursor), a chunk ahead of what it needs, so that the main thread never
 * waits on SQLite for a playing session.
 */
import type { ApiEvent } from '../../../core/model';
import type { Logger } from '../../../core/log/logger';
import type { EventFilter, EventPosition, PageOptions } from '../../store/event-filter';
import { Fifo } from '../fifo';
import { fromReplayChunk, toReplayEvent, type ReplayChunk, type ReplayEvent } from '../replay-event';
import type { ReplaySource } from '../replay-source';

/** Events read per store query: a few pages per second of dense replay. */
const CHUNK = 256;
/** Events per read through the query workers, and how few left start the next one (at least). */
const PREFETCH_CHUNK = 2048;
const PREFETCH_LOW = 2048;
/** A read that failed (the workers busy, say) is tried again after this, doubling up to the max. */
const RETRY_MS = 50;
const MAX_RETRY_MS = 2000;

/** Pages of events for replay, as the query workers answer them. */
export type EventPager = (filter: EventFilter, opts: PageOptions) => Promise<ReplayChunk>;

/** Events read ahead: the next one, null at the end, undefined while the next chunk is on its way. */
export interface EventCursor {
  next(): ReplayEvent | null | undefined;
  /** Resolves once `count` events are read ahead (default 1), or all there are. */
  ready(count?: number): Promise<void>;
  /** Stops reading ahead (the replay moved elsewhere). */
  close(): void;
}

/** Where reading starts: the first event at or after (ts, eventId); no eventId means any at ts. */
export interface EventStart {
  ts: bigint;
  eventId?: string;
}

export class Transaction {
  constructor(
    private readonly source: ReplaySource,
    readonly id: string,
    readonly firstTs: bigint,
    readonly lastTs: bigint,
    readonly total: number,
    /** where it is read ahead asynchronously; without it, synchronously from `source` */
    private readonly reading?: { pager: EventPager; log: Logger },
  ) {}

  /** The transaction as it is in the stores now, or null when it has no events. */
  static find(
    source: ReplaySource,
    id: string,
    reading?: { pager: EventPager; log: Logger },
  ): Transaction | null {
    const { count, firstTs, lastTs } = source.summarize({ transactionId: id });
    if (count === 0 || firstTs === null || lastTs === null) return null;
    return new Transaction(source, id, firstTs, lastTs, count, reading);
  }

  get durationNs(): bigint {
    return this.lastTs - this.firstTs;
  }

  private filter(fromNs: bigint, toNs = this.lastTs + 1n): EventFilter {
    return { transactionId: this.id, fromNs, toNs };
  }

  /** Every event from `start` (inclusive) to the end, lazily. */
  *events(start?: EventStart): Generator<ApiEvent> {
    const from = start?.ts ?? this.firstTs;
    for (const event of this.source.iterate(this.filter(from), { order: 'asc', chunk: CHUNK })) {
      if (!before(event, from, start)) yield event;
    }
  }

  /**
   * Events from `start` on for replay to read ahead: through the query
   * workers when the daemon has them (`onReady` is called each time a chunk
   * arrives), else straight from the source.
   */
  cursor(start: EventStart | undefined, onReady: () => void): EventCursor {
    if (!this.reading) {
      const events = this.events(start);
      return {
        next: () => {
          const event = events.next().value;
          return event ? toReplayEvent(event) : null;
        },
        ready: () => Promise.resolve(),
        close: () => events.return(undefined),
      };
    }
    return new PrefetchCursor(this.reading, this.filter(start?.ts ?? this.firstTs), start, onReady);
  }

  /** Index (in replay order) of the first event at or after `ts`. */
  indexAt(ts: bigint): number {
    return ts <= this.firstTs ? 0 : this.source.summarize(this.filter(this.firstTs, ts)).count;
  }
}

/** Events sharing the start's timestamp but ordered before it were emitted already. */
function before(
  event: Pick<ApiEvent, 'timestamp_ns' | 'event_id'>,
  from: bigint,
  start: EventStart | undefined,
): boolean {
  return start?.eventId !== undefined && event.timestamp_ns === from && event.event_id < start.eventId;
}

/** Reads a chunk ahead through the query workers, and the next once fewer than PREFETCH_LOW are left. */
class PrefetchCursor implements EventCursor {
  private readonly buffer = new Fifo<ReplayEvent>();
  private after: EventPosition | undefined;
  private done = false;
  private reading = false;
  private closed = false;
  private retryMs = RETRY_MS;
  /** how many events it keeps read ahead */
  private wanted = PREFETCH_LOW;
  /** resolved by the next read that lands */
  private landed: { promise: Promise<void>; resolve: () => void } = settlement();

  constructor(
    private readonly through: { pager: EventPager; log: Logger },
    private readonly filter: EventFilter,
    private readonly start: EventStart | undefined,
    private readonly onReady: () => void,
  ) {
    this.read();
  }

  next(): ReplayEvent | null | undefined {
    const event = this.buffer.shift();
    if (this.buffer.length < this.wanted && !this.done && !this.reading) this.read();
    if (event) return event;
    return this.done ? null : undefined;
  }

  async ready(count = 1): Promise<void> {
    this.wanted = Math.max(this.wanted, count);
    if (!this.reading && !this.done && this.buffer.length < count) this.read();
    while (!this.closed && !this.done && this.buffer.length < count) await this.landed.promise;
  }

  close(): void {
    this.closed = true;
    this.landed.resolve();
  }

  private read(): void {
    if (this.closed) return;
    this.reading = true;
    this.through.pager(this.filter, { order: 'asc', limit: PREFETCH_CHUNK, after: this.after }).then(
      (chunk) => {
        if (this.closed) return;
        const from = this.filter.fromNs!;
        for (const event of fromReplayChunk(chunk))
          if (!before(event, from, this.start)) this.buffer.push(event);
        this.after = chunk.next ?? undefined;
        this.done = chunk.next === null;
        this.reading = false;
        this.retryMs = RETRY_MS;
        this.landed.resolve();
        this.landed = settlement();
        if (this.buffer.length < this.wanted && !this.done) this.read();
        this.onReady();
      },
      (err: unknown) => {
        // a replay must not stop on a busy pool or a slow query: it falls behind and says so instead
        this.through.log.warn('replay read-ahead failed; trying again', {
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

function settlement(): { promise: Promise<void>; resolve: () => void } {
  let resolve = () => undefined as void;
  const promise = new Promise<void>((done) => (resolve = done));
  return { promise, resolve };
}
