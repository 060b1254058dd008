/** Messages between the agent's decoder (main thread) and the store's writer thread. */
import type { NewNames, ContextEntry, NameEntry } from '../ingest/dictionary';
import type { RunStart } from './store-writer';
import type { StoreInfo } from '../../core/store/schema';
import type { RetentionOptions } from './retention';
import type { NoticeLevel, OnCorrupt } from './store-keeper';

export interface WriterThreadData {
  dataDir: string;
  node: string;
  batchRows: number;
  /** one SharedArrayBuffer per batch slot */
  slots: SharedArrayBuffer[];
  /** Int32 per slot (SLOT_FREE | SLOT_BUSY), then the FAILED flag */
  flags: SharedArrayBuffer;
  /** BigInt64 per StoreCounter */
  counters: SharedArrayBuffer;
  onCorrupt: OnCorrupt;
  retention?: RetentionOptions;
  /** SQLite's page cache, KiB */
  cacheKib?: number;
}

/** The writer thread's running totals, in WriterThreadData.counters. */
export const StoreCounter = {
  rowsWritten: 0,
  droppedDiskFull: 1,
  droppedStoreError: 2,
  replacements: 3,
  pruned: 4,
  unshippedPruned: 5,
  lostTargets: 6,
} as const;
export const STORE_COUNTER_COUNT = 7;

export const SLOT_FREE = 0;
export const SLOT_BUSY = 1;

export type ToWriter =
  | {
      op: 'batch';
      slot: number;
      count: number;
      baseTs: bigint;
      names: NewNames;
      /** the decoder forgot the contexts of every epoch up to this one */
      forgottenEpoch: number;
    }
  | { op: 'beginRun'; run: RunStart }
  | { op: 'counters'; atNs: bigint; counters: Record<string, number> }
  | { op: 'endRun'; stoppedNs: bigint; reason: string }
  | { op: 'close' };

export type FromWriter =
  | {
      op: 'opened';
      path: string;
      info: StoreInfo;
      services: NameEntry[];
      comms: NameEntry[];
      firstFreeContextId: number;
      firstFreeTargetId: number;
      containers: NameEntry[];
    }
  /** retention removed these contexts with their last events: forget them, acknowledge the epoch */
  | { op: 'forgetContexts'; epoch: number; entries: ContextEntry[] }
  /** a batch was committed (metrics: batch sizes, writer latency) */
  | { op: 'committed'; events: number; seconds: number }
  | { op: 'error'; message: string; code?: string }
  | { op: 'notice'; level: NoticeLevel; text: string }
  | { op: 'closed' };
