/**
 * A query worker: its own read-only connections to the node stores of the
 * data dir, answering one request at a time. The events pages and lookups
 * are turned into their JSON text here, so that the main thread only moves
 * bytes.
 */
import { parentPort, workerData } from 'node:worker_threads';
import { silentLogger } from '../../../core/log/logger';
import { StoreError, type StoreErrorCode } from '../../../core/store/schema';
import { localEventsJson, type JsonBody } from '../../events/events-json';
import type { EventsQuery } from '../../events/events-query';
import { nodeStoresReader } from '../event-reader';
import type { EventFilter, PageOptions } from '../event-filter';
import { NodeStores } from '../node-stores';
import { toWire, type QueryAnswer, type QueryRequest, type QueryWorkerData } from './query-protocol';
import { toReplayChunk } from '../../replay/replay-event';

const data = workerData as QueryWorkerData;
// the main thread's own NodeStores logs what the directory holds; N workers would say it N times more
const stores = new NodeStores(data.dataDir, silentLogger);
const reader = nodeStoresReader(stores);
const json = localEventsJson(reader);

const utf8 = new TextEncoder();
/* the page's bytes, in an ArrayBuffer of their own that is transferred, not copied, to the main thread */
const bytes = async (text: Promise<JsonBody>) => {
  const json = await text;
  return typeof json === 'string' ? utf8.encode(json) : json;
};

const OPS: Record<string, (...args: never[]) => Promise<unknown>> = {
  list: (query: EventsQuery) => bytes(json.list(query)),
  one: (eventId: string, int64AsString: boolean) => bytes(json.one(eventId, int64AsString)),
  page: (filter: EventFilter, opts: PageOptions) => reader.page(filter, opts),
  replayChunk: async (filter: EventFilter, opts: PageOptions) =>
    toReplayChunk(await reader.page(filter, opts)),
  summarize: (filter: EventFilter) => reader.summarize(filter),
  get: (eventId: string) => reader.get(eventId),
  nodes: () => reader.nodes(),
  retainedFrom: (filter: EventFilter) => reader.retainedFrom(filter),
  sampledRanges: (filter: EventFilter) => reader.sampledRanges(filter),
  markDamaged: async (code: StoreErrorCode, message: string, file: string) =>
    stores.markDamaged(new StoreError(code, message, file)),
};

// the pool counts a worker as up once its stores are open
parentPort!.postMessage({ id: 0, ok: true, result: 'ready' } satisfies QueryAnswer);

parentPort!.on('message', (request: QueryRequest) => {
  const op = OPS[request.op];
  const run = op ? op(...(request.args as never[])) : Promise.reject(new Error(`no query op ${request.op}`));
  run.then(
    (result) =>
      parentPort!.postMessage(
        { id: request.id, ok: true, result } satisfies QueryAnswer,
        result instanceof Uint8Array ? [result.buffer as ArrayBuffer] : [],
      ),
    (err: unknown) =>
      parentPort!.postMessage({ id: request.id, ok: false, error: toWire(err) } satisfies QueryAnswer),
  );
});
