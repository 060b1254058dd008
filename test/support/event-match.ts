/** The meaning of an EventFilter and of (timestamp_ns, event_id) order, spelled out for assertions. */
import type { ApiEvent } from '../../core/model';
import type { EventFilter } from '../../daemon/store/event-filter';

export function matchesFilter(e: ApiEvent, f: EventFilter): boolean {
  return (
    (f.transactionId === undefined || e.transaction_id === f.transactionId) &&
    (f.traceId === undefined || e.trace_id === f.traceId) &&
    (f.service === undefined || e.service_name === f.service) &&
    (f.node === undefined || e.node === f.node) &&
    (f.types === undefined || f.types.includes(e.event_type)) &&
    (f.fromNs === undefined || e.timestamp_ns >= f.fromNs) &&
    (f.toNs === undefined || e.timestamp_ns < f.toNs) &&
    (f.minDurationNs === undefined ||
      e.duration_ns >= f.minDurationNs ||
      (e.event_type === 'sys_read' && e.response_ns !== null && e.response_ns >= f.minDurationNs)) &&
    (f.target === undefined || matchesTarget(e, f.target.value, f.target.prefix)) &&
    (f.targetKinds === undefined ||
      (e.event_type === 'sys_write' && e.target_kind !== null && f.targetKinds.includes(e.target_kind)))
  );
}

function matchesTarget(e: ApiEvent, value: string, prefix: boolean): boolean {
  if (e.event_type !== 'sys_write' || e.target === null) return false;
  return prefix ? e.target.startsWith(value) : e.target === value;
}

export function byPosition(a: ApiEvent, b: ApiEvent): number {
  if (a.timestamp_ns !== b.timestamp_ns) return a.timestamp_ns < b.timestamp_ns ? -1 : 1;
  return a.event_id < b.event_id ? -1 : a.event_id > b.event_id ? 1 : 0;
}
