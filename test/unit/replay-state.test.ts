import type { ProblemError } from '../../daemon/http/problem';
import type { ReplaySession } from '../../daemon/replay/sessions/replay-session';
import {
  CONTROLS,
  SESSION_STATES,
  type Control,
  type SessionState,
} from '../../daemon/replay/sessions/session-state';
import { fakeEvent } from '../support/fake-transaction-reader';
import { CapturedStream, settle, useReplayFixtures } from '../support/replay-fixture';

const replayFixture = useReplayFixtures('kreplay-replay-state-');
const T0 = 1_795_345_678_123_456_789n;
const EVENTS = [0n, 1_000n, 5_000n, 9_000n].map((o, i) => fakeEvent('tx', T0 + o, i));

/** The contract's table, written out independently of the implementation: a state, or 409. */
const EXPECTED: Record<SessionState, Record<Control, SessionState | 409>> = {
  ready: { play: 'playing', pause: 409, stop: 'stopped', seek: 'paused' },
  playing: { play: 409, pause: 'paused', stop: 'stopped', seek: 'playing' },
  paused: { play: 'playing', pause: 409, stop: 'stopped', seek: 'paused' },
  finished: { play: 409, pause: 409, stop: 'stopped', seek: 'paused' },
  stopped: { play: 409, pause: 409, stop: 'stopped', seek: 409 },
};

async function sessionIn(fx: ReturnType<typeof replayFixture>, state: SessionState): Promise<ReplaySession> {
  const session = await fx.sessions.create({ transaction_id: 'tx', speed_factor: 1, extra_latency_ns: 0 });
  if (state === 'playing' || state === 'paused' || state === 'finished') await session.play();
  if (state === 'paused') session.pause();
  if (state === 'finished') fx.clock.advanceBy(1_000_000n);
  if (state === 'stopped') session.stop();
  expect(session.state).toBe(state);
  return session;
}

async function apply(session: ReplaySession, control: Control): Promise<void> {
  if (control === 'seek') await session.seek(2_000n);
  else await session[control]();
}

describe('replay session state table', () => {
  const cases = SESSION_STATES.flatMap((state) => CONTROLS.map((control) => [state, control] as const));

  it.each(cases)('%s + %s', async (state, control) => {
    const fx = replayFixture(EVENTS);
    const session = await sessionIn(fx, state);
    const before = session.record();
    const expected = EXPECTED[state][control];
    if (expected === 409) {
      let error: ProblemError | undefined;
      try {
        await apply(session, control);
      } catch (err) {
        error = err as ProblemError;
      }
      expect(error?.status).toBe(409);
      expect(error?.detail).toContain(`is ${state}`);
      expect(session.record()).toEqual(before);
    } else {
      await apply(session, control);
      expect(session.state).toBe(expected);
    }
  });

  it('pausing within the lead before the first deadline leaves the position where it was', async () => {
    const fx = replayFixture(EVENTS);
    fx.clock.lead = 1_000_000n;
    const session = await fx.sessions.create({ transaction_id: 'tx', speed_factor: 1, extra_latency_ns: 0 });
    // pause/play round trips shorter than the lead: the replay must not move back a little each time
    for (let i = 0; i < 20; i++) {
      await session.play();
      fx.clock.advanceBy(200_000n);
      session.pause();
      expect(session.record().position_ns).toBe(0n);
    }
    await session.play();
    fx.clock.advanceBy(1_000_000n + 9_000n);
    expect(session.state).toBe('finished');
    expect(session.record().events_emitted).toBe(EVENTS.length);
  });

  it('stopping a stopped session changes nothing', async () => {
    const fx = replayFixture(EVENTS);
    const session = await sessionIn(fx, 'stopped');
    const before = session.json();
    session.stop();
    expect(session.json()).toBe(before);
  });

  it('finishes once the last event is emitted, at position duration_ns', async () => {
    const fx = replayFixture(EVENTS);
    const session = await fx.sessions.create({ transaction_id: 'tx', speed_factor: 1, extra_latency_ns: 0 });
    await session.play();
    fx.clock.advanceBy(8_999n);
    expect(session.record()).toMatchObject({ state: 'playing', events_emitted: 3 });
    fx.clock.advanceBy(1n);
    expect(session.record()).toMatchObject({
      state: 'finished',
      events_emitted: 4,
      position_ns: 9_000n,
      duration_ns: 9_000n,
    });
  });
});

describe('a control while releases wait to run', () => {
  it('pause emits the events the clock released before it, once, then pauses where they left it', async () => {
    const fx = replayFixture(EVENTS);
    const session = await fx.sessions.create({ transaction_id: 'tx', speed_factor: 1, extra_latency_ns: 0 });
    const stream = new CapturedStream();
    session.watch(stream);
    await session.play();
    fx.clock.holding = true;
    fx.clock.advanceBy(5_000n);
    expect(session.record().events_emitted).toBe(0);
    session.pause();
    expect(session.record()).toMatchObject({ state: 'paused', events_emitted: 3, position_ns: 5_000n });
    fx.clock.runHeld();
    await settle();
    expect(stream.replays().map((r) => r.id)).toEqual([0, 1, 2]);
    expect(stream.states()).toEqual(['ready', 'playing', 'paused']);
  });

  it('a pause that finds the last event released leaves the session finished', async () => {
    const fx = replayFixture(EVENTS);
    const session = await fx.sessions.create({ transaction_id: 'tx', speed_factor: 1, extra_latency_ns: 0 });
    await session.play();
    fx.clock.holding = true;
    fx.clock.advanceBy(10_000n);
    session.pause();
    expect(session.record()).toMatchObject({ state: 'finished', events_emitted: 4 });
  });

  it('stop and seek emit them too before they act', async () => {
    const fx = replayFixture(EVENTS);
    const stopped = await fx.sessions.create({ transaction_id: 'tx', speed_factor: 1, extra_latency_ns: 0 });
    const sought = await fx.sessions.create({ transaction_id: 'tx', speed_factor: 1, extra_latency_ns: 0 });
    await stopped.play();
    await sought.play();
    fx.clock.holding = true;
    fx.clock.advanceBy(1_000n);
    stopped.stop();
    await sought.seek(0n);
    expect(stopped.record()).toMatchObject({ state: 'stopped', events_emitted: 2 });
    expect(sought.record()).toMatchObject({ state: 'playing', events_emitted: 0, position_ns: 0n });
  });
});
