/**
 * A range of the node store as OTLP span bytes, written inside SQLite by
 * kreplay_otlp_spans (native/sqlite/kreplay_otlp.c) in one statement, so no
 * row crosses into JavaScript: per service, its spans' bytes (ScopeSpans
 * field 2, ready to frame); per context, the rows written and the rows of
 * unsampled traces skipped (the trace cap and the counters need them); and
 * the rows the encoder left to core/otlp/event-span.ts, which it cannot be
 * sure to write exactly as that does (a code past its tables, text that is
 * not UTF-8, an integer past 2^53). The names the encoder gives codes come
 * from the TS name functions, handed over with each statement (the spec).
 */
import type Database from 'better-sqlite3';
import { blockOpName, eventTypeName, syscallName, targetKindName } from '../../core/model';
import { errnoName } from '../../core/otlp/event-span';
import { EventInsert } from '../store/event-insert';
import type { OtlpSampling } from './otlp-target';

/** The codes each name table of the spec covers: 0..CODES-1 (kreplay_otlp.c's CODES). */
const CODES = 256;

/** kreplay_otlp_spans's arguments after the spec and the held seqs, in its order (the A_ enum of kreplay_otlp.c). */
const ROW_ARGUMENTS = [
  'e.seq',
  'e.ts',
  'e.dur',
  'e.service',
  'e.ctx',
  'c.trace_id',
  'c.parent_span_id',
  'c.trace_flags',
  'c.transaction_id',
  'e.type',
  'e.pid',
  'e.tid',
  'm.name',
  'e.bytes',
  'e.syscall',
  'e.fd',
  'e.ret',
  't.kind',
  't.value',
  'e.response_ns',
  'e.request_key',
  'e.dev',
  'e.sector',
  'e.op',
  'e.error',
];

/* the events in seq order, each beside its context (events without one name no trace), comm and target */
const SPANS_SQL = `
  SELECT kreplay_otlp_spans(@spec, @held, ${ROW_ARGUMENTS.join(', ')}) AS spans
  FROM events e INDEXED BY events_by_seq
  CROSS JOIN contexts c ON c.id = e.ctx
  LEFT JOIN comms m ON m.id = e.comm
  LEFT JOIN targets t ON t.id = e.target
  WHERE e.seq >= @from AND e.seq < @to`;

const TABLES: [string, (code: number) => string][] = [
  ['type', eventTypeName],
  ['syscall', syscallName],
  ['kind', targetKindName],
  ['op', blockOpName],
  ['errno', errnoName],
];

/** The encoder's spec: the store, the sampling and each code's name as the TS functions give it. */
export function nativeSpanSpec(storeId: string, sampling: OtlpSampling): string {
  const lines = [`store\t${storeId}`, `sampling\t${sampling}`];
  for (const [table, name] of TABLES) {
    const names = Array.from({ length: CODES }, (_, code) => name(code));
    // a name is one field of a line
    const bad = names.find((n) => /[\t\n]/.test(n));
    if (bad !== undefined)
      throw new Error(`the ${table} name ${JSON.stringify(bad)} holds a tab or a newline`);
    lines.push([table, ...names].join('\t'));
  }
  return lines.join('\n');
}

/** One service's spans of a range, as bytes of ScopeSpans field 2. */
export interface EncodedGroup {
  serviceId: number;
  spans: number;
  bytes: Buffer;
}

export interface ContextCount {
  ctx: number;
  /** rows written as spans */
  spans: number;
  /** rows of a W3C trace whose traceparent is not sampled, skipped */
  unsampled: number;
}

export interface NativeSpans {
  groups: EncodedGroup[];
  contexts: ContextCount[];
  /** rows for the TS side to make (kreplay_otlp.c says which and why) */
  left: { seq: number; ctx: number }[];
}

export class NativeSpanReader {
  private readonly select: Database.Statement<[Record<string, unknown>], Buffer>;
  private readonly spec: string;

  constructor(db: Database.Database, storeId: string, sampling: OtlpSampling) {
    // kreplay_otlp_spans lives in the agent's SQLite extension
    EventInsert.prepareConnection(db);
    this.select = db.prepare<[Record<string, unknown>], Buffer>(SPANS_SQL).pluck();
    this.spec = nativeSpanSpec(storeId, sampling);
  }

  /** The spans of seqs [from, to), less those of `held` (ascending). */
  read(from: number, to: number, held: readonly number[] = []): NativeSpans {
    const out = this.select.get({
      spec: this.spec,
      held: Buffer.from(new Float64Array(held).buffer),
      from,
      to,
    })!;
    let at = 0;
    const next = () => {
      const value = out.readDoubleLE(at);
      at += 8;
      return value;
    };
    const groups: EncodedGroup[] = [];
    for (let n = next(); n > 0; n--) {
      const serviceId = next();
      const spans = next();
      const length = next();
      groups.push({ serviceId, spans, bytes: out.subarray(at, at + length) });
      at += length;
    }
    const contexts: ContextCount[] = [];
    for (let n = next(); n > 0; n--) contexts.push({ ctx: next(), spans: next(), unsampled: next() });
    const left: NativeSpans['left'] = [];
    for (let n = next(); n > 0; n--) left.push({ seq: next(), ctx: next() });
    return { groups, contexts, left };
  }
}
