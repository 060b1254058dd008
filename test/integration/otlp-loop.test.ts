/**
 * The OTLP export loop (agent/otlp/otlp-loop.ts) over a real node store and a
 * real OTLP/HTTP receiver on loopback that decodes with the OpenTelemetry
 * project's generated code: sampling, the per-trace cap, and a receiver that
 * is down, slow, asks to wait (429/503 with Retry-After), refuses (500) or
 * drops the connection mid-request. Nothing is lost while the queue holds;
 * what does not fit is dropped and counted. The loop is driven tick by tick
 * here; the agent runs it on its own thread (otlp-export.test.ts).
 */
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { StoreWriter } from '../../agent/store/store-writer';
import { StoreNameCache } from '../../core/store/store-names';
import { OtlpLoop, type OtlpLoopOptions } from '../../agent/otlp/otlp-loop';
import { resolveOtlpTarget, type OtlpTarget } from '../../agent/otlp/otlp-target';
import { IDLE_MS } from '../../agent/otlp/trace-cap';
import { writeEvents, type TestEvent } from '../support/event-store';
import { OtlpReceiver } from '../support/otlp-receiver';
import { waitFor } from '../support/wait';
import { HOUR_MS, useWallStep } from '../support/wall-step';

const SAMPLED = '4bf92f3577b34da6a3ce929d0e0e4736';
const UNSAMPLED = '5bf92f3577b34da6a3ce929d0e0e4737';
const PARENT = '00f067aa0ba902b7';
const T0 = 1_795_338_478_000_000_000n;

let dir: string;
let writer: StoreWriter;
let receiver: OtlpReceiver;
const loops: OtlpLoop[] = [];

beforeEach(async () => {
  dir = mkdtempSync(join(tmpdir(), 'kreplay-otlp-loop-'));
  writer = StoreWriter.open(dir, 'n1');
  receiver = await OtlpReceiver.start();
});

afterEach(async () => {
  for (const loop of loops.splice(0)) await loop.stop(0);
  writer.close();
  await receiver.close();
  rmSync(dir, { recursive: true, force: true });
});

function target(overrides: Partial<OtlpTarget> = {}): OtlpTarget {
  return { ...resolveOtlpTarget({ endpoint: receiver.url }, {}, {})!, ...overrides };
}

function loopFor(t: OtlpTarget, options: OtlpLoopOptions = {}): OtlpLoop {
  const loop = new OtlpLoop(writer.path, t, 1, () => undefined, {
    batchSpans: 5,
    batchDelayMs: 0,
    retryInitialMs: 20,
    retryMaxMs: 100,
    ...options,
  });
  loops.push(loop);
  return loop;
}

/** `n` writes of a sampled trace (or of `trace`), 1 µs apart from `from`. */
function traced(n: number, from = 0, trace = SAMPLED, flags = 1): TestEvent[] {
  return Array.from({ length: n }, (_, i) => ({
    ts: T0 + BigInt((from + i) * 1000),
    txn: `txn-${trace.slice(0, 4)}`,
    trace,
    parentSpan: PARENT,
    traceFlags: flags,
    bytes: 100 + from + i,
    target: ['file', '/var/lib/app/db.sqlite'] as [string, string] as TestEvent['target'],
  }));
}

/** Ticks the loop until `done` holds (the sends run between ticks); at `nowMs`, else on its own clock. */
function tickUntil<T>(loop: OtlpLoop, done: () => T | undefined, nowMs?: () => number): Promise<T> {
  return waitFor(() => {
    loop.tick(nowMs?.());
    return done();
  });
}

