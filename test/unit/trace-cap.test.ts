/**
 * The per-trace span cap's closing (agent/otlp/trace-cap.ts due): an idle
 * trace's summary is sent and the trace forgotten, a trace still active keeps
 * counting, and a summary older than SUMMARY_MAX_MS is sent while its trace
 * goes on, wherever that trace stands among the others.
 */
import { IDLE_MS, MAX_TRACES, SUMMARY_MAX_MS, TraceCap } from '../../agent/otlp/trace-cap';
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

describe('TraceCap: the traces it follows', () => {
  it('closes the least recently active trace first once MAX_TRACES are followed, with its summary', () => {
    const cap = new TraceCap(1, new SpanResources());
    const closed: KernelSpan[] = [];
    let seq = 0;
    // traces 0 and 1 go past their cap first; then every other trace up to the limit
    for (const n of [0, 0, 1, 1]) cap.fold(eventOf(n, seq++), 1, 0, closed);
    for (let n = 2; n < MAX_TRACES; n++) cap.fold(eventOf(n, seq++), 1, 0, closed);
    // trace 0 is active again: trace 1 is now the least recently active
    cap.fold(eventOf(0, seq++), 1, 1, closed);
    expect(closed).toEqual([]);
    cap.fold(eventOf(MAX_TRACES, seq++), 1, 2, closed);
    expect(names(closed)).toEqual(['0001 kreplay: 1 more kernel events']);
    // then trace 2 (no summary: nothing sent), and trace 0's summary only once it is the oldest
    cap.fold(eventOf(MAX_TRACES + 1, seq++), 1, 2, closed);
    expect(closed).toHaveLength(1);
    // trace 1 was forgotten: its next event is a span of its own again
    expect(cap.fold(eventOf(1, seq), 1, 3, closed)).toBe(false);
    expect(names(cap.due(4, true))[0]).toBe('0000 kreplay: 2 more kernel events');
  });

  it('changes no Map when a trace it follows is active again (each change would leave a deleted entry that every walk from the oldest end steps over)', () => {
    const cap = new TraceCap(4, new SpanResources());
    const closed: KernelSpan[] = [];
    let seq = 0;
    for (let n = 0; n < 100; n++) cap.fold(eventOf(n, seq++), 1, 0, closed);
    const set = jest.spyOn(Map.prototype, 'set');
    const del = jest.spyOn(Map.prototype, 'delete');
    try {
      for (let n = 0; n < 100; n++) cap.admit(traceId(n), 1, 1, closed);
      for (let n = 99; n >= 0; n--) cap.fold(eventOf(n, seq++), 1, 2, closed);
      expect(set).not.toHaveBeenCalled();
      expect(del).not.toHaveBeenCalled();
    } finally {
      set.mockRestore();
      del.mockRestore();
    }
    // still in activity order: trace 50, active last, outlives the others
    cap.fold(eventOf(50, seq), 1, 3, closed);
    expect(cap.due(2 + IDLE_MS - 1, false)).toEqual([]);
    for (let n = 0; n < 100; n++) expect(cap.room(traceId(n))).toBe(n === 50 ? 0 : 1);
    expect(cap.due(2 + IDLE_MS, false)).toEqual([]);
    for (let n = 0; n < 100; n++) expect(cap.room(traceId(n))).toBe(n === 50 ? 0 : 4);
    expect(cap.due(3 + IDLE_MS, false)).toEqual([]);
    expect(cap.room(traceId(50))).toBe(4);
  });
});
