/**
 * The node store: one SQLite file per node. This file owns its DDL and its
 * migrations; the agent writes through it and the daemon reads through it.
 *
 * Ingest speed drives the shape: events is clustered by time (WITHOUT ROWID,
 * primary key (ts, seq)), so the table itself serves time ranges and paging;
 * strings live once in dictionary tables; the context and slow-call indexes
 * are partial because most events carry no context and most calls are fast.
 */
import { KreplayError } from '../errors';
import {
  CONTAINERS_SCHEMA_VERSION,
  eventColumnsAddedIn,
  eventColumnsDdl,
  REQUEST_KEY_SCHEMA_VERSION,
  SYSCALL_TYPES_SCHEMA_VERSION,
  TARGETS_SCHEMA_VERSION,
} from './event-columns';
import { contextKey } from './context-key';
import Database from 'better-sqlite3';
import { randomBytes } from 'node:crypto';
import { existsSync } from 'node:fs';

export const SCHEMA_VERSION = 12;

/** Stores from this version on index contexts' ids by generation (CONTEXT_GENERATION_BITS). */
export const CONTEXT_GENERATIONS_SCHEMA_VERSION = 10;

/**
 * Stores from this version on index contexts' ids by their keys (core/store/context-key.ts) within
 * each generation, not by their text.
 */
export const CONTEXT_KEYS_SCHEMA_VERSION = 11;

/**
 * Stores from this version on remove a target with its last events: each row keeps the latest ts of
 * an event without a context and of one with a context that used it, and the agent starts new ids
 * at meta NEXT_TARGET_ID_META; a (value, kind) may have several rows.
 */
export const TARGET_LIFETIME_SCHEMA_VERSION = 12;

/** The meta rows holding the first target id, and context id, no row of the store ever had. */
export const NEXT_TARGET_ID_META = 'next_target_id';
export const NEXT_CONTEXT_ID_META = 'next_context_id';

/** The SQL function migrations call to key the contexts already stored (never in the schema itself). */
const CONTEXT_KEY_FUNCTION = 'kreplay_context_key';

/** The meta row holding the store's seed for its contexts' keys (read by core/store/context-key-seed.ts). */
export const CONTEXT_KEY_SEED_META = 'context_key_seed';

/**
 * The contexts' lookup indexes lead with a context's generation, id >> CONTEXT_GENERATION_BITS: a
 * new context's transaction and trace ids are random strings, and indexed by them alone each
 * batch's new rows land on pages all over an index as large as every context kept, each page
 * written to the WAL again (about half the writer's work per request, issue 46). Within the
 * newest generation (16,384 contexts) they touch a few hundred pages at most; a lookup by id
 * seeks once per generation (daemon/store/query-sql.ts contextIdsSql). From v11 an index holds each
 * id's key (core/store/context-key.ts), not its text: a third of the entry, so of the pages rewritten.
 */
export const CONTEXT_GENERATION_BITS = 14;

/** Stores from this version on keep a traceparent's parent span and flags in contexts. */
export const PARENT_SPAN_SCHEMA_VERSION = 8;

/** Stores from this version on index seq (events_by_seq) and have ship_cursors. */
export const SEQ_INDEX_SCHEMA_VERSION = 3;

/** Stores from this version on have a pruned table (retention). */
export const RETENTION_SCHEMA_VERSION = 4;

/** Stores from this version on record each run's sampling rate and filter. */
export const SAMPLING_SCHEMA_VERSION = 5;

/**
 * The writer's page cache by default (--store-cache-mb): SQLite keeps it filled up to this size,
 * so it is resident memory of the agent. A transaction's dirty pages beyond it are written to
 * the WAL early, which costs little as long as the B-trees' insertion points (their rightmost
 * pages and one leaf per busy service) fit.
 */
export const WRITER_CACHE_KIB = 16384;

/**
 * A new store's page size, bytes (SQLite's default, 4,096, is what stores had before): the writer
 * spends ~25% less CPU a stored event, and no reader more; a sparse commit writes more WAL bytes
 * and a small --max-store-bytes holds a little less (bench/RESULTS.md, issue 46, "A new store's
 * page size"). Set before WAL mode and the first table, after which it cannot change: an existing
 * store keeps its own, with no VACUUM to convert it.
 */
