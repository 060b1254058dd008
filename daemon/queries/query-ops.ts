/**
 * The operations a query worker answers, by name: the one list the worker
 * runs and the pool's typed calls are checked against (QueryOps). The
 * events pages and lookups are turned into their JSON bytes here, so that
 * the main thread only moves them.
 */
import { StoreError, type StoreErrorCode } from '../../core/store/schema';
import { localEventsJson, type JsonBody } from '../events/events-json';
import type { EventsQuery } from '../events/events-query';
import { storeTransactionReader, type TransactionReader } from '../replay/transaction-reader';
import type { EventFilter, PageOptions } from '../store/event-filter';
import { nodeStoresReader } from '../store/event-reader';
import type { NodeStores } from '../store/node-stores';

const utf8 = new TextEncoder();

/* the page's bytes, in an ArrayBuffer of their own that is transferred, not copied, to the main thread */
async function bytes(text: Promise<JsonBody>): Promise<Uint8Array> {
  const json = await text;
  return typeof json === 'string' ? utf8.encode(json) : json;
}

export function queryOps(stores: NodeStores) {
  const reader = nodeStoresReader(stores);
  const json = localEventsJson(reader);
  const transactions = storeTransactionReader(reader);
  return {
    list: (query: EventsQuery) => bytes(json.list(query)),
    one: (eventId: string, int64AsString: boolean) => bytes(json.one(eventId, int64AsString)),
    page: (filter: EventFilter, opts: PageOptions) => reader.page(filter, opts),
    // replay's reads (TransactionReader), the page's JSON built here
    transactionSummary: (...args: Parameters<TransactionReader['summarize']>) =>
      transactions.summarize(...args),
    transactionIndexAt: (...args: Parameters<TransactionReader['indexAt']>) => transactions.indexAt(...args),
    transactionPage: (...args: Parameters<TransactionReader['page']>) => transactions.page(...args),
    // a playing session's read-ahead: the frames written here, into the session's shared buffer
    transactionFrames: (...args: Parameters<NonNullable<TransactionReader['frames']>>) =>
      transactions.frames(...args),
    // a resuming stream's history: its frames' bytes built here
    transactionHistory: (...args: Parameters<NonNullable<TransactionReader['history']>>) =>
      transactions.history(...args),
    summarize: (filter: EventFilter) => reader.summarize(filter),
    get: (eventId: string) => reader.get(eventId),
    nodes: () => reader.nodes(),
    retainedFrom: (filter: EventFilter) => reader.retainedFrom(filter),
    sampledRanges: (filter: EventFilter) => reader.sampledRanges(filter),
    markDamaged: async (code: StoreErrorCode, message: string, file: string | undefined) =>
      stores.markDamaged(new StoreError(code, message, file)),
  };
}

/** Each operation's arguments and result, as the pool calls it. */
export type QueryOps = ReturnType<typeof queryOps>;
export type QueryOp = keyof QueryOps;
