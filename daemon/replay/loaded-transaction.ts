/**
 * Replay from a store that answers asynchronously (the fleet store in
 * ClickHouse): replay reads its transaction synchronously, a chunk at a
 * time, so the transaction is read whole when its session is created and
 * kept in memory, in (timestamp_ns, event_id) order. The load is bounded:
 * a transaction of more than MAX_LOADED_TRANSACTION_EVENTS events is refused
 * (422 transaction-too-large) before any of it is read, rather than
 * exhausting the daemon's memory; events that arrive while it loads count too.
 */
import type { ApiEvent } from '../../core/model';
import { ProblemError } from '../http/problem';
import type { EventFilter, EventPosition, EventSummary, IterateOptions } from '../store/event-filter';
import type { EventReader } from '../store/event-reader';
import type { ReplaySource } from './replay-source';

/** Events of one transaction a session may load (about 0.5 KiB each in memory: ~25 MiB). */
export const MAX_LOADED_TRANSACTION_EVENTS = 50_000;
/** Events per page while loading. */
const LOAD_PAGE = 5000;

function tooLarge(id: string, count: number, max: number): ProblemError {
  return new ProblemError(
    'transaction-too-large',
    `transaction ${JSON.stringify(id)} has ${count} events; replay from ClickHouse loads at most ${max} per session`,
  );
}

/** The first index whose event is at or after `ts` (events sorted by timestamp). */
function lowerBound(events: readonly ApiEvent[], ts: bigint): number {
  let lo = 0;
  let hi = events.length;
  while (lo < hi) {
    const mid = (lo + hi) >>> 1;
    if (events[mid]!.timestamp_ns < ts) lo = mid + 1;
    else hi = mid;
  }
  return lo;
}

/** One transaction's events in memory, read as replay reads a store: by time range, forward. */
export class LoadedTransaction implements ReplaySource {
  constructor(
    readonly id: string,
    private readonly events: readonly ApiEvent[],
  ) {}

  /** The events of `filter`'s time range; it may name no other transaction and ask for nothing else. */
  private slice(filter: EventFilter): readonly ApiEvent[] {
    const { transactionId, fromNs, toNs, ...rest } = filter;
    if (transactionId !== this.id || Object.values(rest).some((v) => v !== undefined))
      throw new Error(`a loaded transaction answers only time ranges of ${this.id}`);
    const from = fromNs === undefined ? 0 : lowerBound(this.events, fromNs);
    const to = toNs === undefined ? this.events.length : lowerBound(this.events, toNs);
    return this.events.slice(from, Math.max(from, to));
  }

  *iterate(filter: EventFilter, opts: IterateOptions): Generator<ApiEvent> {
    // replay reads forward from a time (Transaction.events); paging by `after` is the stores' business
    if (opts.order !== 'asc' || opts.after) throw new Error('a loaded transaction is read forward only');
    yield* this.slice(filter);
  }

  summarize(filter: EventFilter): EventSummary {
    const events = this.slice(filter);
    return {
      count: events.length,
      firstTs: events[0]?.timestamp_ns ?? null,
      lastTs: events[events.length - 1]?.timestamp_ns ?? null,
    };
  }
}

/** Reads transaction `id` from `reader` into memory; 422 past `max` events. */
export async function loadTransaction(
  reader: EventReader,
  id: string,
  max = MAX_LOADED_TRANSACTION_EVENTS,
): Promise<LoadedTransaction> {
  const filter: EventFilter = { transactionId: id };
  const { count } = await reader.summarize(filter);
  if (count > max) throw tooLarge(id, count, max);
  const events: ApiEvent[] = [];
  let after: EventPosition | undefined;
  for (;;) {
    const page = await reader.page(filter, { order: 'asc', limit: LOAD_PAGE, after });
    events.push(...page.events);
    if (events.length > max) throw tooLarge(id, events.length, max);
    if (!page.next) return new LoadedTransaction(id, events);
    after = page.next;
  }
}
