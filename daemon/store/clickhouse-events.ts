/**
 * The events API read from the fleet store in ClickHouse instead of the node
 * files: the same filters, the same (timestamp_ns, event_id) order and the
 * same keyset positions, so pages and cursors match the SQLite merge. A
 * transaction or trace is first found in its lookup table (one key range),
 * then its rows are read by identity. Over a cluster the events come from the
 * Distributed table and the lookup subquery names the shard-local table (with
 * its database: the shards run it as sent), which holds the lookup rows of
 * that shard's events (see core/clickhouse/schema.ts).
 *
 * A re-sent batch never shows twice, before or after merges collapse its
 * copies. Pages do not use FINAL (a lookup took 1.5-6.5x as long with it,
 * bench/fleet.ts): a copy is the same node-file row sent again, equal in
 * every column, and sorts next to its original by (timestamp_ns, event_id),
 * so a page keeps the first of each run of one event_id and, when copies left
 * it short of the limit, reads on from the last row's position. That needs
 * only the Distributed table's plain ORDER BY … LIMIT (each shard's first n
 * rows, merged). `LIMIT 1 BY event_id` would not do: 18.16 cuts each shard's
 * rows to the LIMIT before its LIMIT BY (68 events for LIMIT 100 with three
 * unmerged copies of each, bench/clickhouse-limit-by.ts), and
 * test/integration/clickhouse-cluster.test.ts pages through such copies.
 * A page's lookup subquery reads only from the page's position on (and only
 * its first rows when nothing else filters), so paging a large transaction
 * does not read its whole lookup range for every page. Summaries count with
 * FINAL; one key's events are counted in its lookup table, with FINAL only
 * where copies can be (countLookup); a single event is any copy.
 */
import { ClickHouseError, type ClickHouseHttp } from '../../core/clickhouse/http-client';
import { quoteInt, quoteString } from '../../core/clickhouse/quote';
import { eventsTable, lookupTable, type LookupKey } from '../../core/clickhouse/schema';
import { explainShardFailure } from './clickhouse-shards';
import { CONTAINER_ID_PREFIX, parseContainer, parseEventId, type ApiEvent } from '../../core/model';
import type { EventReader } from './event-reader';
import type { SampledRange } from './node-store';
import {
  positionOf,
  type EventFilter,
  type EventPage,
  type EventPosition,
  type EventSummary,
  type PageOptions,
} from './event-filter';

/** The API's fields, as the events table names them. */
const COLUMNS =
  'event_id, event_type, timestamp_ns, duration_ns, service_name, transaction_id, trace_id, node, pid, tid, comm, bytes, ' +
  'syscall, fd, ret, target_kind, target, device, sector, op, error, response_ns, container';

type Row = Record<string, string | number | null>;

/* 64-bit integers arrive as strings (output_format_json_quote_64bit_integers) */
function toEvent(r: Row): ApiEvent {
  const event = toBareEvent(r);
  if (typeof r.container === 'string') event.container = parseContainer(r.container);
  return event;
}

function toBareEvent(r: Row): ApiEvent {
  const common = {
    event_id: r.event_id as string,
    timestamp_ns: BigInt(r.timestamp_ns!),
    duration_ns: BigInt(r.duration_ns!),
    service_name: r.service_name as string,
    transaction_id: r.transaction_id as string | null,
    trace_id: r.trace_id as string | null,
    node: r.node as string,
    pid: Number(r.pid),
    tid: Number(r.tid),
    comm: r.comm as string,
    bytes: Number(r.bytes),
  };
  if (r.event_type === 'block_io')
    return {
      ...common,
      event_type: 'block_io',
      device: r.device as string,
      sector: Number(r.sector),
      op: r.op as string,
      error: Number(r.error),
    };
  const call = {
    ...common,
    syscall: r.syscall as string,
    fd: Number(r.fd),
    ret: Number(r.ret),
    target_kind: r.target_kind as 'file' | null,
    target: r.target as string | null,
  };
  if (r.event_type === 'sys_read') {
    const response = r.response_ns;
    return {
      ...call,
      event_type: 'sys_read',
      response_ns: response == null ? null : BigInt(response as string),
    };
  }
  // the fleet does not keep request keys (a replay from it matches responses by order)
  return { ...call, event_type: (r.event_type ?? 'sys_write') as 'sys_write' } as ApiEvent;
}

