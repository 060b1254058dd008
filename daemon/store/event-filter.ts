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
  /** events of processes in a container, by its name, its id or an id prefix (namesContainer, core/model/container.ts) */
  container?: string;
  /** exact Kubernetes pod name, namespace, container image */
  pod?: string;
  namespace?: string;
  image?: string;
}

/** The container filters a filter has: they are matched in the stores' containers. */
export function containerFilterOf(filter: EventFilter): ContainerFilter | undefined {
  const { container, pod, namespace, image } = filter;
  if (container === undefined && pod === undefined && namespace === undefined && image === undefined)
    return undefined;
  const out: ContainerFilter = {};
  if (container !== undefined) out.container = container;
  if (pod !== undefined) out.pod = pod;
  if (namespace !== undefined) out.namespace = namespace;
  if (image !== undefined) out.image = image;
  return out;
}

export type ContainerFilter = Pick<EventFilter, 'container' | 'pod' | 'namespace' | 'image'>;

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
