/**
 * A transaction's events in replay order, (timestamp_ns, event_id) across
 * every node, pinned to the span it had when the session was created.
 * Nothing is loaded up front: events are read lazily, a chunk at a time.
 */
import type { ApiEvent } from '../../../core/model';
import type { EventFilter } from '../../store/event-filter';
import type { ReplaySource } from '../replay-source';

/** Events read per store query: a few pages per second of dense replay. */
const CHUNK = 256;

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
  ) {}

  /** The transaction as it is in the stores now, or null when it has no events. */
  static find(source: ReplaySource, id: string): Transaction | null {
    const { count, firstTs, lastTs } = source.summarize({ transactionId: id });
    if (count === 0 || firstTs === null || lastTs === null) return null;
    return new Transaction(source, id, firstTs, lastTs, count);
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
      // events sharing the start's timestamp but ordered before it were emitted already
      if (start?.eventId !== undefined && event.timestamp_ns === from && event.event_id < start.eventId)
        continue;
      yield event;
    }
  }

  /** Index (in replay order) of the first event at or after `ts`. */
  indexAt(ts: bigint): number {
    return ts <= this.firstTs ? 0 : this.source.summarize(this.filter(this.firstTs, ts)).count;
  }
}
