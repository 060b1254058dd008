/**
 * Keyset bounds in one store's own key space, (ts, seq). The global order is
 * (timestamp_ns, event_id), and event_id = store id + ts + seq, so at equal
 * ts the events of a store with a smaller id all come first. A global
 * position therefore maps to one point per store that no row equals: rows of
 * stores ordered before the position's store at that ts fall below it, rows
 * of stores after it fall above.
 */
import { parseEventId } from '../../core/model';
import type { EventFilter, EventOrder, EventPosition } from './event-filter';

export interface RowKey {
  ts: bigint;
  seq: bigint;
}

/** Rows strictly between lo and hi in (ts, seq) order. */
export interface KeyRange {
  lo: RowKey;
  hi: RowKey;
}

/** Seqs are 12 hex digits, so every seq lies strictly between these two. */
const BELOW_ANY_SEQ = -1n;
const ABOVE_ANY_SEQ = 1n << 48n;
const INT64_MIN = -(1n << 63n);
const INT64_MAX = (1n << 63n) - 1n;

export function compareKeys(a: RowKey, b: RowKey): number {
  if (a.ts !== b.ts) return a.ts < b.ts ? -1 : 1;
  return a.seq === b.seq ? 0 : a.seq < b.seq ? -1 : 1;
}

/** The point of `storeId`'s key space where `position` sits in the global order. */
export function keyAt(position: EventPosition, storeId: string): RowKey {
  const id = parseEventId(position.eventId);
  if (!id) throw new RangeError(`not an event id: ${position.eventId}`);
  const seq = storeId === id.storeId ? BigInt(id.seq) : storeId < id.storeId ? ABOVE_ANY_SEQ : BELOW_ANY_SEQ;
  return { ts: position.ts, seq };
}

/** The filter's time window in (ts, seq) terms, narrowed to what lies after `after` in `order`. */
export function rangeFor(
  filter: EventFilter,
  storeId: string,
  order: EventOrder,
  after?: EventPosition,
): KeyRange {
  let lo: RowKey = { ts: filter.fromNs ?? INT64_MIN, seq: BELOW_ANY_SEQ };
  let hi: RowKey =
    filter.toNs === undefined
      ? { ts: INT64_MAX, seq: ABOVE_ANY_SEQ }
      : { ts: filter.toNs, seq: BELOW_ANY_SEQ };
  if (after) {
    const at = keyAt(after, storeId);
    if (order === 'asc' && compareKeys(at, lo) > 0) lo = at;
    if (order === 'desc' && compareKeys(at, hi) < 0) hi = at;
  }
  return { lo, hi };
}

export function isEmptyRange(range: KeyRange): boolean {
  return compareKeys(range.lo, range.hi) >= 0;
}
