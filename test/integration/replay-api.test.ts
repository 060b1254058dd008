import { writeStore, type TestEvent } from '../support/event-store';
import { fetchAllPages, useEventsBackends } from '../support/events-http';
import { api, startReplayServer, StreamClient, type ReplayServer } from '../support/replay-http';
import { useTempDir } from '../support/temp-dir';
import { waitFor } from '../support/wait';

const dir = useTempDir('kreplay-replay-api-');
/* replay reads the node files, or (--store clickhouse://…) the same files shipped to ClickHouse */
const BACKENDS = useEventsBackends();
const T0 = 1_795_345_678_123_456_789n;
const NODES = ['alpha', 'beta', 'gamma'];

/** Gaps of 0 (a tie across nodes) to 2 ms, `n` events, spread over the nodes; `bytes` is the index. */
function transaction(txn: string, n: number, gapNs: (i: number) => bigint): TestEvent[][] {
  const perNode: TestEvent[][] = NODES.map(() => []);
  let ts = T0;
  for (let i = 0; i < n; i++) {
    ts += i === 0 ? 0n : gapNs(i);
    perNode[i % NODES.length]!.push({ ts, txn, trace: 'tr', bytes: i, dur: 1000 + i, service: `s${i % 2}` });
  }
  return perNode;
}

const QUICK_GAPS = [0n, 150_000n, 2_000_000n, 40_000n, 700_000n];

