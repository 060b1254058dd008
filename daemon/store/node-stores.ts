/**
 * Every node store of the data dir as one event sequence in
 * (timestamp_ns, event_id) order: a k-way merge of per-store index reads,
 * paged by keyset so that pages neither skip nor repeat events while the
 * agents keep appending. Memory is bounded by the page: reads are LIMITed
 * and nothing stays open between calls.
 */
import { parseEventId, rowToEvent, type ApiEvent } from '../../core/model';
import type { EventRow } from '../../core/store/event-columns';
import type { IncidentRun } from '../../core/incident';
import type { Logger } from '../../core/log/logger';
import type { StoreError } from '../../core/store/schema';
import {
  positionOf,
  type EventFilter,
  type EventPage,
  type EventSummary,
  type IterateOptions,
  type PageOptions,
} from './event-filter';
import { EventSource } from './event-source';
import type { NodeStore, SampledRange } from './node-store';
import { isEmptyRange, rangeFor } from './key-range';
import { Heap } from './source-heap';
import { StoreDirectory, type DirectoryHealth, type StoreScope } from './store-directory';

const DEFAULT_CHUNK = 1000;
/** Smallest first read of a source: merging many small reads costs more than a few spare rows. */
const MIN_FETCH = 16;

type Head = { source: EventSource; row: EventRow };

/** (ts, store id, seq) is (timestamp_ns, event_id) order, without formatting ids. */
function before(a: Head, b: Head): boolean {
  if (a.row.ts !== b.row.ts) return a.row.ts < b.row.ts;
  const sa = a.source.store.info.storeId;
  const sb = b.source.store.info.storeId;
  if (sa !== sb) return sa < sb;
  return a.row.seq < b.row.seq;
}

/** `read` with a read transaction open on each of `stores`. */
function readingEach<T>(stores: NodeStore[], read: () => T, from = 0): T {
  return from === stores.length ? read() : stores[from]!.reading(() => readingEach(stores, read, from + 1));
}

export class NodeStores {
  private readonly directory: StoreDirectory;

  constructor(dataDir: string, log: Logger, scope: StoreScope = 'all') {
    this.directory = new StoreDirectory(dataDir, log, scope);
  }

  /** A page read from one snapshot of each store (NodeStore.reading). */
  page(filter: EventFilter, opts: PageOptions): EventPage {
    const stores = this.directory.stores();
    return readingEach(stores, () => this.pageOf(stores, filter, opts));
  }

  private pageOf(stores: NodeStore[], filter: EventFilter, opts: PageOptions): EventPage {
    const plans = stores.flatMap((store) => {
      const range = rangeFor(filter, store.info.storeId, opts.order, opts.after);
      return isEmptyRange(range) ? [] : store.reads(filter).map((read) => ({ store, read, range }));
    });
    // Split the page between the sources; a source that holds more reads more on refill.
    const firstFetch = Math.max(MIN_FETCH, Math.ceil((opts.limit + 1) / Math.max(1, plans.length)));
    const heap = new Heap<Head>(opts.order === 'asc' ? before : (a, b) => before(b, a));
    const push = (source: EventSource, wanted: number) => {
      const row = source.head(wanted);
      if (row) heap.push({ source, row });
    };
    for (const { store, read, range } of plans) {
      const fetch = Math.min(firstFetch, opts.limit + 1);
      push(new EventSource(store, read, range, opts.order, fetch, opts.limit + 1), opts.limit + 1);
    }
    const events: ApiEvent[] = [];
    while (events.length < opts.limit) {
      const top = heap.pop();
      if (!top) break;
      events.push(rowToEvent(top.row, top.source.store.names));
      top.source.advance();
      // one row past the page is enough to tell whether a next page exists
      push(top.source, opts.limit - events.length + 1);
    }
    const last = events[events.length - 1];
    return { events, next: last && heap.size > 0 ? positionOf(last) : null };
  }

  /** Every matching event, read `chunk` at a time; nothing is held between chunks. */
  *iterate(filter: EventFilter, opts: IterateOptions): Generator<ApiEvent> {
    let after = opts.after;
    for (;;) {
      const { events, next } = this.page(filter, {
        limit: opts.chunk ?? DEFAULT_CHUNK,
        order: opts.order,
        after,
      });
      yield* events;
      if (!next) return;
      after = next;
    }
  }

  summarize(filter: EventFilter): EventSummary {
    let count = 0n;
    let firstTs: bigint | null = null;
    let lastTs: bigint | null = null;
    for (const store of this.directory.stores()) {
      const range = rangeFor(filter, store.info.storeId, 'asc');
      // the contexts found and their events counted in one snapshot
      const parts = store.reading(() => store.reads(filter).map((read) => store.summarize(read, range)));
      for (const { n, first, last } of parts) {
        count += n;
        if (first !== null && (firstTs === null || first < firstTs)) firstTs = first;
        if (last !== null && (lastTs === null || last > lastTs)) lastTs = last;
      }
    }
    return { count: Number(count), firstTs, lastTs };
  }

  /**
   * The time before which the answer to `filter` may lack events that
   * retention removed, or null when nothing it could match was pruned. A
   * query by transaction or trace depends on the context tier only.
   */
  retainedFrom(filter: EventFilter): bigint | null {
    let from: bigint | null = null;
    for (const store of this.directory.stores()) {
      if (filter.node !== undefined && filter.node !== store.info.node) continue;
      const retained = store.retainedFrom();
      const byContext = filter.transactionId !== undefined || filter.traceId !== undefined;
      for (const boundary of byContext ? [retained.context] : [retained.context, retained.background])
        if (boundary !== null && (from === null || boundary > from)) from = boundary;
    }
    return from;
  }

  /**
   * The sampled runs the answer to `filter` reaches into: there, writes
   * without a transaction are one in `oneIn` of those made. None for a query
   * by transaction or trace (their events are never sampled).
   */
  sampledRanges(filter: EventFilter): SampledRange[] {
    if (filter.transactionId !== undefined || filter.traceId !== undefined) return [];
    const from = filter.fromNs ?? 0n;
    const to = filter.toNs ?? 2n ** 63n - 1n;
    return this.directory
      .stores()
      .filter((store) => filter.node === undefined || filter.node === store.info.node)
      .flatMap((store) => store.sampledRanges(from, to));
  }

  /** The runs of the stores `storeIds` that overlap [fromNs, toNs] (incident files). */
  incidentRuns(storeIds: ReadonlySet<string>, fromNs: bigint, toNs: bigint): IncidentRun[] {
    return this.directory
      .stores()
      .filter((store) => storeIds.has(store.info.storeId))
      .flatMap((store) => store.incidentRuns(fromNs, toNs));
  }

  get(eventId: string): ApiEvent | null {
    const key = parseEventId(eventId);
    const store = key && this.directory.stores().find((s) => s.info.storeId === key.storeId);
    const row = store && store.row(key.ts, key.seq);
    return row ? rowToEvent(row, store.names) : null;
  }

  nodes(): string[] {
    return [...new Set(this.directory.stores().map((s) => s.info.node))].sort();
  }

  health(): DirectoryHealth {
    return this.directory.health();
  }

  markDamaged(damage: StoreError): void {
    this.directory.markDamaged(damage);
  }

  close(): void {
    this.directory.close();
  }
}
