/**
 * Controls that read the store (create, play, seek) on an asynchronous
 * reader: they act in the order they came even when their reads answer out
 * of order, a stop that comes while a seek reads wins, and a read that fails
 * rejects the control with the store's error and leaves the session as it
 * was (and it works again once the store answers).
 */
import { fakeEvent } from '../support/fake-transaction-reader';
import { useReplayFixtures } from '../support/replay-fixture';

const replayFixture = useReplayFixtures('kreplay-replay-reads-');
const T0 = 1_795_345_678_123_456_789n;
const EVENTS = [0n, 1_000n, 5_000n, 9_000n].map((o, i) => fakeEvent('tx', T0 + o, i));
const body = { transaction_id: 'tx', speed_factor: 1, extra_latency_ns: 0 };

/** A read held until the test opens it. */
function gate(): { held: Promise<void>; open: () => void } {
  let open = (): void => undefined;
  const held = new Promise<void>((resolve) => (open = resolve));
  return { held, open };
}

describe('replay controls on an asynchronous store', () => {
  it('applies seeks in the order they came, whatever order their reads answer in', async () => {
    const fx = replayFixture(EVENTS);
    const session = await fx.sessions.create(body);
    // the first seek's count is held until the second seek has come: were the controls not run in
    // turn, the second's read would answer first and the first seek would land last
    const firstRead = gate();
    fx.source.slow = (read, at) => (read === 'indexAt' && at === T0 + 1_000n ? firstRead.held : undefined);
    const first = session.seek(1_000n);
    const second = session.seek(5_000n);
    firstRead.open();
    await Promise.all([first, second]);
    expect(session.record()).toMatchObject({ state: 'paused', position_ns: 5_000n, events_emitted: 2 });
  });

  it('a stop while a seek reads wins: the seek is refused, the session stays stopped', async () => {
    const fx = replayFixture(EVENTS);
    const session = await fx.sessions.create(body);
    const read = gate();
    fx.source.slow = (what) => (what === 'indexAt' ? read.held : undefined);
    const seek = session.seek(5_000n);
    session.stop();
    read.open();
    await expect(seek).rejects.toMatchObject({ status: 409 });
    expect(session.record()).toMatchObject({ state: 'stopped', events_emitted: 0 });
  });

  it('a failing read rejects create, seek and play with the store error; nothing changes', async () => {
    const fx = replayFixture(EVENTS);
    fx.source.failing = 1;
    await expect(fx.sessions.create(body)).rejects.toThrow('the store is down');
    expect(fx.sessions.list()).toEqual([]);
    const session = await fx.sessions.create(body);
    const before = session.record();
    fx.source.failing = 1;
    await expect(session.seek(5_000n)).rejects.toThrow('the store is down');
    expect(session.record()).toEqual(before);
    fx.source.failing = 1;
    await expect(session.play()).rejects.toThrow('the store is down');
    expect(session.record()).toEqual(before);
    expect(fx.clock.armed).toEqual([]);
    // the store answers again: the same session plays to its end
    await session.play();
    fx.clock.advanceBy(10_000n);
    expect(session.record()).toMatchObject({ state: 'finished', events_emitted: 4 });
  });
});
