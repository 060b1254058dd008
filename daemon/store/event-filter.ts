/** What the HTTP routes and replay sessions ask the node stores for. */
import type { ApiEvent, EventType, TargetKind } from '../../core/model';

/** A write target, matched exactly, or every target starting with `value` when prefix. */
export interface TargetPattern {
  value: string;
  prefix: boolean;
}

/** Given fields combine as AND; `fromNs` is inclusive, `toNs` exclusive. */
export interface EventFilter {
  transactionId?: string;
  traceId?: string;
  /** exact service_name */
  service?: string;
  node?: string;
  types?: EventType[];
  fromNs?: bigint;
  toNs?: bigint;
  minDurationNs?: bigint;
  /** sys_write events whose target matches; block_io events have none */
  target?: TargetPattern;
  targetKinds?: TargetKind[];
}

export type EventOrder = 'asc' | 'desc';

/** A place in (timestamp_ns, event_id) order; paging continues strictly after it. */
export interface EventPosition {
  ts: bigint;
  eventId: string;
}

export interface PageOptions {
  limit: number;
  order: EventOrder;
  after?: EventPosition;
}

export interface IterateOptions {
  order: EventOrder;
  after?: EventPosition;
  /** events read per query (default 1000) */
  chunk?: number;
}

export interface EventPage {
  events: ApiEvent[];
  /** the last event's position when more events follow, else null */
  next: EventPosition | null;
}

export interface EventSummary {
  count: number;
  firstTs: bigint | null;
  lastTs: bigint | null;
}

export function positionOf(event: ApiEvent): EventPosition {
  return { ts: event.timestamp_ns, eventId: event.event_id };
}
