/**
 * The agent's side of the store: dictionaries and batches in shared memory
 * on this thread, SQLite on the writer thread. While the writer commits one
 * batch the decoder fills the next; when every slot is still being
 * committed, flush() waits, the capture's queue fills and the kernel counts
 * what its ring cannot hold, so memory stays bounded and loss stays visible.
 */
import { KreplayError } from '../../core/errors';
import { statSync } from 'node:fs';
import type { Worker } from 'node:worker_threads';
import { EventBatch } from '../ingest/event-batch';
import type { BatchSink } from '../ingest/record-decoder';
import type { Logger } from '../../core/log/logger';
import { startThread } from '../../core/threads/start-thread';
import {
  ContextDictionary,
  NameDictionary,
  TargetDictionary,
  takeNewNames,
  type Dictionaries,
} from '../ingest/dictionary';
import type { RunStart } from './store-writer';
import {
  SLOT_BUSY,
  SLOT_FREE,
  type FromWriter,
  type ToWriter,
  type WriterThreadData,
} from './writer-protocol';

const SLOTS = 2;

/** A failure the writer thread reported, with the code of the error it caught there (E_STORE_THREAD if none). */
export class StoreThreadError extends KreplayError {
  constructor(message: string, code?: string) {
    super(code ?? 'E_STORE_THREAD', message);
  }
}

export class StorePipeline implements BatchSink, Dictionaries {
  current: EventBatch;
  private slot = 0;
  private failure: StoreThreadError | null = null;
  private closed: Promise<void> | null = null;

  private constructor(
    private readonly worker: Worker,
    private readonly batches: EventBatch[],
    private readonly flags: Int32Array,
    private readonly rows: BigInt64Array,
    readonly path: string,
    readonly services: NameDictionary,
    readonly comms: NameDictionary,
    readonly contexts: ContextDictionary,
    readonly targets: TargetDictionary,
    private readonly log: Logger,
  ) {
    this.current = batches[0]!;
    worker.on('message', (message: FromWriter) => {
      if (message.op === 'error') {
        this.failure = new StoreThreadError(`store writer failed: ${message.message}`, message.code);
        log.error(this.failure.message);
      }
    });
  }

  /** Starts the writer thread, which opens (creating or migrating) the node's store. */
  static open(dataDir: string, node: string, batchRows: number, log: Logger): Promise<StorePipeline> {
    const slots = Array.from({ length: SLOTS }, () => new SharedArrayBuffer(EventBatch.bytesFor(batchRows)));
    const data: WriterThreadData = {
      dataDir,
      node,
      batchRows,
      slots,
      flags: new SharedArrayBuffer(4 * (SLOTS + 1)),
      rowsWritten: new SharedArrayBuffer(8),
    };
    const worker = startThread(__dirname, 'writer-thread', { workerData: data });
    return new Promise((resolve, reject) => {
      worker.once('error', reject);
      worker.once('message', (message: FromWriter) => {
        if (message.op !== 'opened') {
          reject(
            new StoreThreadError(
              message.op === 'error' ? message.message : 'writer thread did not open',
              message.op === 'error' ? message.code : undefined,
            ),
          );
          return;
        }
        resolve(
          new StorePipeline(
            worker,
            slots.map((memory) => new EventBatch(batchRows, memory)),
            new Int32Array(data.flags),
            new BigInt64Array(data.rowsWritten),
            message.path,
            new NameDictionary(message.services),
            new NameDictionary(message.comms),
            new ContextDictionary(message.contexts),
            new TargetDictionary(message.targets),
            log,
          ),
        );
      });
    });
  }

  get rowsWritten(): number {
    return Number(Atomics.load(this.rows, 0));
  }

  private send(message: ToWriter): void {
    if (this.failure) throw this.failure;
    this.worker.postMessage(message);
  }

  /** Hands the current batch to the writer and continues in a free slot. */
  flush(): void {
    if (this.current.count > 0) {
      Atomics.store(this.flags, this.slot, SLOT_BUSY);
      this.send({
        op: 'batch',
        slot: this.slot,
        count: this.current.count,
        baseTs: this.current.baseTs,
        names: takeNewNames(this),
      });
      this.slot = (this.slot + 1) % SLOTS;
    }
    this.waitFree(this.slot);
    this.current = this.batches[this.slot]!;
    this.current.clear();
  }

  private waitFree(slot: number): void {
    while (Atomics.load(this.flags, slot) !== SLOT_FREE) {
      if (Atomics.load(this.flags, SLOTS) !== 0)
        throw this.failure ?? new StoreThreadError('store writer failed');
      Atomics.wait(this.flags, slot, SLOT_BUSY, 1000);
    }
  }

  /** Flushes and waits until every batch is committed. */
  drain(): void {
    this.flush();
    for (let slot = 0; slot < SLOTS; slot++) this.waitFree(slot);
  }

  beginRun(run: RunStart): void {
    this.send({ op: 'beginRun', run });
  }

  recordCounters(atNs: bigint, counters: Record<string, number>): void {
    this.send({ op: 'counters', atNs, counters });
  }

  endRun(stoppedNs: bigint, reason: string): void {
    this.send({ op: 'endRun', stoppedNs, reason });
  }

  dbBytes(): number {
    const size = (path: string) => {
      try {
        return statSync(path).size;
      } catch {
        return 0;
      }
    };
    return size(this.path) + size(`${this.path}-wal`);
  }

  /** Commits what is pending and closes the store; resolves when the writer thread is done. */
  close(): Promise<void> {
    if (!this.closed) {
      this.closed = new Promise((resolve) => {
        this.worker.once('exit', () => resolve());
        try {
          this.flush();
          this.send({ op: 'close' });
        } catch (err) {
          this.log.error(`closing the store: ${(err as Error).message}`);
          void this.worker.terminate();
        }
      });
    }
    return this.closed;
  }
}
