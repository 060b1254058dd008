/** A query worker module that comes up and dies 20 ms later (a query that crashes it, say): how the pool judges a worker that was up, under test. */
import { parentPort } from 'node:worker_threads';

parentPort!.postMessage({ id: 0, ok: true, result: 'ready' });
setTimeout(() => {
  throw new Error('this query worker dies once up');
}, 20);
