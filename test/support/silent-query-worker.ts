/** A query worker module that comes up and never answers (a query that runs forever): the pool's timeout and close under test. */
import { parentPort } from 'node:worker_threads';

parentPort!.postMessage({ id: 0, ok: true, result: 'ready' });
parentPort!.on('message', () => undefined);
