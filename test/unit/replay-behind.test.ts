/** A clock that cannot keep up is said so: behind_ns in the session's timing, and a state event each way. */
import { BEHIND_AFTER_NS } from '../../daemon/replay/sessions/replay-session';
import { fakeEvent } from '../support/fake-transaction-reader';
import { CapturedStream, settle, useReplayFixtures } from '../support/replay-fixture';

const replayFixture = useReplayFixtures('kreplay-replay-behind-');
const T0 = 1_795_345_678_123_456_789n;
const MS = 1_000_000n;
const BEHIND = BigInt(BEHIND_AFTER_NS);

describe('replay session behind its schedule', () => {
  it('says when releases fall past the threshold and when they are back on time', async () => {
    // events 50 ms apart: each late release is over before the next deadline
    const GAP = 50n * MS;
    const fx = replayFixture(Array.from({ length: 6 }, (_, i) => fakeEvent('tx', T0 + BigInt(i) * GAP, i)));
    const session = await fx.sessions.create({ transaction_id: 'tx', speed_factor: 1, extra_latency_ns: 0 });
    const stream = new CapturedStream();
    fx.sessions.watch(session, stream);
    await session.play();
    const start = fx.clock.nowNs;
    const states = async () => {
      await settle();
      return stream.messages.filter((m) => m.event === 'state').map((m) => JSON.parse(m.data));
    };
    fx.clock.advanceTo(start);
    expect(session.record().timing.behind_ns).toBe(0n);
    const onTime = (await states()).length;
    // event 1 released 30 ms late: behind, said once
    fx.clock.advanceTo(start + GAP, BEHIND * 3n);
    expect(session.record().timing.behind_ns).toBe(BEHIND * 3n);
    const behind = await states();
    expect(behind).toHaveLength(onTime + 1);
    expect(behind.at(-1)).toMatchObject({
      state: 'playing',
      timing: { behind_ns: Number(BEHIND * 3n) },
    });
    // 5 ms late is no longer falling behind, nor caught up: the figure moves, no new event
    fx.clock.advanceTo(start + 2n * GAP, 5n * MS);
    expect(session.record().timing.behind_ns).toBe(5n * MS);
    expect(await states()).toHaveLength(onTime + 1);
    // back on time: behind_ns 0 and one more state event
    fx.clock.advanceTo(start + 3n * GAP);
    expect(session.record().timing.behind_ns).toBe(0n);
    const back = await states();
    expect(back).toHaveLength(onTime + 2);
    expect(back.at(-1)).toMatchObject({ state: 'playing', timing: { behind_ns: 0 } });
  });

  it('is never behind once paused or finished', async () => {
    const fx = replayFixture([
      fakeEvent('tx', T0, 0),
      fakeEvent('tx', T0 + MS, 1),
      fakeEvent('tx', T0 + 2n * MS, 2),
    ]);
    const session = await fx.sessions.create({ transaction_id: 'tx', speed_factor: 1, extra_latency_ns: 0 });
    await session.play();
    fx.clock.advanceTo(fx.clock.nowNs + MS, BEHIND * 2n);
    expect(session.record().timing.behind_ns).toBeGreaterThan(0n);
    session.pause();
    expect(session.record().timing.behind_ns).toBe(0n);
  });
});
