/**
 * What the events routes read, whichever store holds the events: the node
 * files of a data dir (NodeStores) or the fleet store in ClickHouse
 * (ClickHouseEvents). Asynchronous at this boundary so that either may
 * answer from another thread or over the network.
 */
import type { ApiEvent } from '../../core/model';
import type { EventFilter, EventPage, EventSummary, PageOptions } from './event-filter';
import type { NodeStores } from './node-stores';
import type { SampledRange } from './node-store';

export interface EventReader {
  page(filter: EventFilter, opts: PageOptions): Promise<EventPage>;
  summarize(filter: EventFilter): Promise<EventSummary>;
  get(eventId: string): Promise<ApiEvent | null>;
  nodes(): Promise<string[]>;
  /** where retention has pruned up to for this filter's nodes (null: nothing pruned) */
  retainedFrom(filter: EventFilter): Promise<bigint | null>;
  /** runs the answer reaches into that kept one in N writes without a context */
  sampledRanges(filter: EventFilter): Promise<SampledRange[]>;
}

export function nodeStoresReader(stores: NodeStores): EventReader {
  return {
    page: async (filter, opts) => stores.page(filter, opts),
    summarize: async (filter) => stores.summarize(filter),
    get: async (eventId) => stores.get(eventId),
    nodes: async () => stores.nodes(),
    retainedFrom: async (filter) => stores.retainedFrom(filter),
    sampledRanges: async (filter) => stores.sampledRanges(filter),
  };
}
