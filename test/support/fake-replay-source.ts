/** Events in memory behind the ReplaySource interface, counting what replay reads. */
import type { ApiEvent } from '../../core/model';
import type { ReplaySource } from '../../daemon/replay/replay-source';
import type { EventFilter, EventSummary, IterateOptions } from '../../daemon/store/event-filter';
import { byPosition, matchesFilter } from './event-match';

export class FakeReplaySource implements ReplaySource {
  /** events handed out by iterate so far */
  read = 0;
  private readonly events: ApiEvent[];

  constructor(events: ApiEvent[]) {
    this.events = [...events].sort(byPosition);
  }

  *iterate(filter: EventFilter, opts: IterateOptions): Generator<ApiEvent> {
    // replay reads forward from a time; paging by `after` is the real reader's business
    if (opts.order !== 'asc' || opts.after) throw new Error('the fake reads forward only, without after');
    for (const event of this.events) {
      if (!matchesFilter(event, filter)) continue;
      this.read++;
      yield event;
    }
  }

  summarize(filter: EventFilter): EventSummary {
    const matching = this.events.filter((e) => matchesFilter(e, filter));
    return {
      count: matching.length,
      firstTs: matching[0]?.timestamp_ns ?? null,
      lastTs: matching[matching.length - 1]?.timestamp_ns ?? null,
    };
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
