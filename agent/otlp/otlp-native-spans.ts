/**
 * OTLP spans of the node store written inside SQLite (native/sqlite/kreplay_otlp.c),
 * so that neither a row nor a span's bytes cross into JavaScript. A read
 * (kreplay_otlp_spans, one statement over a seq range) adds its spans to the
 * connection's open request and tells, per service, the spans and bytes it
 * added; per context, the rows written and the rows of unsampled traces
 * skipped (the trace cap and the counters need them); and the rows it left to
 * core/otlp/event-span.ts, which it cannot be sure to write exactly as that
 * does (a code past its tables, text that is not UTF-8, an integer past
 * 2^53). The request (kreplay_otlp_request) is the open request's spans in
 * the framing the TS writer lays out (core/otlp/span-protobuf.ts), gzipped by
 * libdeflate. The names the encoder gives codes come from the TS name
 * functions, handed over with each read (the spec).
 */
import type Database from 'better-sqlite3';
import { blockOpName, eventTypeName, syscallName, targetKindName } from '../../core/model';
import { errnoName, type SpanResources } from '../../core/otlp/event-span';
import type { StoreNameCache } from '../../core/store/store-names';
import type { Resource } from '@opentelemetry/resources';
import type { RequestChunk } from '../../core/otlp/span-protobuf';
import { EventInsert } from '../store/event-insert';
import type { OtlpSampling } from './otlp-target';

/** The codes each name table of the spec covers: 0..CODES-1 (kreplay_otlp.c's CODES). */
const CODES = 256;

/** kreplay_otlp_spans's arguments after the spec and the held seqs, in its order (the A_ enum of kreplay_otlp.c). */
const ROW_ARGUMENTS = [
  'e.seq',
  'e.ts',
  'e.dur',
  // the group a span goes to: its service and its container (one resource each), as the batch's service column holds them
  `e.service + (coalesce(e.container, 0) << 32)`,
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

/** One resource's spans a read added to the open request: their bytes (ScopeSpans field 2) stay native. */
export interface NativeGroup {
  /** the service's store id plus 2^32 times its container's (0: none) */
  group: number;
  spans: number;
  length: number;
}

export interface ContextCount {
  ctx: number;
  /** its W3C trace id, from the read's own join (no query a context) */
  traceId: string;
  /** rows written as spans */
  spans: number;
  /** rows of a W3C trace whose traceparent is not sampled, skipped */
  unsampled: number;
}

export interface NativeRead {
  groups: NativeGroup[];
  contexts: ContextCount[];
  /** rows for the TS side to make (kreplay_otlp.c says which and why) */
  left: { seq: number; ctx: number }[];
}

/** A request's layout as kreplay_otlp_request reads it: per chunk a double 0, a length and bytes, or a double 1 and a service id. */
function layoutBlob(chunks: readonly RequestChunk[]): Buffer {
  const parts: Uint8Array[] = [];
  for (const chunk of chunks) {
    const head = Buffer.allocUnsafe(16);
    if (chunk instanceof Uint8Array) {
      head.writeDoubleLE(0, 0);
      head.writeDoubleLE(chunk.length, 8);
      parts.push(head, chunk);
    } else {
      head.writeDoubleLE(1, 0);
      head.writeDoubleLE(chunk.service, 8);
      parts.push(head);
    }
  }
  return Buffer.concat(parts);
}

const CONTAINER_SHIFT = 2 ** 32;
/** a context's trace id in the read's result: 32 hex digits (kreplay_otlp.c's TRACE_ID_LEN) */
const TRACE_ID_LENGTH = 32;

/** The resource of a group's spans: its service's and its container's, the one eventSpan gives their events. */
export function groupResource(group: number, names: StoreNameCache, resources: SpanResources): Resource {
  const container = names.container(Math.floor(group / CONTAINER_SHIFT) || null);
  return resources.of(names.service(group % CONTAINER_SHIFT), names.node, container ?? undefined);
}

export class NativeSpanReader {
  private readonly select: Database.Statement<[Record<string, unknown>], Buffer>;
  private readonly undoRead: Database.Statement<[], number>;
  private readonly requestOf: Database.Statement<[Buffer, number], Buffer>;
  private readonly spec: Buffer;
  /** whether the last read added spans (an undo takes them back out) */
  private lastAdded = false;

  constructor(db: Database.Database, storeId: string, sampling: OtlpSampling) {
    // kreplay_otlp_spans lives in the agent's SQLite extension
    EventInsert.prepareConnection(db);
    this.select = db.prepare<[Record<string, unknown>], Buffer>(SPANS_SQL).pluck();
    this.undoRead = db.prepare<[], number>('SELECT kreplay_otlp_undo()').pluck();
    this.requestOf = db.prepare<[Buffer, number], Buffer>('SELECT kreplay_otlp_request(?, ?)').pluck();
    this.spec = Buffer.from(nativeSpanSpec(storeId, sampling));
  }

  /** Adds the spans of seqs [from, to), less those of `held` (ascending), to the open request. */
  read(from: number, to: number, held: readonly number[] = []): NativeRead {
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
    const groups: NativeGroup[] = [];
    for (let n = next(); n > 0; n--) groups.push({ group: next(), spans: next(), length: next() });
    this.lastAdded = groups.length > 0;
    const contexts: ContextCount[] = [];
    for (let n = next(); n > 0; n--) {
      const count = { ctx: next(), spans: next(), unsampled: next() };
      contexts.push({ ...count, traceId: out.toString('latin1', at, (at += TRACE_ID_LENGTH)) });
    }
    const left: NativeRead['left'] = [];
    for (let n = next(); n > 0; n--) left.push({ seq: next(), ctx: next() });
    return { groups, contexts, left };
  }

  /** Takes the spans the last read added back out of the open request. */
  undo(): void {
    if (this.lastAdded) this.undoRead.get();
    this.lastAdded = false;
  }

  /** The open request in the layout `chunks` give (every service with spans named once), gzipped at `level` (0: not); it is then empty. */
  request(chunks: readonly RequestChunk[], level: number): Buffer {
    const body = this.requestOf.get(layoutBlob(chunks), level)!;
    this.lastAdded = false;
    return body;
  }
}
