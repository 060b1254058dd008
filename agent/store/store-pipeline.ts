/**
 * The agent's side of the store: dictionaries and batches in shared memory
 * on this thread, SQLite on the writer thread. While the writer commits one
 * batch the decoder fills the next; when every slot is still being
 * committed, flush() waits, the capture's queue fills and the kernel counts
 * what its ring cannot hold, so memory stays bounded and loss stays visible.
 */
import { storeFileBytes } from '../../core/store/store-bytes';
import { isErrorCode } from '../../core/error-codes';
import { KreplayError } from '../../core/errors';
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
import type { RetentionOptions } from './retention';
import type { OnCorrupt } from './store-keeper';
import type { RunStart } from './store-writer';
import {
  SLOT_BUSY,
  SLOT_FREE,
  STORE_COUNTER_COUNT,
  StoreCounter,
  type FromWriter,
  type ToWriter,
  type WriterThreadData,
} from './writer-protocol';

const SLOTS = 2;

/**
 * Rows per batch (and per transaction) of the agent: each of the SLOTS batches
 * takes 73 bytes a row of shared memory (4.6 MiB at this size), and the writer
 * binds a committed batch's columns once more while it inserts them. Larger
 * batches saved nothing measurable per row once the insert no longer crossed
 * into SQLite per row (issue 14); they only held more memory.
 */
export const AGENT_BATCH_ROWS = 65536;
const WAIT_SLICE_MS = 100;

/**
 * A failure the writer thread reported: the code of the error it caught there where that is
 * kreplay's, else E_STORE_THREAD with the caught code (SQLite's, an errno's) kept as `threadCode`.
 */
export class StoreThreadError extends KreplayError {
  readonly threadCode: string | undefined;

  constructor(message: string, code?: string) {
    super(isErrorCode(code) ? code : 'E_STORE_THREAD', message);
    this.threadCode = code;
  }
}

export class StorePipeline implements BatchSink, Dictionaries {
  current: EventBatch;
  private slot = 0;
  private failure: StoreThreadError | null = null;
  private closed: Promise<void> | null = null;
  /** events lost because the writer thread itself failed (see onFailure) */
  droppedAfterFailure = 0;
  private onFailure: (error: StoreThreadError) => void = () => undefined;
  private onForget: () => void = () => undefined;
  private onWait: () => void = () => undefined;
  private onCommitted: (events: number, seconds: number) => void = () => undefined;
  private forgottenEpoch = 0;
  /** batches handed to the writer so far (flush() with rows pending) */
  handed = 0;

  private constructor(
    private readonly worker: Worker,
    private readonly batches: EventBatch[],
    private readonly flags: Int32Array,
    private readonly counters: BigInt64Array,
    readonly path: string,
    readonly services: NameDictionary,
    readonly comms: NameDictionary,
    readonly contexts: ContextDictionary,
    readonly targets: TargetDictionary,
    readonly containers: NameDictionary,
    private readonly log: Logger,
  ) {
    this.current = batches[0]!;
    worker.on('message', (message: FromWriter) => {
      if (message.op === 'error') this.fail(new StoreThreadError(message.message, message.code));
      else if (message.op === 'notice') log[message.level](message.text);
      else if (message.op === 'committed') this.onCommitted(message.events, message.seconds);
      else if (message.op === 'forgetContexts') {
        contexts.forget(message.entries);
        this.onForget();
        this.forgottenEpoch = message.epoch;
      }
    });
    worker.on('error', (err) => this.fail(new StoreThreadError(`store writer thread died: ${err.message}`)));
  }

  private fail(error: StoreThreadError): void {
    if (this.failure) return;
    this.failure = error;
    this.onFailure(error);
  }

  /** Called about every WAIT_SLICE_MS while the decoder waits for a free slot (status lines keep their rhythm). */
  whileWaiting(handler: () => void): void {
    this.onWait = handler;
  }

  /** Called after each batch the writer committed, with its size and how long the commit took. */
  whenCommitted(handler: (events: number, seconds: number) => void): void {
    this.onCommitted = handler;
  }

  /** Called when the store removed contexts: caches of context ids must let go of them. */
  whenContextsForgotten(handler: () => void): void {
    this.onForget = handler;
  }

  /** Called once if the writer thread fails for good (not for a full disk, which it rides out). */
  whenFailed(handler: (error: StoreThreadError) => void): void {
    this.onFailure = handler;
    if (this.failure) handler(this.failure);
  }

