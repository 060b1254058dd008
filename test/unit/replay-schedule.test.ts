import { Schedule } from '../../core/replay/schedule';
import type { ReplaySession } from '../../daemon/replay/sessions/replay-session';
import { PREFETCH_CHUNK } from '../../daemon/replay/sessions/transaction';
import { LOOKAHEAD_NS, PRIME_NS } from '../../daemon/replay/sessions/player';
import { fakeEvent } from '../support/fake-transaction-reader';
import { CapturedStream, settle, useReplayFixtures } from '../support/replay-fixture';

const replayFixture = useReplayFixtures('kreplay-replay-schedule-');
const T0 = 1_795_345_678_123_456_789n;
/** recorded offsets; two events share a timestamp */
const OFFSETS = [0n, 1_000n, 1_000n, 5_000n, 12_000n, 30_001n];
const EVENTS = OFFSETS.map((o, i) => fakeEvent('tx', T0 + o, i, 700n + BigInt(i)));

describe('Schedule', () => {
  it('divides recorded time by the speed factor exactly, rounding to the nearest ns', async () => {
    expect(new Schedule(1, 0n).wallOffset(3, 12_345n)).toBe(12_345n);
    expect(new Schedule(2, 0n).wallOffset(3, 12_345n)).toBe(6_173n); // 6172.5 rounds up
    expect(new Schedule(0.5, 0n).wallOffset(0, 12_345n)).toBe(24_690n);
    expect(new Schedule(1000, 0n).wallOffset(0, 1_999n)).toBe(2n);
    // 0.1 is 3602879701896397 / 2^55 as a double: 10^18 / that, exactly, then rounded
    const tenth = (10n ** 18n * 2n ** 55n * 2n + 3602879701896397n) / (2n * 3602879701896397n);
    expect(new Schedule(0.1, 0n).wallOffset(0, 10n ** 18n)).toBe(tenth);
    // far beyond 2^53, no digit lost
    expect(new Schedule(0.25, 0n).wallOffset(0, 2_305_843_009_213_693_951n)).toBe(9_223_372_036_854_775_804n);
  });

  it('adds extra latency once per event before it', async () => {
    const s = new Schedule(4, 250n);
    expect(s.wallOffset(0, 0n)).toBe(0n);
    expect(s.wallOffset(1, 4_000n)).toBe(1_250n);
    expect(s.wallOffset(10, 4_000n)).toBe(3_500n);
    expect(s.replayedDuration(1_000n)).toBe(500n);
    expect(new Schedule(1, 60_000_000_000n).replayedDuration(5n)).toBe(60_000_000_005n);
  });

  it('advances the position at speed, held between the last event and the next', async () => {
    const s = new Schedule(2, 100n);
    // next event is index 3: 300 ns of extra latency come first
    expect(s.position(300n, 3, 1_000n, 9_000n)).toBe(1_000n);
    expect(s.position(1_300n, 3, 1_000n, 9_000n)).toBe(2_000n);
    expect(s.position(4_300n, 3, 1_000n, 9_000n)).toBe(8_000n);
    expect(s.position(900_000n, 3, 1_000n, 9_000n)).toBe(9_000n);
    expect(s.position(0n, 0, 0n, 9_000n)).toBe(0n);
  });
});

