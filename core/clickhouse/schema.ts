/**
 * The fleet store in ClickHouse: one events table of every node's events,
 * dictionaries resolved to strings, exact nanoseconds as UInt64, partitioned
 * by day and ordered by (timestamp_ns, store_id, seq) for time ranges; plus one lookup
 * table per context key, fed by a materialized view, ordered by that key so a
 * transaction or trace is found without scanning the events.
 *
 * Exactly once as a reader sees it: 18.16 deduplicates retried inserts only
 * on replicated tables, so every table is a ReplacingMergeTree whose sorting
 * key holds the event's identity (store_id, timestamp_ns, seq), and every read
 * is correct before background merges have collapsed a retried batch: counts
 * use FINAL, pages keep one row per event_id (daemon/store/clickhouse-events.ts).
 * A row's partition follows from its timestamp, so its copies always share one.
 *
 * A cluster (clickhouse://…?cluster=NAME, a `remote_servers` entry): every
 * server holds the tables above for its shard, and events_on_<NAME>, a
 * Distributed table over them, takes the inserts and serves the reads. Its
 * sharding key is the node store (cityHash64(store_id)): a re-sent batch
 * reaches the shard that holds the first copy, so FINAL and merges still
 * collapse it (they work within one shard only); an agent's batch goes whole to one
 * shard; and an event's lookup rows, written by the materialized views of the
 * shard that took it, sit beside it, so a lookup subquery runs on each shard
 * alone. A transaction spanning nodes spans shards; the Distributed table's
 * ORDER BY merges their answers. That table depends on the deployment's
 * cluster name, not on the schema version, so it is created (if missing)
 * outside the versioned migrations.
 *
 * Migrations are versioned like the node store's (MIGRATIONS[v] takes the
 * database from v to v + 1); the applied versions live in kreplay_migrations.
 */
import { ClickHouseError, type ClickHouseEndpoint, type ClickHouseHttp } from './http-client';
import { quoteInt } from './quote';

export const CLICKHOUSE_SCHEMA_VERSION = 1;

export interface ClickHouseColumn {
  name: string;
  /** its ClickHouse type, as DDL and the RowBinary encoder (agent/ship/ship-sql.ts) read it */
  type: string;
  /** the schema version that added it */
  since: number;
}

/**
 * The events table's columns, in table order: the API's event fields
 * (core/model/event.ts) plus the row's identity in its node store. The one
 * list the DDL and the shipper's RowBinary INSERT are made from: a column a
 * later migration adds goes here with its `since` (and an ALTER in that migration).
 */
export const CLICKHOUSE_EVENT_COLUMNS: readonly ClickHouseColumn[] = [
  { name: 'event_id', type: 'String', since: 1 },
  { name: 'store_id', type: 'String', since: 1 },
  { name: 'timestamp_ns', type: 'UInt64', since: 1 },
  { name: 'seq', type: 'UInt64', since: 1 },
  { name: 'event_type', type: 'String', since: 1 },
  { name: 'duration_ns', type: 'UInt64', since: 1 },
  { name: 'service_name', type: 'String', since: 1 },
  { name: 'transaction_id', type: 'Nullable(String)', since: 1 },
  { name: 'trace_id', type: 'Nullable(String)', since: 1 },
  { name: 'node', type: 'String', since: 1 },
  { name: 'pid', type: 'UInt32', since: 1 },
  { name: 'tid', type: 'UInt32', since: 1 },
  { name: 'comm', type: 'String', since: 1 },
  { name: 'bytes', type: 'UInt64', since: 1 },
  { name: 'syscall', type: 'Nullable(String)', since: 1 },
  { name: 'fd', type: 'Nullable(Int64)', since: 1 },
  { name: 'ret', type: 'Nullable(Int64)', since: 1 },
  { name: 'target_kind', type: 'Nullable(String)', since: 1 },
  { name: 'target', type: 'Nullable(String)', since: 1 },
  { name: 'device', type: 'Nullable(String)', since: 1 },
  { name: 'sector', type: 'Nullable(UInt64)', since: 1 },
  { name: 'op', type: 'Nullable(String)', since: 1 },
  { name: 'error', type: 'Nullable(Int64)', since: 1 },
];