export const NEW_STORE_PAGE_BYTES = 16384;

/**
 * Under a cap this small a new store keeps SQLite's 4 KiB pages: 16 KiB ones held 12% fewer
 * transaction events at 8 MiB and 6% at 16 MiB (~1% at 64 MiB), and under 4 MiB not a whole batch,
 * so the cap took a batch's transaction events before its newer background ones.
 */
export const SMALL_CAP_BYTES = 64 * 1024 * 1024;

/** The page size a new store gets under a --max-store-bytes cap (0: none). */
export function newStorePageBytes(maxStoreBytes: number): number {
  return maxStoreBytes > 0 && maxStoreBytes < SMALL_CAP_BYTES ? 4096 : NEW_STORE_PAGE_BYTES;
}

/** Calls at least this long are in the partial index that serves min_duration_ms. */
export const SLOW_EVENT_NS = 100_000;

/** MIGRATIONS[v] takes a store from version v to v + 1. */
export const MIGRATIONS: readonly string[] = [
  // v1
  `
  CREATE TABLE meta (key TEXT PRIMARY KEY, value TEXT NOT NULL) STRICT;

  CREATE TABLE runs (
    id INTEGER PRIMARY KEY,
    node TEXT NOT NULL,
    started_ns INTEGER NOT NULL,
    stopped_ns INTEGER,
    exit_reason TEXT,
    kernel TEXT NOT NULL,
    agent_version TEXT NOT NULL,
    attach_points TEXT NOT NULL,
    clock_offset_ns INTEGER NOT NULL,
    clock_error_ns INTEGER NOT NULL
  ) STRICT;

  -- Cumulative loss and health counters of a run, one row each time one changes.
  CREATE TABLE counters (
    run_id INTEGER NOT NULL REFERENCES runs(id),
    at_ns INTEGER NOT NULL,
    name TEXT NOT NULL,
    value INTEGER NOT NULL,
    PRIMARY KEY (run_id, name, at_ns)
  ) STRICT, WITHOUT ROWID;

  CREATE TABLE services (id INTEGER PRIMARY KEY, name TEXT NOT NULL UNIQUE) STRICT;
  CREATE TABLE comms (id INTEGER PRIMARY KEY, name TEXT NOT NULL UNIQUE) STRICT;

  CREATE TABLE contexts (
    id INTEGER PRIMARY KEY,
    transaction_id TEXT,
    trace_id TEXT
  ) STRICT;
  CREATE UNIQUE INDEX contexts_key ON contexts (coalesce(transaction_id, ''), coalesce(trace_id, ''));
  CREATE INDEX contexts_by_transaction ON contexts (transaction_id) WHERE transaction_id IS NOT NULL;
  CREATE INDEX contexts_by_trace ON contexts (trace_id) WHERE trace_id IS NOT NULL;

  CREATE TABLE events (
    ${eventColumnsDdl()},
    PRIMARY KEY (ts, seq)
  ) WITHOUT ROWID;
  CREATE INDEX events_by_context ON events (ctx) WHERE ctx IS NOT NULL;
  CREATE INDEX events_by_service ON events (service);
  CREATE INDEX events_slow ON events (type) WHERE dur >= ${SLOW_EVENT_NS};
  `,
  // v2: what each write went to, once per distinct (kind, value); events.target is NULL when unknown
  `
  CREATE TABLE targets (
    id INTEGER PRIMARY KEY,
    kind INTEGER NOT NULL,
    value TEXT NOT NULL
  ) STRICT;
  CREATE UNIQUE INDEX targets_by_value ON targets (value, kind);
  ${eventColumnsAddedIn(TARGETS_SCHEMA_VERSION)}
  `,
  // v3: shipping to a fleet store (agent/ship). seq is the commit order (a later commit may hold
  // an earlier ts), so the shipper walks seq; one cursor per destination, in this file so that a
  // restarted agent resumes where its last acknowledged batch ended.
  `
  CREATE INDEX events_by_seq ON events (seq);
  CREATE TABLE ship_cursors (
    destination TEXT PRIMARY KEY,
    next_seq INTEGER NOT NULL,
    shipped INTEGER NOT NULL,
    updated_ns INTEGER NOT NULL
  ) STRICT;
  `,
  // v4: why a run started (a fresh store after the old one vanished is a gap, not silence);
  // what retention removed, so a reader tells a pruned range from a quiet one; and contexts
  // no longer unique by value, so the agent need not remember every transaction it ever saw.
  `
  ALTER TABLE runs ADD COLUMN start_reason TEXT;
  DROP INDEX contexts_key;

  CREATE TABLE pruned (
    id INTEGER PRIMARY KEY,
    at_ns INTEGER NOT NULL,
    reason TEXT NOT NULL,
    from_ns INTEGER NOT NULL,
    to_ns INTEGER NOT NULL,
    background INTEGER NOT NULL,
    context INTEGER NOT NULL
  ) STRICT;
  `,
  // v5: what a run captured: --sample-background 1/N keeps one in N writes without a context
  // (so counts scale by N), and --include/--exclude (JSON, NULL: everything)
  `
  ALTER TABLE runs ADD COLUMN sample_background INTEGER NOT NULL DEFAULT 1;
  ALTER TABLE runs ADD COLUMN filter TEXT;
  `,
  // v6: sys_read, sys_fsync and sys_connect share sys_write's columns; a read's response time is new
  `
  ${eventColumnsAddedIn(SYSCALL_TYPES_SCHEMA_VERSION)}
  `,
  // v7: a send that started a request on a socket keeps the key of what it asked (native/capture/request_key.h)
  `
  ${eventColumnsAddedIn(REQUEST_KEY_SCHEMA_VERSION)}
  `,
  // v8: a context set by a W3C traceparent keeps its parent-id and flags (the OTLP export's parent
  // span and sampled flag); NULL for markers and for contexts stored before
  `
  ALTER TABLE contexts ADD COLUMN parent_span_id TEXT;
  ALTER TABLE contexts ADD COLUMN trace_flags INTEGER;
  `,
  // v9: the container each event's process ran in (NULL: a host process), once per container as
  // its JSON (core/model/container.ts); a container whose state reads otherwise later is a new row
  `
  CREATE TABLE containers (id INTEGER PRIMARY KEY, info TEXT NOT NULL UNIQUE) STRICT;
  ${eventColumnsAddedIn(CONTAINERS_SCHEMA_VERSION)}
  `,
  // v10: the contexts' lookup indexes by generation first (CONTEXT_GENERATION_BITS)
  `
  DROP INDEX contexts_by_transaction;
  DROP INDEX contexts_by_trace;
  CREATE INDEX contexts_by_transaction ON contexts (id >> ${CONTEXT_GENERATION_BITS}, transaction_id)
    WHERE transaction_id IS NOT NULL;
  CREATE INDEX contexts_by_trace ON contexts (id >> ${CONTEXT_GENERATION_BITS}, trace_id) WHERE trace_id IS NOT NULL;
  `,
  // v11: each id's key (core/store/context-key.ts) beside it, indexed in its place (a third of the
  // entry). The table is made anew for its CHECKs (ADD COLUMN would test them against the rows not yet
  // keyed): a row with an id and no key would be missed by every lookup, so none may be written.
  `
  CREATE TABLE contexts_keyed (
    id INTEGER PRIMARY KEY,
    transaction_id TEXT,
    trace_id TEXT,
    parent_span_id TEXT,
    trace_flags INTEGER,
    transaction_key INTEGER CHECK ((transaction_key IS NULL) = (transaction_id IS NULL)),
    trace_key INTEGER CHECK ((trace_key IS NULL) = (trace_id IS NULL))
  ) STRICT;
  INSERT INTO contexts_keyed
    SELECT id, transaction_id, trace_id, parent_span_id, trace_flags,
      ${CONTEXT_KEY_FUNCTION}(transaction_id), ${CONTEXT_KEY_FUNCTION}(trace_id) FROM contexts;
  DROP TABLE contexts;
  ALTER TABLE contexts_keyed RENAME TO contexts;
  CREATE INDEX contexts_by_transaction ON contexts (id >> ${CONTEXT_GENERATION_BITS}, transaction_key)
    WHERE transaction_id IS NOT NULL;
  CREATE INDEX contexts_by_trace ON contexts (id >> ${CONTEXT_GENERATION_BITS}, trace_key) WHERE trace_id IS NOT NULL;
  `,
  // v12: targets live as long as their events (agent/store/retention.ts), so the agent need not
  // remember every file a host ever wrote: the latest ts of each tier's events that used a target
  // (NULL: none left), and several rows per (value, kind). The rows already stored are stamped from
  // their events in one pass over them; those no event uses any more go.
  `
  DROP INDEX targets_by_value;
  CREATE INDEX targets_by_value ON targets (value, kind);
  ALTER TABLE targets ADD COLUMN last_background_ns INTEGER;
  ALTER TABLE targets ADD COLUMN last_context_ns INTEGER;
  UPDATE targets SET last_background_ns = used.background, last_context_ns = used.context
    FROM (SELECT target,
            max(CASE WHEN ctx IS NULL THEN ts END) AS background,
            max(CASE WHEN ctx IS NOT NULL THEN ts END) AS context
          FROM events WHERE target IS NOT NULL GROUP BY target) AS used
    WHERE used.target = targets.id;
  DELETE FROM targets WHERE last_background_ns IS NULL AND last_context_ns IS NULL;
  `,
];

