/**
 * The daemon's queries run here, on a pool of worker threads with their own
 * read-only connections: the main thread parses, routes, writes replay
 * frames and moves bytes, and never waits on SQLite. Requests wait in a
 * bounded queue for a free worker (past the bound: 503 too-busy with
 * Retry-After), and each has a deadline from the moment a worker that is up
 * takes it (the queue's bound limits the wait before): past it the client
 * gets 503 query-timeout, and the worker is terminated (SQLite's statement
 * with it: better-sqlite3 cannot interrupt one) and replaced, so the pool
 * stays whole. A worker that dies on its own is restarted at once, and
 * again after 0.1, 0.2, 0.4 … s (at most 30 s) while it keeps dying before it
 * has served for a while; while no worker is up, queries are refused with
 * 503 query-workers-down naming why, and /readyz says so.
 */
import { availableParallelism } from 'node:os';
import type { Worker } from 'node:worker_threads';
import type { Logger } from '../../core/log/logger';
import { startThread } from '../../core/threads/start-thread';
import type { EventsJson } from '../events/events-json';
import { StoreError } from '../../core/store/schema';
import { ProblemError } from '../http/problem';
import type { EventReader } from '../store/event-reader';
import type { StoreScope } from '../store/store-directory';
import type { TransactionReader } from '../replay/transaction-reader';
import type { QueryOp, QueryOps } from './query-ops';
import { fromWire, type QueryAnswer, type QueryRequest, type QueryWorkerData } from './query-protocol';

export const DEFAULT_QUERY_WORKERS = availableParallelism();
export const DEFAULT_MAX_QUEUED_QUERIES = 256;
export const DEFAULT_QUERY_TIMEOUT_MS = 10_000;
/** Restart delays of a worker that keeps dying: none the first time, then doubling from this, up to the max. */
const RESTART_BASE_MS = 100;
const RESTART_MAX_MS = 30_000;
/** A worker up this long before it died was healthy: its next death restarts it at once. */
const HEALTHY_AFTER_MS = 10_000;

export interface QueryPoolOptions {
  dataDir: string;
  log: Logger;
  /** which of the data dir's stores the workers read (default all; beside a fleet store, the incidents') */
  scope?: StoreScope;
  workers?: number;
  maxQueued?: number;
  timeoutMs?: number;
  /** told when a worker finds a store damaged (the other workers are told here) */
  onDamaged?: (damage: StoreError) => void;
  /** told of each query answered (or failed) by a worker: how long it waited for one, how long it took there */
  onAnswered?: (timing: QueryTiming) => void;
  /** the workers' thread module (a directory and name, as startThread takes them); the query worker by default */
  workerModule?: { dir: string; name: string };
}

/** A query's time in the pool, in seconds: queued before a worker took it, then from there to its answer. */
export interface QueryTiming {
  op: QueryOp;
  waitSeconds: number;
  runSeconds: number;
}

/** What operation K resolves to on the main thread. */
type Answer<K extends QueryOp> = Awaited<ReturnType<QueryOps[K]>>;

interface Job {
  request: QueryRequest;
  resolve(result: unknown): void;
  reject(err: Error): void;
  timer?: NodeJS.Timeout;
  slot?: Slot;
  /** performance.now() when it was queued, and when a worker took it */
  queuedAt: number;
  takenAt: number;
}

/** Its times are performance.now()'s: a wall clock step neither ends a back-off nor makes a worker look healthy. */
interface Slot {
  worker: Worker;
  job: Job | null;
  since: number;
  /** resolved once the worker's stores are open: queries go only to workers that are up */
  up: Promise<void>;
  isUp: boolean;
  upAt: number;
  /** deaths in a row, each before it had been up HEALTHY_AFTER_MS; and the last one's cause */
  failures: number;
  error: string | null;
  /** when a dead worker is started again */
  restartAt: number | null;
  restartTimer: NodeJS.Timeout | undefined;
}

export interface PoolStats {
  workers: number;
  busy: number;
  queued: number;
  /** time workers have spent on queries, summed */
  busySeconds: number;
}

/** The workers as /readyz reports them. */
export interface PoolHealth {
  workers: number;
  up: number;
  /** workers that died and are waiting to be started again */
  restarting: { failures: number; error: string | null; restart_in_s: number }[];
}

export class QueryPool {
  private readonly slots: Slot[] = [];
  private readonly queue: Job[] = [];
  private nextId = 0;
  private busyMs = 0;
  private closed = false;
  private readonly timeoutMs: number;
  private readonly maxQueued: number;

  constructor(private readonly options: QueryPoolOptions) {
    this.timeoutMs = options.timeoutMs ?? DEFAULT_QUERY_TIMEOUT_MS;
    this.maxQueued = options.maxQueued ?? DEFAULT_MAX_QUEUED_QUERIES;
    for (let i = 0; i < (options.workers ?? DEFAULT_QUERY_WORKERS); i++) {
      const slot = this.newSlot();
      this.slots.push(slot);
      this.start(slot);
    }
  }

