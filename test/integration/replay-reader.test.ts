/**
 * Replay reads the store one way, through its TransactionReader, from the
 * node files (the query workers) or ClickHouse, never on the daemon's main
 * thread: a real daemon creates a session of 60,000 events (past the old
 * 50,000-event cap of ClickHouse sessions), seeks into it, plays it and
 * resumes a stream from Last-Event-ID, while the main thread's own stores
 * are never asked; from ClickHouse (every event there twice, unmerged) every
 * read is a page, no larger than the read-ahead's, and each event comes once. A store that cannot answer turns each control into a
 * problem response, and the session and daemon stay as they were.
 */
import { join } from 'node:path';
import Database from 'better-sqlite3';
import { Shipper } from '../../agent/ship/shipper';
import { ClickHouseHttp } from '../../core/clickhouse/http-client';
import { PREFETCH_CHUNK } from '../../daemon/replay/sessions/transaction';
import type { NodeStores } from '../../daemon/store/node-stores';
import { writeStore, type TestEvent } from '../support/event-store';
import { waitFor } from '../support/wait';
import { useEventsBackends } from '../support/events-http';
import { api, startReplayServer, StreamClient, type ReplayServer } from '../support/replay-http';
import { useTempDir } from '../support/temp-dir';

const dir = useTempDir('kreplay-replay-reader-');
const BACKENDS = useEventsBackends();
const T0 = 1_795_345_678_123_456_789n;
const NODES = ['alpha', 'beta', 'gamma'];
const TOTAL = 60_000;
const GAP_NS = 2_000n;

/** `tx-big`: TOTAL events GAP_NS apart over the nodes, `bytes` its index; and a little noise. */
function writeData(): void {
  const perNode: TestEvent[][] = NODES.map(() => []);
  for (let i = 0; i < TOTAL; i++)
    perNode[i % NODES.length]!.push({ ts: T0 + BigInt(i) * GAP_NS, txn: 'tx-big', bytes: i });
  NODES.forEach((node, n) =>
    writeStore(dir.path, node, [...perNode[n]!, { ts: T0 + 1n + BigInt(n), txn: 'other', bytes: -1 }]),
  );
}

/** Spies on every read of the main thread's node stores. */
function spyOnReads(stores: NodeStores): jest.SpyInstance[] {
  return (['page', 'iterate', 'summarize', 'get'] as const).map((name) => jest.spyOn(stores, name));
}

/**
 * Every node file shipped again, in other batches, with merges stopped: each
 * event has an unmerged copy, as after a retried batch (counts and pages
 * must see it once). Merges start again after the test (afterEach).
 */
async function resendUnmerged(fleet: ClickHouseHttp): Promise<void> {
  await fleet.exec('SYSTEM STOP MERGES');
  for (const node of NODES) {
    const path = join(dir.path, `${node}.db`);
    const db = new Database(path);
    db.prepare('DELETE FROM ship_cursors').run();
    db.close();
    const again = new Shipper(path, fleet, { maxDelayMs: 0, batchRows: 7_000 });
    again.start();
    await waitFor(() => again.status().shipped >= TOTAL / NODES.length + 1, {
      what: 're-shipped',
      timeoutMs: 60_000,
    });
    await again.stop();
  }
  const [copies] = await fleet.rows<{ n: string }>('SELECT count() AS n FROM events');
  expect(Number(copies!.n)).toBe(2 * (TOTAL + NODES.length));
}

const bytesOf = (m: { data: string }) => (JSON.parse(m.data) as { bytes: number }).bytes;

