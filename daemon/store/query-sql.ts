/**
 * The SQL of event reads. Each read walks one index whose entries are in
 * (ts, seq) order after its key: (ctx, ts, seq), (service, ts, seq),
 * (type, ts, seq) for slow calls, or the table's own (ts, seq). The keyset
 * bounds are row values on (ts, seq), so SQLite seeks straight to the page
 * and never sorts (test/unit/store-query-plan.test.ts checks the plans).
 */
import { EVENT_COLUMNS } from '../../core/store/event-columns';
import { contextKey } from '../../core/store/context-key';
import {
  CONTEXT_GENERATION_BITS,
  CONTEXT_GENERATIONS_SCHEMA_VERSION,
  CONTEXT_KEYS_SCHEMA_VERSION,
  SLOW_EVENT_NS,
} from '../../core/store/schema';
import { CONTAINER_ID_PREFIX } from '../../core/model/container';
import type { EventOrder } from './event-filter';
import type { KeyRange } from './key-range';

export type IndexChoice = 'context' | 'service' | 'slow' | 'time';

export interface ReadShape {
  index: IndexChoice;
  /** record type codes to keep, when not all of them */
  types?: readonly number[];
  /**
   * dur >= @minDuration; 'or-response': or a read's response wait >= @minDuration (a store with
   * response_ns: the upstream's wait is the call's time a reader looks for)
   */
  minDuration: boolean | 'or-response';
  /** service = @service, when the index is not the service one */
  service: boolean;
  /** target value = @target, or @target <= value < @targetEnd */
  target?: 'exact' | 'prefix';
  /** target kind codes to keep */
  targetKinds?: readonly number[];
  /** container matched by @container (name, id or id prefix), @pod, @namespace, @image (those given) */
  container?: readonly ('container' | 'pod' | 'namespace' | 'image')[];
}

export type SqlValue = bigint | number | string | null;
export type SqlParams = Record<string, SqlValue>;

const SOURCES: Record<IndexChoice, { from: string; key?: string }> = {
  context: { from: 'events INDEXED BY events_by_context', key: 'ctx = @key' },
  service: { from: 'events INDEXED BY events_by_service', key: 'service = @key' },
  // the literal bound makes the partial index usable; @minDuration narrows further
  slow: { from: 'events INDEXED BY events_slow', key: `type = @key AND dur >= ${SLOW_EVENT_NS}` },
  time: { from: 'events' },
};

/** Past every character a target can hold: "value < prefix + this" bounds a prefix range. */
export const TEXT_END = '\u{10ffff}';

/* Targets are a dictionary: match its rows, then keep the events that reference one. */
function targetTerm(shape: ReadShape): string | undefined {
  const terms = [];
  if (shape.target === 'exact') terms.push('value = @target');
  if (shape.target === 'prefix') terms.push('value >= @target AND value < @targetEnd');
  if (shape.targetKinds) terms.push(`kind IN (${shape.targetKinds.join(', ')})`);
  return terms.length ? `target IN (SELECT id FROM targets WHERE ${terms.join(' AND ')})` : undefined;
}

/* Containers are a dictionary of JSON rows (core/model/container.ts): match them, then their events. */
function containerTerm(shape: ReadShape): string | undefined {
  if (!shape.container) return undefined;
  const terms = shape.container.map((key) =>
    key === 'container'
      ? `(info ->> '$.name' = @container OR (length(@container) >= ${CONTAINER_ID_PREFIX} AND substr(info ->> '$.id', 1, length(@container)) = @container))`
      : `info ->> '$.${key}' = @${key}`,
  );
  return `container IN (SELECT id FROM containers WHERE ${terms.join(' AND ')})`;
}

function fromWhere(shape: ReadShape): string {
  const source = SOURCES[shape.index];
  const terms = [source.key, '(ts, seq) > (@loTs, @loSeq)', '(ts, seq) < (@hiTs, @hiSeq)'];
  if (shape.types) terms.push(`type IN (${shape.types.join(', ')})`);
  if (shape.minDuration === 'or-response') terms.push('(dur >= @minDuration OR response_ns >= @minDuration)');
  else if (shape.minDuration) terms.push('dur >= @minDuration');
  if (shape.service) terms.push('service = @service');
  terms.push(targetTerm(shape));
  terms.push(containerTerm(shape));
  return `FROM ${source.from} WHERE ${terms.filter((t) => t !== undefined).join(' AND ')}`;
}