/** The time range of a filter, as terms on timestamp_ns (of the events table or a lookup table). */
function rangeTerms(filter: EventFilter): string[] {
  const terms: string[] = [];
  if (filter.fromNs !== undefined)
    terms.push(filter.fromNs < 0n ? '1' : `timestamp_ns >= ${quoteInt(filter.fromNs)}`);
  if (filter.toNs !== undefined)
    terms.push(filter.toNs <= 0n ? '0' : `timestamp_ns < ${quoteInt(filter.toNs)}`);
  return terms;
}

/**
 * Where a page reads its lookup rows: from `after` on (its identity taken
 * apart: event_id orders as (store_id, seq) within a timestamp) and, when
 * the filter asks for nothing the lookup table cannot tell, only the first
 * `limit` of them, distinct (copies of a row not yet merged count once).
 * Without these bounds every page would read all of the key's lookup rows
 * (112 ms a page for a 300,000-event transaction, 12 ms with them).
 */
interface LookupBounds {
  order: PageOptions['order'];
  after?: EventPosition;
  limit?: number;
}

function lookupTerm(
  database: string,
  key: LookupKey,
  value: string,
  filter: EventFilter,
  bounds?: LookupBounds,
): string {
  const where = [`${key} = ${quoteString(value)}`, ...rangeTerms(filter)];
  const at = bounds?.after && parseEventId(bounds.after.eventId);
  if (at) {
    const [cmp, cmpEq] = bounds.order === 'asc' ? ['>', '>='] : ['<', '<='];
    const [ts, store] = [quoteInt(at.ts), quoteString(at.storeId)];
    where.push(
      `timestamp_ns ${cmpEq} ${ts} AND (timestamp_ns ${cmp} ${ts} OR store_id ${cmp} ${store} OR ` +
        `(store_id = ${store} AND seq ${cmp} ${quoteInt(BigInt(at.seq))}))`,
    );
  }
  const dir = bounds?.order === 'desc' ? 'DESC' : 'ASC';
  const first =
    bounds?.limit === undefined
      ? ''
      : ` ORDER BY timestamp_ns ${dir}, store_id ${dir}, seq ${dir} LIMIT ${quoteInt(bounds.limit)}`;
  return (
    `(timestamp_ns, store_id, seq) IN (SELECT ${first ? 'DISTINCT ' : ''}timestamp_ns, store_id, seq ` +
    `FROM ${database}.${lookupTable(key)} WHERE ${where.join(' AND ')}${first})`
  );
}

/** The lookup key of a filter that asks for one key's events in a time range and nothing else, if it is one. */
function lookupOnly(filter: EventFilter): { key: LookupKey; value: string } | null {
  const { transactionId, traceId, fromNs: _from, toNs: _to, ...rest } = filter;
  if (Object.values(rest).some((v) => v !== undefined)) return null;
  if (transactionId !== undefined && traceId === undefined)
    return { key: 'transaction_id', value: transactionId };
  if (traceId !== undefined && transactionId === undefined) return { key: 'trace_id', value: traceId };
  return null;
}

function filterTerms(database: string, filter: EventFilter, bounds?: LookupBounds): string[] {
  const terms: string[] = [];
  // the first rows of a lookup are the page's only when nothing else can drop some of them
  const lookupBounds = bounds && (lookupOnly(filter) ? bounds : { ...bounds, limit: undefined });
  if (filter.transactionId !== undefined) {
    terms.push(lookupTerm(database, 'transaction_id', filter.transactionId, filter, lookupBounds));
    terms.push(`transaction_id = ${quoteString(filter.transactionId)}`);
  }
  if (filter.traceId !== undefined) {
    terms.push(lookupTerm(database, 'trace_id', filter.traceId, filter, lookupBounds));
    terms.push(`trace_id = ${quoteString(filter.traceId)}`);
  }
  if (filter.service !== undefined) terms.push(`service_name = ${quoteString(filter.service)}`);
  if (filter.node !== undefined) terms.push(`node = ${quoteString(filter.node)}`);
  if (filter.types) terms.push(`event_type IN (${filter.types.map((t) => quoteString(t)).join(', ')})`);
  terms.push(...rangeTerms(filter));
  if (filter.minDurationNs !== undefined)
    terms.push(
      filter.minDurationNs <= 0n
        ? '1'
        : `(duration_ns >= ${quoteInt(filter.minDurationNs)} OR ifNull(response_ns, 0) >= ${quoteInt(filter.minDurationNs)})`,
    );
  if (filter.target) {
    const value = quoteString(filter.target.value);
    // a byte prefix of UTF-8 text is a code-point prefix: the same events as the node store's range
    terms.push(
      filter.target.prefix ? `substring(target, 1, length(${value})) = ${value}` : `target = ${value}`,
    );
  }
  if (filter.targetKinds)
    terms.push(`target_kind IN (${filter.targetKinds.map((k) => quoteString(k)).join(', ')})`);
  if (filter.container !== undefined) {
    const value = quoteString(filter.container);
    terms.push(
      `(container_name = ${value} OR (length(${value}) >= ${CONTAINER_ID_PREFIX} AND substring(container_id, 1, length(${value})) = ${value}))`,
    );
  }
  if (filter.pod !== undefined) terms.push(`k8s_pod_name = ${quoteString(filter.pod)}`);
  if (filter.namespace !== undefined) terms.push(`k8s_namespace_name = ${quoteString(filter.namespace)}`);
  if (filter.image !== undefined) terms.push(`container_image = ${quoteString(filter.image)}`);
  return terms;
}