/**
 * The first seq not yet shipped to every destination, or null when nothing ships from this
 * store. Retention (agent-in-production) keeps events from here on unless the store cap forces
 * it, and counts those it must drop as unshipped_pruned.
 */
export function firstUnshippedSeq(db: Database.Database): number | null {
  if (schemaVersionOf(db) < SEQ_INDEX_SCHEMA_VERSION) return null;
  const row = db.prepare('SELECT min(next_seq) AS seq FROM ship_cursors').get() as { seq: number | null };
  return row.seq;
}

export type StoreErrorCode =
  'E_STORE_NEWER_SCHEMA' | 'E_STORE_OPEN' | 'E_STORE_NOT_KREPLAY' | 'E_STORE_CORRUPT';

export class StoreError extends KreplayError {
  declare readonly code: StoreErrorCode;
  /** the store file, where the error is about one */
  readonly file?: string;
  constructor(code: StoreErrorCode, message: string, file?: string) {
    super(code, message);
    if (file !== undefined) this.file = file;
  }
}

export interface StoreInfo {
  /** random per file: makes event ids unique across nodes */
  storeId: string;
  node: string;
}

function readSchemaVersion(db: Database.Database, path: string): number {
  const version = db.pragma('user_version', { simple: true }) as number;
  if (version > SCHEMA_VERSION) {
    throw new StoreError(
      'E_STORE_NEWER_SCHEMA',
      `${path} has schema version ${version}, newer than this kreplay understands (${SCHEMA_VERSION}); upgrade kreplay, nothing was changed`,
    );
  }
  return version;
}

