/**
 * The store's writer thread: commits the batches the decoder fills in
 * shared memory, so decoding the next batch overlaps with SQLite's work.
 * Every slot is handed back whether its batch was stored or counted as
 * dropped, so the decoder never waits on a store that cannot take more.
 */
import { parentPort, workerData } from 'node:worker_threads';
import { EventBatch } from '../ingest/event-batch';
import { STEP_ROWS } from './retention';
import { StoreKeeper } from './store-keeper';
import {
  SLOT_FREE,
  StoreCounter,
  type FromWriter,
  type ToWriter,
  type WriterThreadData,
} from './writer-protocol';

const data = workerData as WriterThreadData;
const port = parentPort!;
const flags = new Int32Array(data.flags);
const failedFlag = data.slots.length;
const counters = new BigInt64Array(data.counters);
const post = (message: FromWriter) => port.postMessage(message);

function fail(err: unknown): void {
  const error = err as Error & { code?: string };
  Atomics.store(flags, failedFlag, 1);
  for (let i = 0; i <= failedFlag; i++) Atomics.notify(flags, i);
  post({ op: 'error', message: error.message, code: error.code });
}

function publish(keeper: StoreKeeper): void {
  Atomics.store(counters, StoreCounter.rowsWritten, BigInt(keeper.rowsWritten));
  Atomics.store(counters, StoreCounter.droppedDiskFull, BigInt(keeper.dropped.disk_full));
  Atomics.store(counters, StoreCounter.droppedStoreError, BigInt(keeper.dropped.store_error));
  Atomics.store(counters, StoreCounter.replacements, BigInt(keeper.replacements));
  Atomics.store(counters, StoreCounter.pruned, BigInt(keeper.pruned));
  Atomics.store(counters, StoreCounter.unshippedPruned, BigInt(keeper.unshippedPruned));
  Atomics.store(counters, StoreCounter.lostTargets, BigInt(keeper.lostTargets));
}

function prune(keeper: StoreKeeper, rows: number): void {
  const forgotten = keeper.prune(rows);
  if (forgotten) post({ op: 'forgetContexts', epoch: forgotten.epoch, entries: forgotten.forgotten });
  publish(keeper);
}

/* Retention by time goes on while no batch arrives; a step is cheap when nothing is due. */
const IDLE_PRUNE_MS = 1000;

function serve(keeper: StoreKeeper): void {
  const batches = data.slots.map((memory) => new EventBatch(data.batchRows, memory));
  const idle = setInterval(() => prune(keeper, STEP_ROWS), IDLE_PRUNE_MS);
  port.on('message', (message: ToWriter) => {
    try {
      switch (message.op) {
        case 'batch': {
          const batch = batches[message.slot]!;
          batch.count = message.count;
          batch.baseTs = message.baseTs;
          const started = performance.now();
          try {
            keeper.writeBatch(batch, message.names, message.forgottenEpoch);
            post({ op: 'committed', events: message.count, seconds: (performance.now() - started) / 1000 });
          } finally {
            publish(keeper); // before the slot is free: a drain that sees it free sees the counts
            Atomics.store(flags, message.slot, SLOT_FREE);
            Atomics.notify(flags, message.slot);
          }
          // The slot is free, so the decoder fills it while this thread prunes about as much as it stored.
          prune(keeper, message.count);
          break;
        }
        case 'beginRun':
          keeper.beginRun(message.run);
          break;
        case 'counters':
          keeper.recordCounters(message.atNs, message.counters);
          break;
        case 'endRun':
          keeper.endRun(message.stoppedNs, message.reason);
          break;
        case 'close':
          clearInterval(idle);
          keeper.close();
          post({ op: 'closed' });
          port.close();
          break;
      }
    } catch (err) {
      fail(err);
    }
  });
}

try {
  const keeper = StoreKeeper.open({
    dataDir: data.dataDir,
    node: data.node,
    onCorrupt: data.onCorrupt,
    retention: data.retention,
    cacheKib: data.cacheKib,
    notify: (level, text) => post({ op: 'notice', level, text }),
  });
  const names = keeper.names();
  post({
    op: 'opened',
    path: keeper.path,
    info: keeper.info!,
    services: names.services,
    comms: names.comms,
    firstFreeContextId: names.firstFreeContextId,
    firstFreeTargetId: names.firstFreeTargetId,
    containers: names.containers,
  });
  serve(keeper);
} catch (err) {
  fail(err);
  port.close();
}