describe('a session on a fake clock', () => {
  it('hands the clock o_i / speed + i × extra after play and reports it on each event', async () => {
    const fx = replayFixture(EVENTS);
    const session = await fx.sessions.create({
      transaction_id: 'tx',
      speed_factor: 2,
      extra_latency_ns: 300,
    });
    const stream = new CapturedStream();
    session.watch(stream);
    const playedAt = fx.clock.now();
    await session.play();
    const expected = OFFSETS.map((o, i) => (o + 1n) / 2n + BigInt(i) * 300n);
    expect(fx.clock.armed.map((d) => d - playedAt)).toEqual(expected);
    fx.clock.advanceBy(1_000_000n, 70n);
    await settle();
    const replays = stream.replays();
    expect(replays.map((r) => r.id)).toEqual([0, 1, 2, 3, 4, 5]);
    expect(replays.map((r) => BigInt(r.data.replay_offset_ns as number))).toEqual(expected);
    expect(replays.map((r) => r.data.replayed_duration_ns)).toEqual(
      EVENTS.map((_, i) => Math.round((700 + i) / 2) + 300),
    );
    expect(replays.every((r) => r.data.emitted_late_ns === 70)).toBe(true);
    expect(stream.states()).toEqual(['ready', 'playing', 'finished']);
    expect(session.record().timing).toEqual({
      lateness_p50_ns: 70n,
      lateness_p99_ns: 70n,
      lateness_max_ns: 70n,
      behind_ns: 0n,
    });
  });

  it('writes every field of the event with exact integers', async () => {
    const fx = replayFixture(EVENTS);
    const session = await fx.sessions.create({ transaction_id: 'tx', speed_factor: 1, extra_latency_ns: 0 });
    const stream = new CapturedStream();
    session.watch(stream);
    await session.play();
    fx.clock.advanceBy(0n);
    await settle();
    const data = stream.messages.find((m) => m.event === 'replay')!.data;
    expect(data).toContain(`"timestamp_ns":${T0},"duration_ns":700,`);
    expect(data).toMatch(/"replay_offset_ns":0,"replayed_duration_ns":700,"emitted_late_ns":0}$/);
  });

  it('keeps the schedule across pauses: pause time is excluded', async () => {
    const fx = replayFixture(EVENTS);
    const session = await fx.sessions.create({ transaction_id: 'tx', speed_factor: 1, extra_latency_ns: 0 });
    const start = fx.clock.now();
    await session.play();
    fx.clock.advanceTo(start + 2_000n);
    session.pause();
    expect(session.record()).toMatchObject({ position_ns: 2_000n, events_emitted: 3 });
    fx.clock.advanceBy(1_000_000n);
    expect(session.record()).toMatchObject({ position_ns: 2_000n, events_emitted: 3 });
    const resumedAt = fx.clock.now();
    const armed = fx.clock.armed.length;
    await session.play();
    expect(fx.clock.armed.slice(armed).map((d) => d - resumedAt)).toEqual([3_000n, 10_000n, 28_001n]);
  });

  it('seeks to the first event at or after the position, with a consistent schedule', async () => {
    const fx = replayFixture(EVENTS);
    const session = await fx.sessions.create({
      transaction_id: 'tx',
      speed_factor: 4,
      extra_latency_ns: 1_000,
    });
    await session.seek(1_000n);
    expect(session.record()).toMatchObject({ state: 'paused', position_ns: 1_000n, events_emitted: 1 });
    await session.seek(1_001n);
    expect(session.record()).toMatchObject({ state: 'paused', position_ns: 1_001n, events_emitted: 3 });
    const at = fx.clock.now();
    await session.play();
    // wall offset now = 1001/4 + 3 × 1000; event 3 is due at 5000/4 + 3 × 1000
    expect(fx.clock.armed[0]! - at).toBe(1_250n - 250n);
    fx.clock.advanceBy(1_000n);
    expect(session.record()).toMatchObject({ state: 'playing', events_emitted: 4, position_ns: 5_000n });
    await session.seek(0n);
    expect(session.record()).toMatchObject({ state: 'playing', events_emitted: 0, position_ns: 0n });
    fx.clock.advanceBy(10_000_000n);
    expect(session.record()).toMatchObject({ state: 'finished', position_ns: 30_001n, events_emitted: 6 });
    await session.seek(30_001n);
    expect(session.record()).toMatchObject({ state: 'paused', position_ns: 30_001n, events_emitted: 5 });
  });

  it('refuses positions outside 0..duration_ns, naming position_ns', async () => {
    const fx = replayFixture(EVENTS);
    const session = await fx.sessions.create({ transaction_id: 'tx', speed_factor: 1, extra_latency_ns: 0 });
    for (const p of [-1n, 30_002n]) {
      await expect(session.seek(p)).rejects.toThrow(
        expect.objectContaining({ status: 400, errors: [expect.objectContaining({ param: 'position_ns' })] }),
      );
    }
    expect(session.state).toBe('ready');
  });

  it('holds the position at the last emitted event while its extra latency runs', async () => {
    const fx = replayFixture(EVENTS);
    const session = await fx.sessions.create({
      transaction_id: 'tx',
      speed_factor: 1,
      extra_latency_ns: 10_000,
    });
    const start = fx.clock.now();
    await session.play();
    fx.clock.advanceTo(start + 10_000n); // event 1 is due at 1000 + 10000
    expect(session.record()).toMatchObject({ events_emitted: 1, position_ns: 0n });
    fx.clock.advanceTo(start + 10_500n);
    expect(session.record()).toMatchObject({ events_emitted: 1, position_ns: 500n });
    fx.clock.advanceTo(start + 11_000n);
    expect(session.record()).toMatchObject({ events_emitted: 2, position_ns: 1_000n });
  });

  /**
   * Events read and not yet emitted: the lookahead handed to the clock, and
   * at most one page (PREFETCH_CHUNK) past it. Checked after every step of the clock, with
   * the reads it started landed in between: nothing reads the whole
   * transaction, at play or later.
   */
  async function playInSteps(
    fx: ReturnType<typeof replayFixture>,
    session: ReplaySession,
    stepNs: bigint,
    untilNs: bigint,
    heldAtMost: number,
  ): Promise<void> {
    const start = fx.clock.now();
    for (let at = start; at < start + untilNs && session.state === 'playing';) {
      at = at + stepNs < start + untilNs ? at + stepNs : start + untilNs;
      fx.clock.advanceTo(at);
      await settle();
      expect(fx.source.read - session.record().events_emitted).toBeLessThanOrEqual(heldAtMost);
    }
    expect(Math.max(...fx.source.pages)).toBeLessThanOrEqual(PREFETCH_CHUNK);
  }

  it('reads a long transaction a bounded lookahead at a time', async () => {
    // 100 µs apart: the play starts once 250 ms (2,500 events) are read (faster than it plays),
    // then keeps that far ahead; the whole transaction is 50,000
    const many = Array.from({ length: 50_000 }, (_, i) => fakeEvent('big', T0 + BigInt(i) * 100_000n, i));
    const fx = replayFixture(many);
    const session = await fx.sessions.create({ transaction_id: 'big', speed_factor: 1, extra_latency_ns: 0 });
    const held = Number(LOOKAHEAD_NS / 100_000n) + 100 + PREFETCH_CHUNK;
    await session.play();
    expect(fx.source.read).toBeGreaterThanOrEqual(Number(LOOKAHEAD_NS / 100_000n));
    expect(fx.source.read).toBeLessThanOrEqual(held);
    await playInSteps(fx, session, 1_000_000n, 999_900_000n, held);
    expect(session.record().events_emitted).toBe(10_000);
    expect(fx.source.read).toBeLessThanOrEqual(10_000 + held);
  });

  it('keeps a dense replay a second read ahead while it plays, not a lookahead', async () => {
    // 20 µs apart: 50,000 events a second, dense, 3 s long. With a lookahead (250 ms) in hand, a
    // stall of the daemon's main thread or of a worker longer than that made it release late
    const dense = Array.from({ length: 150_000 }, (_, i) => fakeEvent('d', T0 + BigInt(i) * 20_000n, i));
    const fx = replayFixture(dense);
    fx.clock.dataBytes = 128 << 20;
    const session = await fx.sessions.create({ transaction_id: 'd', speed_factor: 1, extra_latency_ns: 0 });
    const second = Number(PRIME_NS / 20_000n);
    await session.play();
    await playInSteps(fx, session, 10_000_000n, 1_000_000_000n, second + 2 * PREFETCH_CHUNK);
    const emitted = session.record().events_emitted;
    expect(emitted).toBeGreaterThanOrEqual(second - PREFETCH_CHUNK);
    expect(fx.source.read - emitted).toBeGreaterThanOrEqual(second - PREFETCH_CHUNK);
  });

  it('primes up to a second before playing when the store reads slower than the replay plays', async () => {
    // 40 µs apart: 6,250 events a lookahead, 25,000 a second (not dense)
    const events = Array.from({ length: 30_000 }, (_, i) => fakeEvent('d', T0 + BigInt(i) * 40_000n, i));
    const fast = replayFixture(events);
    const quick = await fast.sessions.create({ transaction_id: 'd', speed_factor: 1, extra_latency_ns: 0 });
    await quick.play();
    const lookahead = Number(LOOKAHEAD_NS / 40_000n);
    expect(fast.source.read).toBeGreaterThanOrEqual(lookahead);
    expect(fast.source.read).toBeLessThanOrEqual(lookahead + PREFETCH_CHUNK);

    const slow = replayFixture(events);
    // each page of 2,048 events (82 ms of replay) takes 100 ms to read: slower than it plays
    slow.source.slow = (read) => {
      if (read === 'page') slow.clock.nowNs += 100_000_000n;
    };
    const primed = await slow.sessions.create({ transaction_id: 'd', speed_factor: 1, extra_latency_ns: 0 });
    await primed.play();
    const second = Number(PRIME_NS / 40_000n);
    expect(slow.source.read).toBeGreaterThanOrEqual(second);
    expect(slow.source.read).toBeLessThanOrEqual(second + PREFETCH_CHUNK);
  });

  it('primes a second of a dense replay before playing, however fast the store reads', async () => {
    // 20 µs apart: 50,000 events a second, dense; read at once
    const dense = Array.from({ length: 60_000 }, (_, i) => fakeEvent('d', T0 + BigInt(i) * 20_000n, i));
    const fx = replayFixture(dense);
    fx.clock.dataBytes = 64 << 20;
    const session = await fx.sessions.create({ transaction_id: 'd', speed_factor: 1, extra_latency_ns: 0 });
    await session.play();
    const second = Number(PRIME_NS / 20_000n);
    expect(fx.source.read).toBeGreaterThanOrEqual(second);
    expect(fx.source.read).toBeLessThanOrEqual(second + PREFETCH_CHUNK);
  });

  it('never holds more than its buffer, however dense the transaction', async () => {
    const dense = Array.from({ length: 30_000 }, (_, i) => fakeEvent('dense', T0 + BigInt(i), i));
    const fx = replayFixture(dense);
    fx.clock.dataBytes = 4 << 20;
    const session = await fx.sessions.create({
      transaction_id: 'dense',
      speed_factor: 1,
      extra_latency_ns: 0,
    });
    await session.play();
    // the whole transaction is due within the lookahead: the buffer's bytes bound what is read
    const held = fx.clock.armed.length;
    expect(held).toBeGreaterThan(1000);
    expect(held).toBeLessThan(30_000);
    expect(fx.source.read).toBeLessThanOrEqual(held + PREFETCH_CHUNK);
    await playInSteps(fx, session, 1_000n, 30_000n, held + PREFETCH_CHUNK);
    expect(session.record()).toMatchObject({ state: 'finished', events_emitted: 30_000 });
  });
});
