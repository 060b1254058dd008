/**
 * A session's frames on their way to its watchers. Frames emitted in one
 * task (the clock releases due events in batches) go out as one write per
 * watcher when the task is done, then `onFlushed` learns when that was.
 */
export interface Watcher {
  write(text: string): void;
  end(): void;
}

export class Broadcast {
  private readonly watchers = new Set<Watcher>();
  private outbox = '';
  private deadlines: bigint[] = [];
  private flushQueued = false;

  /** `deadlines`: those of the replay frames just handed to every watcher. */
  constructor(private readonly onFlushed: (deadlines: bigint[]) => void) {}

  get size(): number {
    return this.watchers.size;
  }

  send(frame: string, deadline?: bigint): void {
    this.outbox += frame;
    if (deadline !== undefined) this.deadlines.push(deadline);
    if (!this.flushQueued) {
      this.flushQueued = true;
      queueMicrotask(() => this.flush());
    }
  }

  flush(): void {
    this.flushQueued = false;
    if (this.outbox === '') return;
    const text = this.outbox;
    const deadlines = this.deadlines;
    this.outbox = '';
    this.deadlines = [];
    for (const watcher of this.watchers) watcher.write(text);
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
