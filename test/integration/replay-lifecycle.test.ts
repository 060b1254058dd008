import { readFileSync, writeFileSync, readdirSync, mkdirSync } from 'node:fs';
import { join } from 'node:path';
import { writeStore } from '../support/event-store';
import {
  api,
  startReplayServer,
  StreamClient,
  type ReplayServer,
  type SessionLimits,
} from '../support/replay-http';
import { useTempDir } from '../support/temp-dir';
import { waitFor } from '../support/wait';
import { FakeWallClock } from '../support/fake-wall-clock';
import { request } from 'node:http';

/** POST a session from a given loopback address: another client, as the per-client limit sees it. */
function apiFrom(
  base: string,
  localAddress: string,
  body: unknown,
): Promise<{ status: number; body: Record<string, unknown> }> {
  return new Promise((resolve, reject) => {
    const req = request(
      `${base}/api/replay/sessions`,
      { method: 'POST', localAddress, headers: { 'content-type': 'application/json' } },
      (res) => {
        let text = '';
        res.on('data', (chunk: Buffer) => (text += chunk.toString()));
        res.on('end', () => resolve({ status: res.statusCode ?? 0, body: JSON.parse(text) }));
      },
    );
    req.on('error', reject);
    req.end(JSON.stringify(body));
  });
}

const dir = useTempDir('kreplay-replay-lifecycle-');
const T0 = 1_795_345_678_123_456_789n;

/** 'tx-long': 100 events 20 ms apart on two nodes (2 s at speed 1); 'tx-short': 3 events within 2 µs. */
function writeData(): void {
  for (const [n, node] of ['left', 'right'].entries()) {
    const long = Array.from({ length: 50 }, (_, i) => ({
      ts: T0 + BigInt(2 * i + n) * 20_000_000n,
      txn: 'tx-long',
    }));
    const short = [{ ts: T0 + BigInt(n), txn: 'tx-short' }];
    writeStore(dir.path, node, [
      ...long,
      ...short,
      ...(n === 0 ? [{ ts: T0 + 2_000n, txn: 'tx-short' }] : []),
    ]);
  }
}

