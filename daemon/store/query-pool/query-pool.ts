/**
 * The daemon's queries run here, on a pool of worker threads with their own
 * read-only connections: the main thread parses, routes, writes replay
 * frames and moves bytes, and never waits on SQLite. Requests wait in a
 * bounded queue for a free worker (past the bound: 503 too-busy with
 * Retry-After), and each has a deadline from the moment a worker that is up
 * takes it (the queue's bound limits the wait before): past it the client
 * gets 503 query-timeout, and the worker is terminated (SQLite's statement
 * with it: better-sqlite3 cannot interrupt one) and replaced, so the pool
 * stays whole.
 */
import { availableParallelism } from 'node:os';
import type { Worker } from 'node:worker_threads';
import type { Logger } from '../../../core/log/logger';
import { startThread } from '../../../core/threads/start-thread';
import type { EventsJson } from '../../events/events-json';
import { StoreError } from '../../../core/store/schema';
import { ProblemError } from '../../http/problem';
import type { EventReader } from '../event-reader';
import { fromWire, type QueryAnswer, type QueryRequest, type QueryWorkerData } from './query-protocol';

export const DEFAULT_QUERY_WORKERS = availableParallelism();
export const DEFAULT_MAX_QUEUED_QUERIES = 256;
export const DEFAULT_QUERY_TIMEOUT_MS = 10_000;

export interface QueryPoolOptions {
  dataDir: string;
  log: Logger;
  workers?: number;
  maxQueued?: number;
  timeoutMs?: number;
  /** told when a worker finds a store damaged (the other workers are told here) */
  onDamaged?: (damage: StoreError) => void;
}

interface Job {
  request: QueryRequest;
  resolve(result: unknown): void;
  reject(err: Error): void;
  timer?: NodeJS.Timeout;
  slot?: Slot;
}

interface Slot {
  worker: Worker;
  job: Job | null;
  since: number;
  /** resolved once the worker's stores are open: queries go only to workers that are up */
  up: Promise<void>;
  isUp: boolean;
}

export interface PoolStats {
  workers: number;
  busy: number;
  queued: number;
  /** time workers have spent on queries, summed */
  busySeconds: number;
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
    for (let i = 0; i < (options.workers ?? DEFAULT_QUERY_WORKERS); i++) this.slots.push(this.spawn());
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
    const now = Date.now();
    const running = this.slots.reduce((ms, slot) => ms + (slot.job ? now - slot.since : 0), 0);
    return {
      workers: this.slots.length,
      busy: this.slots.filter((slot) => slot.job).length,
      queued: this.queue.length,
      busySeconds: (this.busyMs + running) / 1000,
    };
  }

  async close(): Promise<void> {
    this.closed = true;
    for (const job of this.queue.splice(0))
      this.fail(job, new ProblemError('shutting-down', 'the daemon is shutting down'));
    await Promise.all(this.slots.map((slot) => slot.worker.terminate()));
  }

  private call<T>(op: string, ...args: unknown[]): Promise<T> {
    if (this.closed) return Promise.reject(new ProblemError('shutting-down', 'the daemon is shutting down'));
    if (this.queue.length >= this.maxQueued)
      return Promise.reject(
        new ProblemError(
          'too-busy',
          `${this.queue.length} queries are waiting for the ${this.slots.length} query workers already; try again shortly`,
          undefined,
          { 'Retry-After': '1' },
        ),
      );
    return new Promise<T>((resolve, reject) => {
      const job: Job = {
        request: { id: ++this.nextId, op, args },
        resolve: resolve as (result: unknown) => void,
        reject,
      };
      this.queue.push(job);
      this.dispatch();
    });
  }

  private dispatch(): void {
    for (const slot of this.slots) {
      if (this.queue.length === 0) return;
      if (slot.job || !slot.isUp) continue;
      const job = this.queue.shift()!;
      slot.job = job;
      slot.since = Date.now();
      job.slot = slot;
      job.timer = setTimeout(() => this.expire(job), this.timeoutMs);
      slot.worker.postMessage(job.request);
    }
  }

  private spawn(): Slot {
    const data: QueryWorkerData = { dataDir: this.options.dataDir };
    const worker = startThread(__dirname, 'query-worker-main', { workerData: data, name: 'query-worker' });
    let up = () => undefined as void;
    const slot: Slot = {
      worker,
      job: null,
      since: 0,
      isUp: false,
      up: new Promise<void>((resolve) => (up = resolve)),
    };
    worker.once('message', () => {
      slot.isUp = true;
      up();
      this.dispatch();
    });
    worker.on('message', (answer: QueryAnswer) => {
      const job = slot.job;
      if (!job || job.request.id !== answer.id) return;
      this.release(slot);
      clearTimeout(job.timer);
      if (answer.ok) job.resolve(answer.result);
      else {
        const error = fromWire(answer.error);
        if (error instanceof StoreError && error.code === 'E_STORE_CORRUPT') this.spreadDamage(error, slot);
        job.reject(error);
      }
      this.dispatch();
    });
    worker.on('error', (err) => this.options.log.error('query worker failed', { error: err.message }));
    worker.on('exit', () => {
      const index = this.slots.indexOf(slot);
      if (this.closed || index < 0) return;
      // a worker that died on its own: its query fails, a new one takes its place
      const job = slot.job;
      this.release(slot);
      if (job) this.fail(job, new Error('the query worker running this query died'));
      this.slots[index] = this.spawn();
      this.dispatch();
    });
    return slot;
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
        });
  }

  private release(slot: Slot): void {
    if (slot.job) this.busyMs += Date.now() - slot.since;
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
    const index = this.slots.indexOf(slot);
    this.release(slot);
    this.slots[index] = this.spawn();
    void slot.worker.terminate();
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