const columnsDdl = (upTo: number) =>
  CLICKHOUSE_EVENT_COLUMNS.filter((c) => c.since <= upTo)
    .map((c) => `${c.name} ${c.type}`)
    .join(',\n  ');

/** The context keys with a lookup table: events_by_<key>. */
export const LOOKUP_KEYS = ['transaction_id', 'trace_id'] as const;
export type LookupKey = (typeof LOOKUP_KEYS)[number];

export function lookupTable(key: LookupKey): string {
  return key === 'transaction_id' ? 'events_by_transaction' : 'events_by_trace';
}

function lookupDdl(key: LookupKey): string[] {
  const table = lookupTable(key);
  return [
    `CREATE TABLE IF NOT EXISTS ${table} (${key} String, timestamp_ns UInt64, store_id String, seq UInt64)
     ENGINE = ReplacingMergeTree() ORDER BY (${key}, timestamp_ns, store_id, seq)`,
    `CREATE MATERIALIZED VIEW IF NOT EXISTS ${table}_feed TO ${table} AS
     SELECT assumeNotNull(${key}) AS ${key}, timestamp_ns, store_id, seq FROM events WHERE ${key} IS NOT NULL`,
  ];
}

/** Where events are inserted and read: the local table, or the cluster's Distributed table. */
export function eventsTable(endpoint: ClickHouseEndpoint): string {
  return endpoint.cluster ? `events_on_${endpoint.cluster}` : 'events';
}

/** MIGRATIONS[v]: the statements taking a database from version v to v + 1. */
export const CLICKHOUSE_MIGRATIONS: readonly (readonly string[])[] = [
  [
    `CREATE TABLE IF NOT EXISTS events (${columnsDdl(1)}
     ) ENGINE = ReplacingMergeTree()
     PARTITION BY toDate(toDateTime(intDiv(timestamp_ns, 1000000000)), 'UTC')
     ORDER BY (timestamp_ns, store_id, seq)`,
    ...LOOKUP_KEYS.flatMap(lookupDdl),
  ],
];

/** Creates the database if needed and applies the migrations it lacks; returns its version. */
export async function migrateClickHouse(ch: ClickHouseHttp): Promise<number> {
  await ch.exec(`CREATE DATABASE IF NOT EXISTS ${ch.endpoint.database}`, undefined, null);
  await ch.exec('CREATE TABLE IF NOT EXISTS kreplay_migrations (version UInt32) ENGINE = TinyLog');
  const [row] = await ch.rows<{ v: number }>('SELECT toUInt32(max(version)) AS v FROM kreplay_migrations');
  const from = row ? Number(row.v) : 0;
  if (from > CLICKHOUSE_SCHEMA_VERSION)
    throw new ClickHouseError(
      'E_CLICKHOUSE_SCHEMA',
      `ClickHouse database ${ch.endpoint.database} has schema version ${from}, newer than this kreplay understands (${CLICKHOUSE_SCHEMA_VERSION})`,
    );
  for (let v = from; v < CLICKHOUSE_SCHEMA_VERSION; v++) {
    for (const statement of CLICKHOUSE_MIGRATIONS[v]!) await ch.exec(statement);
    await ch.exec(`INSERT INTO kreplay_migrations (version) VALUES (${quoteInt(v + 1)})`);
  }
  const { cluster, database } = ch.endpoint;
  if (cluster)
    await ch.exec(
      `CREATE TABLE IF NOT EXISTS ${eventsTable(ch.endpoint)} AS events
       ENGINE = Distributed(${cluster}, ${database}, events, cityHash64(store_id))`,
    );
  return CLICKHOUSE_SCHEMA_VERSION;
}
