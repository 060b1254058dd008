/**
 * The per-trace span cap: a trace's first `maxSpans` events are exported as
 * spans; the rest are folded into one summary span (events, bytes and total
 * time per event type, from the first folded event's start to the last one's
 * end), so a request that made a million writes costs the trace view one
 * span, not a million. A trace counts while it is active: once no event of it
 * came for IDLE_MS its summary is sent and it is forgotten; a summary older
 * than SUMMARY_MAX_MS is sent too, and a new one begins.
 */
import type { ApiEvent } from '../../core/model';
import { KernelSpan, type SpanResources } from '../../core/otlp/event-span';
import { summarySpanIdOf } from '../../core/otlp/span-ids';
import type { Attributes } from '@opentelemetry/api';

export const IDLE_MS = 5000;
export const SUMMARY_MAX_MS = 60_000;
/** Traces followed at once; past this the least recently active is closed early. */
export const MAX_TRACES = 65536;

interface TypeTotals {
  count: number;
  bytes: number;
  durationNs: bigint;
}

class Summary {
  readonly byType = new Map<string, TypeTotals>();
  events = 0;
  startNs: bigint;
  endNs: bigint;
  lastEventId: string;

  constructor(
    readonly first: ApiEvent,
    readonly traceFlags: number,
    readonly startedMs: number,
  ) {
    this.startNs = first.timestamp_ns;
    this.endNs = first.timestamp_ns + first.duration_ns;
    this.lastEventId = first.event_id;
  }

  add(event: ApiEvent): void {
    this.events++;
    let totals = this.byType.get(event.event_type);
    if (!totals) {
      totals = { count: 0, bytes: 0, durationNs: 0n };
      this.byType.set(event.event_type, totals);
    }
    totals.count++;
    totals.bytes += event.bytes;
    totals.durationNs += event.duration_ns;
    if (event.timestamp_ns < this.startNs) this.startNs = event.timestamp_ns;
    const end = event.timestamp_ns + event.duration_ns;
    if (end > this.endNs) this.endNs = end;
    this.lastEventId = event.event_id;
  }

  span(maxSpans: number, resources: SpanResources): KernelSpan {
    const e = this.first;
    const attributes: Attributes = {
      'kreplay.summary.events': this.events,
      'kreplay.summary.span_cap': maxSpans,
      'kreplay.summary.first_event_id': e.event_id,
      'kreplay.summary.last_event_id': this.lastEventId,
    };
    for (const [type, t] of this.byType) {
      attributes[`kreplay.summary.${type}.count`] = t.count;
      attributes[`kreplay.summary.${type}.bytes`] = t.bytes;
      attributes[`kreplay.summary.${type}.duration_ns`] = Number(t.durationNs);
    }
    if (e.transaction_id !== null) attributes['kreplay.transaction_id'] = e.transaction_id;
    return new KernelSpan({
      traceId: e.trace_id!,
      spanId: summarySpanIdOf('summary', e.event_id),
      parentSpanId: e.parent_span_id ?? null,
      traceFlags: this.traceFlags,
      name: `kreplay: ${this.events} more kernel events`,
      startNs: this.startNs,
      endNs: this.endNs,
      attributes,
      error: null,
      resource: resources.of(e.service_name, e.node),
    });
  }
}

interface TraceState {
  traceId: string;
  spans: number;
  lastMs: number;
  summary: Summary | null;
  /** neighbours in activity order (null: the end) */
  older: TraceState | null;
  newer: TraceState | null;
}

/**
 * The traces followed, in activity order, the least recently active first: a list through the
 * states, so that touching a trace only relinks it. A Map kept in that order by a delete and a set
 * per touch leaves a deleted entry behind each time, which every walk from its oldest end (each
 * eviction, each tick) steps over: at 20,000 short traces a second, most of the export's time.
 */
class ActivityOrder {
  oldest: TraceState | null = null;
  private newest: TraceState | null = null;

