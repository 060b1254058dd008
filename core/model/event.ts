/** The event as the API, the replay stream and the CLI show it. */
import { deviceName, blockOpName, eventTypeName, syscallName, type EventType } from './event-types';
import { formatEventId } from './event-id';
import { exactJson, int64Json } from '../json/exact-json';
import { RecordType } from './record-layout';
import type { TargetKind } from './target';
import type { EventRow } from '../store/event-columns';
import type { Container } from './container';

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
  /**
   * the parent-id of the W3C traceparent that set the event's context: the span its OTLP export is
   * a child of; absent for a marker's context and for events stored before store schema v8
   */
  parent_span_id?: string;
  /** the container the process ran in (its runtime's state on the host); absent for a host process */
  container?: Container;
}

/** The fields of every syscall type (all but block_io). */
interface SyscallFields extends CommonFields {
  syscall: string;
  fd: number;
  /** bytes (messages for sendmmsg/recvmmsg, 0 for fsync and connect), or negative errno */
  ret: number;
  /** null when the fd was not open (EBADF) or its target was lost */
  target_kind: TargetKind | null;
  target: string | null;
}

export interface SysWriteEvent extends SyscallFields {
  event_type: 'sys_write';
  /** a send that started a request on a socket: the key of what it asked (native/capture/request_key.h); absent otherwise */
  request_key?: number;
}

export interface SysReadEvent extends SyscallFields {
  event_type: 'sys_read';
  /** a socket's first read after a send on it: from the end of that send to the end of this read */
  response_ns: bigint | null;
}

export interface SysFsyncEvent extends SyscallFields {
  event_type: 'sys_fsync';
}

/** duration_ns: until the connection was established or failed; ret: 0 or its negative errno */
export interface SysConnectEvent extends SyscallFields {
  event_type: 'sys_connect';
}

export type SyscallEvent = SysWriteEvent | SysReadEvent | SysFsyncEvent | SysConnectEvent;

export interface BlockIoEvent extends CommonFields {
  event_type: 'block_io';
  device: string;
  sector: number;
  op: string;
  error: number;
}

export type ApiEvent = SyscallEvent | BlockIoEvent;

/** A write's target as its store's dictionary holds it. */
export interface Target {
  kind: TargetKind;
  value: string;
}

/** A context as its store holds it. */
export interface StoreContext {
  transaction_id: string | null;
  trace_id: string | null;
  parent_span_id: string | null;
  /** the traceparent's flags (bit 0: sampled); not shown in events, read by the OTLP export */
  trace_flags: number | null;
}

/** What a row's integer references mean in its store. */
export interface StoreNames {
  storeId: string;
  node: string;
  service(id: number): string;
  comm(id: number): string;
  context(id: number | null): StoreContext;
  target(id: number | null): Target | null;
  container(id: number | null): Container | null;
}

/*
 * Not on every event (only traceparent contexts, only processes in containers): added after the
 * literal, like request_key.
 */
function withParentSpan<E extends ApiEvent>(event: E, ctx: StoreContext, container: Container | null): E {
  if (ctx.parent_span_id !== null) event.parent_span_id = ctx.parent_span_id;
  if (container !== null) event.container = container;
  return event;
}