  /** The node stores' EventReader, answered by the workers. */
  readonly reader: EventReader = {
    page: (filter, opts) => this.call('page', filter, opts),
    summarize: (filter) => this.call('summarize', filter),
    get: (eventId) => this.call('get', eventId),
    nodes: () => this.call('nodes'),
    retainedFrom: (filter) => this.call('retainedFrom', filter),
    sampledRanges: (filter) => this.call('sampledRanges', filter),
  };

  /**
   * Replay's reads of the node files: a session's summary, a seek's index,
   * the frames read ahead, pages of events. Those a replay's schedule or a
   * control waits for go before the queued queries: a client's query can
   * wait a few milliseconds more. The pages are a resuming stream's history
   * (framed on the worker), sent at its client's pace, on no schedule: they queue with the queries,
   * so that a client catching up does not hold a worker ahead of them.
   */
  readonly transactions: TransactionReader = {
    summarize: (...args) => this.enqueue(true, 'transactionSummary', ...args),
    indexAt: (...args) => this.enqueue(true, 'transactionIndexAt', ...args),
    page: (...args) => this.enqueue(false, 'transactionPage', ...args),
    frames: (...args) => this.enqueue(true, 'transactionFrames', ...args),
    history: (...args) => this.enqueue(false, 'transactionHistory', ...args),
  };

  /** Events pages and lookups as JSON text, built in the workers. */
  readonly json: EventsJson = {
    list: (query) => this.call('list', query),
    one: (eventId, int64AsString) => this.call('one', eventId, int64AsString),
  };

  /** Resolves once every worker is up (its first queries would otherwise wait for it). */
  async ready(): Promise<void> {
    await Promise.all(this.slots.map((slot) => slot.up));
  }

  stats(): PoolStats {
    const now = performance.now();
    const running = this.slots.reduce((ms, slot) => ms + (slot.job ? now - slot.since : 0), 0);
    return {
      workers: this.slots.length,
      busy: this.slots.filter((slot) => slot.job).length,
      queued: this.queue.length,
      busySeconds: (this.busyMs + running) / 1000,
    };
  }

  health(): PoolHealth {
    const now = performance.now();
    return {
      workers: this.slots.length,
      up: this.slots.filter((slot) => slot.isUp).length,
      restarting: this.slots
        .filter((slot) => slot.restartAt !== null)
        .map((slot) => ({
          failures: slot.failures,
          error: slot.error,
          restart_in_s: Math.max(0, (slot.restartAt! - now) / 1000),
        })),
    };
  }

  async close(): Promise<void> {
    this.closed = true;
    const closing = () => new ProblemError('shutting-down', 'the daemon is shutting down');
    for (const job of this.queue.splice(0)) this.fail(job, closing());
    // a running query fails now too: its worker is terminated below, and its deadline must not replace it
    for (const slot of this.slots) {
      const job = slot.job;
      this.release(slot);
      if (job) this.fail(job, closing());
      if (slot.restartAt !== null) clearTimeout(slot.restartTimer);
    }
    await Promise.all(this.slots.map((slot) => slot.worker.terminate()));
  }

  /** 503 while no worker is up and each has died since it last served: queries would wait for nothing. */
  private down(): ProblemError | null {
    if (this.slots.some((slot) => slot.isUp || slot.restartAt === null)) return null;
    const next = Math.min(...this.slots.map((slot) => slot.restartAt!));
    const error = this.slots.find((slot) => slot.error)?.error ?? 'unknown';
    return new ProblemError(
      'query-workers-down',
      `no query worker is running: they keep dying (${error}); the next starts in ${Math.ceil((next - performance.now()) / 1000)} s`,
      undefined,
      { 'Retry-After': String(Math.max(1, Math.ceil((next - performance.now()) / 1000))) },
    );
  }

  private call<K extends QueryOp>(op: K, ...args: Parameters<QueryOps[K]>): Promise<Answer<K>> {
    return this.enqueue(false, op, ...args);
  }

  /** Queues a query (`first`: ahead of the others); 503 past the queue's bound or while no worker is up. */
  private enqueue<K extends QueryOp>(
    first: boolean,
    op: K,
    ...args: Parameters<QueryOps[K]>
  ): Promise<Answer<K>> {
    if (this.closed) return Promise.reject(new ProblemError('shutting-down', 'the daemon is shutting down'));
    const down = this.down();
    if (down) return Promise.reject(down);
    if (this.queue.length >= this.maxQueued)
      return Promise.reject(
        new ProblemError(
          'too-busy',
          `${this.queue.length} queries are waiting for the ${this.slots.length} query workers already; try again shortly`,
          undefined,
          { 'Retry-After': '1' },
        ),
      );
    return new Promise<Answer<K>>((resolve, reject) => {
      const job: Job = {
        request: { id: ++this.nextId, op, args } as QueryRequest,
        resolve: resolve as (result: unknown) => void,
        reject,
        queuedAt: performance.now(),
        takenAt: 0,
      };
      if (first) this.queue.unshift(job);
      else this.queue.push(job);
      this.dispatch();
    });
  }

