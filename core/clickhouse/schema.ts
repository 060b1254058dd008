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
 * v2 rebuilt the tables with finer granules for lookups (regranulate below);
 * v3 added sys_read's response_ns; v4 each event's container (its JSON, and the fields a query
 * filters by as columns of their own).
 */
import { ClickHouseError, type ClickHouseEndpoint, type ClickHouseHttp } from './http-client';
import { quoteInt } from './quote';

export const CLICKHOUSE_SCHEMA_VERSION = 4;

/** The schema version that added response_ns (issue 24: sys_read, sys_fsync, sys_connect). */
const RESPONSE_SCHEMA_VERSION = 3;

/** The schema version that added the containers' columns (issue 45). */
const CONTAINER_SCHEMA_VERSION = 4;

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
  { name: 'response_ns', type: 'Nullable(UInt64)', since: RESPONSE_SCHEMA_VERSION },
  /** the API's container object as JSON (core/model/container.ts); NULL for a host process */
  { name: 'container', type: 'Nullable(String)', since: CONTAINER_SCHEMA_VERSION },
  { name: 'container_id', type: 'Nullable(String)', since: CONTAINER_SCHEMA_VERSION },
  { name: 'container_name', type: 'Nullable(String)', since: CONTAINER_SCHEMA_VERSION },
  { name: 'container_image', type: 'Nullable(String)', since: CONTAINER_SCHEMA_VERSION },
  { name: 'k8s_pod_name', type: 'Nullable(String)', since: CONTAINER_SCHEMA_VERSION },
  { name: 'k8s_namespace_name', type: 'Nullable(String)', since: CONTAINER_SCHEMA_VERSION },
];

const columnsAt = (version: number) => CLICKHOUSE_EVENT_COLUMNS.filter((c) => c.since <= version);
const columnsDdl = (version: number) =>
  columnsAt(version)
    .map((c) => `${c.name} ${c.type}`)
    .join(',\n  ');

/** The context keys with a lookup table: events_by_<key>. */
export const LOOKUP_KEYS = ['transaction_id', 'trace_id'] as const;
export type LookupKey = (typeof LOOKUP_KEYS)[number];

export function lookupTable(key: LookupKey): string {
  return key === 'transaction_id' ? 'events_by_transaction' : 'events_by_trace';
}

/**
 * Rows per granule, the unit ClickHouse reads (default 8,192): a lookup reads
 * the granules of its key in the lookup table, then those holding its events
 * in the events table, so both are finer than the default (schema v2).
 */
export const EVENTS_GRANULARITY = 1024;
export const LOOKUP_GRANULARITY = 256;

const granularity = (rows: number | null) => (rows ? ` SETTINGS index_granularity = ${rows}` : '');

function eventsDdl(table: string, version: number, rows: number | null): string {
  return `CREATE TABLE IF NOT EXISTS ${table} (${columnsDdl(version)}
     ) ENGINE = ReplacingMergeTree()
     PARTITION BY toDate(toDateTime(intDiv(timestamp_ns, 1000000000)), 'UTC')
     ORDER BY (timestamp_ns, store_id, seq)${granularity(rows)}`;
}

/**
 * v1's view kept `WHERE k IS NOT NULL`, but 18.16 lets `assumeNotNull(k) AS k` stand for k there
 * too, so it always held and every event without the key got a row under ''. Since v2 the view
 * filters on notEmpty (through the alias, NULL becomes ''): context values are never empty
 * (CONTEXT_VALUE, agent/attribution/context-parser.ts).
 */
function lookupDdl(key: LookupKey, version: number, rows: number | null): string[] {
  const table = lookupTable(key);
  return [
    `CREATE TABLE IF NOT EXISTS ${table} (${key} String, timestamp_ns UInt64, store_id String, seq UInt64)
     ENGINE = ReplacingMergeTree() ORDER BY (${key}, timestamp_ns, store_id, seq)${granularity(rows)}`,
    `CREATE MATERIALIZED VIEW IF NOT EXISTS ${table}_feed TO ${table} AS
     SELECT assumeNotNull(${key}) AS ${key}, timestamp_ns, store_id, seq FROM events
     WHERE ${version < 2 ? `${key} IS NOT NULL` : `notEmpty(${key})`}`,
  ];
}

/** Where events are inserted and read: the local table, or the cluster's Distributed table. */
export function eventsTable(endpoint: ClickHouseEndpoint): string {
  return endpoint.cluster ? `events_on_${endpoint.cluster}` : 'events';
}

/** A migration: statements, or steps that must look at the database first. */
type Migration = readonly string[] | ((ch: ClickHouseHttp, version: number) => Promise<void>);

