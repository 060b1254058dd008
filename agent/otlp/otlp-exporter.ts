/**
 * Exports the node store's events of W3C traces as OTLP spans
 * (agent/otlp/otlp-loop.ts) on a thread of its own, as shipping to
 * ClickHouse does: the capture's thread never encodes, compresses or waits
 * for a receiver. The export starts at the events committed from now on;
 * this side keeps the progress for the status line, the counters table and
 * the metrics.
 */
import Database from 'better-sqlite3';
import type { Worker } from 'node:worker_threads';
import { startThread } from '../../core/threads/start-thread';
import { LAST_SEQ_SQL } from '../ship/ship-sql';
import type { OtlpLoopOptions } from './otlp-loop';
import { startingOtlpProgress, type OtlpProgress } from './otlp-progress';
import type { OtlpTarget } from './otlp-target';

export interface OtlpThreadData {
  storePath: string;
  target: OtlpTarget;
  cursor: number;
  options: OtlpLoopOptions;
}

/** The one request: stop, after sending what is stored for at most flushMs. */
export interface ToOtlpThread {
  op: 'stop';
  flushMs: number;
}

export interface OtlpStatus extends OtlpProgress {
  /** the traces URL */
  destination: string;
}

export class OtlpExporter {
  private progress = startingOtlpProgress();
  private worker: Worker | null = null;
  private stopped: Promise<void> | null = null;
  private readonly cursor: number;

  /** Call before the capture starts: the export begins with the events committed after this. */
  constructor(
    private readonly storePath: string,
    private readonly target: OtlpTarget,
    private readonly options: OtlpLoopOptions = {},
  ) {
    const db = new Database(storePath, { readonly: true, fileMustExist: true });
    try {
      this.cursor = ((db.prepare(LAST_SEQ_SQL).pluck().get() as number | null) ?? 0) + 1;
    } finally {
      db.close();
    }
  }

  start(onError: (err: Error) => void): void {
    if (this.worker || this.stopped) return;
    const data: OtlpThreadData = {
      storePath: this.storePath,
      target: this.target,
      cursor: this.cursor,
      options: this.options,
    };
    const worker = startThread(__dirname, 'otlp-thread', { workerData: data, name: 'otlp' });
    this.worker = worker;
    worker.on('message', (progress: OtlpProgress) => (this.progress = progress));
    // the thread failed outside its loop's retries (the store unreadable): the export stops, said once
    worker.on('error', (err) => {
      this.worker = null;
      this.progress = { ...this.progress, state: 'stopped', lastError: err.message };
      onError(err);
    });
  }

  /** Stops after sending what is stored for at most `flushMs`. */
  stop(flushMs = 0): Promise<void> {
    this.stopped ??= this.shutDown(flushMs);
    return this.stopped;
  }

  private async shutDown(flushMs: number): Promise<void> {
    const worker = this.worker;
    if (!worker) return;
    const exited = new Promise<void>((resolve) => worker.once('exit', () => resolve()));
    const stopped = new Promise<void>((resolve) =>
      worker.on('message', (p: OtlpProgress) => p.state === 'stopped' && resolve()),
    );
    worker.postMessage({ op: 'stop', flushMs } satisfies ToOtlpThread);
    await Promise.race([stopped, exited]);
    await worker.terminate();
  }

  status(): OtlpStatus {
    return { destination: this.target.url, ...this.progress };
  }
}
