/**
 * A ClickHouse cluster of two shards on this machine (test/support writes
 * the remote_servers entry): twelve agents' shippers send to the Distributed
 * table through either server, the daemon reads it with
 * --store clickhouse://…?cluster=NAME, a transaction spanning nodes on both
 * shards comes back whole, once, in order (the same as from the node files);
 * a shard killed or hung (SIGSTOP) turns queries into a prompt 503 naming it.
 */
import { waitFor } from '../support/wait';
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import Database from 'better-sqlite3';
import { StoreWriter } from '../../agent/store/store-writer';
import { Shipper } from '../../agent/ship/shipper';
import { createDaemon, type Daemon } from '../../daemon/create-daemon';
import { silentLogger } from '../../core/log/logger';
import { clickhouseAvailable, useClickHouseCluster } from '../support/clickhouse-server';
import { writeEvents, type TestEvent } from '../support/event-store';
import { fetchAllPages, get } from '../support/events-http';
import { api, StreamClient } from '../support/replay-http';

const describeCh = clickhouseAvailable ? describe : describe.skip;
if (!clickhouseAvailable)
  console.warn('SKIPPED: clickhouse-server is not installed (make setup installs it)');

const BASE = 1_763_856_000_000_000_000n;
/* store ids are random: with 12 nodes all land on one shard once in 2,048 runs (the first test says so) */
const NODES = Array.from({ length: 12 }, (_, n) => `node-${n}`);
const PER_NODE = 1500;

/** Node `n`'s events: a share of tx-span (every node takes part, ties across nodes), plus noise. */
function nodeEvents(n: number): TestEvent[] {
  return Array.from({ length: PER_NODE }, (_, i) => ({
    ts: BASE + BigInt(i) * 10_000n + BigInt(i % 3 === 0 ? 0 : n),
    txn: i % 25 === 0 ? 'tx-span' : `tx-${n}-${i % 40}`,
    trace: i % 7 === 0 ? 'tr-span' : null,
    service: `svc-${n % 3}`,
    bytes: n * 10_000 + i,
  }));
}

