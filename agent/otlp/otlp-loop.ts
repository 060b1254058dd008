/**
 * The OTLP export's work, on its own thread (agent/otlp/otlp-thread.ts), so
 * it never takes the thread that decodes the capture: its own read
 * connection follows the node store in commit (seq) order from where the
 * export started, turns each event of a W3C trace into a span (sampled traces
 * only, unless sampling is `all`; past the per-trace cap into the trace's
 * summary), gathers spans into requests by count (BATCH_SPANS) and age
 * (BATCH_DELAY_MS), gzips them and sends them in order. A receiver that is
 * down, slow or asks to wait (429/503 with Retry-After) gets the same request
 * again after its Retry-After or an exponential backoff, while the reading
 * goes on: spans wait in a bounded queue, and what does not fit is dropped
 * and counted, never waited for.
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
import { LAST_SEQ_SQL } from '../ship/ship-sql';
import { OtlpSender, type SendOutcome } from './otlp-sender';
import type { OtlpTarget } from './otlp-target';
import { TraceCap } from './trace-cap';

export interface OtlpLoopOptions {
  /** how often the store is looked at (default 100 ms) */
  pollMs?: number;
  /** spans per request at most (default 512) */
  batchSpans?: number;
  /** a request goes once its oldest span waited this long (default 1 s) */
  batchDelayMs?: number;
  /** rows read per look at most (default 8,192) */
  readRows?: number;
  retryInitialMs?: number;
  retryMaxMs?: number;
}

/** What the loop tells its owner: totals since the start, and the queue now. */
export interface OtlpProgress {
  state: 'exporting' | 'retrying' | 'stopped';
  /** spans the receiver accepted (summary spans included) */
  exported: number;
  /** spans that did not fit the queue */
  dropped: number;
  /** spans the receiver refused for good (a non-retryable answer, or a partial success) */
  rejected: number;
  /** events of traces whose traceparent is not sampled (skipped) */
  unsampled: number;
  /** events past their trace's cap, folded into summary spans */
  summarized: number;
  /** spans waiting to be sent */
  queued: number;
  /** requests sent again */
  retries: number;
  /** bytes of the requests the receiver accepted, as sent (gzipped) */
  wireBytes: number;
  lastError: string | null;
}

interface Request {
  body: Buffer;
  spans: number;
}

export class OtlpLoop {
  private readonly db: Database.Database;
  private readonly names: StoreNameCache;
  private readonly select: Database.Statement<[number, number], EventRow>;
  private readonly lastSeq: Database.Statement<[], number | null>;
  private readonly sender: OtlpSender;
  private readonly resources = new SpanResources();
  private readonly cap: TraceCap;
  private readonly encoder: SpanEncoder;
  private readonly pollMs: number;
  private readonly batchSpans: number;
  private readonly batchDelayMs: number;
  private readonly readRows: number;
  private readonly retryInitialMs: number;
  private readonly retryMaxMs: number;
  private readonly requests: Request[] = [];
  private open: KernelSpan[] = [];
  private openSinceMs = 0;
  private timer: NodeJS.Timeout | null = null;
  private sending: Promise<void> | null = null;
  private backoffMs: number;
  private wake: (() => void) | null = null;
  private stopping = false;
  readonly progress: OtlpProgress = {
    state: 'exporting',
    exported: 0,
    dropped: 0,
    rejected: 0,
    unsampled: 0,
    summarized: 0,
    queued: 0,
    retries: 0,
    wireBytes: 0,
    lastError: null,
  };

  constructor(
    storePath: string,
    private readonly target: OtlpTarget,
    /** the first seq to export */
    private cursor: number,
    private readonly report: (progress: OtlpProgress) => void,
    options: OtlpLoopOptions = {},
  ) {
    this.pollMs = options.pollMs ?? 100;
    this.batchSpans = options.batchSpans ?? 512;
    this.batchDelayMs = options.batchDelayMs ?? 1000;
    this.readRows = options.readRows ?? 8192;
    this.retryInitialMs = options.retryInitialMs ?? 500;
    this.retryMaxMs = options.retryMaxMs ?? 30_000;
    this.backoffMs = this.retryInitialMs;
    this.db = new Database(storePath, { readonly: true, fileMustExist: true });
    this.db.pragma('busy_timeout = 5000');
    this.names = new StoreNameCache(this.db, readStoreInfo(this.db));
    // the agent's writer migrated the file to this version before the export started
    this.select = this.db
      .prepare<[number, number], EventRow>(
        `SELECT ${eventColumnsOf(SCHEMA_VERSION)} FROM events INDEXED BY events_by_seq
         WHERE seq >= ? AND seq < ? AND ctx IS NOT NULL ORDER BY seq`,
      )
      .safeIntegers(true);
    this.lastSeq = this.db.prepare<[], number | null>(LAST_SEQ_SQL).pluck();
    this.sender = new OtlpSender(target);
    this.cap = new TraceCap(target.maxSpansPerTrace, this.resources);
    this.encoder = new SpanEncoder(target.protocol);
  }

  start(): void {
    this.timer ??= setInterval(() => this.tick(), this.pollMs);
  }

  /** Reads what was committed, closes what is due, and sends. */
  tick(nowMs = Date.now()): void {
    this.read(nowMs);
    for (const summary of this.cap.due(nowMs, false)) this.add(summary, nowMs);
    if (this.open.length > 0 && nowMs - this.openSinceMs >= this.batchDelayMs) this.seal();
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
      // a row gives at most one span (a summary span comes with a row that closes one)
      const rows = failing ? this.readRows : Math.min(this.readRows, room);
      const to = Math.min(this.cursor + rows, last + 1);
      // all(), not iterate(): the names cache queries the same connection for a new context
      for (const row of this.select.all(this.cursor, to)) this.consider(row, nowMs);
      this.cursor = to;
    }
  }

  private consider(row: EventRow, nowMs: number): void {
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
    const closed: KernelSpan[] = [];
    const folded = this.cap.fold(event, flags, nowMs, closed);
    for (const summary of closed) this.add(summary, nowMs);
    if (folded) this.progress.summarized++;
    else this.add(eventSpan(event, this.resources, ctx.trace_flags, spanId)!, nowMs);
  }

  private add(span: KernelSpan, nowMs: number): void {
    if (this.progress.queued >= this.target.queueSpans) {
      this.progress.dropped++;
      return;
    }
    if (this.open.length === 0) this.openSinceMs = nowMs;
    this.open.push(span);
    this.progress.queued++;
    if (this.open.length >= this.batchSpans) this.seal();
  }

  /** The open batch becomes a request, encoded and compressed once, however often it is sent. */
  private seal(): void {
    if (this.open.length === 0) return;
    const encoded = this.encoder.encode(this.open);
    const bytes = Buffer.from(encoded.buffer, encoded.byteOffset, encoded.byteLength);
    this.requests.push({
      body: this.target.gzip ? gzipSync(bytes, { level: 1 }) : bytes,
      spans: this.open.length,
    });
    this.open = [];
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
        await this.sleep(outcome.afterMs ?? this.backoffMs);
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

  private publish(): void {
    this.report(this.progress);
  }

  private sleep(ms: number): Promise<void> {
    return new Promise((resolve) => {
      const timer = setTimeout(done, ms);
      function done(): void {
        clearTimeout(timer);
        resolve();
      }
      this.wake = done;
    });
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
    this.wake?.();
    const nowMs = Date.now();
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
