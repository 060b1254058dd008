/**
 * A session's frames on their way to its watchers. Frames emitted in one
 * task (the clock releases due events in batches) go out as one write per
 * watcher when the task is done, then `onFlushed` learns when that was.
 * Watchers handed to the clock (`direct`) get their replay frames from the
 * clock thread: from here they get everything else.
 */
import type { LaneSockets } from '../replay-clock';

export interface Watcher {
  write(text: string): void;
  end(): void;
  /** true once the clock writes this watcher's replay frames itself */
  readonly direct?: boolean;
  /**
   * Hands the stream to the clock's `sockets` if it can (LaneSockets.attach:
   * `first`, then frames from event `fromIndex` on); false when it stays
   * with the main thread (TLS, say).
   */
  handOver?(sockets: LaneSockets, fromIndex: number, first: string): boolean;
}

export class Broadcast {
  private readonly watchers = new Set<Watcher>();
  /** everything queued, for the main thread's watchers */
  private outbox = '';
  /** what is queued but replay frames, for the clock's watchers */
  private controlOutbox = '';
  private deadlines: bigint[] = [];
  private flushQueued = false;

  /** `deadlines`: those of the replay frames just handed to the main thread's watchers. */
  constructor(private readonly onFlushed: (deadlines: bigint[]) => void) {}

  get size(): number {
    return this.watchers.size;
  }

  /** Watchers whose replay frames the main thread writes. */
  get mainWatchers(): number {
    let count = 0;
    for (const watcher of this.watchers) if (!watcher.direct) count++;
    return count;
  }

  /** A frame for every watcher (a state event). */
  send(frame: string): void {
    this.outbox += frame;
    this.controlOutbox += frame;
    this.queueFlush();
  }

  /** A replay frame due at `deadline`, for the main thread's watchers. */
  sendReplay(frame: string, deadline: bigint): void {
    this.outbox += frame;
    this.deadlines.push(deadline);
    this.queueFlush();
  }

  private queueFlush(): void {
    if (!this.flushQueued) {
      this.flushQueued = true;
      queueMicrotask(() => this.flush());
    }
  }

  flush(): void {
    this.flushQueued = false;
    if (this.outbox === '' && this.controlOutbox === '' && this.deadlines.length === 0) return;
    const text = this.outbox;
    const control = this.controlOutbox;
    const deadlines = this.deadlines;
    this.outbox = '';
    this.controlOutbox = '';
    this.deadlines = [];
    for (const watcher of this.watchers) {
      const out = watcher.direct ? control : text;
      if (out !== '') watcher.write(out);
    }
    if (deadlines.length > 0) this.onFlushed(deadlines);
  }

  /** Starts a watcher at the next frame: what is queued now was meant for the others. */
  add(watcher: Watcher): void {
    this.flush();
    this.watchers.add(watcher);
  }

  delete(watcher: Watcher): void {
    this.watchers.delete(watcher);
  }

  /** Ends every stream after what is queued. */
  end(): void {
    this.flush();
    for (const watcher of this.watchers) watcher.end();
    this.watchers.clear();
  }
}