describe.each(BACKENDS)('replay sessions over HTTP from $kind, real stores and clock', (backend) => {
  let server: ReplayServer;

  beforeEach(async () => {
    const quick = transaction('tx-quick', 50, (i) => QUICK_GAPS[i % QUICK_GAPS.length]!);
    const slow = transaction('tx-slow', 40, () => 25_000_000n);
    const noise = NODES.map((_, n) => [{ ts: T0 + 5n + BigInt(n), txn: 'other', bytes: 999 }]);
    NODES.forEach((node, n) => writeStore(dir.path, node, [...quick[n]!, ...slow[n]!, ...noise[n]!]));
    writeStore(dir.path, 'delta', [
      { ts: T0 + 77n, txn: 'tx-one', bytes: 0, target: ['socket', 'tcp 10.0.0.5:5432'] },
    ]);
    server = await startReplayServer(dir.path, {}, backend);
  });
  afterEach(() => server.close());

  const create = async (txn: string, speed = 1, extra = 0) => {
    const reply = await api(server.url, 'POST', '', {
      transaction_id: txn,
      speed_factor: speed,
      extra_latency_ns: extra,
    });
    expect(reply.status).toBe(201);
    return reply.body as { id: string; events_total: number; duration_ns: number };
  };

  it('plays a transaction of several nodes to the end, on schedule, in order', async () => {
    const session = await create('tx-quick', 4, 20_000);
    const stream = await StreamClient.open(server.url, session.id);
    await stream.until((s) => s.states().length === 1);
    const playSent = process.hrtime.bigint();
    expect((await api(server.url, 'POST', `/${session.id}/play`)).status).toBe(200);
    await stream.until((s) => s.states().includes('finished'));
    stream.close();

    // a loaded machine may add a `playing` event saying the clock fell behind: count changes of state
    expect(stream.states().filter((s, i, all) => s !== all[i - 1])).toEqual(['ready', 'playing', 'finished']);
    const replays = stream.replays();
    const recorded = await fetchAllPages(server.url, 'transaction_id=tx-quick');
    expect(replays.map((m) => Number(m.id))).toEqual(recorded.map((_, i) => i));
    expect(replays.map((m) => JSON.parse(m.data).event_id)).toEqual(recorded.map((e) => e.event_id));
    expect(new Set(recorded.map((e) => e.node))).toEqual(new Set(NODES));

    let emittedBefore = -1n;
    replays.forEach((m, i) => {
      const e = recorded[i]!;
      expect(m.data).toContain(`"timestamp_ns":${e.timestamp_ns},"duration_ns":${e.duration_ns},`);
      const data = /"replay_offset_ns":(\d+),"replayed_duration_ns":(\d+),"emitted_late_ns":(\d+)}$/.exec(
        m.data,
      )!;
      const [scheduled, replayed, late] = [BigInt(data[1]!), BigInt(data[2]!), BigInt(data[3]!)];
      const o = e.timestamp_ns - recorded[0]!.timestamp_ns;
      expect(scheduled).toBe((o + 2n) / 4n + BigInt(i) * 20_000n);
      expect(replayed).toBe((e.duration_ns + 2n) / 4n + 20_000n);
      // emitted no earlier than scheduled, in order; received after that
      expect(late).toBeGreaterThanOrEqual(0n);
      expect(scheduled + late).toBeGreaterThanOrEqual(emittedBefore);
      emittedBefore = scheduled + late;
      expect(m.at - playSent).toBeGreaterThanOrEqual(scheduled);
    });

    const record = (await api(server.url, 'GET', `/${session.id}`)).body;
    expect(record).toMatchObject({
      state: 'finished',
      events_emitted: 50,
      events_total: 50,
      position_ns: session.duration_ns,
    });
    const timing = record.timing as Record<string, number>;
    expect(timing.lateness_p50_ns).toBeLessThanOrEqual(timing.lateness_p99_ns!);
    expect(timing.lateness_p99_ns).toBeLessThanOrEqual(timing.lateness_max_ns!);
  });

  it('resumes a stream after Last-Event-ID without gaps or repeats', async () => {
    const session = await create('tx-slow');
    const first = await StreamClient.open(server.url, session.id);
    await api(server.url, 'POST', `/${session.id}/play`);
    await first.until((s) => s.replays().length >= 5);
    first.close();
    // what the client took before it closed: messages of the same chunk may still be parsed after
    const seen = first.replays();
    const last = Number(seen.at(-1)!.id);
    // events go on meanwhile; the second stream gets them from the store, then live
    await waitFor(
      async () => ((await api(server.url, 'GET', `/${session.id}`)).body.events_emitted as number) > last + 1,
      { what: 'events emitted after the first stream closed' },
    );
    const second = await StreamClient.open(server.url, session.id, last);
    await second.until((s) => s.states().includes('finished'));
    second.close();
    const ids = [...seen, ...second.replays()].map((m) => Number(m.id));
    expect(ids).toEqual(Array.from({ length: 40 }, (_, i) => i));
    // the re-sent events are the same as the live ones were
    const bytes = second.replays().map((m) => JSON.parse(m.data).bytes);
    expect(bytes).toEqual(second.replays().map((m) => Number(m.id)));
  });

  it('sends each event once, in order, across rapid pauses and plays (frames the clock wrote are never sent again)', async () => {
    // 50 events over 29 ms, slowed to ~0.3 s: time for many pause/play round trips
    const session = await create('tx-quick', 0.1);
    const stream = await StreamClient.open(server.url, session.id);
    await stream.until((s) => s.states().length === 1);
    // alternate play and pause until the replay has finished (409): every control before that is taken
    const statuses: number[] = [];
    for (let cycle = 0; cycle < 100 && statuses.at(-1) !== 409; cycle++) {
      statuses.push((await api(server.url, 'POST', `/${session.id}/play`)).status);
      if (statuses.at(-1) !== 409)
        statuses.push((await api(server.url, 'POST', `/${session.id}/pause`)).status);
    }
    // a bounded number of cycles, then it plays to the end
    if (statuses.at(-1) !== 409)
      expect((await api(server.url, 'POST', `/${session.id}/play`)).status).toBe(200);
    await stream.until((s) => s.states().includes('finished'));
    stream.close();
    const taken = statuses.at(-1) === 409 ? statuses.slice(0, -1) : statuses;
    expect(taken.length).toBeGreaterThanOrEqual(1);
    expect(new Set(taken)).toEqual(new Set([200]));
    const ids = stream.replays().map((m) => Number(m.id));
    expect(ids).toEqual(Array.from({ length: session.events_total }, (_, i) => i));
    for (const m of stream.replays()) expect(typeof JSON.parse(m.data).emitted_late_ns).toBe('number');
  });

  it('starts a late watcher at the current position', async () => {
    const session = await create('tx-slow');
    await api(server.url, 'POST', `/${session.id}/play`);
    // join once the replay is under way (its 40 events take a second)
    await waitFor(
      async () => ((await api(server.url, 'GET', `/${session.id}`)).body.events_emitted as number) > 0,
    );
    const late = await StreamClient.open(server.url, session.id);
    await late.until((s) => s.states().includes('finished'));
    late.close();
    const joined = JSON.parse(late.received[0]!.data) as { state: string; events_emitted: number };
    expect(late.received[0]!.event).toBe('state');
    expect(joined.state).toBe('playing');
    expect(joined.events_emitted).toBeGreaterThan(0);
    const ids = late.replays().map((m) => Number(m.id));
    expect(ids).toEqual(
      Array.from({ length: 40 - joined.events_emitted }, (_, i) => joined.events_emitted + i),
    );
  });

  it('serves several watchers, and closing one leaves the session and the others alone', async () => {
    const session = await create('tx-slow', 2);
    const [a, b] = await Promise.all([
      StreamClient.open(server.url, session.id),
      StreamClient.open(server.url, session.id),
    ]);
    await api(server.url, 'POST', `/${session.id}/play`);
    await a.until((s) => s.replays().length >= 3);
    a.close();
    await b.until((s) => s.states().includes('finished'));
    b.close();
    expect(b.replays()).toHaveLength(40);
  });

  it('finishes a one-event transaction at once, and plays it again after a seek', async () => {
    const session = await create('tx-one');
    expect(session).toMatchObject({ events_total: 1, duration_ns: 0 });
    const stream = await StreamClient.open(server.url, session.id);
    await api(server.url, 'POST', `/${session.id}/play`);
    await stream.until((s) => s.states().includes('finished'));
    expect((await api(server.url, 'POST', `/${session.id}/play`)).status).toBe(409);
    expect((await api(server.url, 'POST', `/${session.id}/seek`, { position_ns: 0 })).body.state).toBe(
      'paused',
    );
    await api(server.url, 'POST', `/${session.id}/play`);
    await stream.until((s) => s.states().filter((st) => st === 'finished').length === 2);
    stream.close();
    expect(stream.replays().map((m) => m.id)).toEqual(['0', '0']);
    // the stream's event JSON is the query API's, write target included
    expect(JSON.parse(stream.replays()[0]!.data)).toMatchObject({
      target_kind: 'socket',
      target: 'tcp 10.0.0.5:5432',
    });
  });

  it('ends the streams of a stopped session; a new stream gets the state and ends', async () => {
    const session = await create('tx-slow');
    const stream = await StreamClient.open(server.url, session.id);
    await api(server.url, 'POST', `/${session.id}/play`);
    await api(server.url, 'POST', `/${session.id}/stop`);
    await stream.until((s) => s.ended);
    expect(stream.states().at(-1)).toBe('stopped');
    const after = await StreamClient.open(server.url, session.id);
    await after.until((s) => s.ended);
    expect(after.states()).toEqual(['stopped']);
  });
});