describe('OTLP export loop', () => {
  it('exports a sampled trace’s events one span each up to the cap, the rest in one summary span; unsampled traces give nothing', async () => {
    writeEvents(writer, [...traced(5), ...traced(3, 100, UNSAMPLED, 0)]);
    writeEvents(writer, [
      {
        ts: T0 + 900_000n,
        type: 'sys_fsync',
        trace: SAMPLED,
        txn: 'x',
        parentSpan: PARENT,
        traceFlags: 1,
        dur: 7,
      },
    ]);
    const loop = loopFor(target({ maxSpansPerTrace: 3 }));
    let now = 1_000_000;
    await tickUntil(
      loop,
      () => (receiver.spans.length >= 3 ? true : undefined),
      () => now,
    );
    // the trace goes quiet: its summary is sent
    now += IDLE_MS;
    // acknowledged, not only received: the counts below are the loop's
    await tickUntil(
      loop,
      () => (loop.progress.exported >= 4 ? true : undefined),
      () => now,
    );
    expect(receiver.spans.map((s) => s.traceId)).toEqual(Array(4).fill(SAMPLED));
    expect(receiver.spans.every((s) => s.parentSpanId === PARENT)).toBe(true);
    const [first, , , summary] = receiver.spans;
    expect(first).toMatchObject({ name: 'sys_write /var/lib/app/db.sqlite', startNs: T0, endNs: T0 + 1000n });
    expect(summary!.name).toBe('kreplay: 3 more kernel events');
    expect(summary!.attributes).toMatchObject({
      'kreplay.summary.events': 3,
      'kreplay.summary.span_cap': 3,
      'kreplay.summary.sys_write.count': 2,
      'kreplay.summary.sys_write.bytes': 103 + 104,
      'kreplay.summary.sys_write.duration_ns': 2000,
      'kreplay.summary.sys_fsync.count': 1,
      'kreplay.summary.sys_fsync.duration_ns': 7,
    });
    // from the first folded event's start to the last one's end
    expect([summary!.startNs, summary!.endNs]).toEqual([T0 + 3000n, T0 + 900_007n]);
    expect(loop.progress).toMatchObject({
      exported: 4,
      unsampled: 3,
      summarized: 3,
      dropped: 0,
      rejected: 0,
    });
    expect(receiver.requests[0]).toMatchObject({
      path: '/v1/traces',
      headers: { 'content-type': 'application/x-protobuf', 'content-encoding': 'gzip' },
    });
  });

  it('counts short traces (a request’s few events each) against the cap from the native read, with no lookup a context', async () => {
    const traces = Array.from(
      { length: 40 },
      (_, i) => `4bf92f3577b34da6a3ce929d0e0e${i.toString(16).padStart(4, '0')}`,
    );
    writeEvents(
      writer,
      traces.flatMap((trace, i) => traced(2, 10 * i, trace)),
    );
    const lookups = jest.spyOn(StoreNameCache.prototype, 'context');
    try {
      const loop = loopFor(target({ maxSpansPerTrace: 2 }), { batchSpans: 64 });
      await tickUntil(loop, () => (loop.progress.exported >= 80 ? true : undefined));
      // each trace's spans, none folded (2 is the cap: one more would be summarized)
      expect(loop.progress).toMatchObject({ exported: 80, summarized: 0, dropped: 0 });
      const perTrace = new Map<string, number>();
      for (const span of receiver.spans) perTrace.set(span.traceId, (perTrace.get(span.traceId) ?? 0) + 1);
      expect([...perTrace]).toEqual(traces.map((trace) => [trace, 2]));
      expect(lookups).not.toHaveBeenCalled();
    } finally {
      lookups.mockRestore();
    }
  });

  it('sends again after 429 (honouring Retry-After), 503, a connection dropped mid-request and a receiver that is down: nothing lost', async () => {
    const answers = [
      { kind: 'status', status: 429, headers: { 'retry-after': '1' } },
      { kind: 'drop' },
      { kind: 'status', status: 503 },
    ] as const;
    const at: number[] = [];
    receiver.answer = (i) => {
      at.push(Date.now());
      return answers[i] ?? { kind: 'accept' };
    };
    writeEvents(writer, traced(12));
    const loop = loopFor(target());
    await tickUntil(loop, () => (loop.progress.exported >= 12 ? true : undefined));
    // the request after the 429 waited for its Retry-After (1 s), not the 20 ms backoff
    expect(at[1]! - at[0]!).toBeGreaterThanOrEqual(950);
    expect(receiver.requests.slice(0, 3).map((r) => r.answer)).toEqual(['status', 'drop', 'status']);

    // down: refused connections, retried until it is back on the same port
    const port = receiver.port;
    await receiver.close();
    writeEvents(writer, traced(4, 12));
    await tickUntil(loop, () => (loop.progress.state === 'retrying' ? true : undefined));
    const before = receiver.spans;
    receiver = await OtlpReceiver.start(port);
    await tickUntil(loop, () => (loop.progress.exported >= 16 ? true : undefined));
    const ids = [...before, ...receiver.spans].map((s) => s.attributes['kreplay.event_id']);
    expect(new Set(ids).size).toBe(16);
    expect(ids).toHaveLength(16);
    expect(loop.progress).toMatchObject({ exported: 16, dropped: 0, rejected: 0 });
    expect(loop.progress.retries).toBeGreaterThanOrEqual(4);
  });

  it('counts a request refused for good (500) as rejected, and goes on', async () => {
    receiver.answer = (i) => (i === 0 ? { kind: 'status', status: 500, body: 'no' } : { kind: 'accept' });
    writeEvents(writer, traced(8));
    const loop = loopFor(target());
    await tickUntil(loop, () =>
      loop.progress.queued === 0 && receiver.requests.length >= 2 ? true : undefined,
    );
    expect(loop.progress).toMatchObject({ exported: 3, rejected: 5, retries: 0, lastError: null });
    expect(receiver.spans).toHaveLength(3);
  });

  it('reads no faster than a receiver that keeps up takes: a burst past the queue is sent late, not dropped', async () => {
    writeEvents(writer, traced(25));
    const loop = loopFor(target({ queueSpans: 10 }));
    await tickUntil(loop, () => loop.progress.exported === 25);
    expect(loop.progress).toMatchObject({ dropped: 0, queued: 0 });
    expect(receiver.spans).toHaveLength(25);
  });

  it('sends again after a receiver too slow to answer', async () => {
    receiver.answer = (i) => (i === 0 ? { kind: 'hang' } : { kind: 'accept' });
    writeEvents(writer, traced(5));
    const loop = loopFor(target({ timeoutMs: 200 }));
    await tickUntil(loop, () => (loop.progress.exported >= 5 ? true : undefined));
    expect(loop.progress).toMatchObject({ exported: 5, retries: 1 });
    expect(receiver.spans).toHaveLength(5);
  });

  it('drops and counts what does not fit the queue while the receiver is down, and delivers the rest', async () => {
    const port = receiver.port;
    await receiver.close();
    writeEvents(writer, traced(25));
    const loop = loopFor(target({ queueSpans: 10 }));
    // the first request fails: from then on what does not fit is dropped
    await tickUntil(loop, () => loop.progress.dropped === 15);
    expect(loop.progress).toMatchObject({ queued: 10, state: 'retrying' });
    receiver = await OtlpReceiver.start(port);
    await tickUntil(loop, () => (loop.progress.exported >= 10 ? true : undefined));
    expect(loop.progress).toMatchObject({ exported: 10, dropped: 15, queued: 0 });
    expect(receiver.spans).toHaveLength(10);
  });

  it('makes here the spans the native encoder leaves (an errno past its table), in seq order with the cap', async () => {
    const odd = { ...traced(1, 2)[0]!, ret: -5000 };
    writeEvents(writer, [...traced(2), odd, ...traced(3, 3)]);
    const loop = loopFor(target({ maxSpansPerTrace: 4 }), { batchSpans: 100 });
    let now = 1_000_000;
    await tickUntil(
      loop,
      () => (receiver.spans.length >= 4 ? true : undefined),
      () => now,
    );
    now += IDLE_MS;
    await tickUntil(
      loop,
      () => (loop.progress.exported >= 5 ? true : undefined),
      () => now,
    );
    // the first four events in seq order as spans, the odd one third; the last two in the summary
    const spans = receiver.spans.filter((s) => !s.name.startsWith('kreplay:'));
    expect(spans.map((s) => s.startNs).sort()).toEqual([T0, T0 + 1000n, T0 + 2000n, T0 + 3000n]);
    expect(spans.find((s) => s.startNs === T0 + 2000n)).toMatchObject({
      attributes: { 'kreplay.ret': -5000, 'error.type': 'errno 5000' },
      status: { code: 2, message: 'errno 5000' },
    });
    expect(receiver.spans.find((s) => s.name.startsWith('kreplay:'))!.attributes).toMatchObject({
      'kreplay.summary.events': 2,
    });
    expect(loop.progress).toMatchObject({ exported: 5, summarized: 2, dropped: 0 });
  });

  describe('under a wall clock step', () => {
    const wall = useWallStep();

    it('sends a part request batchDelayMs after its first span, though the clock stepped an hour back meanwhile', async () => {
      writeEvents(writer, traced(3));
      const loop = loopFor(target(), { batchSpans: 100, batchDelayMs: 100 });
      loop.tick();
      expect(loop.progress.queued).toBe(3);
      wall.step(-HOUR_MS);
      await tickUntil(loop, () => (loop.progress.exported >= 3 ? true : undefined));
      expect(receiver.spans).toHaveLength(3);
    });
  });

  it('speaks http/json when asked, with the same spans', async () => {
    writeEvents(writer, traced(3));
    const loop = loopFor(target({ protocol: 'http/json', gzip: false }));
    await tickUntil(loop, () => (receiver.spans.length >= 3 ? true : undefined));
    expect(receiver.requests[0]!.headers['content-type']).toBe('application/json');
    expect(receiver.requests[0]!.headers['content-encoding']).toBeUndefined();
    expect(receiver.spans.map((s) => s.startNs)).toEqual([T0, T0 + 1000n, T0 + 2000n]);
  });
});
