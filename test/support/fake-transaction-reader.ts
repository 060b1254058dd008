/**
 * Events in memory behind the TransactionReader interface, counting what
 * replay reads: the synchronous store of old, kept as a test fake. Each read
 * answers on the next microtask, as an asynchronous store would (later;
 * `slow` holds chosen reads back); `failing` makes the next reads fail as a
 * store that is down does.
 */
import type { ApiEvent } from '../../core/model';
import {
  chunkEvents,
  pageEvents,
  toReplayChunk,
  type ReplayChunk,
  type ReplayEvents,
} from '../../daemon/replay/replay-event';
import type { TransactionRange, TransactionReader } from '../../daemon/replay/transaction-reader';
import type { EventPage, EventPosition, EventSummary } from '../../daemon/store/event-filter';
import { byPosition } from './event-match';

export class FakeTransactionReader implements TransactionReader {
  /** events handed out by page so far */
  read = 0;
  /** every page asked for, by its limit */
  readonly pages: number[] = [];
  /** the next this many reads fail */
  failing = 0;
  /** awaited before each read answers (a slow store), with what it reads and where */
  slow: (read: 'summarize' | 'indexAt' | 'page', at?: bigint) => Promise<void> | void = () => undefined;
  private readonly events: ApiEvent[];

  constructor(events: ApiEvent[]) {
    this.events = [...events].sort(byPosition);
  }

  private fail(): void {
    if (this.failing > 0) {
      this.failing--;
      throw new Error('the store is down');
    }
  }

  private of(transactionId: string, fromNs?: bigint, toNs?: bigint): ApiEvent[] {
    return this.events.filter(
      (e) =>
        e.transaction_id === transactionId &&
        (fromNs === undefined || e.timestamp_ns >= fromNs) &&
        (toNs === undefined || e.timestamp_ns < toNs),
    );
  }

  async summarize(transactionId: string): Promise<EventSummary> {
    await this.slow('summarize');
    this.fail();
    const matching = this.of(transactionId);
    return {
      count: matching.length,
      firstTs: matching[0]?.timestamp_ns ?? null,
      lastTs: matching[matching.length - 1]?.timestamp_ns ?? null,
    };
  }

  async indexAt(transactionId: string, firstTs: bigint, ts: bigint): Promise<number> {
    await this.slow('indexAt', ts);
    this.fail();
    return this.of(transactionId, firstTs, ts).length;
  }

  async page(range: TransactionRange, limit: number, after?: EventPosition): Promise<ReplayChunk> {
    await this.slow('page', after?.ts ?? range.fromNs);
    this.fail();
    this.pages.push(limit);
    const matching = this.of(range.transactionId, range.fromNs, range.toNs).filter(
      (e) =>
        !after || e.timestamp_ns > after.ts || (e.timestamp_ns === after.ts && e.event_id > after.eventId),
    );
    const events = matching.slice(0, limit);
    this.read += events.length;
    const last = events[events.length - 1];
    return toReplayChunk({
      events,
      next: last && matching.length > limit ? { ts: last.timestamp_ns, eventId: last.event_id } : null,
    });
  }
}

/** A sys_write of transaction `txn` at `ts`; `seq` orders events sharing a timestamp. */
export function fakeEvent(txn: string, ts: bigint, seq: number, durationNs = 1000n): ApiEvent {
  return {
    event_id: 'aaaaaaaaaaaa' + ts.toString(16).padStart(16, '0') + seq.toString(16).padStart(12, '0'),
    event_type: 'sys_write',
    timestamp_ns: ts,
    duration_ns: durationNs,
    service_name: 'svc',
    transaction_id: txn,
    trace_id: null,
    node: 'n1',
    pid: 1,
    tid: 1,
    comm: 'worker',
    bytes: seq,
    syscall: 'write',
    fd: 3,
    ret: seq,
    target_kind: 'file',
    target: '/var/lib/app/wal.log',
  };
}

/** The two ways a page reaches the frame writers, for tests that frame through both alike. */
type EventSource = [name: string, of: (page: EventPage) => ReplayEvents];
export const EVENT_SOURCES: [chunk: EventSource, page: EventSource] = [
  ['a chunk posted from a worker', (page) => chunkEvents(toReplayChunk(page))],
  ['a page framed where it was read', pageEvents],
];