describeCh('a ClickHouse cluster of two shards', () => {
  jest.setTimeout(120_000);
  const dir = { path: '' }; // one data dir for the block: its daemons outlive single tests
  const fleet = useClickHouseCluster();
  const DB = 'fleet';
  let viaCluster: Daemon;
  let viaFiles: Daemon;

  beforeAll(async () => {
    dir.path = mkdtempSync(join(tmpdir(), 'kreplay-cluster-'));
    const cluster = fleet.cluster;
    await cluster.migrate(DB);
    NODES.forEach((node, n) => {
      const writer = StoreWriter.open(dir.path, node);
      writeEvents(writer, nodeEvents(n));
      writer.close();
    });
    // several agents at once, entering the cluster through either server
    const shippers = NODES.map(
      (node, n) =>
        new Shipper(join(dir.path, `${node}.db`), cluster.client(DB, n % 2), {
          maxDelayMs: 0,
          batchRows: 1000,
        }),
    );
    shippers.forEach((s) => s.start());
    await waitFor(() => shippers.every((s) => s.status().shipped === PER_NODE), {
      what: 'all shipped',
      timeoutMs: 60_000,
    });
    await Promise.all(shippers.map((s) => s.stop()));
    viaCluster = await createDaemon({ dataDir: dir.path, store: cluster.url(DB, 0, 2), log: silentLogger });
    viaFiles = await createDaemon({ dataDir: dir.path, log: silentLogger });
  }, 120_000);

  afterAll(async () => {
    await viaCluster?.close();
    await viaFiles?.close();
    rmSync(dir.path, { recursive: true, force: true });
  });

  it('spreads nodes over both shards, each node whole on one, each event once', async () => {
    const perShard = await Promise.all(
      fleet.cluster.shards.map((_, i) =>
        fleet.cluster
          .client(DB, i)
          .rows<{ node: string; n: string }>(
            'SELECT node, count() AS n FROM events FINAL GROUP BY node ORDER BY node',
          ),
      ),
    );
    for (const rows of perShard) expect(rows.length).toBeGreaterThan(0);
    const all = perShard.flat();
    expect(all.map((r) => r.node).sort()).toEqual([...NODES].sort());
    expect(all.every((r) => r.n === String(PER_NODE))).toBe(true);
  });

  it('returns a transaction spanning nodes on both shards whole, once, in order, as the node files do', async () => {
    const cluster = await fetchAllPages(viaCluster.url, 'transaction_id=tx-span&limit=50');
    const files = await fetchAllPages(viaFiles.url, 'transaction_id=tx-span&limit=50');
    expect(cluster).toHaveLength(NODES.length * (PER_NODE / 25));
    expect(new Set(cluster.map((e) => e.event_id)).size).toBe(cluster.length);
    expect(new Set(cluster.map((e) => e.node)).size).toBe(NODES.length);
    expect(cluster).toEqual(files);
    const trace = await fetchAllPages(viaCluster.url, 'trace_id=tr-span&order=desc&limit=333');
    expect(trace).toEqual(await fetchAllPages(viaFiles.url, 'trace_id=tr-span&order=desc&limit=333'));
    const one = await get(`${viaCluster.url}/api/events/${cluster[77]!.event_id}?int64=string`);
    expect(one.status).toBe(200);
  });

  it('a re-sent batch through the other server never shows twice', async () => {
    const path = join(dir.path, `${NODES[0]}.db`);
    const db = new Database(path);
    db.prepare('DELETE FROM ship_cursors').run();
    db.close();
    const again = new Shipper(path, fleet.cluster.client(DB, 1), { maxDelayMs: 0 });
    again.start();
    await waitFor(() => again.status().shipped === PER_NODE, { what: 're-sent', timeoutMs: 60_000 });
    await again.stop();
    const events = await fetchAllPages(viaCluster.url, `node=${NODES[0]}&limit=1000`);
    expect(events).toHaveLength(PER_NODE);
  });

  it('pages through unmerged copies on both shards exactly as the node files, cursors included', async () => {
    const shards = fleet.cluster.shards.map((_, i) => fleet.cluster.client(DB, i));
    // copies stay in their own parts: what a retried batch looks like until a merge runs
    for (const shard of shards) await shard.exec('SYSTEM STOP MERGES');
    try {
      // every node sent again through the other server in other batch sizes, a third of them twice
      for (const [n, node] of NODES.entries())
        for (let copy = 0; copy < (n % 3 === 0 ? 2 : 1); copy++) {
          const path = join(dir.path, `${node}.db`);
          const db = new Database(path);
          db.prepare('DELETE FROM ship_cursors').run();
          db.close();
          const again = new Shipper(path, fleet.cluster.client(DB, (n + 1) % 2), {
            maxDelayMs: 0,
            batchRows: 170 + 110 * copy,
          });
          again.start();
          await waitFor(() => again.status().shipped === PER_NODE, { what: 're-sent', timeoutMs: 60_000 });
          await again.stop();
        }
      for (const shard of shards) {
        const [r] = await shard.rows<{ n: string; ids: string }>(
          'SELECT count() AS n, uniqExact(event_id) AS ids FROM events',
        );
        expect(Number(r!.n)).toBeGreaterThanOrEqual(2 * Number(r!.ids)); // every event there at least twice
      }
      const queries = [
        `transaction_id=tx-3-5&limit=1`,
        'transaction_id=tx-span&limit=29',
        'transaction_id=tx-span&order=desc&limit=50',
        'transaction_id=tx-span',
        'trace_id=tr-span&limit=97',
        'trace_id=tr-span&order=desc&limit=333',
        `node=${NODES[3]}&limit=999`,
        'service=svc-1&order=desc&limit=250',
        'limit=2000',
      ];
      for (const query of queries) {
        const walk = async (base: string) => {
          const pages: string[] = [];
          for (let cursor: string | null = null; pages.length === 0 || cursor;) {
            const reply = await get(
              `${base}/api/events?int64=string&${query}${cursor ? `&cursor=${cursor}` : ''}`,
            );
            expect(reply.status).toBe(200);
            pages.push(reply.text);
            cursor = (JSON.parse(reply.text) as { next_cursor: string | null }).next_cursor;
          }
          return pages;
        };
        const [cluster, files] = [await walk(viaCluster.url), await walk(viaFiles.url)];
        expect(cluster).toEqual(files); // byte for byte: events, order and cursors, page by page
      }
      // a session's count and span, read from each shard's lookup table with the copies there, and a seek's index
      for (const transaction_id of ['tx-span', 'tx-3-5']) {
        const sessions: { id: string; events_total: number; duration_ns: number }[] = [];
        for (const daemon of [viaCluster, viaFiles]) {
          const created = await api(daemon.url, 'POST', '', { transaction_id });
          expect(created.status).toBe(201);
          sessions.push(created.body as (typeof sessions)[number]);
        }
        expect(sessions[0]!.events_total).toBe(sessions[1]!.events_total);
        expect(sessions[0]!.duration_ns).toBe(sessions[1]!.duration_ns);
        for (const [i, daemon] of [viaCluster, viaFiles].entries())
          await api(daemon.url, 'DELETE', `/${sessions[i]!.id}`);
      }
      const all = await fetchAllPages(viaCluster.url, 'limit=10000');
      expect(all).toHaveLength(NODES.length * PER_NODE);
      const one = await get(`${viaCluster.url}/api/events/${all[4321]!.event_id}?int64=string`);
      expect(one.text).toBe(
        await get(`${viaFiles.url}/api/events/${all[4321]!.event_id}?int64=string`).then((r) => r.text),
      );
    } finally {
      for (const shard of shards) await shard.exec('SYSTEM START MERGES');
    }
  });

  it('replays a transaction spanning both shards as from the node files, and keeps the session across a restart', async () => {
    const played: string[][] = [];
    const sessions: { id: string; events_total: number; duration_ns: number }[] = [];
    for (const daemon of [viaCluster, viaFiles]) {
      const created = await api(daemon.url, 'POST', '', { transaction_id: 'tx-span', speed_factor: 8 });
      expect(created.status).toBe(201);
      const session = created.body as { id: string; events_total: number; duration_ns: number };
      sessions.push(session);
      const stream = await StreamClient.open(daemon.url, session.id);
      await api(daemon.url, 'POST', `/${session.id}/play`);
      await stream.until((st) => st.states().includes('finished'));
      stream.close();
      played.push(stream.replays().map((m) => (JSON.parse(m.data) as { event_id: string }).event_id));
    }
    expect(sessions[0]).toMatchObject({
      events_total: sessions[1]!.events_total,
      duration_ns: sessions[1]!.duration_ns,
    });
    expect(played[0]).toHaveLength(NODES.length * (PER_NODE / 25));
    expect(played[0]).toEqual(played[1]);

    // restarted, the daemon loads the session's transaction from the cluster again and plays it
    await viaCluster.close();
    viaCluster = await createDaemon({
      dataDir: dir.path,
      store: fleet.cluster.url(DB, 0, 2),
      log: silentLogger,
    });
    const id = sessions[0]!.id;
    expect((await api(viaCluster.url, 'GET', `/${id}`)).body).toMatchObject({
      state: 'finished',
      events_total: sessions[0]!.events_total,
    });
    await api(viaCluster.url, 'POST', `/${id}/seek`, { position_ns: 0 });
    const again = await StreamClient.open(viaCluster.url, id);
    await api(viaCluster.url, 'POST', `/${id}/play`);
    await again.until((st) => st.states().includes('finished'));
    again.close();
    expect(again.replays().map((m) => (JSON.parse(m.data) as { event_id: string }).event_id)).toEqual(
      played[0],
    );
  });

  const shardDown = async (how: 'killed' | 'hung') => {
    const shard = fleet.cluster.shards[1]!;
    if (how === 'killed') await shard.stop();
    else shard.signal('SIGSTOP');
    try {
      const started = Date.now();
      const reply = await get(`${viaCluster.url}/api/events?transaction_id=tx-span`);
      const tookMs = Date.now() - started;
      expect(reply.status).toBe(503);
      expect(reply.contentType).toMatch(/^application\/problem\+json/);
      const problem = JSON.parse(reply.text) as { type: string; detail: string };
      expect(problem.type).toMatch(/store-unavailable$/);
      expect(problem.detail).toContain(
        `shard 2 of cluster ${fleet.cluster.name} (127.0.0.1:${shard.tcpPort})`,
      );
      // the URL's timeout is 2 s: a query, then a probe of each shard, each bounded
      expect(tookMs).toBeLessThan(15_000);
      // replay too: a session cannot be created, with the same answer
      const session = await fetch(`${viaCluster.url}/api/replay/sessions`, {
        method: 'POST',
        headers: { 'content-type': 'application/json' },
        body: JSON.stringify({ transaction_id: 'tx-span' }),
      });
      expect(session.status).toBe(503);
      expect(await session.text()).toContain('shard 2 of cluster');
    } finally {
      if (how === 'killed') await shard.start();
      else shard.signal('SIGCONT');
    }
    // the entry server may first try a connection it held to the shard before: allow it a few seconds
    let back: unknown[] = [];
    const deadline = Date.now() + 15_000;
    while (back.length === 0) {
      back = await fetchAllPages(viaCluster.url, 'transaction_id=tx-span&limit=500').catch((err: unknown) => {
        if (Date.now() > deadline) throw err;
        return [];
      });
      if (back.length === 0) await new Promise((r) => setTimeout(r, 200));
    }
    expect(back).toHaveLength(NODES.length * (PER_NODE / 25));
  };

  it('answers 503 naming the shard when one is killed, and serves again once it is back', () =>
    shardDown('killed'));

  it('answers 503 naming the shard when one hangs (SIGSTOP), without hanging itself', () =>
    shardDown('hung'));
});
