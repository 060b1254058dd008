/**
 * The per-trace span cap's closing (agent/otlp/trace-cap.ts due): an idle
 * trace's summary is sent and the trace forgotten, a trace still active keeps
 * counting, and a summary older than SUMMARY_MAX_MS is sent while its trace
 * goes on, wherever that trace stands among the others.
 */
import { IDLE_MS, SUMMARY_MAX_MS, TraceCap } from '../../agent/otlp/trace-cap';
import { SpanResources, type KernelSpan } from '../../core/otlp/event-span';
import { fakeEvent } from '../support/fake-transaction-reader';

const T0 = 1_795_338_478_000_000_000n;

function traceId(n: number): string {
  return `4bf92f3577b34da6a3ce929d0e0e${n.toString(16).padStart(4, '0')}`;
}

/** An event of trace `n`; `seq` tells events apart. */
function eventOf(n: number, seq: number) {
  return { ...fakeEvent(`txn-${n}`, T0 + BigInt(seq) * 1000n, seq), trace_id: traceId(n) };
}

function names(spans: KernelSpan[]): string[] {
  return spans.map((s) => `${s.spanContext().traceId.slice(-4)} ${s.name}`);
}

describe('TraceCap.due', () => {
  it('sends the summaries of idle traces and of old summaries, and keeps counting the traces still active', () => {
    const cap = new TraceCap(1, new SpanResources());
    const closed: KernelSpan[] = [];
    let seq = 0;
    // trace 1 goes past its cap at 0 ms; traces 2 and 3 are active after it
    for (const n of [1, 1, 1, 2, 3]) cap.fold(eventOf(n, seq++), 1, 0, closed);
    expect(cap.due(IDLE_MS - 1, false)).toEqual([]);
    // trace 1 stays active (touched last), trace 2 goes idle, trace 3 is touched: 2 has no summary
    cap.fold(eventOf(3, seq++), 1, IDLE_MS - 1, closed);
    cap.fold(eventOf(1, seq++), 1, IDLE_MS - 1, closed);
    expect(cap.due(IDLE_MS, false)).toEqual([]);
    // trace 2 was forgotten: its next event starts its count again, as a span of its own
    expect(cap.fold(eventOf(2, seq++), 1, IDLE_MS, closed)).toBe(false);
    // trace 1's summary ages out while trace 1 is active, behind traces 3 and 2 (active too)
    cap.fold(eventOf(1, seq++), 1, SUMMARY_MAX_MS - 1, closed);
    cap.fold(eventOf(3, seq++), 1, SUMMARY_MAX_MS - 1, closed);
    cap.fold(eventOf(2, seq++), 1, SUMMARY_MAX_MS - 1, closed);
    expect(names(cap.due(SUMMARY_MAX_MS, false))).toEqual(['0001 kreplay: 4 more kernel events']);
    // it goes on counting against its cap: the next event starts a new summary
    expect(cap.fold(eventOf(1, seq), 1, SUMMARY_MAX_MS, closed)).toBe(true);
    expect(cap.due(SUMMARY_MAX_MS, false)).toEqual([]);
    // traces 3 and 2 go idle, then 1: each summary once, in the order they went idle
    expect(names(cap.due(SUMMARY_MAX_MS - 1 + IDLE_MS, false))).toEqual([
      '0003 kreplay: 2 more kernel events',
      '0002 kreplay: 1 more kernel events',
    ]);
    expect(names(cap.due(SUMMARY_MAX_MS + IDLE_MS, true))).toEqual(['0001 kreplay: 1 more kernel events']);
    expect(closed).toEqual([]);
  });
});
