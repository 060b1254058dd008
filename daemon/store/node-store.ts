/**
 * One node's store, opened read-only. Turns a filter into index reads (each
 * ordered by (ts, seq)) and runs them one bounded statement at a time: no
 * statement stays open between calls, so the agent's checkpoints are never
 * held back by a paused reader.
 */
import type Database from 'better-sqlite3';
import { EVENT_TYPE_CODE, targetKindCode } from '../../core/model';
import {
  CONTAINERS_SCHEMA_VERSION,
  SYSCALL_TYPES_SCHEMA_VERSION,
  TARGETS_SCHEMA_VERSION,
  eventColumnsOf,
  type EventRow,
  type RawEventRow,
} from '../../core/store/event-columns';
import { readContextKeySeed } from '../../core/store/context-key-seed';
import {
  CONTEXT_KEYS_SCHEMA_VERSION,
  RETENTION_SCHEMA_VERSION,
  SAMPLING_SCHEMA_VERSION,
  SEQ_INDEX_SCHEMA_VERSION,
  SLOW_EVENT_NS,
  corruptStoreError,
  isCorruption,
  openReadStore,
  schemaVersionOf,
  type StoreError,
  type StoreInfo,
} from '../../core/store/schema';
import type { IncidentRun } from '../../core/incident';
import { containerFilterOf, type EventFilter, type EventOrder } from './event-filter';
import type { KeyRange } from './key-range';
import {
  eventByKeySql,
  contextIdsParams,
  contextIdsSql,
  contextLookupOf,
  eventsSql,
  rangeParams,
  summarySql,
  TEXT_END,
  type ReadShape,
  type SqlParams,
} from './query-sql';
import { StoreNameCache } from '../../core/store/store-names';

/** One index read: its shape and its key and filter values, without the keyset bounds. */
export interface StoreRead {
  shape: ReadShape;
  params: SqlParams;
}

const byNumber = (a: number, b: number) => a - b;

/**
 * An EVENT_COLUMNS row read in raw mode: better-sqlite3 builds row objects
 * property by property, which costs twice as much as arrays plus this
 * literal (its keys are checked against the column table by a test).
 */

export function toEventRow(values: unknown[]): EventRow {
  // prettier-ignore
  const [ts, seq, type, dur, service, ctx, pid, tid, comm, bytes, fd, ret, syscall, dev, sector, op, error, target, response_ns, request_key, container] =
    values as RawEventRow;
  // prettier-ignore
  return { ts, seq, type, dur, service, ctx, pid, tid, comm, bytes, fd, ret, syscall, dev, sector, op, error, target, response_ns, request_key, container };
}

export interface StoreSummary {
  n: bigint;
  first: bigint | null;
  last: bigint | null;
}

/** Where retention left each tier complete: events at or after these were never pruned. */
export interface RetainedFrom {
  background: bigint | null;
  context: bigint | null;
}

/* pruned rows since the last look, folded into the boundaries (the table only grows) */
const PRUNED_SINCE_SQL = `SELECT max(id) AS id,
  max(CASE WHEN background > 0 THEN to_ns END) AS background,
  max(CASE WHEN context > 0 THEN to_ns END) AS context
  FROM pruned WHERE id > ?`;

/** A run that kept one in `oneIn` writes without a context (--sample-background). */
export interface SampledRange {
  node: string;
  fromNs: bigint;
  /** null while the run goes on */
  toNs: bigint | null;
  oneIn: number;
}

/* runs overlapping [from, to) that sampled; a run not stopped reaches to now */
const SAMPLED_RUNS_SQL = `SELECT started_ns AS fromNs, stopped_ns AS toNs, sample_background AS oneIn
  FROM runs WHERE sample_background > 1 AND started_ns < :to AND (stopped_ns IS NULL OR stopped_ns > :from)
  ORDER BY started_ns`;

/* runs overlapping [from, to]; columns a store's schema lacks read as their defaults */
const runsSql = (
  version: number,
) => `SELECT id, node, started_ns, stopped_ns, kernel, agent_version, clock_error_ns, clock_offset_ns,
  ${version >= SAMPLING_SCHEMA_VERSION ? 'sample_background, filter' : '1 AS sample_background, NULL AS filter'},
  ${version >= RETENTION_SCHEMA_VERSION ? 'start_reason' : 'NULL AS start_reason'}, exit_reason
  FROM runs WHERE started_ns <= :to AND (stopped_ns IS NULL OR stopped_ns >= :from) ORDER BY started_ns, id`;

/* the counters' key is (run_id, name, at_ns): each is one step down the b-tree */
const NEXT_COUNTER_SQL = 'SELECT name FROM counters WHERE run_id = ? AND name > ? ORDER BY name LIMIT 1';
const COUNTER_BEFORE_SQL =
  'SELECT at_ns, value FROM counters WHERE run_id = ? AND name = ? AND at_ns < ? ORDER BY at_ns DESC LIMIT 1';
