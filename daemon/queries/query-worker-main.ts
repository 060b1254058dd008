/**
 * A query worker: its own read-only connections to the node stores of the
 * data dir, answering one request at a time with the operations of
 * query-ops.ts.
 */
import { parentPort, workerData } from 'node:worker_threads';
import { silentLogger } from '../../core/log/logger';
import { loadSqliteBinding } from '../../core/store/schema';
import { NodeStores } from '../store/node-stores';
import { queryOps } from './query-ops';
import { toWire, type QueryAnswer, type QueryRequest, type QueryWorkerData } from './query-protocol';

loadSqliteBinding();
const data = workerData as QueryWorkerData;
// the main thread's own NodeStores logs what the directory holds; N workers would say it N times more
const ops = queryOps(new NodeStores(data.dataDir, silentLogger, data.scope));

// the pool counts a worker as up once its stores are open
parentPort!.postMessage({ id: 0, ok: true, result: 'ready' } satisfies QueryAnswer);

parentPort!.on('message', (request: QueryRequest) => {
  const op = Object.hasOwn(ops, request.op)
    ? (ops[request.op] as (...args: unknown[]) => Promise<unknown>)
    : null;
  const run = op ? op(...request.args) : Promise.reject(new Error(`no query op ${String(request.op)}`));
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
