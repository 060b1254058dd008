/**
 * The one way replay reads the store: a transaction's summary when its
 * session is created, the index of a time for a seek, and pages of its events
 * in replay order, (timestamp_ns, event_id) across every node, for the
 * read-ahead and for a resuming stream's history (both framed where read). Asynchronous, so that the
 * main thread never waits on a store: the query pool answers it on its
 * workers for the node files (queries/query-ops.ts), ClickHouseEvents over
 * HTTP for the fleet store; both through `storeTransactionReader`, so the
 * meaning of each read has one owner. Pages are bounded, so no transaction
 * is ever read whole, whatever its size.
 */
import type { EventPosition, EventSummary } from '../store/event-filter';
import type { EventReader } from '../store/event-reader';
import { chunkEvents, pageEvents, toReplayChunk, type ReplayChunk } from './replay-event';
import { writeFrames, type FrameDest, type FrameSpec, type FramesWritten } from './lane/frame-writer';
import { writeHistory, type HistoryFrames, type HistorySpec } from './lane/history-writer';

/** A transaction's events from `fromNs` (inclusive) to `toNs` (exclusive). */
export interface TransactionRange {
  transactionId: string;
  fromNs: bigint;
  toNs: bigint;
}

export interface TransactionReader {
  /** How many events transaction `transactionId` has, and its first and last timestamps, as the store holds them now. */
  summarize(transactionId: string): Promise<EventSummary>;
  /** The index, in replay order, of its first event at or after `ts`, counting from `firstTs` (its first event's timestamp). */
  indexAt(transactionId: string, firstTs: bigint, ts: bigint): Promise<number>;
  /** Up to `limit` of the range's events after `after` (from the start without it), in replay order. */
  page(range: TransactionRange, limit: number, after?: EventPosition): Promise<ReplayChunk>;
  /**
   * A page as replay frames written straight into a lane's buffer, where the
   * page is read (a query worker): absent, the reader's page is written by
   * the caller (framesOf).
   */
  frames?(
    range: TransactionRange,
    limit: number,
    after: EventPosition | undefined,
    spec: FrameSpec,
    dest: FrameDest,
  ): Promise<FramesWritten>;
  /**
   * A page as a resuming stream's history, its frames as bytes, built where
   * the page is read (a query worker): absent, the reader's page is framed by
   * the caller (historyOf).
   */
  history?(
    range: TransactionRange,
    limit: number,
    after: EventPosition | undefined,
    spec: HistorySpec,
  ): Promise<HistoryFrames>;
}

/** `reader`'s frames: its own, or its page written into the buffer by this thread. */
export function framesOf(reader: TransactionReader): NonNullable<TransactionReader['frames']> {
  return reader.frames
    ? reader.frames.bind(reader)
    : async (range, limit, after, spec, dest) =>
        writeFrames(chunkEvents(await reader.page(range, limit, after)), spec, dest);
}

/** `reader`'s history pages: its own, or its page framed by this thread. */
export function historyOf(reader: TransactionReader): NonNullable<TransactionReader['history']> {
  return reader.history
    ? reader.history.bind(reader)
    : async (range, limit, after, spec) =>
        writeHistory(chunkEvents(await reader.page(range, limit, after)), spec);
}

/** Replay's reads over a store's EventReader (the node files on a query worker, or ClickHouse). */
export function storeTransactionReader(reader: EventReader): Required<TransactionReader> {
  return {
    summarize: (transactionId) => reader.summarize({ transactionId }),
    indexAt: async (transactionId, firstTs, ts) =>
      ts <= firstTs ? 0 : (await reader.summarize({ transactionId, fromNs: firstTs, toNs: ts })).count,
    page: async (range, limit, after) =>
      toReplayChunk(await reader.page(range, { order: 'asc', limit, after })),
    frames: async (range, limit, after, spec, dest) =>
      writeFrames(pageEvents(await reader.page(range, { order: 'asc', limit, after })), spec, dest),
    history: async (range, limit, after, spec) =>
      writeHistory(pageEvents(await reader.page(range, { order: 'asc', limit, after })), spec),
  };
}