/** `columns`: what the store's schema can select (see eventColumnsOf). */
export function eventsSql(shape: ReadShape, order: EventOrder, columns = EVENT_COLUMNS): string {
  const dir = order === 'asc' ? 'ASC' : 'DESC';
  return `SELECT ${columns} ${fromWhere(shape)} ORDER BY ts ${dir}, seq ${dir} LIMIT @limit`;
}

export function summarySql(shape: ReadShape): string {
  return `SELECT count(*) AS n, min(ts) AS first, max(ts) AS last ${fromWhere(shape)}`;
}

export function rangeParams(range: KeyRange): SqlParams {
  return { loTs: range.lo.ts, loSeq: range.lo.seq, hiTs: range.hi.ts, hiSeq: range.hi.seq };
}

export function eventByKeySql(columns = EVENT_COLUMNS): string {
  return `SELECT ${columns} FROM events WHERE ts = ? AND seq = ?`;
}

/**
 * How a store's contexts are found by id, by its schema version: by the ids' text (before
 * generations), by generation and text, or by generation and the ids' keys (core/store/context-key.ts).
 */
export type ContextLookup = 'text' | 'generations' | 'keys';

export function contextLookupOf(schemaVersion: number): ContextLookup {
  if (schemaVersion >= CONTEXT_KEYS_SCHEMA_VERSION) return 'keys';
  return schemaVersion >= CONTEXT_GENERATIONS_SCHEMA_VERSION ? 'generations' : 'text';
}

/**
 * Context ids per filter, in no particular order (each id is a read of its own, merged by time);
 * a trace may span several (transaction, trace) rows. A store whose lookup indexes lead with the
 * generation (schema.ts CONTEXT_GENERATION_BITS) is searched once per generation from its first
 * context's to its last's. Keyed, the index finds the rows of an id's key and each row's own id
 * decides (two ids may share a key): the answer is the text's, exactly. The generations are an
 * IN list, not a join, and nothing sorts the ids: a join or an ORDER BY over them cost SQLite
 * 60-80 µs of a 100 µs lookup (a sorter or a co-routine set up per statement) on a 1-generation store.
 */
export function contextIdsSql(transaction: boolean, trace: boolean, lookup: ContextLookup): string {
  const keys = lookup === 'keys';
  const terms = [
    transaction && keys && 'transaction_key = @transactionKey',
    transaction && 'transaction_id = @transactionId',
    trace && keys && 'trace_key = @traceKey',
    trace && 'trace_id = @traceId',
  ];
  const where = terms.filter(Boolean).join(' AND ');
  if (lookup === 'text') return `SELECT id FROM contexts WHERE ${where}`;
  const bits = CONTEXT_GENERATION_BITS;
  const generations =
    `WITH RECURSIVE generations(g) AS (SELECT min(id) >> ${bits} FROM contexts UNION ALL ` +
    `SELECT g + 1 FROM generations WHERE g < (SELECT max(id) >> ${bits} FROM contexts)) SELECT g FROM generations`;
  return (
    `SELECT id FROM contexts INDEXED BY ${transaction ? 'contexts_by_transaction' : 'contexts_by_trace'} ` +
    `WHERE id >> ${bits} IN (${generations}) AND ${where}`
  );
}

/**
 * contextIdsSql's parameters: the ids given, and their keys where the lookup uses them, under the
 * store's seed (core/store/context-key-seed.ts readContextKeySeed).
 */
export function contextIdsParams(
  ids: { transactionId?: string | undefined; traceId?: string | undefined },
  lookup: ContextLookup,
  seed: number,
): SqlParams {
  const params: SqlParams = {};
  if (ids.transactionId !== undefined) {
    params.transactionId = ids.transactionId;
    if (lookup === 'keys') params.transactionKey = contextKey(ids.transactionId, seed);
  }
  if (ids.traceId !== undefined) {
    params.traceId = ids.traceId;
    if (lookup === 'keys') params.traceKey = contextKey(ids.traceId, seed);
  }
  return params;
}
