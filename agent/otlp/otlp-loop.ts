/**
 * The OTLP export's work, on its own thread (agent/otlp/otlp-thread.ts), so
 * it never takes the thread that decodes the capture: its own read
 * connection follows the node store in commit (seq) order from where the
 * export started, turns each event of a W3C trace into a span (sampled traces
 * only, unless sampling is `all`; past the per-trace cap into the trace's
 * summary), gathers spans into requests by count (batchSpans), size
 * (MAX_REQUEST_BYTES) and age (batchDelayMs), gzips them and sends them in
 * order. With http/protobuf the spans are written inside SQLite
 * (otlp-native-spans.ts), a read's worth at a time, and only the trace cap's
 * bookkeeping, summaries and the rare row the native encoder leaves come into
 * JavaScript; http/json makes each span here (core/otlp/event-span.ts). A
 * receiver that is down, slow or asks to wait (429/503 with Retry-After) gets
 * the same request again after its Retry-After or an exponential backoff,
 * while the reading goes on: spans wait in a bounded queue, and what does not
 * fit is dropped and counted, never waited for.
 */
import Database from 'better-sqlite3';
import { gzipSync } from 'node:zlib';
import { rowToEvent, type ApiEvent } from '../../core/model';
import { eventColumnsOf, type EventRow } from '../../core/store/event-columns';
import { readStoreInfo, SCHEMA_VERSION } from '../../core/store/schema';
import { StoreNameCache } from '../../core/store/store-names';
import {
  eventSpan,
  SAMPLED_FLAG,
  SpanResources,
  W3C_TRACE_ID,
  type KernelSpan,
} from '../../core/otlp/event-span';
import { SpanEncoder } from '../../core/otlp/otlp-encoding';
import { spanIdFor } from '../../core/otlp/span-ids';
import { SpanProtobufWriter } from '../../core/otlp/span-protobuf';
import { LAST_SEQ_SQL } from '../ship/ship-sql';
import { groupResource, NativeSpanReader, type NativeRead } from './otlp-native-spans';
import { OtlpSender, type SendOutcome } from './otlp-sender';
import type { OtlpTarget } from './otlp-target';
import type { OtlpProtocol } from '../../core/otlp/otlp-protocols';
import { TraceCap } from './trace-cap';
import { WakeableSleep } from '../wakeable-sleep';
import { startingOtlpProgress, type OtlpProgress } from './otlp-progress';

export interface OtlpLoopOptions {
  /** how often the store is looked at (default 100 ms) */
  pollMs?: number;
  /** spans per request at most (default 4,096 for http/protobuf, 512 for http/json) */
  batchSpans?: number;
  /** a request goes once its oldest span waited this long (default 1 s) */
  batchDelayMs?: number;
  /** rows read per look at most (default 8,192) */
  readRows?: number;
  retryInitialMs?: number;
  retryMaxMs?: number;
}

interface Request {
  body: Buffer;
  spans: number;
}

/** The request being gathered: spans made here, and the bytes per group (service, container) of the spans kept natively. */
interface OpenRequest {
  spans: KernelSpan[];
  native: Map<number, number>;
  count: number;
  /** of the native spans (those made here are few: summaries, odd rows) */
  nativeBytes: number;
  sinceMs: number;
}

const noRequest = (): OpenRequest => ({ spans: [], native: new Map(), count: 0, nativeBytes: 0, sinceMs: 0 });

/**
 * Spans a request holds at most. Protobuf: a request costs the export thread ~200 µs (HTTP, the
 * loopback), so many spans to one; its bytes are bounded too (MAX_REQUEST_BYTES). JSON: its bytes
 * are not known before it is written, so few enough that long paths stay far under the 20 MiB
 * a receiver takes (~14 KB a span).
 */
const DEFAULT_BATCH_SPANS: Record<OtlpProtocol, number> = { 'http/protobuf': 4096, 'http/json': 512 };
/**
 * A request is sent once its spans take this many bytes (before gzip), whatever their count: an
 * OTLP receiver takes 20 MiB bodies by default (the OpenTelemetry Collector's), and a read adds at
 * most NATIVE_READ_ROWS spans of at most ~13 KB (a 4 KB path thrice) past it.
 */
const MAX_REQUEST_BYTES = 4 << 20;
/** Rows a native read takes at most: past 512 a read costs no less a span (bench/otlp.ts). */
const NATIVE_READ_ROWS = 512;

/** The fastest level: a span's bytes are mostly keys and ids every span repeats, which level 1 finds as well. */
const GZIP_LEVEL = 1;
/** How often the progress goes to the owner at most, but for a change of state and the stop. */
const PUBLISH_MS = 100;

