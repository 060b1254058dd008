/**
 * The events API read from the fleet store in ClickHouse instead of the node
 * files: the same filters, the same (timestamp_ns, event_id) order and the
 * same keyset positions, so pages and cursors match the SQLite merge. A
 * transaction or trace is first found in its lookup table (one key range),
 * then its rows are read by identity. Every read uses FINAL (see
 * core/clickhouse/schema.ts) so a re-sent batch never shows twice.
 */
import type { ClickHouseHttp } from '../../core/clickhouse/http-client';
import { quoteInt, quoteString } from '../../core/clickhouse/quote';
import { lookupTable, type LookupKey } from '../../core/clickhouse/schema';
import { parseEventId, type ApiEvent } from '../../core/model';
import type { EventReader } from './event-reader';
import type { SampledRange } from './node-store';
import {
  positionOf,
  type EventFilter,
  type EventPage,
  type EventSummary,
  type PageOptions,
} from './event-filter';

/** The API's fields, as the events table names them. */
const COLUMNS =
  'event_id, event_type, timestamp_ns, duration_ns, service_name, transaction_id, trace_id, node, pid, tid, comm, bytes, ' +
  'syscall, fd, ret, target_kind, target, device, sector, op, error';

type Row = Record<string, string | number | null>;

/* 64-bit integers arrive as strings (output_format_json_quote_64bit_integers) */
function toEvent(r: Row): ApiEvent {
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
  return {
    ...common,
    event_type: 'sys_write',
    syscall: r.syscall as string,
    fd: Number(r.fd),
    ret: Number(r.ret),
    target_kind: r.target_kind as 'file' | null,
    target: r.target as string | null,
  } as ApiEvent;
}

function lookupTerm(key: LookupKey, value: string): string {
  return `(timestamp_ns, store_id, seq) IN (SELECT timestamp_ns, store_id, seq FROM ${lookupTable(key)} WHERE ${key} = ${quoteString(value)})`;
}

function filterTerms(filter: EventFilter): string[] {
  const terms: string[] = [];
  if (filter.transactionId !== undefined) {
    terms.push(lookupTerm('transaction_id', filter.transactionId));
    terms.push(`transaction_id = ${quoteString(filter.transactionId)}`);
  }
  if (filter.traceId !== undefined) {
    terms.push(lookupTerm('trace_id', filter.traceId));
    terms.push(`trace_id = ${quoteString(filter.traceId)}`);
  }
  if (filter.service !== undefined) terms.push(`service_name = ${quoteString(filter.service)}`);
  if (filter.node !== undefined) terms.push(`node = ${quoteString(filter.node)}`);
  if (filter.types) terms.push(`event_type IN (${filter.types.map((t) => quoteString(t)).join(', ')})`);
  if (filter.fromNs !== undefined)
    terms.push(filter.fromNs < 0n ? '1' : `timestamp_ns >= ${quoteInt(filter.fromNs)}`);
  if (filter.toNs !== undefined)
    terms.push(filter.toNs <= 0n ? '0' : `timestamp_ns < ${quoteInt(filter.toNs)}`);
  if (filter.minDurationNs !== undefined)
    terms.push(filter.minDurationNs <= 0n ? '1' : `duration_ns >= ${quoteInt(filter.minDurationNs)}`);
  if (filter.target) {
    const value = quoteString(filter.target.value);
    // a byte prefix of UTF-8 text is a code-point prefix: the same events as the node store's range
    terms.push(
      filter.target.prefix ? `substring(target, 1, length(${value})) = ${value}` : `target = ${value}`,
    );
  }
  if (filter.targetKinds)
    terms.push(`target_kind IN (${filter.targetKinds.map((k) => quoteString(k)).join(', ')})`);
  return terms;
}

export class ClickHouseEvents implements EventReader {
  constructor(private readonly ch: ClickHouseHttp) {}

  async page(filter: EventFilter, opts: PageOptions): Promise<EventPage> {
    const terms = filterTerms(filter);
    const dir = opts.order === 'asc' ? 'ASC' : 'DESC';
    if (opts.after) {
      const ts = quoteInt(opts.after.ts);
      const id = quoteString(opts.after.eventId);
      const [cmp, cmpEq] = opts.order === 'asc' ? ['>', '>='] : ['<', '<='];
      terms.push(`timestamp_ns ${cmpEq} ${ts} AND (timestamp_ns ${cmp} ${ts} OR event_id ${cmp} ${id})`);
    }
    const where = terms.length ? `WHERE ${terms.join(' AND ')}` : '';
    const rows = await this.ch.rows<Row>(
      `SELECT ${COLUMNS} FROM events FINAL ${where} ORDER BY timestamp_ns ${dir}, event_id ${dir} LIMIT ${quoteInt(opts.limit + 1)}`,
    );
    const events = rows.slice(0, opts.limit).map(toEvent);
    const last = events[events.length - 1];
    return { events, next: last && rows.length > opts.limit ? positionOf(last) : null };
  }

  async summarize(filter: EventFilter): Promise<EventSummary> {
    const terms = filterTerms(filter);
    const where = terms.length ? `WHERE ${terms.join(' AND ')}` : '';
    const [row] = await this.ch.rows<{ n: string; first: string; last: string }>(
      `SELECT count() AS n, min(timestamp_ns) AS first, max(timestamp_ns) AS last FROM events FINAL ${where}`,
    );
    const count = Number(row!.n);
    return {
      count,
      firstTs: count ? BigInt(row!.first) : null,
      lastTs: count ? BigInt(row!.last) : null,
    };
  }

  async get(eventId: string): Promise<ApiEvent | null> {
    const key = parseEventId(eventId);
    if (!key) return null;
    const rows = await this.ch.rows<Row>(
      `SELECT ${COLUMNS} FROM events FINAL WHERE timestamp_ns = ${quoteInt(key.ts)} AND store_id = ${quoteString(key.storeId)} AND seq = ${quoteInt(key.seq)}`,
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
    const rows = await this.ch.rows<{ node: string }>('SELECT DISTINCT node FROM events ORDER BY node');
    return rows.map((r) => r.node);
  }
}
