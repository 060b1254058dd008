/**
 * Queries run on the worker pool: the main thread answers while a long query
 * runs, a query past --query-timeout gets 503 and the pool still answers
 * afterwards, and past --max-queued-queries a request gets 503 too-busy.
 * Times are relative to the same heavy query measured in the test.
 */
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { silentLogger } from '../../core/log/logger';
import { createDaemon, type Daemon, type DaemonOptions } from '../../daemon/create-daemon';
import { writeStore } from '../support/event-store';
import { waitFor } from '../support/wait';

const T0 = 1_795_345_678_000_000_000n;
const EVENTS = 400_000;
// a page of 10,000 read backwards through the slow-call filter: tens of ms of SQLite and JSON
const HEAVY = '/api/events?limit=10000&order=desc&min_duration_ms=0.0005';
const LIGHT = '/api/events?limit=1';

describe('query worker pool', () => {
  let dir = '';
  const daemons: Daemon[] = [];
  const start = async (options: Partial<DaemonOptions>) => {
    const daemon = await createDaemon({ dataDir: dir, log: silentLogger, ...options });
    daemons.push(daemon);
    return daemon.url;
  };
  const timed = async (url: string) => {
    const started = performance.now();
    const res = await fetch(url);
    const body = (await res.json()) as Record<string, unknown>;
    return { status: res.status, headers: res.headers, body, ms: performance.now() - started };
  };

  beforeAll(() => {
    dir = mkdtempSync(join(tmpdir(), 'kreplay-query-pool-'));
    writeStore(
      dir,
      'big',
      Array.from({ length: EVENTS }, (_, i) => ({ ts: T0 + BigInt(i) * 1000n, txn: i % 2 ? 'tx' : null })),
    );
  });
  afterEach(async () => {
    for (const daemon of daemons.splice(0)) await daemon.close();
  });
  afterAll(() => rmSync(dir, { recursive: true, force: true }));

  it('keeps the main thread free while a long query runs', async () => {
    const url = await start({ queryWorkers: 1 });
    await timed(`${url}${HEAVY}`); // warm
    let heavyDone = false;
    const heavy = timed(`${url}${HEAVY}`).then((r) => {
      heavyDone = true;
      return r;
    });
    // liveness and the metrics are answered on the main thread meanwhile
    let answeredDuring = 0;
    while (!heavyDone) {
      const health = await fetch(`${url}/healthz`);
      expect(health.status).toBe(200);
      if (!heavyDone) answeredDuring++;
    }
    expect((await heavy).status).toBe(200);
    expect(answeredDuring).toBeGreaterThan(1);
  });

  it('answers 503 query-timeout past --query-timeout, and the pool serves the next query', async () => {
    const relaxed = await start({ queryWorkers: 1 });
    await timed(`${relaxed}${HEAVY}`);
    // one at a time, the fastest of several: on one worker, requests sent together would wait for each other
    const fastest = async (path: string, times: number) => {
      let best = Infinity;
      for (let i = 0; i < times; i++) best = Math.min(best, (await timed(`${relaxed}${path}`)).ms);
      return best;
    };
    const heavyMs = await fastest(HEAVY, 3);
    const light = await fastest(LIGHT, 7);
    // the deadline lies between the two, by a wide margin on each side
    expect(light * 5).toBeLessThan(heavyMs);
    const url = await start({ queryWorkers: 1, queryTimeoutMs: Math.sqrt(heavyMs * light) });
    const late = await timed(`${url}${HEAVY}`);
    expect(late.status).toBe(503);
    expect(late.headers.get('retry-after')).toBe('1');
    expect(late.body).toMatchObject({
      code: 'E_QUERY_TIMEOUT',
      detail: expect.stringContaining('--query-timeout'),
    });
    // the replaced worker comes up and answers
    const daemon = daemons.at(-1)!;
    let after = await timed(`${url}${LIGHT}`);
    for (let i = 0; i < 20 && after.status !== 200; i++) after = await timed(`${url}${LIGHT}`);
    expect(after.status).toBe(200);
    expect((after.body.events as unknown[]).length).toBe(1);
    const metrics = await (await fetch(`${url}/metrics`)).text();
    expect(metrics).toMatch(/^kreplay_query_workers_busy 0$/m);
    expect(daemon.url).toBe(url);
  });

  it('counts the wait for a worker apart from the run: a query queued behind another waits while it runs', async () => {
    const url = await start({ queryWorkers: 1 });
    const scrape = async () => (await fetch(`${url}/metrics`)).text();
    const replies = Promise.all(Array.from({ length: 4 }, () => timed(`${url}${HEAVY}`)));
    // one of them seen waiting: its wait is one at least of the others' runs
    await waitFor(async () => /^kreplay_query_queue_depth [1-9]/m.test(await scrape()), { everyMs: 1 });
    expect((await replies).map((r) => r.status)).toEqual([200, 200, 200, 200]);
    const metrics = await scrape();
    const value = (name: string) =>
      Number(new RegExp(`^${name}\\{op="list"\\} (\\S+)$`, 'm').exec(metrics)?.[1]);
    expect(value('kreplay_query_wait_seconds_count')).toBe(4);
    expect(value('kreplay_query_run_seconds_count')).toBe(4);
    // one worker: the waits end as runs end, so together they are more than nothing and less than the runs
    const waited = value('kreplay_query_wait_seconds_sum');
    expect(waited).toBeGreaterThan(0);
    expect(waited).toBeLessThan(value('kreplay_query_run_seconds_sum') * 3);
  });

  it('refuses with 503 too-busy past --max-queued-queries, and serves the rest', async () => {
    const url = await start({ queryWorkers: 1, maxQueuedQueries: 1 });
    const replies = await Promise.all(Array.from({ length: 5 }, () => timed(`${url}${HEAVY}`)));
    const statuses = replies.map((r) => r.status).sort();
    expect(statuses.filter((s) => s === 200).length).toBeGreaterThanOrEqual(2);
    const busy = replies.filter((r) => r.status === 503);
    expect(busy.length).toBeGreaterThanOrEqual(1);
    for (const reply of busy) {
      expect(reply.body).toMatchObject({ code: 'E_TOO_BUSY' });
      expect(reply.headers.get('retry-after')).toBe('1');
    }
  });
});