export class OtlpLoop {
  private readonly db: Database.Database;
  private readonly names: StoreNameCache;
  private readonly select: Database.Statement<[number, number], EventRow>;
  /** the rows of some contexts in a seq range: the traces a native read cannot count at once */
  private readonly selectOf: Database.Statement<[number, number, string], EventRow>;
  /** http/protobuf: spans written inside SQLite */
  private readonly native: NativeSpanReader | null;
  private readonly lastSeq: Database.Statement<[], number | null>;
  private readonly sender: OtlpSender;
  private readonly resources = new SpanResources();
  private readonly cap: TraceCap;
  private readonly encoder: SpanEncoder;
  /** the framing of requests with natively kept spans */
  private readonly protobuf = new SpanProtobufWriter();
  private readonly pollMs: number;
  private readonly batchSpans: number;
  private readonly batchDelayMs: number;
  private readonly readRows: number;
  private readonly retryInitialMs: number;
  private readonly retryMaxMs: number;
  private readonly requests: Request[] = [];
  private open: OpenRequest = noRequest();
  private publishedMs = 0;
  private publishedState: OtlpProgress['state'] | null = null;
  private timer: NodeJS.Timeout | null = null;
  private sending: Promise<void> | null = null;
  private backoffMs: number;
  private readonly pause = new WakeableSleep();
  private stopping = false;
  readonly progress = startingOtlpProgress();

  constructor(
    storePath: string,
    private readonly target: OtlpTarget,
    /** the first seq to export */
    private cursor: number,
    private readonly report: (progress: OtlpProgress) => void,
    options: OtlpLoopOptions = {},
  ) {
    this.pollMs = options.pollMs ?? 100;
    this.batchSpans = options.batchSpans ?? DEFAULT_BATCH_SPANS[target.protocol];
    this.batchDelayMs = options.batchDelayMs ?? 1000;
    this.readRows = options.readRows ?? 8192;
    this.retryInitialMs = options.retryInitialMs ?? 500;
    this.retryMaxMs = options.retryMaxMs ?? 30_000;
    this.backoffMs = this.retryInitialMs;
    this.db = new Database(storePath, { readonly: true, fileMustExist: true });
    this.db.pragma('busy_timeout = 5000');
    this.names = new StoreNameCache(this.db, readStoreInfo(this.db));
    // the agent's writer migrated the file to this version before the export started
    const columns = eventColumnsOf(SCHEMA_VERSION);
    this.select = this.db
      .prepare<[number, number], EventRow>(
        `SELECT ${columns} FROM events INDEXED BY events_by_seq
         WHERE seq >= ? AND seq < ? AND ctx IS NOT NULL ORDER BY seq`,
      )
      .safeIntegers(true);
    this.selectOf = this.db
      .prepare<[number, number, string], EventRow>(
        `SELECT ${columns} FROM events INDEXED BY events_by_seq
         WHERE seq >= ? AND seq < ? AND ctx IN (SELECT value FROM json_each(?)) ORDER BY seq`,
      )
      .safeIntegers(true);
    this.native =
      target.protocol === 'http/protobuf'
        ? new NativeSpanReader(this.db, this.names.storeId, target.sampling)
        : null;
    this.lastSeq = this.db.prepare<[], number | null>(LAST_SEQ_SQL).pluck();
    this.sender = new OtlpSender(target);
    this.cap = new TraceCap(target.maxSpansPerTrace, this.resources);
    this.encoder = new SpanEncoder(target.protocol);
  }

  start(): void {
    this.timer ??= setInterval(() => this.tick(), this.pollMs);
  }

  /**
   * Reads what was committed, closes what is due, and sends. `nowMs` is performance.now()'s: the
   * batch delay and the trace cap's idle and summary ages are spans of time, which a wall clock
   * stepped back held for the length of the step (and stepped on, closed at once).
   */
  tick(nowMs = performance.now()): void {
    this.read(nowMs);
    for (const summary of this.cap.due(nowMs, false)) this.add(summary, nowMs);
    if (this.full() || (this.open.count > 0 && nowMs - this.open.sinceMs >= this.batchDelayMs)) this.seal();
    this.kick();
    this.publish();
  }

