/**
 * Schema v2 of the fleet store (core/clickhouse/schema.ts): a database
 * shipped to at v1 is rebuilt with fine granules, every event and lookup row
 * kept exactly once as readers see them, also when the migration was cut
 * short after its rename; agents ship on afterwards.
 */
import { join } from 'node:path';
import { StoreWriter } from '../../agent/store/store-writer';
import { ShipBatchReader } from '../../agent/ship/ship-batch';
import type { ClickHouseHttp } from '../../core/clickhouse/http-client';
import { quoteString } from '../../core/clickhouse/quote';
import {
  CLICKHOUSE_MIGRATIONS,
  CLICKHOUSE_EVENT_COLUMNS,
  CLICKHOUSE_SCHEMA_VERSION,
  EVENTS_GRANULARITY,
  LOOKUP_GRANULARITY,
  migrateClickHouse,
} from '../../core/clickhouse/schema';
import { clickhouseAvailable, shipDataDir, useClickHouse } from '../support/clickhouse-server';
import { writeEvents, type TestEvent } from '../support/event-store';
import { useTempDir } from '../support/temp-dir';
import Database from 'better-sqlite3';
import { readStoreInfo } from '../../core/store/schema';

const describeCh = clickhouseAvailable ? describe : describe.skip;
if (!clickhouseAvailable)
  console.warn('SKIPPED: clickhouse-server is not installed (make setup installs it)');

const BASE = 1_763_856_000_000_000_000n;

function events(from: number, count: number): TestEvent[] {
  return Array.from({ length: count }, (_, i) => ({
    // two days: two partitions
    ts: BASE + BigInt(from + i) * 20_000_000_000n,
    txn: `tx-${(from + i) % 40}`,
    trace: (from + i) % 3 === 0 ? `tr-${(from + i) % 9}` : null,
  }));
}

/** A database at schema v1, holding the node file's events as a v1 agent shipped them. */
async function v1Database(ch: ClickHouseHttp, path: string): Promise<void> {
  await ch.exec(`CREATE DATABASE IF NOT EXISTS ${ch.endpoint.database}`, undefined, null);
  await ch.exec('CREATE TABLE kreplay_migrations (version UInt32) ENGINE = TinyLog');
  for (const statement of CLICKHOUSE_MIGRATIONS[0] as string[]) await ch.exec(statement);
  await ch.exec('INSERT INTO kreplay_migrations (version) VALUES (1)');
  const db = new Database(path, { readonly: true });
  // the columns a v1 agent filled (v3 added response_ns)
  const reader = new ShipBatchReader(
    db,
    readStoreInfo(db),
    CLICKHOUSE_EVENT_COLUMNS.filter((c) => c.since === 1),
  );
  for (let seq = 1; ;) {
    const batch = reader.read(seq, 3000);
    if (batch.count === 0) break;
    await ch.exec(reader.insert('events'), batch.rows);
    seq = batch.nextSeq;
  }
  db.close();
}

async function counts(ch: ClickHouseHttp): Promise<Record<string, string>> {
  const [row] = await ch.rows<Record<string, string>>(
    `SELECT (SELECT count() FROM events FINAL) AS events, (SELECT uniqExact(event_id) FROM events) AS ids,
       (SELECT count() FROM events_by_transaction FINAL) AS txn_rows,
       (SELECT count() FROM events_by_trace FINAL) AS trace_rows,
       (SELECT count() FROM events_by_transaction FINAL WHERE transaction_id = ${quoteString('tx-7')}) AS tx7`,
  );
  return row!;
}

async function createQuery(ch: ClickHouseHttp, table: string): Promise<string> {
  return (await ch.exec(`SHOW CREATE TABLE ${table} FORMAT TSVRaw`)).trim();
}

describeCh('fleet store schema v2', () => {
  jest.setTimeout(90_000);
  const dir = useTempDir();
  const clickhouse = useClickHouse();

  it.each([
    ['whole', false],
    ['after a migration cut short past its rename', true],
  ])('rebuilds a v1 database with fine granules, keeping every event once (%s)', async (name, cut) => {
    const node = `node-${cut ? 'cut' : 'whole'}`;
    const writer = StoreWriter.open(dir.path, node);
    writeEvents(writer, events(0, 6000));
    writer.close();
    const ch = clickhouse.server.client(`mig_${cut ? 'cut' : 'whole'}`);
    await v1Database(ch, join(dir.path, `${node}.db`));
    const before = await counts(ch);
    // v1's views gave every event a row in both lookup tables, under '' when it had no such key
    expect(before).toEqual({ events: '6000', ids: '6000', txn_rows: '6000', trace_rows: '6000', tx7: '150' });
    if (cut) {
      // the first steps ran, then the process died: views dropped, the old tables renamed
      await ch.exec('DROP TABLE events_by_transaction_feed');
      await ch.exec('DROP TABLE events_by_trace_feed');
      await ch.exec(
        'RENAME TABLE events TO events_old, events_by_transaction TO events_by_transaction_old, events_by_trace TO events_by_trace_old',
      );
    }

    expect(await migrateClickHouse(ch)).toBe(CLICKHOUSE_SCHEMA_VERSION);
    expect(await counts(ch)).toEqual({ ...before, trace_rows: '2000' });
    expect(await createQuery(ch, 'events')).toContain(`index_granularity = ${EVENTS_GRANULARITY}`);
    for (const table of ['events_by_transaction', 'events_by_trace'])
      expect(await createQuery(ch, table)).toContain(`index_granularity = ${LOOKUP_GRANULARITY}`);
    const tables = await ch.rows<{ name: string }>(
      'SELECT name FROM system.tables WHERE database = currentDatabase() ORDER BY name',
    );
    expect(tables.map((t) => t.name)).toEqual([
      'events',
      'events_by_trace',
      'events_by_trace_feed',
      'events_by_transaction',
      'events_by_transaction_feed',
      'kreplay_migrations',
    ]);

    // the agent ships on: its new events reach the new tables and their lookups, the old ones stay once
    const again = StoreWriter.open(dir.path, node);
    writeEvents(again, events(6000, 1000));
    again.close();
    await shipDataDir(dir.path, ch);
    expect(await counts(ch)).toEqual({
      events: '7000',
      ids: '7000',
      txn_rows: '7000',
      trace_rows: String(Math.ceil(7000 / 3)),
      tx7: '175',
    });
  });
});
