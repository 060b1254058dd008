import { readFileSync, writeFileSync, readdirSync, mkdirSync } from 'node:fs';
import { join } from 'node:path';
import { MAX_LIVE_SESSIONS } from '../../daemon/replay/sessions/session-service';
import { writeStore } from '../support/event-store';
import { api, startReplayServer, StreamClient, type ReplayServer } from '../support/replay-http';
import { useTempDir } from '../support/temp-dir';

const dir = useTempDir('kreplay-replay-lifecycle-');
const T0 = 1_795_345_678_123_456_789n;
const sleep = (ms: number) => new Promise((resolve) => setTimeout(resolve, ms));

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
  const start = async (ttlMs?: number) => {
    const server = await startReplayServer(dir.path, ttlMs);
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
    const server = await start(1000);
    const finished = await create(server, 'tx-short', 1000);
    const stream = await StreamClient.open(server.url, finished);
    await api(server.url, 'POST', `/${finished}/play`);
    await stream.until((s) => s.states().includes('finished'));
    const stopped = await create(server, 'tx-long');
    await api(server.url, 'POST', `/${stopped}/stop`);
    const paused = await create(server, 'tx-long');
    await api(server.url, 'POST', `/${paused}/seek`, { position_ns: 5 });
    const ready = await create(server, 'tx-long');
    expect((await api(server.url, 'GET', `/${finished}`)).status).toBe(200);
    await sleep(1600);
    expect((await api(server.url, 'GET', `/${finished}`)).status).toBe(404);
    expect((await api(server.url, 'GET', `/${stopped}`)).status).toBe(404);
    const left = (await api(server.url, 'GET', '')).body.sessions as { id: string }[];
    expect(left.map((s) => s.id)).toEqual([paused, ready]);
    // an expired session's stream ends
    await stream.until((s) => s.ended);
  });

  it(`refuses a session beyond ${MAX_LIVE_SESSIONS} live ones with 429 and Retry-After`, async () => {
    const server = await start();
    const ids: string[] = [];
    for (let i = 0; i < MAX_LIVE_SESSIONS; i++) ids.push(await create(server, 'tx-long'));
    const refused = await api(server.url, 'POST', '', { transaction_id: 'tx-long' });
    expect(refused.status).toBe(429);
    expect(refused.headers.get('content-type')).toMatch(/^application\/problem\+json/);
    expect(refused.headers.get('retry-after')).toBe('60');
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

  it('keeps sessions across a restart: paused ones where they were, playing ones paused', async () => {
    const first = await start();
    const paused = await create(first, 'tx-long');
    const playing = await create(first, 'tx-long', 0.5);
    const finished = await create(first, 'tx-short', 1000);
    const stream = await StreamClient.open(first.url, paused);
    for (const id of [paused, playing, finished]) await api(first.url, 'POST', `/${id}/play`);
    await stream.until((s) => s.replays().length >= 10);
    const pausedRecord = (await api(first.url, 'POST', `/${paused}/pause`)).body;
    await sleep(50);
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
