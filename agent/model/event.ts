/** The event as the API, the replay stream and the CLI show it. */
import { deviceName, blockOpName, eventTypeName, syscallName, type EventType } from './event-types';
import { formatEventId } from './event-id';
import { RecordType } from './record-layout';

interface CommonFields {
  event_id: string;
  event_type: EventType;
  timestamp_ns: bigint;
  duration_ns: bigint;
  service_name: string;
  transaction_id: string | null;
  trace_id: string | null;
  node: string;
  pid: number;
  tid: number;
  comm: string;
  bytes: number;
}

export interface SysWriteEvent extends CommonFields {
  event_type: 'sys_write';
  syscall: string;
  fd: number;
  ret: number;
}

export interface BlockIoEvent extends CommonFields {
  event_type: 'block_io';
  device: string;
  sector: number;
  op: string;
  error: number;
}

export type ApiEvent = SysWriteEvent | BlockIoEvent;

/** Columns of the events table, in the order EventRow names them. */
export const EVENT_COLUMNS =
  'ts, seq, type, dur, service, ctx, pid, tid, comm, bytes, fd, ret, syscall, dev, sector, op, error';

/** A row of EVENT_COLUMNS read with safeIntegers(true). */
export interface EventRow {
  ts: bigint;
  seq: bigint;
  type: bigint;
  dur: bigint;
  service: bigint;
  ctx: bigint | null;
  pid: bigint;
  tid: bigint;
  comm: bigint;
  bytes: bigint;
  fd: bigint | null;
  ret: bigint | null;
  syscall: bigint | null;
  dev: bigint | null;
  sector: bigint | null;
  op: bigint | null;
  error: bigint | null;
}

/** What a row's integer references mean in its store. */
export interface StoreNames {
  storeId: string;
  node: string;
  service(id: number): string;
  comm(id: number): string;
  context(id: number | null): { transaction_id: string | null; trace_id: string | null };
}

export function rowToEvent(row: EventRow, names: StoreNames): ApiEvent {
  const seq = Number(row.seq);
  const ctx = names.context(row.ctx === null ? null : Number(row.ctx));
  const common = {
    event_id: formatEventId(names.storeId, row.ts, seq),
    timestamp_ns: row.ts,
    duration_ns: row.dur,
    service_name: names.service(Number(row.service)),
    transaction_id: ctx.transaction_id,
    trace_id: ctx.trace_id,
    node: names.node,
    pid: Number(row.pid),
    tid: Number(row.tid),
    comm: names.comm(Number(row.comm)),
    bytes: Number(row.bytes),
  };
  if (Number(row.type) === RecordType.BlockIo) {
    return {
      ...common,
      event_type: 'block_io',
      device: deviceName(Number(row.dev ?? 0)),
      sector: Number(row.sector ?? 0),
      op: blockOpName(Number(row.op ?? 0)),
      error: Number(row.error ?? 0),
    };
  }
  return {
    ...common,
    event_type: eventTypeName(Number(row.type)) as 'sys_write',
    syscall: syscallName(Number(row.syscall ?? 0)),
    fd: Number(row.fd ?? -1),
    ret: Number(row.ret ?? 0),
  };
}

/**
 * JSON text of an event with timestamp_ns and duration_ns as exact integers
 * (all 19 digits; JSON.stringify cannot write a bigint), or as strings for
 * JavaScript clients that would round them.
 */
export function eventToJson(event: ApiEvent, int64AsString = false, extra?: Record<string, unknown>): string {
  const parts: string[] = [];
  for (const [key, value] of Object.entries(extra ? { ...event, ...extra } : event)) {
    const text =
      typeof value === 'bigint'
        ? int64AsString
          ? `"${value}"`
          : value.toString()
        : JSON.stringify(value === undefined ? null : value);
    parts.push(`${JSON.stringify(key)}:${text}`);
  }
  return `{${parts.join(',')}}`;
}