describe.each(BACKENDS)('replay reads from $kind through its TransactionReader', (backend) => {
  jest.setTimeout(120_000);
  let server: ReplayServer;
  afterEach(async () => {
    jest.restoreAllMocks();
    await server?.fleet?.exec('SYSTEM START MERGES');
    await server?.close();
  });

  it('creates, seeks, plays and resumes a 60,000-event session without the main thread reading a store', async () => {
    writeData();
    server = await startReplayServer(dir.path, {}, backend);
    if (server.fleet) await resendUnmerged(server.fleet);
    const reads = spyOnReads(server.stores);
    const sql = jest.spyOn(ClickHouseHttp.prototype, 'rows');

    const created = await api(server.url, 'POST', '', { transaction_id: 'tx-big', speed_factor: 4 });
    expect(created.status).toBe(201);
    const session = created.body as { id: string; events_total: number; duration_ns: number };
    expect(session).toMatchObject({
      events_total: TOTAL,
      duration_ns: Number(BigInt(TOTAL - 1) * GAP_NS),
    });

    // the first event at or after 90,000,001 ns is event 45,001
    const seek = 45_000 * Number(GAP_NS) + 1;
    const sought = await api(server.url, 'POST', `/${session.id}/seek`, { position_ns: seek });
    expect(sought.status).toBe(200);
    expect(sought.body).toMatchObject({ state: 'paused', events_emitted: 45_001, position_ns: seek });

    const live = await StreamClient.open(server.url, session.id);
    expect((await api(server.url, 'POST', `/${session.id}/play`)).status).toBe(200);
    await live.until((s) => s.states().includes('finished'), 60_000);
    live.close();
    const played = live.replays();
    expect(played.map((m) => Number(m.id))).toEqual(
      Array.from({ length: TOTAL - 45_001 }, (_, i) => 45_001 + i),
    );
    expect(played.map(bytesOf)).toEqual(played.map((m) => Number(m.id)));

    // a client resuming after event 50,000 gets the rest again from the store, the same events
    const resumed = await StreamClient.open(server.url, session.id, 50_000);
    await resumed.until((s) => s.states().length === 1);
    resumed.close();
    const again = resumed.replays();
    expect(again.map((m) => Number(m.id))).toEqual(
      Array.from({ length: TOTAL - 50_001 }, (_, i) => 50_001 + i),
    );
    const withoutLateness = (m: { data: string }) => m.data.replace(/"emitted_late_ns":(\d+|null)}$/, '');
    expect(again.map(withoutLateness)).toEqual(played.slice(50_001 - 45_001).map(withoutLateness));

    // the main thread never read the node files; ClickHouse was read a page at a time
    for (const read of reads) expect(read).not.toHaveBeenCalled();
    if (backend.kind === 'clickhouse') {
      const pages = sql.mock.calls
        .map(([text]) => text)
        .filter((text) => /ORDER BY timestamp_ns ASC/.test(text));
      expect(pages.length).toBeGreaterThanOrEqual((TOTAL - 45_001) / PREFETCH_CHUNK);
      for (const text of pages)
        expect(Number(/LIMIT (\d+)\s*$/.exec(text)![1])).toBeLessThanOrEqual(PREFETCH_CHUNK + 1);
    } else expect(sql).not.toHaveBeenCalled();
  });

  it('answers a problem for each control when the store cannot answer, and keeps the session as it was', async () => {
    writeData();
    server = await startReplayServer(dir.path, {}, backend);
    const created = await api(server.url, 'POST', '', { transaction_id: 'tx-big' });
    const id = (created.body as { id: string }).id;
    // ten events behind it: a resuming stream has history to read
    await api(server.url, 'POST', `/${id}/seek`, { position_ns: 10 * Number(GAP_NS) });
    // the session is saved in the data dir: the next daemon has it, but not its store
    let problem: { status: number; kind: string };
    if (backend.kind === 'clickhouse') {
      await backend.server().stop();
      problem = { status: 503, kind: 'store-unavailable' };
    } else {
      await server.close();
      // no query may wait for a worker: every read is refused, as on a daemon swamped by queries
      server = await startReplayServer(dir.path, { maxQueuedQueries: 0 }, backend);
      problem = { status: 503, kind: 'too-busy' };
    }
    try {
      const before = (await api(server.url, 'GET', `/${id}`)).body;
      expect(before).toMatchObject({ state: 'paused', events_emitted: 10, events_total: TOTAL });
      for (const [method, path, body] of [
        ['POST', '', { transaction_id: 'tx-big' }],
        ['POST', `/${id}/seek`, { position_ns: 1000 }],
        ['POST', `/${id}/play`, undefined],
      ] as const) {
        const reply = await api(server.url, method, path, body);
        expect({ route: path, status: reply.status }).toEqual({ route: path, status: problem.status });
        expect(reply.headers.get('content-type')).toMatch(/^application\/problem\+json/);
        expect(reply.body).toMatchObject({ type: expect.stringContaining(problem.kind) });
      }
      // a resuming stream is refused before it starts
      const res = await fetch(`${server.url}/api/replay/sessions/${id}/events`, {
        headers: { 'Last-Event-ID': '0' },
      });
      expect(res.status).toBe(problem.status);
      expect(res.headers.get('content-type')).toMatch(/^application\/problem\+json/);
      await res.text();
      expect((await api(server.url, 'GET', `/${id}`)).body).toEqual(before);
      expect((await fetch(`${server.url}/healthz`)).status).toBe(200);
    } finally {
      if (backend.kind === 'clickhouse') await backend.server().start();
    }
  });
});