  /*
   * The committed events past the cursor, a look's worth of seqs at a time. While the receiver
   * takes requests, reading waits for room in the queue (the store holds the rest: a burst is sent
   * late, not dropped); while it fails, reading goes on and what does not fit is dropped, counted,
   * so the export never falls behind by more than the queue.
   */
  private read(nowMs: number): void {
    const last = this.lastSeq.get() ?? 0;
    while (this.cursor <= last) {
      const failing = this.progress.state === 'retrying' || this.stopping;
      const room = this.target.queueSpans - this.progress.queued;
      if (!failing && room <= 0) return;
      if (this.full()) this.seal();
      // a row gives at most one span (a summary span comes with a row that closes one); a native
      // read adds its spans to the open request whole, so it reads what the request has room for
      const rows = this.native
        ? Math.min(
            NATIVE_READ_ROWS,
            this.readRows,
            this.batchSpans - this.open.count,
            room > 0 ? room : this.batchSpans,
          )
        : failing
          ? this.readRows
          : Math.min(this.readRows, room);
      const to = Math.min(this.cursor + rows, last + 1);
      const spans: KernelSpan[] = [];
      if (this.native) this.readNative(this.native, to, nowMs, spans);
      // all(), not iterate(): the names cache queries the same connection for a new context
      else for (const row of this.select.all(this.cursor, to)) this.consider(row, nowMs, spans);
      for (const span of spans) this.add(span, nowMs);
      this.cursor = to;
    }
  }

  /**
   * Seqs [cursor, to) written natively. The trace cap counts each trace's spans of the read at
   * once; a trace the read takes past its cap (and one with a row left to the TS side) is
   * counted event by event in seq order, as `consider` does, its folded events held out of a
   * second native read. The spans made here go to `out`, to be added once the read's own are.
   */
  private readNative(native: NativeSpanReader, to: number, nowMs: number, out: KernelSpan[]): void {
    const from = this.cursor;
    const first = native.read(from, to);
    const byTrace = new Map<string, { spans: number; ctxs: number[] }>();
    for (const { ctx, traceId, spans, unsampled } of first.contexts) {
      this.progress.unsampled += unsampled;
      if (spans === 0) continue;
      const trace = byTrace.get(traceId);
      if (trace) {
        trace.spans += spans;
        trace.ctxs.push(ctx);
      } else byTrace.set(traceId, { spans, ctxs: [ctx] });
    }
    // contexts whose rows are counted event by event: those of rows left to the TS side, and of their traces
    const byEvent = new Set<number>();
    const leftTraces = new Set<unknown>();
    for (const { ctx } of first.left) {
      byEvent.add(ctx);
      leftTraces.add(this.names.context(ctx).trace_id);
    }
    for (const [traceId, trace] of byTrace) {
      if (leftTraces.has(traceId) || trace.spans > this.cap.room(traceId))
        for (const ctx of trace.ctxs) byEvent.add(ctx);
      else this.cap.admit(traceId, trace.spans, nowMs, out);
    }
    let read: NativeRead = first;
    if (byEvent.size > 0) {
      const left = new Set(first.left.map((row) => row.seq));
      const held: number[] = [];
      for (const row of this.selectOf.all(from, to, JSON.stringify([...byEvent]))) {
        if (left.has(Number(row.seq))) this.consider(row, nowMs, out);
        else if (this.fold(row, nowMs, out)) held.push(Number(row.seq));
      }
      if (held.length > 0) {
        native.undo();
        read = native.read(from, to, held);
      }
    }
    const spans = read.groups.reduce((n, group) => n + group.spans, 0);
    if (spans === 0) return;
    // read() sized the read to the queue's room: only a queue full already (a failing receiver) drops
    if (this.progress.queued >= this.target.queueSpans) {
      native.undo();
      this.progress.dropped += spans;
      return;
    }
    this.opened(spans, nowMs);
    for (const { group, length } of read.groups) {
      this.open.native.set(group, (this.open.native.get(group) ?? 0) + length);
      this.open.nativeBytes += length;
    }
    this.progress.queued += spans;
  }

  /** A row as a span made here (http/json, and the rows the native encoder leaves): sampling, cap, span, to `out`. */
  private consider(row: EventRow, nowMs: number, out: KernelSpan[]): void {
    const ctx = this.names.context(Number(row.ctx));
    // a marker's context names no W3C trace: nothing to put the event under
    if (ctx.trace_id === null || !W3C_TRACE_ID.test(ctx.trace_id)) return;
    const flags = ctx.trace_flags ?? 0;
    if (this.target.sampling === 'sampled' && !(flags & SAMPLED_FLAG)) {
      this.progress.unsampled++;
      return;
    }
    const event: ApiEvent = rowToEvent(row, this.names);
    const spanId = spanIdFor(this.names.storeId, Number(row.seq));
    if (this.cap.fold(event, flags, nowMs, out)) this.progress.summarized++;
    else out.push(eventSpan(event, this.resources, ctx.trace_flags, spanId)!);
  }