const COUNTER_FROM_SQL =
  'SELECT at_ns, value FROM counters WHERE run_id = ? AND name = ? AND at_ns >= ? ORDER BY at_ns LIMIT 1';
const COUNTER_LAST_SQL =
  'SELECT at_ns, value FROM counters WHERE run_id = ? AND name = ? ORDER BY at_ns DESC LIMIT 1';

interface RunRow {
  id: bigint;
  node: string;
  started_ns: bigint;
  stopped_ns: bigint | null;
  kernel: string;
  agent_version: string;
  clock_error_ns: bigint;
  clock_offset_ns: bigint;
  sample_background: bigint;
  filter: string | null;
  start_reason: string | null;
  exit_reason: string | null;
}
type CounterRow = { at_ns: bigint; value: bigint } | undefined;

/** The run's filter as the agent stored it (JSON), or its text when it is not JSON. */
function filterValue(text: string): unknown {
  try {
    return JSON.parse(text) as unknown;
  } catch {
    return text;
  }
}

/* the events table's key leads with ts: the newest row is one step down the b-tree */
/**
 * The stamp of the event stored last: after the wall clock stepped back, the events stored since
 * are stamped before those stored earlier, and the greatest stamp said the store was fresher than
 * now (an age below zero) for as long as the step, whether the agent still wrote or not. Stores
 * from before seq had an index: the greatest stamp.
 */
const NEWEST_TS_SQL = 'SELECT ts FROM events INDEXED BY events_by_seq ORDER BY seq DESC LIMIT 1';
const NEWEST_TS_UNINDEXED_SQL = 'SELECT ts FROM events ORDER BY ts DESC LIMIT 1';

const later = (a: bigint | null, b: bigint | null) => (a === null ? b : b === null || a > b ? a : b);

export class NodeStore {
  readonly names: StoreNameCache;
  private readonly statements = new Map<string, Database.Statement>();
  private readonly retained: RetainedFrom = { background: null, context: null };
  private prunedSeen = 0n;
  /** set once a read found the file damaged */
  damage: StoreError | null = null;
  /* an older store is read as it is, and again as what it became once the agent upgrades it */
  private schemaVersion = 0;
  private columns = '';
  /* read again with the version: a store the agent upgrades to keys gets its seed in that transaction */
  private contextKeySeed = 0;
  /** a read transaction is open (reading) */
  private inRead = false;

  private constructor(
    private readonly db: Database.Database,
    readonly info: StoreInfo,
    readonly path: string,
  ) {
    this.names = new StoreNameCache(db, info);
    this.refreshSchema();
  }

  static open(path: string): NodeStore {
    const { db, info } = openReadStore(path);
    try {
      return new NodeStore(db, info, path);
    } catch (err) {
      db.close();
      throw err;
    }
  }

  private refreshSchema(): void {
    const version = schemaVersionOf(this.db);
    if (version === this.schemaVersion) return;
    if (version >= CONTEXT_KEYS_SCHEMA_VERSION)
      this.contextKeySeed = this.guard(() => readContextKeySeed(this.db));
    this.schemaVersion = version;
    this.columns = eventColumnsOf(version);
  }

  /** Prepared once per SQL text; each text is only ever read in one `mode`. */
  private statement(sql: string, mode: 'object' | 'raw' | 'pluck' = 'object'): Database.Statement {
    let statement = this.statements.get(sql);
    if (!statement) {
      statement = this.db.prepare(sql).safeIntegers(true);
      if (mode === 'raw') statement.raw(true);
      if (mode === 'pluck') statement.pluck(true);
      this.statements.set(sql, statement);
    }
    return statement;
  }

  /**
   * The statement that finds `filter`'s contexts here, and its parameters: by the store's schema as
   * the last `reads` saw it, and its seed (bench/query.ts runs the same through the sqlite3 CLI).
   */
  contextIdsQuery(filter: EventFilter): { sql: string; params: SqlParams } {
    const lookup = contextLookupOf(this.schemaVersion);
    return {
      sql: contextIdsSql(filter.transactionId !== undefined, filter.traceId !== undefined, lookup),
      params: contextIdsParams(filter, lookup, this.contextKeySeed),
    };
  }

  private contextIds(filter: EventFilter): bigint[] {
    const { sql, params } = this.contextIdsQuery(filter);
    return this.guard(() => this.statement(sql, 'pluck').all(params) as bigint[]);
  }

