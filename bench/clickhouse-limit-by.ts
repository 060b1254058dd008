/**
 * Why the ClickHouse pages do not deduplicate with `LIMIT 1 BY event_id`
 * (daemon/store/clickhouse-events.ts): on a cluster of two shards with merges
 * stopped, every row of eight node stores inserted three times (three parts
 * per shard), a page of LIMIT n asked four ways: LIMIT BY through the
 * Distributed table, LIMIT BY on one shard's local table, FINAL, and the
 * daemon's reader (plain ORDER BY … LIMIT, one row per event_id, reading on).
 * Every answer should hold min(n, events) distinct events; a shard that cuts
 * its rows to the LIMIT before its LIMIT BY returns fewer.
 *
 *   node dist/bench/clickhouse-limit-by.js
 */
import { quoteInt, quoteString } from '../core/clickhouse/quote';
import { eventsTable } from '../core/clickhouse/schema';
import { ClickHouseEvents } from '../daemon/store/clickhouse-events';
import { TestCluster } from './clickhouse-servers';
import { printTable } from './table';

const STORES = ['sa', 'sb', 'sc', 'sd', 'se', 'sf', 'sg', 'sh'];
const PER_STORE = 30;
const COPIES = 3;
const TXN = 'tx';

function rowsJson(): string {
  const rows = STORES.flatMap((store, k) =>
    Array.from({ length: PER_STORE }, (_, i) => {
      const ts = 1000 + i * 10 + k;
      return {
        event_id: `${store}${String(ts).padStart(8, '0')}`,
        store_id: store,
        timestamp_ns: ts,
        seq: i + 1,
        event_type: 'sys_write',
        duration_ns: 1,
        service_name: 'svc',
        transaction_id: TXN,
        trace_id: null,
        node: store,
        pid: 1,
        tid: 1,
        comm: 'c',
        bytes: 1,
        syscall: 'write',
        fd: 3,
        ret: 1,
      };
    }),
  );
  return rows.map((r) => JSON.stringify(r)).join('\n');
}

async function main(): Promise<void> {
  const cluster = await TestCluster.create();
  try {
    const database = 'limit_by';
    await cluster.migrate(database);
    const shards = cluster.shards.map((_, i) => cluster.client(database, i));
    for (const shard of shards) await shard.exec('SYSTEM STOP MERGES');
    const ch = cluster.client(database, 0);
    const table = eventsTable(ch.endpoint);
    const body = rowsJson();
    for (let c = 0; c < COPIES; c++) await ch.exec(`INSERT INTO ${table} FORMAT JSONEachRow`, body);
    const [version] = await ch.rows<{ v: string }>('SELECT version() AS v');
    const layout = await Promise.all(
      shards.map(async (s) => {
        const [r] = await s.rows<{ parts: string; n: string; ids: string }>(
          `SELECT (SELECT count() FROM system.parts WHERE active AND database = ${quoteString(database)} AND table = 'events') AS parts, count() AS n, uniqExact(event_id) AS ids FROM events`,
        );
        return `${r!.parts} parts, ${r!.n} rows, ${r!.ids} events`;
      }),
    );
    console.log(`ClickHouse ${version!.v}; shards: ${layout.join(' / ')}`);
    const where = `WHERE transaction_id = ${quoteString(TXN)} ORDER BY timestamp_ns, event_id`;
    const count = async (sql: string, on = ch) => (await on.rows(sql)).length;
    const [local] = await shards[0]!.rows<{ ids: string }>('SELECT uniqExact(event_id) AS ids FROM events');
    const reader = new ClickHouseEvents(ch);
    const rows: (string | number)[][] = [];
    for (const limit of [1, 5, 10, 31, 100]) {
      const n = quoteInt(limit);
      rows.push([
        limit,
        Math.min(limit, STORES.length * PER_STORE),
        await count(`SELECT event_id FROM ${table} ${where} LIMIT 1 BY event_id LIMIT ${n}`),
        `${await count(`SELECT event_id FROM events ${where} LIMIT 1 BY event_id LIMIT ${n}`, shards[0])} of ${Math.min(limit, Number(local!.ids))}`,
        await count(`SELECT event_id FROM ${table} FINAL ${where} LIMIT ${n}`),
        (await reader.page({ transactionId: TXN }, { limit, order: 'asc' })).events.length,
      ]);
    }
    printTable(
      `a page of LIMIT n with ${COPIES} unmerged copies of every row on both shards: distinct events returned`,
      rows,
      [
        'LIMIT',
        'expected',
        'LIMIT 1 BY via Distributed',
        "LIMIT 1 BY on shard 1's table",
        'FINAL via Distributed',
        "the daemon's reader",
      ],
    );
  } finally {
    await cluster.destroy();
  }
}

main().catch((err: unknown) => {
  console.error(err);
  process.exit(1);
});
