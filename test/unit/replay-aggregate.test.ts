/**
 * The clock reports a lane's releases in aggregate (a count per look, not a
 * report per event): the session's figures must come out exactly as if
 * each event had been reported on its own.
 */
import { FrameBuffer } from '../../daemon/replay/lane/frame-buffer';
import { TimingStats } from '../../daemon/replay/timing-stats';
import { fakeEvent } from '../support/fake-transaction-reader';
import { CapturedStream, settle, useReplayFixtures } from '../support/replay-fixture';

const replayFixture = useReplayFixtures('kreplay-replay-aggregate-');
const T0 = 1_795_345_678_123_456_789n;
const EVENTS = 3000;
/** irregular gaps, so each report's events are late by different amounts */
const offsetOf = (i: number) => BigInt(i) * 1_000n + BigInt((i * 7919) % 997);

describe('replay releases reported in aggregate', () => {
  it('keeps counts, lateness statistics and every frame exact across batches of releases', async () => {
    const fx = replayFixture(Array.from({ length: EVENTS }, (_, i) => fakeEvent('tx', T0 + offsetOf(i), i)));
    fx.clock.batching = true;
    const session = await fx.sessions.create({
      transaction_id: 'tx',
      speed_factor: 1,
      extra_latency_ns: 250,
    });
    const stream = new CapturedStream();
    fx.sessions.watch(session, stream);
    await session.play();
    const start = fx.clock.nowNs;
    // the clock looks every 37 µs, each look 3 µs after the time it looked for: dozens of events a report
    for (let t = start; session.state === 'playing'; t += 37_000n) fx.clock.advanceTo(t, 3_000n);
    await settle();

    // what each event's lateness must be: its own deadline against the look that released it
    const reference = new TimingStats();
    const expected: bigint[] = [];
    for (let i = 0; i < EVENTS; i++) {
      const deadline = start + offsetOf(i) + BigInt(i) * 250n;
      const look = start + ((deadline - start + 36_999n) / 37_000n) * 37_000n;
      const late = look + 3_000n - deadline;
      reference.add(late);
      expected.push(late);
    }
    const record = session.record();
    expect(record.state).toBe('finished');
    expect(record.events_emitted).toBe(EVENTS);
    const want = reference.summary();
    expect(record.timing).toMatchObject({
      lateness_p50_ns: want.p50,
      lateness_p99_ns: want.p99,
      lateness_max_ns: want.max,
    });
    const frames = stream.messages.filter((m) => m.event === 'replay').map((m) => JSON.parse(m.data));
    expect(frames.map((f: { emitted_late_ns: number }) => BigInt(f.emitted_late_ns))).toEqual(expected);
    expect(stream.messages.filter((m) => m.event === 'replay').map((m) => Number(m.id))).toEqual(
      Array.from({ length: EVENTS }, (_, i) => i),
    );
  });

  it('does no work per event on the main thread while no stream is its own: frames and figures stay with the clock', async () => {
    const fx = replayFixture(Array.from({ length: EVENTS }, (_, i) => fakeEvent('tx', T0 + offsetOf(i), i)));
    fx.clock.batching = true;
    const session = await fx.sessions.create({ transaction_id: 'tx', speed_factor: 1, extra_latency_ns: 0 });
    const framesRead = jest.spyOn(FrameBuffer.prototype, 'frame');
    const reports: number[] = [];
    const emit = (session as unknown as { emit: (r: { count: number }) => void }).emit.bind(session);
    (session as unknown as { emit: (r: { count: number }) => void }).emit = (r) => {
      reports.push(r.count);
      emit(r);
    };
    try {
      await session.play();
      const start = fx.clock.nowNs;
      for (let t = start; session.state === 'playing'; t += 1_000_000n) {
        fx.clock.advanceTo(t, 3_000n);
        await settle();
      }
      // 3 ms of events a report: a few reports told the session of every release, and no frame was read back
      expect(session.record()).toMatchObject({ state: 'finished', events_emitted: EVENTS });
      expect(reports.reduce((a, b) => a + b, 0)).toBe(EVENTS);
      expect(reports.length).toBeLessThanOrEqual(5);
      expect(framesRead).not.toHaveBeenCalled();
      expect(session.record().timing.lateness_max_ns).toBeGreaterThanOrEqual(3_000n);
    } finally {
      framesRead.mockRestore();
    }
  });

  it('emits a batch the clock released before a pause once, and never again', async () => {
    const fx = replayFixture(Array.from({ length: 400 }, (_, i) => fakeEvent('tx', T0 + offsetOf(i), i)));
    fx.clock.batching = true;
    const session = await fx.sessions.create({ transaction_id: 'tx', speed_factor: 1, extra_latency_ns: 0 });
    const stream = new CapturedStream();
    fx.sessions.watch(session, stream);
    await session.play();
    const start = fx.clock.nowNs;
    fx.clock.advanceTo(start + 50_000n);
    // released in one report the main thread has not taken yet when the pause comes
    fx.clock.holding = true;
    fx.clock.advanceTo(start + 150_000n);
    session.pause();
    fx.clock.holding = false;
    fx.clock.runHeld();
    const paused = session.record().events_emitted;
    expect(paused).toBeGreaterThan(100);
    await session.play();
    for (let next = fx.clock.next(); next !== undefined; next = fx.clock.next()) fx.clock.advanceTo(next);
    await settle();
    expect(session.record()).toMatchObject({ state: 'finished', events_emitted: 400 });
    const ids = stream.messages.filter((m) => m.event === 'replay').map((m) => Number(m.id));
    expect(ids).toEqual(Array.from({ length: 400 }, (_, i) => i));
  });
});