describe('replay session lifecycle', () => {
  const servers: ReplayServer[] = [];
  const start = async (limits?: SessionLimits) => {
    const server = await startReplayServer(dir.path, limits);
    servers.push(server);
    return server;
  };
  beforeEach(writeData);
  afterEach(async () => {
    for (const server of servers.splice(0)) await server.close();
  });

  const create = async (server: ReplayServer, txn: string, speed = 1) => {
    const reply = await api(server.url, 'POST', '', { transaction_id: txn, speed_factor: speed });
    expect(reply.status).toBe(201);
    return reply.body.id as string;
  };

  it('removes finished and stopped sessions after the idle TTL, never live ones', async () => {
    const wallClock = new FakeWallClock();
    const server = await start({ sessionTtlMs: 1000, wallClock });
    const finished = await create(server, 'tx-short', 1000);
    const stream = await StreamClient.open(server.url, finished);
    await api(server.url, 'POST', `/${finished}/play`);
    await stream.until((s) => s.states().includes('finished'));
    const stopped = await create(server, 'tx-long');
    await api(server.url, 'POST', `/${stopped}/stop`);
    const paused = await create(server, 'tx-long');
    await api(server.url, 'POST', `/${paused}/seek`, { position_ns: 5 });
    const ready = await create(server, 'tx-long');
    wallClock.advanceBy(999);
    expect((await api(server.url, 'GET', `/${finished}`)).status).toBe(200);
    wallClock.advanceBy(1);
    expect((await api(server.url, 'GET', `/${finished}`)).status).toBe(404);
    expect((await api(server.url, 'GET', `/${stopped}`)).status).toBe(404);
    const left = (await api(server.url, 'GET', '')).body.sessions as { id: string }[];
    expect(left.map((s) => s.id)).toEqual([paused, ready]);
    // an expired session's stream ends
    await stream.until((s) => s.ended);
  });

  it('refuses a session beyond --max-sessions live ones with 429 and Retry-After', async () => {
    const server = await start({ maxSessions: 6, maxSessionsPerClient: 100 });
    const ids: string[] = [];
    for (let i = 0; i < 6; i++) ids.push(await create(server, 'tx-long'));
    const refused = await api(server.url, 'POST', '', { transaction_id: 'tx-long' });
    expect(refused.status).toBe(429);
    expect(refused.headers.get('content-type')).toMatch(/^application\/problem\+json/);
    expect(refused.headers.get('retry-after')).toBe('60');
    expect(refused.body.detail).toMatch(/at most 6 sessions .* on this daemon/);
    // a playing session frees its slot when it finishes: about 2 s at speed 1
    await api(server.url, 'POST', `/${ids[0]}/play`);
    const again = await api(server.url, 'POST', '', { transaction_id: 'tx-long' });
    expect(again.status).toBe(429);
    expect(Number(again.headers.get('retry-after'))).toBeGreaterThanOrEqual(1);
    expect(Number(again.headers.get('retry-after'))).toBeLessThanOrEqual(2);
    // finished and stopped sessions do not count
    await api(server.url, 'POST', `/${ids[1]}/stop`);
    await create(server, 'tx-long');
  });

  it('limits live sessions per client; every loopback address is the one client "loopback"', async () => {
    const server = await start({ maxSessionsPerClient: 2 });
    const from = (localAddress: string) => apiFrom(server.url, localAddress, { transaction_id: 'tx-long' });
    expect((await from('127.0.0.4')).status).toBe(201);
    const second = await from('127.0.0.5');
    expect(second.status).toBe(201);
    // rotating the source address through 127.0.0.0/8 makes no new client
    for (const address of ['127.0.0.6', '127.0.0.7', '127.0.0.8', '127.0.0.1']) {
      const refused = await from(address);
      expect(refused.status).toBe(429);
      expect(refused.body.detail).toMatch(/^loopback has 2 sessions/);
    }
    // an ended session frees its owner's slot
    await api(server.url, 'POST', `/${second.body.id as string}/stop`);
    expect((await from('127.0.0.9')).status).toBe(201);
  });

  it('removes ready and paused sessions after --idle-session-ttl; playing ones stay', async () => {
    const wallClock = new FakeWallClock();
    const server = await start({ idleSessionTtlMs: 700, wallClock });
    const ready = await create(server, 'tx-long');
    const paused = await create(server, 'tx-long');
    await api(server.url, 'POST', `/${paused}/seek`, { position_ns: 5 });
    const playing = await create(server, 'tx-long', 0.5);
    await api(server.url, 'POST', `/${playing}/play`);
    wallClock.advanceBy(400);
    // a change restarts the clock: this one is touched at 400 ms and goes at 1.1 s
    const touched = await create(server, 'tx-long');
    wallClock.advanceBy(300);
    const left = (await api(server.url, 'GET', '')).body.sessions as { id: string }[];
    expect(left.map((s) => s.id)).toEqual([playing, touched]);
    expect((await api(server.url, 'GET', `/${ready}`)).status).toBe(404);
    wallClock.advanceBy(399);
    expect((await api(server.url, 'GET', '')).body.sessions).toHaveLength(2);
    wallClock.advanceBy(1);
    const later = (await api(server.url, 'GET', '')).body.sessions as { id: string }[];
    expect(later.map((s) => s.id)).toEqual([playing]);
  });

  it("two daemons on one data dir keep both daemons' sessions, and a third takes them over", async () => {
    const a = await start();
    const b = await start();
    const fromA = await create(a, 'tx-long');
    const fromB = await create(b, 'tx-short');
    // each change saves: A's saves must not drop B's session, nor B's A's
    await api(a.url, 'POST', `/${fromA}/seek`, { position_ns: 7 });
    await api(b.url, 'POST', `/${fromB}/stop`);
    const ids = (server: ReplayServer) =>
      api(server.url, 'GET', '').then((r) => (r.body.sessions as { id: string }[]).map((s) => s.id));
    expect(await ids(a)).toEqual([fromA]);
    expect(await ids(b)).toEqual([fromB]);
    await a.replay.close();
    await b.replay.close();
    const saved = JSON.parse(readFileSync(join(dir.path, '.replay', 'sessions.json'), 'utf8'));
    expect(saved.sessions.map((s: { id: string }) => s.id).sort()).toEqual([fromA, fromB].sort());
    // released by daemons that stopped: the next one takes both
    const c = await start();
    expect((await ids(c)).sort()).toEqual([fromA, fromB].sort());
    expect((await api(c.url, 'GET', `/${fromA}`)).body).toMatchObject({ state: 'paused', position_ns: 7 });
  });

  it('takes over the sessions of a daemon whose process died, not those of a live one', async () => {
    mkdirSync(join(dir.path, '.replay'));
    const saved = (daemon: string | null, id: string) => ({
      daemon,
      id,
      transaction_id: 'tx-short',
      speed_factor: 1,
      extra_latency_ns: 0,
      state: 'ready',
      created_at: new Date().toISOString(),
      updated_at: new Date().toISOString(),
      first_ts: String(T0),
      last_ts: String(T0 + 2_000n),
      events_total: 3,
      next_index: 0,
      next_start: null,
      floor_ns: '0',
      position_ns: '0',
      wall_ns: '0',
      lateness: { max: '0', buckets: [] },
    });
    // pid 1's start time never matches "1" ticks; this process is alive
    const live = `${process.pid}:${readFileSync('/proc/self/stat', 'utf8').split(') ')[1]!.split(' ')[19]}:other`;
    writeFileSync(
      join(dir.path, '.replay', 'sessions.json'),
      JSON.stringify({ version: 2, sessions: [saved('1:1:dead', 'of-dead'), saved(live, 'of-live')] }),
    );
    const server = await start();
    const ids = (await api(server.url, 'GET', '')).body.sessions as { id: string }[];
    expect(ids.map((s) => s.id)).toEqual(['of-dead']);
    await server.close();
    servers.splice(0);
    const after = JSON.parse(readFileSync(join(dir.path, '.replay', 'sessions.json'), 'utf8'));
    expect(after.sessions.map((s: { id: string; daemon: string | null }) => [s.id, s.daemon])).toEqual([
      ['of-live', live],
      ['of-dead', null],
    ]);
  });

  it('keeps sessions across a restart: paused ones where they were, playing ones paused', async () => {
    const first = await start();
    const paused = await create(first, 'tx-long');
    const playing = await create(first, 'tx-long', 0.5);
    const finished = await create(first, 'tx-short', 1000);
    const stream = await StreamClient.open(first.url, paused);
    for (const id of [paused, playing, finished]) await api(first.url, 'POST', `/${id}/play`);
    await stream.until((s) => s.replays().length >= 10);
    const pausedRecord = (await api(first.url, 'POST', `/${paused}/pause`)).body;
    // the watcher has the pause, the fast one has finished and the other is under way before the restart
    await stream.until((s) => s.states().at(-1) === 'paused');
    const stateOf = async (id: string) => (await api(first.url, 'GET', `/${id}`)).body;
    await waitFor(async () => (await stateOf(finished)).state === 'finished');
    await waitFor(async () => ((await stateOf(playing)).position_ns as number) > 0);
    await first.close();
    servers.splice(0);
    expect(stream.states().at(-1)).toBe('paused');
    await stream.until((s) => s.ended);
    expect(readdirSync(join(dir.path, '.replay'))).toEqual(['sessions.json']);

    const second = await start();
    const records = (await api(second.url, 'GET', '')).body.sessions as Record<string, unknown>[];
    expect(records.map((r) => r.id)).toEqual([paused, playing, finished]);
    expect(records[0]).toEqual(pausedRecord);
    const wasPlaying = records[1]!;
    expect(wasPlaying.state).toBe('paused');
    expect(wasPlaying.position_ns).toBeGreaterThan(0);
    expect(wasPlaying.position_ns).toBeLessThan(wasPlaying.duration_ns as number);
    expect(records[2]).toMatchObject({ state: 'finished', events_emitted: 3 });

    // it plays on from where it was: the first event it sends is the next one
    const resumed = await StreamClient.open(second.url, paused);
    await api(second.url, 'POST', `/${paused}/play`);
    await resumed.until((s) => s.replays().length >= 1);
    resumed.close();
    expect(Number(resumed.replays()[0]!.id)).toBe(pausedRecord.events_emitted);
  });

  it('moves an unreadable sessions file aside and starts empty', async () => {
    mkdirSync(join(dir.path, '.replay'));
    writeFileSync(join(dir.path, '.replay', 'sessions.json'), '{"version":1,"sessions":[');
    const server = await start();
    expect((await api(server.url, 'GET', '')).body).toEqual({ sessions: [] });
    const id = await create(server, 'tx-short');
    await server.close();
    servers.splice(0);
    const files = readdirSync(join(dir.path, '.replay')).sort();
    expect(files).toEqual(['sessions.json', expect.stringMatching(/^sessions\.json\.unreadable-\d+$/)]);
    const saved = JSON.parse(readFileSync(join(dir.path, '.replay', 'sessions.json'), 'utf8'));
    expect(saved.sessions.map((s: { id: string }) => s.id)).toEqual([id]);
  });
});
