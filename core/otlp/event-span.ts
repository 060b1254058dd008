/**
 * An event as an OTLP span in its request's trace: a child of the span the
 * request's W3C traceparent named, with the call's exact start and end, named
 * for the call and what it went to (`sys_fsync /var/lib/app/db.sqlite`,
 * `sys_read tcp 10.0.0.5:5432`). Attributes follow the OpenTelemetry semantic
 * conventions where one exists (process.pid, thread.id, file.path,
 * network.peer.*, error.type); the rest are kreplay's own (kreplay.*). The
 * span has the shape the OpenTelemetry project's serializers take (a
 * ReadableSpan); core/otlp/otlp-encoding.ts says which encoder writes what.
 *
 * Spans rather than span events: an event of a span sits at one instant, but a
 * kernel call has a duration (the 800 ms fsync), and the trace views draw
 * spans on the timeline under their parent, where events are only ticks.
 */
import type { Attributes, HrTime, SpanContext, SpanStatus } from '@opentelemetry/api';
import { resourceFromAttributes, type Resource } from '@opentelemetry/resources';
import { constants } from 'node:os';
import type { ApiEvent } from '../model/event';
import type { Container } from '../model/container';
import { VERSION } from '../version';
import { spanIdOf } from './span-ids';

/** A W3C trace id: what a traceparent carries (a marker's trace id may be anything, and is not exported). */
export const W3C_TRACE_ID = /^(?!0{32})[0-9a-f]{32}$/;
/** The traceparent's sampled flag (W3C trace-flags bit 0). */
export const SAMPLED_FLAG = 1;

const NS_PER_S = 1_000_000_000n;
/** SpanKind.INTERNAL and SpanStatusCode (api), as numbers: the api's enums are const enums elsewhere. */
const SPAN_KIND_INTERNAL = 0;
const STATUS_UNSET: SpanStatus = Object.freeze({ code: 0 });
const STATUS_ERROR = 2;

export const INSTRUMENTATION_SCOPE = Object.freeze({ name: 'kreplay', version: VERSION });

/** ns since the epoch as [s, ns]: exact (the serializers write it back as one 64-bit integer). */
export function hrTimeOf(ns: bigint): HrTime {
  return [Number(ns / NS_PER_S), Number(ns % NS_PER_S)];
}

const ERRNO_NAMES = new Map<number, string>();
for (const [name, code] of Object.entries(constants.errno))
  if (!ERRNO_NAMES.has(code)) ERRNO_NAMES.set(code, name);

/** EIO for 5; `errno N` for a number Linux does not name. */
export function errnoName(errno: number): string {
  return ERRNO_NAMES.get(errno) ?? `errno ${errno}`;
}

/** The OpenTelemetry semantic conventions' resource attributes of a container, those it has. */
export function containerAttributes(c: Container): Attributes {
  const attributes: Attributes = { 'container.id': c.id };
  if (c.name !== null) attributes['container.name'] = c.name;
  if (c.image !== null) attributes['container.image.name'] = c.image;
  if (c.runtime !== 'unknown') attributes['container.runtime'] = c.runtime;
  if (c.pod !== null) attributes['k8s.pod.name'] = c.pod;
  if (c.namespace !== null) attributes['k8s.namespace.name'] = c.namespace;
  return attributes;
}

/** One resource per (service, node, container): the serializers group spans by resource identity. */
export class SpanResources {
  private readonly byNode = new Map<string, Map<string, Resource>>();

  of(service: string, node: string, container?: Container): Resource {
    let services = this.byNode.get(node);
    if (!services) {
      services = new Map();
      this.byNode.set(node, services);
    }
    // a service name holds no NUL: the key is unambiguous
    const key = container ? `${service}\0${container.id}` : service;
    let resource = services.get(key);
    if (!resource) {
      resource = resourceFromAttributes({
        'service.name': service,
        'host.name': node,
        ...(container && containerAttributes(container)),
      });
      services.set(key, resource);
    }
    return resource;
  }
}

/** What a span is made of, apart from what every kernel span shares. */
export interface SpanParts {
  traceId: string;
  spanId: string;
  /** null: the event's parent span is not known (a store, fleet or file from before parent spans were kept) */
  parentSpanId: string | null;
  traceFlags: number;
  name: string;
  startNs: bigint;
  endNs: bigint;
  attributes: Attributes;
  /** set for a failed call */
  error: string | null;
  resource: Resource;
}

/** A finished span of kernel work, in the shape the OpenTelemetry serializers read. */
export class KernelSpan {
  readonly kind = SPAN_KIND_INTERNAL;
  readonly name: string;
  readonly parentSpanContext: SpanContext | undefined;
  /** exact, for kreplay's protobuf writer; startTime and endTime (made when asked) for the OpenTelemetry serializers */
  readonly startNs: bigint;
  readonly endNs: bigint;
  readonly status: SpanStatus;
  readonly attributes: Attributes;
  readonly links = [];
  readonly events = [];
  readonly ended = true;
  readonly resource: Resource;
  readonly instrumentationScope = INSTRUMENTATION_SCOPE;
  readonly droppedAttributesCount = 0;
  readonly droppedEventsCount = 0;
  readonly droppedLinksCount = 0;
  private readonly context: SpanContext;

