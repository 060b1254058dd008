/** Messages between the agent's decoder (main thread) and the store's writer thread. */
import type { NewNames, ContextEntry, NameEntry, TargetEntry } from '../ingest/dictionary';
import type { RunStart } from './store-writer';
import type { StoreInfo } from '../../core/store/schema';

export interface WriterThreadData {
  dataDir: string;
  node: string;
  batchRows: number;
  /** one SharedArrayBuffer per batch slot */
  slots: SharedArrayBuffer[];
  /** Int32 per slot (SLOT_FREE | SLOT_BUSY), then the FAILED flag */
  flags: SharedArrayBuffer;
  /** BigInt64: rows committed so far */
  rowsWritten: SharedArrayBuffer;
}

export const SLOT_FREE = 0;
export const SLOT_BUSY = 1;

export type ToWriter =
  | { op: 'batch'; slot: number; count: number; baseTs: bigint; names: NewNames }
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
      contexts: ContextEntry[];
      targets: TargetEntry[];
    }
  | { op: 'error'; message: string; code?: string }
  | { op: 'closed' };