/** Rows after `pos` in `order`: keyset on (timestamp_ns, event_id), as the node stores page. */
function afterTerm(pos: EventPosition, order: PageOptions['order']): string {
  const ts = quoteInt(pos.ts);
  const id = quoteString(pos.eventId);
  const [cmp, cmpEq] = order === 'asc' ? ['>', '>='] : ['<', '<='];
  return `timestamp_ns ${cmpEq} ${ts} AND (timestamp_ns ${cmp} ${ts} OR event_id ${cmp} ${id})`;
}

function summary(count: number, first: string, last: string): EventSummary {
  return { count, firstTs: count ? BigInt(first) : null, lastTs: count ? BigInt(last) : null };
}

/**
 * Parts' time ranges (inclusive) for one key: the rows of parts whose range
 * meets no other's (`alone`, no copies among them), and the ranges where some
 * meet (each the union of the parts that chain together), where copies may be.
 */
export function overlaps(parts: readonly { n: number; first: bigint; last: bigint }[]): {
  alone: number;
  shared: [bigint, bigint][];
} {
  const sorted = [...parts].sort((a, b) => (a.first < b.first ? -1 : a.first > b.first ? 1 : 0));
  let alone = 0;
  const shared: [bigint, bigint][] = [];
  for (let i = 0; i < sorted.length;) {
    let last = sorted[i]!.last;
    let j = i + 1;
    for (; j < sorted.length && sorted[j]!.first <= last; j++)
      if (sorted[j]!.last > last) last = sorted[j]!.last;
    if (j === i + 1) alone += sorted[i]!.n;
    else shared.push([sorted[i]!.first, last]);
    i = j;
  }
  return { alone, shared };
}

/** The most rows one read of a page asks for when copies crowd it (a page is at most MAX_LIMIT + 1). */
const MAX_READ = 100_000;

export class ClickHouseEvents implements EventReader {
  private readonly table: string;

  constructor(private readonly ch: ClickHouseHttp) {
    this.table = eventsTable(ch.endpoint);
  }

  private async rows<T>(sql: string): Promise<T[]> {
    try {
      return await this.ch.rows<T>(sql);
    } catch (err) {
      throw err instanceof ClickHouseError ? await explainShardFailure(this.ch, err) : err;
    }
  }

  async page(filter: EventFilter, opts: PageOptions): Promise<EventPage> {
    const dir = opts.order === 'asc' ? 'ASC' : 'DESC';
    const want = opts.limit + 1; // one more than the page tells whether another follows
    const rows: Row[] = [];
    let after = opts.after;
    let ask = want;
    for (;;) {
      const terms = filterTerms(this.ch.endpoint.database, filter, { order: opts.order, after, limit: ask });
      const where = [...terms, ...(after ? [afterTerm(after, opts.order)] : [])];
      const got = await this.rows<Row>(
        `SELECT ${COLUMNS} FROM ${this.table} ${where.length ? `WHERE ${where.join(' AND ')}` : ''} ` +
          `ORDER BY timestamp_ns ${dir}, event_id ${dir} LIMIT ${quoteInt(ask)}`,
      );
      let distinct = 0;
      for (const r of got)
        if (rows.length === 0 || rows[rows.length - 1]!.event_id !== r.event_id) {
          rows.push(r);
          distinct++;
        }
      const last = got[got.length - 1];
      if (got.length < ask || rows.length >= want || !last) break;
      // copies filled part of this read: read on past them, asking for as many more as their share suggests
      after = { ts: BigInt(last.timestamp_ns!), eventId: last.event_id as string };
      ask = Math.min(MAX_READ, Math.ceil(((want - rows.length) * got.length) / Math.max(1, distinct)));
    }
    const events = rows.slice(0, opts.limit).map(toEvent);
    const last = events[events.length - 1];
    return { events, next: last && rows.length > opts.limit ? positionOf(last) : null };
  }