  constructor(parts: SpanParts) {
    this.name = parts.name;
    this.context = { traceId: parts.traceId, spanId: parts.spanId, traceFlags: parts.traceFlags };
    this.parentSpanContext =
      parts.parentSpanId === null
        ? undefined
        : {
            traceId: parts.traceId,
            spanId: parts.parentSpanId,
            traceFlags: parts.traceFlags,
            isRemote: true,
          };
    this.startNs = parts.startNs;
    this.endNs = parts.endNs;
    this.status = parts.error === null ? STATUS_UNSET : { code: STATUS_ERROR, message: parts.error };
    this.attributes = parts.attributes;
    this.resource = parts.resource;
  }

  get startTime(): HrTime {
    return hrTimeOf(this.startNs);
  }

  get endTime(): HrTime {
    return hrTimeOf(this.endNs);
  }

  get duration(): HrTime {
    return hrTimeOf(this.endNs - this.startNs);
  }

  spanContext(): SpanContext {
    return this.context;
  }
}

const SOCKET = /^(tcp|udp|sctp|mptcp|udplite)( accepted)? (?:\[([0-9a-f:.]+)\]|(\d+\.\d+\.\d+\.\d+)):(\d+)$/;

/** The semantic conventions' attributes of a write's or read's target, beside kreplay.target. */
function targetAttributes(kind: string, target: string, out: Attributes): void {
  if (kind === 'file') {
    out['file.path'] = target;
    return;
  }
  if (kind !== 'socket') return;
  const m = SOCKET.exec(target);
  if (m) {
    const [, transport, accepted, v6, v4, port] = m;
    // an accepted connection is named by the listening address, this side's, never the client's
    const side = accepted ? 'network.local' : 'network.peer';
    out['network.transport'] = transport!;
    out['network.type'] = v6 ? 'ipv6' : 'ipv4';
    out[`${side}.address`] = (v6 ?? v4)!;
    out[`${side}.port`] = Number(port);
  } else if (target.startsWith('unix ')) {
    out['network.transport'] = 'unix';
    out['network.peer.address'] = target.slice('unix '.length);
  }
}

/**
 * The span of `event`, or null when the event carries no W3C trace id (no
 * context, or a marker's free-form trace id): there is no trace to put it in.
 * `traceFlags`: the traceparent's, where known.
 */
export function eventSpan(
  event: ApiEvent,
  resources: SpanResources,
  traceFlags: number | null = null,
  /** the event's span id when the caller has it at hand (spanIdFor: the store id and seq) */
  spanId: string | null = spanIdOf(event.event_id),
): KernelSpan | null {
  const traceId = event.trace_id;
  if (traceId === null || !W3C_TRACE_ID.test(traceId) || spanId === null) return null;
  const attributes: Attributes = {
    'process.pid': event.pid,
    'thread.id': event.tid,
    'thread.name': event.comm,
    'kreplay.event_id': event.event_id,
    'kreplay.event_type': event.event_type,
    'kreplay.bytes': event.bytes,
  };
  if (event.transaction_id !== null) attributes['kreplay.transaction_id'] = event.transaction_id;
  const parentSpanId = event.parent_span_id ?? null;
  // a root in the trace only because the parent was not kept: said, not guessed
  if (parentSpanId === null) attributes['kreplay.parent_span_unknown'] = true;
  let name: string;
  let error: string | null = null;
  if (event.event_type === 'block_io') {
    name = `block_io ${event.op} ${event.device}`;
    attributes['kreplay.device'] = event.device;
    attributes['kreplay.op'] = event.op;
    attributes['kreplay.sector'] = event.sector;
    if (event.error < 0) error = errnoName(-event.error);
  } else {
    name = event.target === null ? event.event_type : `${event.event_type} ${event.target}`;
    attributes['kreplay.syscall'] = event.syscall;
    attributes['kreplay.fd'] = event.fd;
    attributes['kreplay.ret'] = event.ret;
    if (event.target !== null && event.target_kind !== null) {
      attributes['kreplay.target_kind'] = event.target_kind;
      attributes['kreplay.target'] = event.target;
      targetAttributes(event.target_kind, event.target, attributes);
    }
    if (event.event_type === 'sys_read' && event.response_ns !== null)
      attributes['kreplay.response_ns'] = Number(event.response_ns);
    if (event.event_type === 'sys_write' && event.request_key !== undefined)
      attributes['kreplay.request_key'] = event.request_key;
    if (event.ret < 0) error = errnoName(-event.ret);
  }
  if (error !== null) attributes['error.type'] = error;
  return new KernelSpan({
    traceId,
    spanId,
    parentSpanId,
    // an exported span was recorded: sampled, whatever else the traceparent's flags say
    traceFlags: (traceFlags ?? 0) | SAMPLED_FLAG,
    name,
    startNs: event.timestamp_ns,
    endNs: event.timestamp_ns + event.duration_ns,
    attributes,
    error,
    resource: resources.of(event.service_name, event.node, event.container),
  });
}