function applyMigrations(db: Database.Database, from: number, node: string): void {
  // A store keyed from here on gets its seed before its rows are keyed (a v10 store's, in the
  // migration). A v11 store made before seeds keeps none: its rows were keyed with seed 0.
  const seed = from < CONTEXT_KEYS_SCHEMA_VERSION ? randomBytes(4).readUInt32LE(0) : 0;
  db.function(CONTEXT_KEY_FUNCTION, { deterministic: true }, (id: unknown) =>
    typeof id === 'string' ? contextKey(id, seed) : null,
  );
  db.transaction(() => {
    for (let v = from; v < SCHEMA_VERSION; v++) db.exec(MIGRATIONS[v]!);
    const setMeta = db.prepare('INSERT INTO meta (key, value) VALUES (?, ?)');
    if (from === 0) {
      setMeta.run('store_id', randomBytes(6).toString('hex'));
      setMeta.run('node', node);
      setMeta.run('next_seq', '1');
    }
    if (from < CONTEXT_KEYS_SCHEMA_VERSION) setMeta.run(CONTEXT_KEY_SEED_META, String(seed));
    db.pragma(`user_version = ${SCHEMA_VERSION}`);
  })();
}

export function readStoreInfo(db: Database.Database): StoreInfo {
  const rows = db.prepare('SELECT key, value FROM meta').all() as { key: string; value: string }[];
  const meta = new Map(rows.map((r) => [r.key, r.value]));
  const storeId = meta.get('store_id');
  const node = meta.get('node');
  if (!storeId || !node) throw new StoreError('E_STORE_NOT_KREPLAY', `${db.name} has no kreplay meta rows`);
  return { storeId, node };
}