  /**
   * The reads whose merge answers `filter` here, most selective index first:
   * context, service, slow calls, time. Empty when nothing can match.
   */
  reads(filter: EventFilter): StoreRead[] {
    if (filter.node !== undefined && filter.node !== this.info.node) return [];
    this.refreshSchema();
    const targetFilter = filter.target !== undefined || filter.targetKinds !== undefined;
    if (targetFilter && this.schemaVersion < TARGETS_SCHEMA_VERSION) return [];
    const containers = containerFilterOf(filter);
    // a store from before containers has none: no event of it is in one
    if (containers && this.schemaVersion < CONTAINERS_SCHEMA_VERSION) return [];
    const codes = filter.types && [...new Set(filter.types.map((t) => EVENT_TYPE_CODE[t]))].sort(byNumber);
    const someTypes = codes && codes.length < Object.keys(EVENT_TYPE_CODE).length ? codes : undefined;
    const params: SqlParams = {};
    if (filter.minDurationNs !== undefined) params.minDuration = filter.minDurationNs;
    if (filter.target) params.target = filter.target.value;
    if (filter.target?.prefix) params.targetEnd = filter.target.value + TEXT_END;
    if (containers) Object.assign(params, containers);
    const targetKinds =
      filter.targetKinds && [...new Set(filter.targetKinds.map(targetKindCode))].sort(byNumber);
    const serviceId = filter.service === undefined ? undefined : this.names.serviceId(filter.service);
    if (filter.service !== undefined && serviceId === undefined) return [];
    // min_duration_ms matches a call's duration or a read's response wait (README, events API)
    const responses = this.schemaVersion >= SYSCALL_TYPES_SCHEMA_VERSION;
    const minDuration =
      filter.minDurationNs === undefined ? false : responses ? ('or-response' as const) : true;
    const shape = (index: ReadShape['index'], service = false): ReadShape => ({
      index,
      types: someTypes,
      minDuration,
      service,
      target: filter.target && (filter.target.prefix ? 'prefix' : 'exact'),
      targetKinds,
      container: containers && (Object.keys(containers) as (keyof typeof containers)[]),
    });

    if (filter.transactionId !== undefined || filter.traceId !== undefined) {
      if (serviceId !== undefined) params.service = serviceId;
      const contextShape = shape('context', serviceId !== undefined);
      return this.contextIds(filter).map((key) => ({ shape: contextShape, params: { ...params, key } }));
    }
    if (serviceId !== undefined) return [{ shape: shape('service'), params: { ...params, key: serviceId } }];
    if (filter.minDurationNs !== undefined && filter.minDurationNs >= BigInt(SLOW_EVENT_NS)) {
      const slow = { ...shape('slow'), types: undefined };
      const all = codes ?? Object.values(EVENT_TYPE_CODE).sort(byNumber);
      // the slow index holds long calls only: a fast read after a long response wait is found by time
      return all.map((key) =>
        responses && key === EVENT_TYPE_CODE.sys_read
          ? { shape: { ...shape('time'), types: [key] }, params }
          : { shape: slow, params: { ...params, key } },
      );
    }
    return [{ shape: shape('time'), params }];
  }

  /** Up to `limit` rows of `read` strictly inside `range`, in (ts, seq) `order`. */
  fetch(read: StoreRead, range: KeyRange, order: EventOrder, limit: number): EventRow[] {
    const rows = this.guard(
      () =>
        this.statement(eventsSql(read.shape, order, this.columns), 'raw').all({
          ...read.params,
          ...rangeParams(range),
          limit,
        }) as unknown[][],
    );
    return rows.map(toEventRow);
  }

  summarize(read: StoreRead, range: KeyRange): StoreSummary {
    return this.guard(
      () =>
        this.statement(summarySql(read.shape)).get({
          ...read.params,
          ...rangeParams(range),
        }) as StoreSummary,
    );
  }

  /** The retained range of each tier, from the pruned rows the agent wrote. */
  retainedFrom(): RetainedFrom {
    return this.reading(() => this.retainedNow());
  }

  private retainedNow(): RetainedFrom {
    this.refreshSchema();
    if (this.schemaVersion < RETENTION_SCHEMA_VERSION) return this.retained; // nothing pruned before
    const since = this.guard(() => this.statement(PRUNED_SINCE_SQL).get(this.prunedSeen)) as {
      id: bigint | null;
      background: bigint | null;
      context: bigint | null;
    };
    if (since.id !== null) {
      this.prunedSeen = since.id;
      if (since.background !== null)
        this.retained.background = later(this.retained.background, since.background + 1n);
      if (since.context !== null) this.retained.context = later(this.retained.context, since.context + 1n);
    }
    return this.retained;
  }

  /** The runs overlapping [fromNs, toNs) that sampled background writes, oldest first. */
  sampledRanges(fromNs: bigint, toNs: bigint): SampledRange[] {
    this.refreshSchema();
    if (this.schemaVersion < SAMPLING_SCHEMA_VERSION) return [];
    const rows = this.guard(
      () =>
        this.statement(SAMPLED_RUNS_SQL).all({ from: fromNs, to: toNs }) as {
          fromNs: bigint;
          toNs: bigint | null;
          oneIn: bigint;
        }[],
    );
    return rows.map((r) => ({
      node: this.info.node,
      fromNs: r.fromNs,
      toNs: r.toNs,
      oneIn: Number(r.oneIn),
    }));
  }

