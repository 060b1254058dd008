/**
 * The store's writer thread: commits the batches the decoder fills in
 * shared memory, so decoding the next batch overlaps with SQLite's work.
 */
import { parentPort, workerData } from 'node:worker_threads';
import { EventBatch } from '../ingest/event-batch';
import { StoreWriter } from './store-writer';
import { SLOT_FREE, type FromWriter, type ToWriter, type WriterThreadData } from './writer-protocol';

const data = workerData as WriterThreadData;
const port = parentPort!;
const flags = new Int32Array(data.flags);
const failedFlag = data.slots.length;
const rowsWritten = new BigInt64Array(data.rowsWritten);
const post = (message: FromWriter) => port.postMessage(message);

function fail(err: unknown): void {
  const error = err as Error & { code?: string };
  Atomics.store(flags, failedFlag, 1);
  for (let i = 0; i <= failedFlag; i++) Atomics.notify(flags, i);
  post({ op: 'error', message: error.message, code: error.code });
}

function serve(writer: StoreWriter): void {
  const batches = data.slots.map((memory) => new EventBatch(data.batchRows, memory));
  port.on('message', (message: ToWriter) => {
    try {
      switch (message.op) {
        case 'batch': {
          const batch = batches[message.slot]!;
          batch.count = message.count;
          batch.baseTs = message.baseTs;
          writer.writeBatch(batch, message.names);
          Atomics.add(rowsWritten, 0, BigInt(message.count));
          Atomics.store(flags, message.slot, SLOT_FREE);
          Atomics.notify(flags, message.slot);
          break;
        }
        case 'beginRun':
          writer.beginRun(message.run);
          break;
        case 'counters':
          writer.recordCounters(message.atNs, message.counters);
          break;
        case 'endRun':
          writer.endRun(message.stoppedNs, message.reason);
          break;
        case 'close':
          writer.close();
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
  const writer = StoreWriter.open(data.dataDir, data.node);
  post({
    op: 'opened',
    path: writer.path,
    info: writer.info,
    services: writer.services.entries(),
    comms: writer.comms.entries(),
    contexts: writer.contexts.entries(),
    targets: writer.targets.entries(),
  });
  serve(writer);
} catch (err) {
  fail(err);
  port.close();
}