  /** `state` (not in the list) becomes the most recently active. */
  push(state: TraceState): void {
    state.older = this.newest;
    state.newer = null;
    if (this.newest) this.newest.newer = state;
    else this.oldest = state;
    this.newest = state;
  }

  remove(state: TraceState): void {
    if (state.older) state.older.newer = state.newer;
    else this.oldest = state.newer;
    if (state.newer) state.newer.older = state.older;
    else this.newest = state.older;
    state.older = state.newer = null;
  }
}

export class TraceCap {
  private readonly traces = new Map<string, TraceState>();
  private readonly order = new ActivityOrder();
  /** the traces holding a summary (few: those past their cap), looked at for its age */
  private readonly summarizing = new Map<string, TraceState>();
  /** events folded into summaries */
  summarized = 0;

  constructor(
    private readonly maxSpans: number,
    private readonly resources: SpanResources,
  ) {}

  /** Spans the trace may still send one by one. */
  room(traceId: string): number {
    return this.maxSpans - (this.traces.get(traceId)?.spans ?? 0);
  }

  /**
   * `n` events of the trace go as spans of their own (the caller checked `room`): counted at once
   * (events written natively, a read's worth at a time). A trace closed early to make room adds
   * its summary to `closed`.
   */
  admit(traceId: string, n: number, nowMs: number, closed: KernelSpan[]): void {
    this.touch(traceId, nowMs, closed).spans += n;
  }

  /**
   * Whether the event (of a W3C trace) is past its trace's cap, and so folded
   * into the trace's summary; false: it goes as a span of its own. A trace
   * closed early to make room adds its summary to `closed`.
   */
  fold(event: ApiEvent, traceFlags: number, nowMs: number, closed: KernelSpan[]): boolean {
    const state = this.touch(event.trace_id!, nowMs, closed);
    if (state.spans < this.maxSpans) {
      state.spans++;
      return false;
    }
    if (!state.summary) {
      state.summary = new Summary(event, traceFlags, nowMs);
      this.summarizing.set(event.trace_id!, state);
    }
    state.summary.add(event);
    this.summarized++;
    return true;
  }

  /** The trace's state, made the most recently active. */
  private touch(traceId: string, nowMs: number, closed: KernelSpan[]): TraceState {
    let state = this.traces.get(traceId);
    if (state) this.order.remove(state);
    else {
      if (this.traces.size >= MAX_TRACES) this.close(this.order.oldest!, closed);
      state = { traceId, spans: 0, lastMs: nowMs, summary: null, older: null, newer: null };
      this.traces.set(traceId, state);
    }
    state.lastMs = nowMs;
    this.order.push(state);
    return state;
  }

  private close(state: TraceState, closed: KernelSpan[]): void {
    this.order.remove(state);
    this.traces.delete(state.traceId);
    this.summarizing.delete(state.traceId);
    if (state.summary) closed.push(state.summary.span(this.maxSpans, this.resources));
  }

  /**
   * Summaries due at `nowMs` (idle traces, old summaries), or all of them when `all`. Called every
   * tick with tens of thousands of traces followed (a few events each): it looks at the idle ones,
   * which lead the activity order, and at those with a summary, not at every trace. `nowMs` is on a
   * monotonic clock (the loop's performance.now()): on one stepped back, the least recently active
   * trace would look active until the clock caught up, and the walk, which stops there, close none.
   */
  due(nowMs: number, all: boolean): KernelSpan[] {
    const closed: KernelSpan[] = [];
    for (let state = this.order.oldest; state; state = this.order.oldest) {
      if (!all && nowMs - state.lastMs < IDLE_MS) break;
      this.close(state, closed);
    }
    for (const [traceId, state] of this.summarizing)
      if (nowMs - state.summary!.startedMs >= SUMMARY_MAX_MS) {
        closed.push(state.summary!.span(this.maxSpans, this.resources));
        state.summary = null;
        this.summarizing.delete(traceId);
      }
    return closed;
  }
}