  /** Starts the writer thread, which opens (creating or migrating) the node's store. */
  static open(
    dataDir: string,
    node: string,
    batchRows: number,
    store: { onCorrupt: OnCorrupt; retention?: RetentionOptions; cacheKib?: number },
    log: Logger,
  ): Promise<StorePipeline> {
    const slots = Array.from({ length: SLOTS }, () => new SharedArrayBuffer(EventBatch.bytesFor(batchRows)));
    const data: WriterThreadData = {
      dataDir,
      node,
      batchRows,
      slots,
      flags: new SharedArrayBuffer(4 * (SLOTS + 1)),
      counters: new SharedArrayBuffer(8 * STORE_COUNTER_COUNT),
      onCorrupt: store.onCorrupt,
      retention: store.retention,
      cacheKib: store.cacheKib,
    };
    const worker = startThread(__dirname, 'writer-thread', { workerData: data });
    return new Promise((resolve, reject) => {
      worker.once('error', reject);
      const onMessage = (message: FromWriter) => {
        if (message.op === 'notice') {
          log[message.level](message.text);
          return;
        }
        worker.off('message', onMessage);
        worker.off('error', reject);
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
            new BigInt64Array(data.counters),
            message.path,
            new NameDictionary(message.services),
            new NameDictionary(message.comms),
            new ContextDictionary([], message.firstFreeContextId),
            new TargetDictionary(message.firstFreeTargetId),
            new NameDictionary(message.containers),
            log,
          ),
        );
      };
      worker.on('message', onMessage);
    });
  }

  private counter(index: number): number {
    return Number(Atomics.load(this.counters, index));
  }

  get rowsWritten(): number {
    return this.counter(StoreCounter.rowsWritten);
  }

  /** Events that reached the store but not its file, by reason. */
  get dropped(): { diskFull: number; storeError: number } {
    return {
      diskFull: this.counter(StoreCounter.droppedDiskFull),
      storeError: this.counter(StoreCounter.droppedStoreError) + this.droppedAfterFailure,
    };
  }

  /** Events removed by retention. */
  get pruned(): number {
    return this.counter(StoreCounter.pruned);
  }

  /** Of those, events the cap removed before they were shipped. */
  get unshippedPruned(): number {
    return this.counter(StoreCounter.unshippedPruned);
  }

  /** Events stored without their target: the decoder had forgotten it and retention had removed its row. */
  get lostTargets(): number {
    return this.counter(StoreCounter.lostTargets);
  }

  /** Fresh stores opened because the file was deleted, replaced or damaged. */
  get replacements(): number {
    return this.counter(StoreCounter.replacements);
  }

  get failed(): boolean {
    return this.failure !== null;
  }

  private send(message: ToWriter): void {
    if (!this.failure) this.worker.postMessage(message);
  }

  /** Hands the current batch to the writer and continues in a free slot. */
  flush(): void {
    if (this.failure) {
      this.droppedAfterFailure += this.current.count;
      this.current.clear();
      return;
    }
    if (this.current.count > 0) {
      Atomics.store(this.flags, this.slot, SLOT_BUSY);
      this.send({
        op: 'batch',
        slot: this.slot,
        count: this.current.count,
        baseTs: this.current.baseTs,
        names: takeNewNames(this, this.current.baseTs),
        forgottenEpoch: this.forgottenEpoch,
      });
      this.slot = (this.slot + 1) % SLOTS;
      this.handed++;
    }
    if (!this.waitFree(this.slot)) this.droppedAfterFailure += this.batches[this.slot]!.count;
    this.current = this.batches[this.slot]!;
    this.current.clear();
  }

  /* false when the writer failed: its slots will never be freed */
  private waitFree(slot: number): boolean {
    while (Atomics.load(this.flags, slot) !== SLOT_FREE) {
      if (Atomics.load(this.flags, SLOTS) !== 0) return false;
      Atomics.wait(this.flags, slot, SLOT_BUSY, WAIT_SLICE_MS);
      this.onWait();
    }
    return true;
  }

  /** Flushes and waits until every batch is stored or counted as dropped. */
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
    return storeFileBytes(this.path);
  }

  /** Commits what is pending and closes the store; resolves when the writer thread is done. */
  close(): Promise<void> {
    if (!this.closed) {
      this.closed = new Promise((resolve) => {
        this.worker.once('exit', () => resolve());
        this.flush();
        if (this.failure) void this.worker.terminate();
        else this.send({ op: 'close' });
      });
    }
    return this.closed;
  }
}