export function rowToEvent(row: EventRow, names: StoreNames): ApiEvent {
  // object literals of one fixed shape per type: V8 builds them far faster than spreads
  const ctx = names.context(row.ctx === null ? null : Number(row.ctx));
  const eventId = formatEventId(names.storeId, row.ts, Number(row.seq));
  const serviceName = names.service(Number(row.service));
  const comm = names.comm(Number(row.comm));
  const container = names.container(row.container === null ? null : Number(row.container));
  if (Number(row.type) === RecordType.BlockIo) {
    return withParentSpan<BlockIoEvent>(
      {
        event_id: eventId,
        event_type: 'block_io',
        timestamp_ns: row.ts,
        duration_ns: row.dur,
        service_name: serviceName,
        transaction_id: ctx.transaction_id,
        trace_id: ctx.trace_id,
        node: names.node,
        pid: Number(row.pid),
        tid: Number(row.tid),
        comm,
        bytes: Number(row.bytes),
        device: deviceName(Number(row.dev ?? 0)),
        sector: Number(row.sector ?? 0),
        op: blockOpName(Number(row.op ?? 0)),
        error: Number(row.error ?? 0),
      },
      ctx,
      container,
    );
  }
  const target = names.target(row.target === null ? null : Number(row.target));
  const type = eventTypeName(Number(row.type));
  if (type === 'sys_read') {
    return withParentSpan<SysReadEvent>(
      {
        event_id: eventId,
        event_type: type,
        timestamp_ns: row.ts,
        duration_ns: row.dur,
        service_name: serviceName,
        transaction_id: ctx.transaction_id,
        trace_id: ctx.trace_id,
        node: names.node,
        pid: Number(row.pid),
        tid: Number(row.tid),
        comm,
        bytes: Number(row.bytes),
        syscall: syscallName(Number(row.syscall ?? 0)),
        fd: Number(row.fd ?? -1),
        ret: Number(row.ret ?? 0),
        target_kind: target && target.kind,
        target: target && target.value,
        response_ns: row.response_ns,
      },
      ctx,
      container,
    );
  }
  const event: Exclude<SyscallEvent, SysReadEvent> = {
    event_id: eventId,
    event_type: type as Exclude<SyscallEvent['event_type'], 'sys_read'>,
    timestamp_ns: row.ts,
    duration_ns: row.dur,
    service_name: serviceName,
    transaction_id: ctx.transaction_id,
    trace_id: ctx.trace_id,
    node: names.node,
    pid: Number(row.pid),
    tid: Number(row.tid),
    comm,
    bytes: Number(row.bytes),
    syscall: syscallName(Number(row.syscall ?? 0)),
    fd: Number(row.fd ?? -1),
    ret: Number(row.ret ?? 0),
    target_kind: target && target.kind,
    target: target && target.value,
  };
  // only a send that started a request has one (rare: the common shape stays one literal)
  if (row.request_key !== null && event.event_type === 'sys_write')
    event.request_key = Number(row.request_key);
  return withParentSpan(event, ctx, container);
}

/** A JSON string literal; the common case (printable ASCII, no quote or backslash) skips JSON.stringify. */
const PLAIN = /^[\x20-\x21\x23-\x5b\x5d-\x7e]*$/;
function jsonString(value: string | null): string {
  if (value === null) return 'null';
  return PLAIN.test(value) ? `"${value}"` : JSON.stringify(value);
}

/**
 * JSON text of an event with timestamp_ns and duration_ns exact (see
 * exact-json.ts), and `extra` fields after it. Written field by field:
 * pages of 10,000 events spend most of their time here.
 */
export function eventToJson(event: ApiEvent, int64AsString = false, extra?: Record<string, unknown>): string {
  let text =
    `{"event_id":${jsonString(event.event_id)},"event_type":"${event.event_type}"` +
    `,"timestamp_ns":${int64Json(event.timestamp_ns, int64AsString)},"duration_ns":${int64Json(event.duration_ns, int64AsString)}` +
    `,"service_name":${jsonString(event.service_name)},"transaction_id":${jsonString(event.transaction_id)}` +
    `,"trace_id":${jsonString(event.trace_id)},"node":${jsonString(event.node)}` +
    `,"pid":${event.pid},"tid":${event.tid},"comm":${jsonString(event.comm)},"bytes":${event.bytes}`;
  text +=
    event.event_type === 'block_io'
      ? `,"device":${jsonString(event.device)},"sector":${event.sector},"op":${jsonString(event.op)},"error":${event.error}`
      : `,"syscall":${jsonString(event.syscall)},"fd":${event.fd},"ret":${event.ret}` +
        `,"target_kind":${jsonString(event.target_kind)},"target":${jsonString(event.target)}`;
  if (event.event_type === 'sys_read')
    text += `,"response_ns":${event.response_ns === null ? 'null' : int64Json(event.response_ns, int64AsString)}`;
  else if (event.event_type === 'sys_write' && event.request_key !== undefined)
    text += `,"request_key":${event.request_key}`;
  if (event.parent_span_id !== undefined) text += `,"parent_span_id":${jsonString(event.parent_span_id)}`;
  if (event.container !== undefined) text += `,"container":${JSON.stringify(event.container)}`;
  return withJsonFields(`${text}}`, extra, int64AsString);
}

/** `json` (an object's text) with `extra`'s fields appended, as eventToJson appends them. */
export function withJsonFields(json: string, extra?: Record<string, unknown>, int64AsString = false): string {
  if (!extra) return json;
  let text = json.slice(0, -1);
  for (const [key, value] of Object.entries(extra))
    text += `,${JSON.stringify(key)}:${exactJson(value, int64AsString)}`;
  return `${text}}`;
}