  /**
   * The runs overlapping [fromNs, toNs] with each counter's growth over that
   * window, read between the snapshots that bracket it (incident files).
   */
  incidentRuns(fromNs: bigint, toNs: bigint): IncidentRun[] {
    this.refreshSchema();
    const runs = this.guard(
      () => this.statement(runsSql(this.schemaVersion)).all({ from: fromNs, to: toNs }) as RunRow[],
    );
    return runs.map((r) => {
      let from: bigint | null = null;
      let to: bigint | null = null;
      const counters: Record<string, number> = {};
      for (let name = this.nextCounter(r.id, ''); name !== undefined; name = this.nextCounter(r.id, name)) {
        const before = this.guard(
          () => this.statement(COUNTER_BEFORE_SQL).get(r.id, name, fromNs) as CounterRow,
        );
        const after = this.guard(
          () =>
            (this.statement(COUNTER_FROM_SQL).get(r.id, name, toNs) ??
              this.statement(COUNTER_LAST_SQL).get(r.id, name)) as CounterRow,
        );
        if (!after) continue;
        // no snapshot since the one before the window: it did not grow
        counters[name] =
          before && after.at_ns <= before.at_ns ? 0 : Number(after.value - (before?.value ?? 0n));
        if (before && (from === null || before.at_ns < from)) from = before.at_ns;
        if (to === null || after.at_ns > to) to = after.at_ns;
      }
      return {
        node: r.node,
        store_id: this.info.storeId,
        started_ns: r.started_ns,
        stopped_ns: r.stopped_ns,
        kernel: r.kernel,
        agent_version: r.agent_version,
        clock_error_ns: r.clock_error_ns,
        clock_offset_ns: r.clock_offset_ns,
        sample_background: Number(r.sample_background),
        filter: r.filter === null ? null : filterValue(r.filter),
        start_reason: r.start_reason,
        exit_reason: r.exit_reason,
        counters,
        counters_from_ns: from,
        counters_to_ns: to,
      };
    });
  }

  private nextCounter(runId: bigint, after: string): string | undefined {
    return this.guard(
      () => this.statement(NEXT_COUNTER_SQL, 'pluck').get(runId, after) as string | undefined,
    );
  }

  row(ts: bigint, seq: number): EventRow | undefined {
    this.refreshSchema();
    const values = this.guard(
      () => this.statement(eventByKeySql(this.columns), 'raw').get(ts, seq) as unknown[] | undefined,
    );
    return values && toEventRow(values);
  }

  /** The timestamp of the event stored last (null: no events), for readiness. */
  newestTs(): bigint | null {
    this.refreshSchema();
    const sql = this.schemaVersion >= SEQ_INDEX_SCHEMA_VERSION ? NEWEST_TS_SQL : NEWEST_TS_UNINDEXED_SQL;
    return this.guard(() => (this.statement(sql, 'pluck').get() as bigint | undefined) ?? null);
  }

  /**
   * Runs `read`'s statements in one read transaction: one snapshot of the store for all of them,
   * and the store's locks taken once rather than by each statement (~10 µs a statement on a slow
   * host, of an event page's ~0.6 ms). Within a transaction already open, `read` just runs.
   */
  reading<T>(read: () => T): T {
    // known here rather than asked of the connection (a native call, ~2 µs each on a slow host)
    if (this.inRead) return read();
    this.statement('BEGIN').run();
    this.inRead = true;
    let result: T;
    try {
      result = read();
    } catch (err) {
      // the read's error is the one to tell (a damaged file's StoreError), not the end's
      this.endRead(true);
      throw err;
    }
    this.endRead(false);
    return result;
  }

  /** Lets the snapshot go: a read transaction has nothing to keep. After a failed read, quietly. */
  private endRead(failed: boolean): void {
    this.inRead = false;
    try {
      this.guard(() => this.statement('COMMIT').run());
    } catch (err) {
      try {
        if (this.db.inTransaction) this.db.exec('ROLLBACK');
      } catch {
        // a damaged file's connection: the directory drops the store
      }
      if (!failed) throw err;
    }
  }

  /**
   * Runs a read; SQLite finding the file damaged is a StoreError naming it,
   * and the store remembers it (`damage`) so that the directory skips it.
   */
  private guard<T>(read: () => T): T {
    try {
      return read();
    } catch (err) {
      if (!isCorruption(err)) throw err;
      this.damage = corruptStoreError(this.path, err);
      throw this.damage;
    }
  }

  close(): void {
    this.db.close();
  }
}