  /** A row the native encoder wrote: whether the trace cap folds it into its trace's summary (closed ones to `out`). */
  private fold(row: EventRow, nowMs: number, out: KernelSpan[]): boolean {
    const ctx = this.names.context(Number(row.ctx));
    const folded = this.cap.fold(rowToEvent(row, this.names), ctx.trace_flags ?? 0, nowMs, out);
    if (folded) this.progress.summarized++;
    return folded;
  }

  private add(span: KernelSpan, nowMs: number): void {
    if (this.progress.queued >= this.target.queueSpans) {
      this.progress.dropped++;
      return;
    }
    this.opened(1, nowMs);
    this.open.spans.push(span);
    this.progress.queued++;
    if (this.open.count >= this.batchSpans) this.seal();
  }

  private full(): boolean {
    return this.open.count >= this.batchSpans || this.open.nativeBytes >= MAX_REQUEST_BYTES;
  }

  private opened(spans: number, nowMs: number): void {
    if (this.open.count === 0) this.open.sinceMs = nowMs;
    this.open.count += spans;
  }

  /** The open batch becomes a request, encoded and compressed once, however often it is sent. */
  private seal(): void {
    if (this.open.count === 0) return;
    this.requests.push({ body: this.body(), spans: this.open.count });
    this.open = noRequest();
  }

  /** The open request's body: http/protobuf framed around the native spans and gzipped natively, http/json here. */
  private body(): Buffer {
    const { spans, native } = this.open;
    if (this.native) {
      const kept = [...native].map(([group, length]) => ({
        resource: groupResource(group, this.names, this.resources),
        service: group,
        length,
      }));
      return this.native.request(this.protobuf.layout(spans, kept), this.target.gzip ? GZIP_LEVEL : 0);
    }
    const encoded = this.encoder.encode(spans);
    const bytes = Buffer.from(encoded.buffer, encoded.byteOffset, encoded.byteLength);
    return this.target.gzip ? gzipSync(bytes, { level: GZIP_LEVEL }) : bytes;
  }

  private kick(): void {
    if (this.requests.length > 0) this.sending ??= this.sendAll().finally(() => (this.sending = null));
  }

  private async sendAll(): Promise<void> {
    while (this.requests.length > 0) {
      const request = this.requests[0]!;
      const outcome = await this.sender.send(request.body);
      // stop() gave up on it meanwhile, and counted it
      if (this.progress.state === 'stopped') return;
      if (outcome.kind === 'retry') {
        this.note(outcome);
        if (this.stopping) return;
        await this.pause.sleep(outcome.afterMs ?? this.backoffMs);
        this.backoffMs = Math.min(this.backoffMs * 2, this.retryMaxMs);
        this.progress.retries++;
        continue;
      }
      this.requests.shift();
      this.progress.queued -= request.spans;
      this.backoffMs = this.retryInitialMs;
      this.note(outcome);
      if (outcome.kind === 'accepted') {
        this.progress.exported += request.spans - outcome.rejectedSpans;
        this.progress.rejected += outcome.rejectedSpans;
        this.progress.wireBytes += request.body.length;
      } else this.progress.rejected += request.spans;
      this.publish();
    }
  }

  private note(outcome: SendOutcome): void {
    if (outcome.kind === 'accepted') {
      this.progress.state = 'exporting';
      this.progress.lastError = outcome.message;
    } else {
      this.progress.state = outcome.kind === 'retry' ? 'retrying' : 'exporting';
      this.progress.lastError = outcome.error;
    }
    this.publish();
  }

  /** The progress to the owner: at most every PUBLISH_MS (a message costs), at once when the state changed. */
  private publish(nowMs = performance.now()): void {
    if (nowMs - this.publishedMs < PUBLISH_MS && this.progress.state === this.publishedState) return;
    this.publishedMs = nowMs;
    this.publishedState = this.progress.state;
    this.report(this.progress);
  }

  /**
   * Stops reading: what is committed by then is read, every summary closed,
   * and the queue sent for at most `flushMs`, each request tried once more at
   * most. What is not acknowledged by then is counted as dropped.
   */
  async stop(flushMs: number): Promise<void> {
    if (this.timer) clearInterval(this.timer);
    this.timer = null;
    this.stopping = true;
    this.pause.wake();
    const nowMs = performance.now();
    this.read(nowMs);
    for (const summary of this.cap.due(nowMs, true)) this.add(summary, nowMs);
    this.seal();
    this.kick();
    let deadline: NodeJS.Timeout | undefined;
    await Promise.race([
      this.sending,
      new Promise<void>((resolve) => (deadline = setTimeout(resolve, flushMs))),
    ]);
    clearTimeout(deadline);
    this.progress.dropped += this.progress.queued;
    this.progress.queued = 0;
    this.requests.length = 0;
    this.progress.state = 'stopped';
    this.sender.close();
    this.db.close();
    this.publish();
  }
}
