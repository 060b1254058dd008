import { EVENT_SOURCES, fakeEvent } from '../support/fake-transaction-reader';
import { CapturedStream, settle, useReplayFixtures } from '../support/replay-fixture';
import type { HistoryPage } from '../../daemon/replay/sessions/replay-session';
import type { TransactionReader } from '../../daemon/replay/transaction-reader';
import { chunkEvents } from '../../daemon/replay/replay-event';
import { writeHistory } from '../../daemon/replay/lane/history-writer';
import { lateFrameText, replayFrame } from '../../daemon/replay/lane/replay-frame';
import { Schedule } from '../../core/replay/schedule';
import { eventToJson } from '../../core/model';

const replayFixture = useReplayFixtures('kreplay-replay-resume-');
const T0 = 1_795_345_678_123_456_789n;
/** 3000 events 1 µs apart, every third sharing its timestamp with the one before */
const EVENTS = Array.from({ length: 3000 }, (_, i) =>
  fakeEvent('tx', T0 + BigInt(i - Math.floor(i / 3)) * 1_000n, i),
);
const offsetOf = (i: number) => EVENTS[i]!.timestamp_ns - T0;

const text = (page: HistoryPage) => Buffer.from(page.bytes).toString('utf8');

async function collect(pages: AsyncIterable<HistoryPage>): Promise<string[]> {
  const out: string[] = [];
  for await (const page of pages) out.push(text(page));
  return out;
}

describe('resuming a stream', () => {
  it('re-reads emitted events from the nearest checkpoint, each with the lateness it was released with', async () => {
    const fx = replayFixture(EVENTS);
    const session = await fx.sessions.create({ transaction_id: 'tx', speed_factor: 1, extra_latency_ns: 0 });
    const start = fx.clock.now();
    await session.play();
    fx.clock.advanceTo(start + offsetOf(2499), 5n);
    expect(session.record().events_emitted).toBe(2500);
    const read = fx.source.read;
    const stream = new CapturedStream();
    const pages: number[] = [];
    for await (const page of session.history(2100)) {
      stream.write(text(page));
      pages.push(page.events);
    }
    expect(fx.source.read - read).toBeLessThan(500);
    // a page's frames go as one text, not one write per event
    expect(pages).toEqual([400]);
    const replays = stream.replays();
    expect(replays.map((r) => r.id)).toEqual(Array.from({ length: 400 }, (_, i) => 2100 + i));
    expect(replays.map((r) => r.data.bytes)).toEqual(replays.map((r) => r.id));
    expect(replays.every((r) => r.data.emitted_late_ns === 5)).toBe(true);
    // far behind the live stream too (a stream cut for falling behind resumes from there)
    const old = new CapturedStream();
    for await (const page of session.history(3)) old.write(text(page));
    expect(old.replays().map((r) => [r.id, r.data.emitted_late_ns])).toEqual(
      Array.from({ length: 2497 }, (_, i) => [3 + i, 5]),
    );
  });

  it('ends the history where the live stream is, even as it moves', async () => {
    const fx = replayFixture(EVENTS);
    const session = await fx.sessions.create({ transaction_id: 'tx', speed_factor: 1, extra_latency_ns: 0 });
    const start = fx.clock.now();
    await session.play();
    fx.clock.advanceTo(start + offsetOf(9));
    const ids: number[] = [];
    for await (const page of session.history(0)) {
      const frames = [...text(page).matchAll(/^id: (\d+)$/gm)].map((m) => Number(m[1]));
      expect(frames.length).toBe(page.events);
      ids.push(...frames);
      // the live stream moves on while the history is sent: the next page reaches where it is then
      if (ids.length === 10) fx.clock.advanceTo(start + offsetOf(19));
    }
    expect(ids).toEqual(Array.from({ length: 20 }, (_, i) => i));
    expect(await collect(session.history(25))).toEqual([]);
  });

  it('ends a resuming stream that is past what the main thread was told of, rather than send it events twice', async () => {
    // the clock writes to the sockets it holds before the main thread hears of the release: a client
    // cut then asks with an id past `emitted`; a stream the main thread writes would repeat the gap
    const fx = replayFixture(EVENTS);
    const session = await fx.sessions.create({ transaction_id: 'tx', speed_factor: 1, extra_latency_ns: 0 });
    const start = fx.clock.now();
    await session.play();
    fx.clock.advanceTo(start + offsetOf(9));
    expect(session.record().events_emitted).toBe(10);
    const ahead = new CapturedStream();
    session.watch(ahead, 13);
    const caughtUp = new CapturedStream();
    session.watch(caughtUp, 10);
    fx.clock.advanceTo(start + offsetOf(19));
    await settle();
    expect(ahead.ended).toBe(true);
    expect(ahead.messages).toEqual([]);
    expect(session.watchers).toBe(1);
    expect(caughtUp.ended).toBe(false);
    expect(caughtUp.replays().map((r) => r.id)).toEqual(Array.from({ length: 10 }, (_, i) => 10 + i));
  });
});