/** SQLite's verdict that a file is damaged or not a database at all. */
export function isCorruption(err: unknown): boolean {
  const code = (err as { code?: unknown }).code;
  return typeof code === 'string' && (code.startsWith('SQLITE_CORRUPT') || code === 'SQLITE_NOTADB');
}

export function corruptStoreError(path: string, err: unknown): StoreError {
  return new StoreError(
    'E_STORE_CORRUPT',
    `${path} is damaged (${(err as Error).message}); nothing was changed. Move it aside ` +
      `(mv ${path} ${path}.corrupt) or start the agent with --on-corrupt rename, which moves it ` +
      `aside itself and starts a fresh store.`,
    path,
  );
}

/** Opens (creating or migrating) a node's store for the one writer. Throws StoreError. */
export function openWriteStore(
  path: string,
  node: string,
  cacheKib = WRITER_CACHE_KIB,
  pageBytes = NEW_STORE_PAGE_BYTES,
): { db: Database.Database; info: StoreInfo } {
  let db: Database.Database;
  try {
    db = new Database(path);
  } catch (err) {
    throw new StoreError('E_STORE_OPEN', `cannot open ${path}: ${(err as Error).message}`);
  }
  try {
    const version = readSchemaVersion(db, path);
    if (version === 0) db.pragma(`page_size = ${pageBytes}`);
    db.pragma('journal_mode = WAL');
    db.pragma('synchronous = NORMAL');
    // Checkpoints are the agent's (see agent/store/checkpoint-policy.ts).
    db.pragma('wal_autocheckpoint = 0');
    // The agent's memory is bounded (issue 14): a page cache of a configured size, and no mmap,
    // whose file pages would count in its RSS as the store grows.
    db.pragma(`cache_size = -${cacheKib}`);
    db.pragma('mmap_size = 0');
    db.pragma('temp_store = MEMORY');
    db.pragma('busy_timeout = 5000');
    if (version < SCHEMA_VERSION) applyMigrations(db, version, node);
    return { db, info: readStoreInfo(db) };
  } catch (err) {
    db.close();
    throw isCorruption(err) ? corruptStoreError(path, err) : err;
  }
}

/** Each connection's `PRAGMA user_version`, prepared once: `db.pragma()` parses it again every call. */
const userVersion = new WeakMap<Database.Database, Database.Statement>();

/** The schema version of an open store, read again on every call: the agent may upgrade it meanwhile. */
export function schemaVersionOf(db: Database.Database): number {
  let statement = userVersion.get(db);
  if (!statement) {
    statement = db.prepare('PRAGMA user_version').pluck();
    userVersion.set(db, statement);
  }
  return statement.get() as number;
}

/**
 * Loads the SQLite binding into the calling thread now. A thread that reads stores calls it before
 * it says it is up: one terminated (a daemon's close) while Node registers a native addon aborts
 * the whole process (FATAL ERROR in napi_get_last_error_info, seen in a full test run).
 */
export function loadSqliteBinding(): void {
  new Database(':memory:').close();
}

/**
 * Opens a node's store read-only; never blocks or migrates the writer's
 * file. Stores of an older schema are read as they are (an upgrade only
 * adds): the reader asks schemaVersionOf() what they hold.
 */
export function openReadStore(path: string): { db: Database.Database; info: StoreInfo } {
  if (!existsSync(path)) throw new StoreError('E_STORE_OPEN', `${path} does not exist`);
  const db = new Database(path, { readonly: true, fileMustExist: true });
  try {
    db.pragma('busy_timeout = 2000');
    if (readSchemaVersion(db, path) === 0)
      throw new StoreError('E_STORE_NOT_KREPLAY', `${path} has schema version 0, not a kreplay store yet`);
    return { db, info: readStoreInfo(db) };
  } catch (err) {
    db.close();
    throw err;
  }
}
