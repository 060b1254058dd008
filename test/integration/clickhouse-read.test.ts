/**
 * The events API's reads from ClickHouse against the same reads from the
 * node files: three nodes' stores shipped to a real clickhouse-server, then
 * every filter paged through both readers in both orders with small pages,
 * comparing events, order and cursor positions page by page.
 */
import { join } from 'node:path';
import Database from 'better-sqlite3';
import { Shipper } from '../../agent/ship/shipper';
import { StoreWriter } from '../../agent/store/store-writer';
import { eventToJson } from '../../core/model';
import { createLogger } from '../../core/log/logger';
import { ClickHouseEvents } from '../../daemon/store/clickhouse-events';
import type { EventFilter, EventOrder, EventPosition } from '../../daemon/store/event-filter';
import { NodeStores } from '../../daemon/store/node-stores';
import { clickhouseAvailable, shipDataDir, useClickHouse } from '../support/clickhouse-server';
import { waitFor } from '../support/wait';
import { writeEvents, type TestEvent } from '../support/event-store';
import { useTempDir } from '../support/temp-dir';

const describeCh = clickhouseAvailable ? describe : describe.skip;
if (!clickhouseAvailable)
  console.warn('SKIPPED: clickhouse-server is not installed (make setup installs it)');

const BASE = 1_763_856_000_000_000_000n;

/** Events of one node; equal timestamps across nodes so order ties are broken by event_id. */
function nodeEvents(node: number): TestEvent[] {
  return Array.from({ length: 120 }, (_, i) => ({
    ts: BASE + BigInt(Math.floor(i / 2)) * 1000n,
    type: i % 5 === 0 ? ('block_io' as const) : ('sys_write' as const),
    dur: (i % 7) * 40_000,
    txn: i % 3 === 0 ? `tx-${i % 4}` : null,
    trace: i % 4 === 0 ? `tr-${(i + node) % 3}` : null,
    service: `svc-${(i + node) % 3}`,
    target: i % 2 ? (['file', `/var/log/app-${i % 3}.log`] as const) : undefined,
  })) as TestEvent[];
}

const FILTERS: EventFilter[] = [
  {},
  { transactionId: 'tx-1' },
  { transactionId: 'tx-2', service: 'svc-1' },
  { traceId: 'tr-0' },
  { service: 'svc-2', types: ['block_io'] },
  { node: 'n1', fromNs: BASE + 10_000n, toNs: BASE + 40_000n },
  { minDurationNs: 120_000n },
  { target: { value: '/var/log/app-1', prefix: true } },
  { target: { value: '/var/log/app-2.log', prefix: false }, targetKinds: ['file'] },
  { transactionId: 'no-such' },
  { service: "it's\\ \0 odd" },
];

describeCh('events read from ClickHouse match the node files', () => {
  jest.setTimeout(90_000);
  const dir = useTempDir();
  const clickhouse = useClickHouse();

  it('returns the same pages, order, cursors, summaries and single events', async () => {
    const ch = clickhouse.server.client('reads');
    for (const node of [0, 1, 2]) {
      const writer = StoreWriter.open(dir.path, `n${node}`);
      writeEvents(writer, nodeEvents(node));
      writer.close();
    }
    await shipDataDir(dir.path, ch);
    const sqlite = new NodeStores(dir.path, createLogger({ component: 'test', level: 'error' }));
    const fleet = new ClickHouseEvents(ch);
    try {
      for (const filter of FILTERS)
        for (const order of ['asc', 'desc'] as EventOrder[]) {
          let after: EventPosition | undefined;
          let pages = 0;
          for (;;) {
            const want = sqlite.page(filter, { limit: 7, order, after });
            const got = await fleet.page(filter, { limit: 7, order, after });
            expect(got.events.map((e) => eventToJson(e))).toEqual(want.events.map((e) => eventToJson(e)));
            expect(got.next).toEqual(want.next);
            pages++;
            if (!want.next) break;
            after = want.next;
          }
          expect(pages).toBeGreaterThan(0);
          expect(await fleet.summarize(filter)).toEqual(sqlite.summarize(filter));
        }
      const all = sqlite.page({}, { limit: 1000, order: 'asc' }).events;
      expect(all).toHaveLength(360);
      for (const event of [all[0]!, all[177]!, all[359]!])
        expect(eventToJson((await fleet.get(event.event_id))!)).toBe(eventToJson(event));
      expect(await fleet.get('0'.repeat(40))).toBeNull();
      expect(await fleet.nodes()).toEqual(sqlite.nodes());
    } finally {
      sqlite.close();
    }
  });

  it('counts a key exactly while copies of re-sent batches sit unmerged in parts of their own', async () => {
    const ch = clickhouse.server.client('copies');
    for (const node of [0, 1, 2]) {
      const writer = StoreWriter.open(dir.path, `c${node}`);
      writeEvents(writer, nodeEvents(node));
      writer.close();
    }
    await shipDataDir(dir.path, ch);
    await ch.exec('SYSTEM STOP MERGES');
    try {
      // c1 sent again in two batch sizes, and c2's first batch again: copies overlapping some parts' time ranges only
      for (const [node, batchRows, until] of [
        ['c1', 50, 120],
        ['c1', 33, 120],
        ['c2', 40, 40],
      ] as const) {
        const path = join(dir.path, `${node}.db`);
        const db = new Database(path);
        db.prepare('DELETE FROM ship_cursors').run();
        db.close();
        const again = new Shipper(path, ch, { maxDelayMs: 0, batchRows });
        again.start();
        await waitFor(() => again.status().shipped >= until, { what: 're-shipped', timeoutMs: 60_000 });
        await again.stop();
      }
      const [raw] = await ch.rows<{ n: string; ids: string }>(
        "SELECT count() AS n, uniqExact(timestamp_ns, store_id, seq) AS ids FROM events_by_transaction WHERE transaction_id = 'tx-0'",
      );
      expect(Number(raw!.n)).toBeGreaterThan(Number(raw!.ids)); // the copies are there, unmerged
      const sqlite = new NodeStores(dir.path, createLogger({ component: 'test', level: 'error' }));
      const fleet = new ClickHouseEvents(ch);
      try {
        const filters: EventFilter[] = ['tx-0', 'tx-1', 'tx-2', 'tx-3', 'no-such'].flatMap((t) => [
          { transactionId: t },
          { transactionId: t, fromNs: BASE + 10_000n, toNs: BASE + 45_000n },
          { transactionId: t, fromNs: BASE, toNs: BASE + 15_000n },
        ]);
        filters.push({ traceId: 'tr-1' }, { traceId: 'tr-2', fromNs: BASE + 20_000n, toNs: BASE + 50_000n });
        for (const filter of filters) expect(await fleet.summarize(filter)).toEqual(sqlite.summarize(filter));
      } finally {
        sqlite.close();
      }
    } finally {
      await ch.exec('SYSTEM START MERGES');
    }
  });
});
