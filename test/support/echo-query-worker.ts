/** A query worker module that answers each query at once with its op's name: the order the pool hands queries out under test. */
import { parentPort } from 'node:worker_threads';

parentPort!.postMessage({ id: 0, ok: true, result: 'ready' });
parentPort!.on('message', (request: { id: number; op: string }) =>
  parentPort!.postMessage({ id: request.id, ok: true, result: request.op }),
);
