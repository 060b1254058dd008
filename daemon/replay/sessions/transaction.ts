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
import type { FrameBuffer } from '../lane/frame-buffer';
import { framesOf, historyOf, type TransactionRange, type TransactionReader } from '../transaction-reader';
import type { FrameSpec, FramesWritten } from '../lane/frame-writer';
import type { HistoryFrames } from '../lane/history-writer';

/** Events per read ahead. */
export const PREFETCH_CHUNK = 2048;

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
    readonly log: Logger,
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
   * A resuming stream's history: the events from `start` (inclusive, the
   * replay's event `index`) on, framed where they are read, a page at a time
   * (one step per page, not per event: a resuming stream's history may be
   * 100,000 events), those from index `from` on sent, up to where `until()`
   * says the live stream is when the page is asked for. `lateness(a, b)`:
   * events a..b-1's, as released.
   */
  async *history(
    start: EventStart | undefined,
    index: number,
    from: number,
    until: () => number,
    lateness: (from: number, to: number) => Float64Array,
    schedule: Pick<FrameSpec, 'speedFactor' | 'extraLatencyNs'>,
  ): AsyncGenerator<HistoryFrames> {
    const range = this.range(start?.ts ?? this.firstTs);
    const skip = start?.eventId === undefined ? undefined : { ts: range.fromNs, eventId: start.eventId };
    const read = historyOf(this.reader);
    let after: EventPosition | undefined;
    for (let end = until(); index < end; end = until()) {
      const limit = Math.min(PREFETCH_CHUNK, end - index);
      const page = await read(range, limit, after, {
        ...schedule,
        firstTs: this.firstTs,
        firstIndex: index,
        skip,
        from,
        lateness: lateness(index, index + limit),
      });
      index += page.placed;
      yield page;
      if (!page.next) return;
      after = page.next;
    }
  }

  /** Events from `start` on, read ahead a page at a time as frames. */
  frames(start: EventStart | undefined): FrameReader {
    // a page's window: twice the time a page's worth of events takes at the transaction's mean rate
    const windowNs = ((this.durationNs + 1n) * BigInt(2 * PREFETCH_CHUNK)) / BigInt(this.total) + 1n;
    return new FrameReader(framesOf(this.reader), this.range(start?.ts ?? this.firstTs), start, windowNs);
  }

  /** Index (in replay order) of the first event at or after `ts`. */
  indexAt(ts: bigint): Promise<number> {
    return ts <= this.firstTs ? Promise.resolve(0) : this.reader.indexAt(this.id, this.firstTs, ts);
  }
}

/**
 * Reads the events from a start into a FrameBuffer as frames, a page per
 * fill(). Each read asks for a window of time from where the last one ended,
 * not for the rest of the transaction: a store that must read every row of
 * the range to find the first ones (ClickHouse 18.16's lookup subquery: 232
 * ms a page at 1M events) reads a window's worth instead. A window that gave
 * less than half a page is doubled for the next. A page the buffer had no
 * room for goes on from the last event written.
 */
export class FrameReader {
  private after: EventPosition | undefined;
  /** where the next window starts when there is no `after` (the last one was read to its end) */
  private fromNs: bigint;
  /** the range is read to its end */
  done = false;

  constructor(
    private readonly frames: NonNullable<TransactionReader['frames']>,
    private readonly range: TransactionRange,
    private readonly start: EventStart | undefined,
    private windowNs: bigint,
  ) {
    this.fromNs = range.fromNs;
  }

  /** Writes the next page's frames into `buffer`, the first as event `spec.firstIndex`. */
  async fill(buffer: FrameBuffer, spec: Omit<FrameSpec, 'skip'>): Promise<FramesWritten> {
    const fromNs = this.after?.ts ?? this.fromNs;
    const toNs = fromNs + this.windowNs < this.range.toNs ? fromNs + this.windowNs : this.range.toNs;
    const skip =
      this.start?.eventId === undefined ? undefined : { ts: this.range.fromNs, eventId: this.start.eventId };
    const written = await this.frames(
      { ...this.range, fromNs, toNs },
      PREFETCH_CHUNK,
      this.after,
      { ...spec, skip },
      buffer.dest(),
    );
    buffer.wrote(written);
    if (written.next === undefined) return written;
    this.after = written.next ?? undefined;
    // a window read to its end: the next starts where it ended, wider if this one was sparse
    if (written.next === null) {
      this.fromNs = toNs;
      if (written.read < PREFETCH_CHUNK / 2) this.windowNs *= 2n;
      this.done = toNs >= this.range.toNs;
    }
    return written;
  }
}
