/**
 * One index read of one store as a lazily refilled stream of rows. Each
 * refill is a fresh keyset query after the last row it returned, so nothing
 * is held open between refills and rows inserted meanwhile are seen in place.
 */
import type { EventRow } from '../../core/store/event-columns';
import type { EventOrder } from './event-filter';
import type { KeyRange } from './key-range';
import type { NodeStore, StoreRead } from './node-store';

export class EventSource {
  private rows: EventRow[] = [];
  private next = 0;
  private exhausted = false;

  /**
   * `fetchSize` rows are read first; each refill reads twice as many, up to
   * `maxFetch`, so sources that turn out to hold most of a page need few queries.
   */
  constructor(
    readonly store: NodeStore,
    private readonly read: StoreRead,
    private range: KeyRange,
    private readonly order: EventOrder,
    private fetchSize: number,
    private readonly maxFetch: number,
  ) {}

  /** The next row, reading at most `wanted` more rows when the buffer is empty. */
  head(wanted: number): EventRow | undefined {
    if (this.next < this.rows.length) return this.rows[this.next];
    if (this.exhausted) return undefined;
    const limit = Math.max(1, Math.min(this.fetchSize, wanted));
    this.rows = this.store.fetch(this.read, this.range, this.order, limit);
    this.next = 0;
    this.exhausted = this.rows.length < limit;
    this.fetchSize = Math.min(this.fetchSize * 2, this.maxFetch);
    const last = this.rows[this.rows.length - 1];
    if (last) {
      const key = { ts: last.ts, seq: last.seq };
      this.range = this.order === 'asc' ? { lo: key, hi: this.range.hi } : { lo: this.range.lo, hi: key };
    }
    return this.rows[0];
  }

  /** Drops the row `head` returned. */
  advance(): void {
    this.next++;
  }
}