describe('a history framed where it is read', () => {
  it('asks the reader for framed pages (a query worker builds them), bytes the same as framed here', async () => {
    const framedHere = replayFixture(EVENTS);
    const onWorker = replayFixture(EVENTS);
    const asked: number[] = [];
    const reader: TransactionReader = onWorker.source;
    // the query pool's reader frames on its worker; this one records that it was asked to
    reader.history = async (range, limit, after, spec) => {
      asked.push(limit);
      return writeHistory(chunkEvents(await onWorker.source.page(range, limit, after)), spec);
    };
    const seen: string[][] = [];
    for (const fx of [framedHere, onWorker]) {
      const session = await fx.sessions.create({
        transaction_id: 'tx',
        speed_factor: 1,
        extra_latency_ns: 0,
      });
      const start = fx.clock.now();
      await session.play();
      fx.clock.advanceTo(start + offsetOf(2499), 3n);
      expect(session.record().events_emitted).toBe(2500);
      seen.push(await collect(session.history(1500)));
    }
    // the main thread of a daemon with query workers frames nothing: every page came framed
    // from the checkpoint before event 1500 (1024) to the live stream (2500), in one page
    expect(asked).toEqual([1476]);
    expect(seen[1]).toEqual(seen[0]);
    const stream = new CapturedStream();
    stream.write(seen[1]!.join(''));
    expect(stream.replays().map((r) => [r.id, r.data.emitted_late_ns])).toEqual(
      Array.from({ length: 1000 }, (_, i) => [1500 + i, 3]),
    );
  });

  it.each(EVENT_SOURCES)(
    'frames each event of %s as the live stream did: from its index on, the skipped left out, unknown lateness null',
    (_, eventsOf) => {
      const events = EVENTS.slice(0, 6);
      const schedule = new Schedule(1, 0n);
      // events[2] and [3] share a timestamp; a start at [3] skips [2]
      const skip = { ts: events[3]!.timestamp_ns, eventId: events[3]!.event_id };
      const page = writeHistory(eventsOf({ events: events.slice(2), next: null }), {
        firstTs: T0,
        speedFactor: 1,
        extraLatencyNs: 0n,
        firstIndex: 3,
        skip,
        from: 4,
        lateness: Float64Array.of(11, NaN, -2),
      });
      // event i sits at index i: [2] takes no place, so [3] is index 3
      const live = (i: number, late: bigint | null) =>
        lateFrameText(replayFrame(schedule, T0, i, { ...events[i]!, json: eventToJson(events[i]!) }), late);
      expect(Buffer.from(page.bytes).toString('utf8')).toBe(live(4, null) + live(5, -2n));
      expect(page).toMatchObject({ events: 2, placed: 3, next: null });
    },
  );

  it.each(EVENT_SOURCES)(
    'ends the history of %s that no lateness covers, rather than read it again',
    (_, eventsOf) => {
      const events = EVENTS.slice(0, 3);
      const page = writeHistory(
        eventsOf({ events, next: { ts: events[2]!.timestamp_ns, eventId: events[2]!.event_id } }),
        {
          firstTs: T0,
          speedFactor: 1,
          extraLatencyNs: 0n,
          firstIndex: 0,
          from: 0,
          lateness: new Float64Array(0),
        },
      );
      expect(page).toMatchObject({ events: 0, placed: 0, next: null });
      expect(page.bytes.length).toBe(0);
    },
  );
});

describe('a daemon restart', () => {
  it('brings a playing session back paused where it was, and it continues from there', async () => {
    const first = replayFixture(EVENTS);
    const session = await first.sessions.create({
      transaction_id: 'tx',
      speed_factor: 2,
      extra_latency_ns: 100,
    });
    const before = new CapturedStream();
    session.watch(before);
    const start = first.clock.now();
    await session.play();
    first.clock.advanceTo(start + 300_000n);
    const emitted = session.record().events_emitted;
    expect(emitted).toBeGreaterThan(100);
    await first.sessions.close();
    await settle();
    expect(before.ended).toBe(true);
    expect(before.states()).toEqual(['ready', 'playing', 'paused']);
    const saved = session.record();

    const second = replayFixture(EVENTS, { dataDir: first.dataDir });
    const restored = second.sessions.get(session.id);
    expect(restored.record()).toEqual({ ...saved, state: 'paused' });
    const after = new CapturedStream();
    restored.watch(after);
    const resumedAt = second.clock.now();
    await restored.play();
    // the schedule goes on: the next event is due where it would have been
    const wallNow = 300_000n;
    expect(second.clock.armed[0]! - resumedAt).toBe(
      (offsetOf(emitted) + 1n) / 2n + BigInt(emitted) * 100n - wallNow,
    );
    second.clock.advanceBy(10_000_000_000n);
    await settle();
    const ids = [...before.replays(), ...after.replays()].map((r) => r.id);
    expect(ids).toEqual(EVENTS.map((_, i) => i));
    expect(restored.record()).toMatchObject({ state: 'finished', events_emitted: 3000 });
  });
});