  private dispatch(): void {
    for (const slot of this.slots) {
      if (this.queue.length === 0) return;
      if (slot.job || !slot.isUp) continue;
      const job = this.queue.shift()!;
      slot.job = job;
      slot.since = performance.now();
      job.takenAt = performance.now();
      job.slot = slot;
      job.timer = setTimeout(() => this.expire(job), this.timeoutMs);
      slot.worker.postMessage(job.request);
    }
  }

  private newSlot(): Slot {
    return {
      worker: null as unknown as Worker,
      job: null,
      since: 0,
      isUp: false,
      upAt: 0,
      up: Promise.resolve(),
      failures: 0,
      error: null,
      restartAt: null,
      restartTimer: undefined,
    };
  }

  /** Starts a worker in `slot` (a new one, or in place of one that died or was terminated). */
  private start(slot: Slot): void {
    slot.restartAt = null;
    slot.isUp = false;
    const data: QueryWorkerData = { dataDir: this.options.dataDir, scope: this.options.scope ?? 'all' };
    const module = this.options.workerModule ?? { dir: __dirname, name: 'query-worker-main' };
    const worker = startThread(module.dir, module.name, { workerData: data, name: 'query-worker' });
    slot.worker = worker;
    let up = () => undefined as void;
    slot.up = new Promise<void>((resolve) => (up = resolve));
    worker.once('message', () => {
      slot.isUp = true;
      slot.upAt = performance.now();
      up();
      this.dispatch();
    });
    worker.on('message', (answer: QueryAnswer) => {
      const job = slot.job;
      if (!job || job.request.id !== answer.id) return;
      this.release(slot);
      clearTimeout(job.timer);
      this.options.onAnswered?.({
        op: job.request.op,
        waitSeconds: (job.takenAt - job.queuedAt) / 1000,
        runSeconds: (performance.now() - job.takenAt) / 1000,
      });
      if (answer.ok) job.resolve(answer.result);
      else {
        const error = fromWire(answer.error);
        if (error instanceof StoreError && error.code === 'E_STORE_CORRUPT') this.spreadDamage(error, slot);
        job.reject(error);
      }
      this.dispatch();
    });
    let cause: string | null = null;
    worker.on('error', (err) => {
      cause = err.message;
      this.options.log.error('query worker failed', { error: err.message });
    });
    worker.on('exit', (code) => {
      // terminated on purpose (a timeout, the end): whoever did it starts the next
      if (this.closed || slot.worker !== worker) return;
      this.died(slot, cause ?? `exited with code ${code}`);
    });
  }

  /** A worker that died on its own: its query fails, and it is started again, later if it keeps dying. */
  private died(slot: Slot, error: string): void {
    const job = slot.job;
    this.release(slot);
    if (job) this.fail(job, new Error(`the query worker running this query died: ${error}`));
    const healthy = slot.isUp && performance.now() - slot.upAt >= HEALTHY_AFTER_MS;
    slot.isUp = false;
    slot.failures = healthy ? 1 : slot.failures + 1;
    slot.error = error;
    const delay =
      slot.failures <= 1 ? 0 : Math.min(RESTART_MAX_MS, RESTART_BASE_MS * 2 ** (slot.failures - 2));
    slot.restartAt = performance.now() + delay;
    slot.restartTimer = setTimeout(() => {
      if (this.closed) return;
      this.start(slot);
      this.dispatch();
    }, delay).unref();
    this.options.log.warn('query worker died; starting another', {
      error,
      failures: slot.failures,
      delayMs: delay,
    });
    const down = this.down();
    if (down) for (const queued of this.queue.splice(0)) this.fail(queued, down);
  }

  /** Every reader skips a damaged store from now on, not only the worker that found it. */
  private spreadDamage(damage: StoreError, finder: Slot): void {
    this.options.onDamaged?.(damage);
    for (const slot of this.slots)
      if (slot !== finder)
        slot.worker.postMessage({
          id: 0,
          op: 'markDamaged',
          args: [damage.code, damage.message, damage.file],
        } satisfies QueryRequest);
  }

  private release(slot: Slot): void {
    if (slot.job) this.busyMs += performance.now() - slot.since;
    slot.job = null;
  }

  private expire(job: Job): void {
    const slot = job.slot;
    if (!slot || slot.job !== job) return;
    const timeout = new ProblemError(
      'query-timeout',
      `the query ran past --query-timeout (${this.timeoutMs} ms): narrow it (from/to, a transaction, a service)`,
      undefined,
      { 'Retry-After': '1' },
    );
    // the statement cannot be interrupted: the worker goes with it, a fresh one replaces it
    this.release(slot);
    const stuck = slot.worker;
    this.start(slot);
    void stuck.terminate();
    job.reject(timeout);
    this.options.log.warn('query timed out; its worker was replaced', {
      op: job.request.op,
      timeoutMs: this.timeoutMs,
    });
    this.dispatch();
  }

  private fail(job: Job, err: Error): void {
    clearTimeout(job.timer);
    job.reject(err);
  }
}