  async summarize(filter: EventFilter): Promise<EventSummary> {
    const only = lookupOnly(filter);
    if (only) return this.countLookup(only.key, only.value, filter);
    const terms = filterTerms(this.ch.endpoint.database, filter);
    const where = terms.length ? `WHERE ${terms.join(' AND ')}` : '';
    const [row] = await this.rows<{ n: string; first: string; last: string }>(
      `SELECT count() AS n, min(timestamp_ns) AS first, max(timestamp_ns) AS last FROM ${this.table} FINAL ${where}`,
    );
    return summary(Number(row!.n), row!.first, row!.last);
  }

  /**
   * One key's events in a time range, counted in its lookup table (its rows
   * are the events', one each) exactly but without FINAL over all of them:
   * FINAL merges every row of the key in one thread (130-200 ms for a
   * 1,000,000-event transaction), a plain count per part takes 15-20 ms.
   * Copies of an event share its timestamp and no part holds two (a batch
   * is sent whole, a merge collapses them), so two parts can share an event
   * only where their time ranges for the key meet: parts whose ranges meet
   * no other's are counted plainly, the ranges where some meet are counted
   * with FINAL (a re-sent batch's: its own time range). Over a cluster the
   * lookup tables are read on each shard (copies of an event share its
   * shard); parts of two shards with the same name count as one part, which
   * only widens its range.
   */
  private async countLookup(key: LookupKey, value: string, filter: EventFilter): Promise<EventSummary> {
    const { database, cluster } = this.ch.endpoint;
    const table = lookupTable(key);
    const source = cluster
      ? `cluster(${quoteString(cluster)}, ${database}, ${table})`
      : `${database}.${table}`;
    const where = [`${key} = ${quoteString(value)}`, ...rangeTerms(filter)].join(' AND ');
    const parts = await this.rows<{ n: string; first: string; last: string }>(
      `SELECT count() AS n, min(timestamp_ns) AS first, max(timestamp_ns) AS last FROM ${source} WHERE ${where} GROUP BY _part`,
    );
    const ranges = overlaps(
      parts.map((p) => ({ n: Number(p.n), first: BigInt(p.first), last: BigInt(p.last) })),
    );
    let count = ranges.alone;
    if (ranges.shared.length > 0) {
      const shared = ranges.shared
        .map(([from, to]) => `timestamp_ns BETWEEN ${quoteInt(from)} AND ${quoteInt(to)}`)
        .join(' OR ');
      const [row] = await this.rows<{ n: string }>(
        `SELECT count() AS n FROM ${source} FINAL WHERE ${where} AND (${shared})`,
      );
      count += Number(row!.n);
    }
    // copies do not move the first and last timestamps
    const first = parts.reduce<bigint | null>(
      (m, p) => (m === null || BigInt(p.first) < m ? BigInt(p.first) : m),
      null,
    );
    const last = parts.reduce<bigint | null>(
      (m, p) => (m === null || BigInt(p.last) > m ? BigInt(p.last) : m),
      null,
    );
    return { count, firstTs: count ? first : null, lastTs: count ? last : null };
  }

  async get(eventId: string): Promise<ApiEvent | null> {
    const key = parseEventId(eventId);
    if (!key) return null;
    const rows = await this.rows<Row>(
      `SELECT ${COLUMNS} FROM ${this.table} WHERE timestamp_ns = ${quoteInt(key.ts)} AND store_id = ${quoteString(key.storeId)} AND seq = ${quoteInt(key.seq)} LIMIT 1`,
    );
    return rows[0] ? toEvent(rows[0]) : null;
  }

  /** The fleet store keeps what nodes ship; node-side retention never removes from it. */
  retainedFrom(): Promise<bigint | null> {
    return Promise.resolve(null);
  }

  /** The fleet store does not receive the nodes' runs: sampled ranges are told by the node files only. */
  sampledRanges(): Promise<SampledRange[]> {
    return Promise.resolve([]);
  }

  async nodes(): Promise<string[]> {
    const rows = await this.rows<{ node: string }>(`SELECT DISTINCT node FROM ${this.table} ORDER BY node`);
    return rows.map((r) => r.node);
  }
}