/** Events copied per statement while rebuilding: one statement well within fetch's 300 s wait for headers. */
const COPY_CHUNK_ROWS = 2_000_000n;
const COPY_TIMEOUT_MS = 240_000;

/**
 * Rebuilds the tables with the finer granularity (a table's granularity is
 * fixed when it is created) and the lookup views with their filter mended: the old ones are renamed to *_old, new ones made
 * beside the lookup views, and the events copied a time slice at a time (the
 * views fill the new lookup tables), then the old tables dropped. Inserts that
 * arrive meanwhile fail until the new table exists and are retried by their
 * agents (their cursors wait). Every step can run again after a crash: the
 * rename happens once, and a slice copied twice collapses like a re-sent
 * batch. A slice is read with FINAL so that no new part holds two copies of
 * an event (an insert does not collapse its own rows; the lookup counts rely
 * on it, daemon/store/clickhouse-events.ts).
 */
async function regranulate(ch: ClickHouseHttp, version: number): Promise<void> {
  const tables = ['events', ...LOOKUP_KEYS.map(lookupTable)];
  for (const key of LOOKUP_KEYS) await ch.exec(`DROP TABLE IF EXISTS ${lookupTable(key)}_feed`);
  const present = new Set(
    (
      await ch.rows<{ name: string }>('SELECT name FROM system.tables WHERE database = currentDatabase()')
    ).map((t) => t.name),
  );
  if (!present.has('events_old'))
    await ch.exec(`RENAME TABLE ${tables.map((t) => `${t} TO ${t}_old`).join(', ')}`);
  await ch.exec(eventsDdl('events', version, EVENTS_GRANULARITY));
  for (const statement of LOOKUP_KEYS.flatMap((key) => lookupDdl(key, version, LOOKUP_GRANULARITY)))
    await ch.exec(statement);
  const columns = columnsAt(version)
    .map((c) => c.name)
    .join(', ');
  const [range] = await ch.rows<{ n: string; first: string; last: string }>(
    'SELECT count() AS n, min(timestamp_ns) AS first, max(timestamp_ns) AS last FROM events_old',
  );
  const rows = BigInt(range!.n);
  if (rows > 0n) {
    // equal time slices, each read by the sorting key
    const chunks = (rows + COPY_CHUNK_ROWS - 1n) / COPY_CHUNK_ROWS;
    const first = BigInt(range!.first);
    const step = (BigInt(range!.last) - first) / chunks + 1n;
    for (let from = first; from <= BigInt(range!.last); from += step)
      await ch.exec(
        `INSERT INTO events (${columns}) SELECT ${columns} FROM events_old FINAL
         WHERE timestamp_ns >= ${quoteInt(from)} AND timestamp_ns < ${quoteInt(from + step)}`,
        undefined,
        undefined,
        COPY_TIMEOUT_MS,
      );
  }
  for (const table of tables) await ch.exec(`DROP TABLE IF EXISTS ${table}_old`);
}

/**
 * Adds the columns of schema `version` to the events table, and to a
 * cluster's Distributed table over it when that exists (it was made AS
 * events). Each column only when missing, so a crash between ALTERs is
 * mended by running again (18.16 has no ADD COLUMN IF NOT EXISTS).
 */
async function addColumns(ch: ClickHouseHttp, version: number): Promise<void> {
  const tables = ['events', ...(ch.endpoint.cluster ? [eventsTable(ch.endpoint)] : [])];
  const present = await ch.rows<{ table: string; name: string }>(
    `SELECT table, name FROM system.columns WHERE database = currentDatabase()`,
  );
  const has = new Set(present.map((c) => `${c.table}.${c.name}`));
  const tableNames = new Set(present.map((c) => c.table));
  for (const table of tables.filter((t) => tableNames.has(t)))
    for (const c of CLICKHOUSE_EVENT_COLUMNS.filter(
      (c) => c.since === version && !has.has(`${table}.${c.name}`),
    ))
      await ch.exec(`ALTER TABLE ${table} ADD COLUMN ${c.name} ${c.type}`);
}

/** MIGRATIONS[v] takes a database from version v to v + 1. */
export const CLICKHOUSE_MIGRATIONS: readonly Migration[] = [
  [eventsDdl('events', 1, null), ...LOOKUP_KEYS.flatMap((key) => lookupDdl(key, 1, null))],
  regranulate,
  addColumns,
  addColumns,
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
    const migration = CLICKHOUSE_MIGRATIONS[v]!;
    if (typeof migration === 'function') await migration(ch, v + 1);
    else for (const statement of migration) await ch.exec(statement);
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
