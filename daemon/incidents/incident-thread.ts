/**
 * The daemon's side of its incident thread (incident-thread-main.ts): the
 * incident files are decoded and their stores built there, so a large file
 * dropped into `incidents/` or uploaded never stalls the main thread (the
 * HTTP API, replay controls and their streams) for the seconds it takes.
 */
import type { Worker } from 'node:worker_threads';
import { IncidentFileError } from '../../core/incident';
import type { Logger } from '../../core/log/logger';
import { startThread } from '../../core/threads/start-thread';
import { ProblemError } from '../http/problem';
import type { IncidentEntry, IncidentListing } from './incident-library';
import type { IncidentAnswer, IncidentRequest, IncidentResult, WireIncidentError } from './incident-protocol';

/**
 * since: performance.now() (a wall clock step would make a waiting request look stuck, or a stuck
 * one not); refused: its deadline passed (the timer's millisecond clock may fire it before `since`
 * is a whole deadline old: a refused request is stuck all the same)
 */
type Pending = {
  resolve: (answer: IncidentResult) => void;
  reject: (err: Error) => void;
  since: number;
  refused: boolean;
};

/**
 * A request the library has not answered in this long is refused (503) and the library reported
 * stuck on /readyz: no read of a file may hold the daemon's incident routes forever.
 */
export const INCIDENT_DEADLINE_MS = 30_000;
/** How long close() waits for the thread to end before leaving it to the process's exit. */
const CLOSE_WAIT_MS = 2_000;

function fromWire(error: WireIncidentError): Error {
  if (error.code === undefined || error.file === undefined) return new Error(error.message);
  return new IncidentFileError(error.code, error.file, error.message.slice(error.file.length + ': '.length));
}

export class IncidentThread {
  private readonly worker: Worker;
  private readonly pending = new Map<number, Pending>();
  private nextId = 1;
  private watch: NodeJS.Timeout | undefined;
  private stopped: Error | undefined;

  constructor(
    dataDir: string,
    log: Logger,
    private readonly deadlineMs = INCIDENT_DEADLINE_MS,
  ) {
    this.worker = startThread(__dirname, 'incident-thread-main', { workerData: { dataDir } });
    this.worker.on('message', (answer: IncidentAnswer) => {
      if ('log' in answer) return log[answer.log](answer.msg, answer.fields);
      const waiting = this.pending.get(answer.id);
      this.pending.delete(answer.id);
      if (answer.ok) waiting?.resolve(answer);
      else waiting?.reject(fromWire(answer.error));
    });
    const stop = (err: Error) => {
      this.stopped ??= err;
      for (const waiting of this.pending.values()) waiting.reject(this.stopped);
      this.pending.clear();
    };
    this.worker.on('error', (err) => {
      log.error('the incident thread failed', { error: err.message });
      stop(new Error(`the incident thread failed: ${err.message}`));
    });
    this.worker.on('exit', () => stop(new Error('the incident thread stopped')));
  }

  private ask(request: IncidentRequest, transfer: ArrayBuffer[] = []): Promise<IncidentResult> {
    if (this.stopped) return Promise.reject(this.stopped);
    return new Promise((resolve, reject) => {
      const timer = setTimeout(() => {
        const waiting = this.pending.get(request.id);
        if (!waiting) return;
        waiting.refused = true;
        reject(
          new ProblemError(
            'store-unavailable',
            `the incident library has not answered in ${INCIDENT_DEADLINE_MS / 1000} s (a file it cannot read?)`,
            undefined,
            { 'Retry-After': String(INCIDENT_DEADLINE_MS / 1000) },
          ),
        );
      }, this.deadlineMs).unref();
      this.pending.set(request.id, {
        resolve: (answer) => {
          clearTimeout(timer);
          resolve(answer);
        },
        reject: (err) => {
          clearTimeout(timer);
          reject(err);
        },
        since: performance.now(),
        refused: false,
      });
      this.worker.postMessage(request, transfer);
    });
  }

  /** Seconds the oldest unanswered request has waited, once past the deadline; null while the library answers. */
  stuckForS(now = performance.now()): number | null {
    let oldest = now;
    let refused = false;
    for (const waiting of this.pending.values()) {
      oldest = Math.min(oldest, waiting.since);
      refused ||= waiting.refused;
    }
    return refused || now - oldest >= this.deadlineMs ? (now - oldest) / 1000 : null;
  }

  /** Looks at the files again (after any look already asked for); what is then served and skipped. */
  async listing(): Promise<IncidentListing> {
    return (await this.ask({ id: this.nextId++, op: 'refresh' })).listing;
  }

  /**
   * Checks the bytes whole, keeps them under their digest and serves them; IncidentFileError for a
   * bad file. Bytes that own their whole buffer are handed over (and no longer usable here), others copied.
   */
  async upload(bytes: Uint8Array): Promise<IncidentEntry> {
    const own =
      bytes.byteOffset === 0 &&
      bytes.byteLength === bytes.buffer.byteLength &&
      bytes.buffer instanceof ArrayBuffer;
    const handed = own ? bytes : new Uint8Array(bytes);
    const answer = await this.ask({ id: this.nextId++, op: 'upload', bytes: handed }, [
      handed.buffer as ArrayBuffer,
    ]);
    return answer.entry!;
  }

  /** Looks again every `everyMs`, unless a look is still under way (a large file being built). */
  watchEvery(everyMs: number): void {
    this.watch = setInterval(() => {
      if (this.pending.size === 0) this.listing().catch(() => undefined);
    }, everyMs).unref();
  }

  /** Ends the thread; one stuck in a system call is left to the process's exit, not waited for. */
  async close(): Promise<void> {
    clearInterval(this.watch);
    this.worker.unref();
    let timer: NodeJS.Timeout | undefined;
    await Promise.race([
      this.worker.terminate(),
      new Promise((resolve) => (timer = setTimeout(resolve, CLOSE_WAIT_MS).unref())),
    ]);
    clearTimeout(timer);
  }
}
