/**
 * The inverse of rowToEvent (event.ts): an API event as a row of a store's
 * events table, for stores built from events (an incident file served by
 * the daemon). Generic over event types: the fields every syscall type
 * shares (syscall, fd, ret, target_kind, target) and block_io's (device,
 * sector, op, error) map to their columns, and a column the table gains
 * (EVENT_COLUMN_TABLE) is filled from the event field of the same name.
 */
import { EVENT_COLUMN_TABLE, type EventColumnName } from '../store/event-columns';
import { blockOpName, encodeDevice, EVENT_TYPE_CODE, SYSCALL_NAMES, type EventType } from './event-types';
import { parseEventId } from './event-id';
import { targetKindCode, type TargetKind } from './target';

/** What the row's integer references point to, given out by the store being built. */
export interface RowNames {
  service(name: string): number;
  comm(name: string): number;
  context(transactionId: string | null, traceId: string | null, parentSpanId: string | null): number | null;
  target(kind: number, value: string): number;
  /** the containers row of a container's JSON (core/model/container.ts) */
  container(info: string): number;
}

export type RowValues = Record<EventColumnName, bigint | number | null>;

/** REQ_OP_* names back to codes (event-types.ts names them); `op_N` for the unnamed. */
function opCode(name: string): number {
  const m = /^op_(\d+)$/.exec(name);
  if (m) return Number(m[1]);
  for (let code = 0; code < 64; code++) if (blockOpName(code) === name) return code;
  return 0;
}

const int = (v: unknown): number | bigint | null =>
  typeof v === 'number' || typeof v === 'bigint' ? v : typeof v === 'boolean' ? Number(v) : null;

/** The row of `event`; its key (ts, seq) is the one its event id names, or `fallbackSeq`. */
export function eventToRow(event: Record<string, unknown>, names: RowNames, fallbackSeq: number): RowValues {
  const key = parseEventId(String(event.event_id));
  const row = Object.fromEntries(EVENT_COLUMN_TABLE.map((c) => [c.name, null])) as RowValues;
  row.ts = event.timestamp_ns as bigint;
  row.seq = key && key.ts === row.ts ? key.seq : fallbackSeq;
  row.type = EVENT_TYPE_CODE[event.event_type as EventType] ?? 0;
  row.dur = event.duration_ns as bigint;
  row.service = names.service(String(event.service_name));
  row.ctx = names.context(
    (event.transaction_id as string | null) ?? null,
    (event.trace_id as string | null) ?? null,
    typeof event.parent_span_id === 'string' ? event.parent_span_id : null,
  );
  row.pid = int(event.pid) ?? 0;
  row.tid = int(event.tid) ?? 0;
  row.comm = names.comm(String(event.comm));
  row.bytes = int(event.bytes) ?? 0;
  if (typeof event.syscall === 'string') {
    const m = /^syscall_(\d+)$/.exec(event.syscall);
    row.syscall = m ? Number(m[1]) : Math.max(0, (SYSCALL_NAMES as readonly string[]).indexOf(event.syscall));
  }
  if (typeof event.target === 'string' && typeof event.target_kind === 'string')
    row.target = names.target(targetKindCode(event.target_kind as TargetKind), event.target);
  if (typeof event.device === 'string') {
    const [major, minor] = event.device.split(':').map(Number);
    row.dev = encodeDevice(major ?? 0, minor ?? 0);
  }
  if (typeof event.op === 'string') row.op = opCode(event.op);
  // an API event's container is an object; an incident file's column holds its JSON
  const container = event.container;
  if (typeof container === 'string') row.container = names.container(container);
  else if (typeof container === 'object' && container !== null)
    row.container = names.container(JSON.stringify(container));
  // fd, ret, sector, error, and any column added later: the field of the same name
  for (const { name } of EVENT_COLUMN_TABLE)
    if (row[name] === null && name in event && !(name in FIELD_OF)) row[name] = int(event[name]);
  return row;
}

/** Columns whose event field has another name or form (filled above). */
const FIELD_OF: Partial<Record<EventColumnName, string>> = {
  ts: 'timestamp_ns',
  seq: 'event_id',
  type: 'event_type',
  dur: 'duration_ns',
  service: 'service_name',
  ctx: 'transaction_id',
  comm: 'comm',
  syscall: 'syscall',
  target: 'target',
  dev: 'device',
  op: 'op',
  container: 'container',
};
