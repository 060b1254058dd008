/**
 * A lane of the high-resolution clock, on the main thread: what a session
 * hands the clock (its buffer, statistics and lateness pages, an anchor and
 * records as the read-ahead writes them) and the releases reported back.
 */
import type { ReleaseStats } from '../release-stats';
import type { FrameBuffer } from '../lane/frame-buffer';
import type { ClockLane, LaneSockets, OnReleased, Released } from '../replay-clock';
import { Fifo } from '../fifo';
import type { ClockCommand, ClockPortMessage } from './clock-wire';
import type { ReportedLane } from './release-reader';

/** Releases one report tells the session at most, so that the event loop gets its turn between slices. */
const RELEASES_PER_CALL = 1024;

/** What a lane needs of its clock (high-res-clock.ts). */
export interface LaneHost {
  /** a message the thread reads when a command queued after it says so */
  post(message: ClockPortMessage): void;
  /** queues a command of `lane`; the thread gets it when this task is done (or at settle()) */
  queue(lane: HighResLane, command: ClockCommand): void;
  /** moves queued commands to the thread now */
  flush(): void;
  /** returns once the thread has done every command queued so far, its reports taken */
  settle(): void;
  /** nanoseconds from the thread's time zero to `deadline` */
  sinceEpoch(deadline: bigint): number;
  prompt(lane: HighResLane, on: boolean): void;
  socketsOf(lane: HighResLane): LaneSockets;
  /** keeps a buffer let go of for the next play */
  keepSpare(buffer: FrameBuffer): void;
}

/**
 * A session's lane: the records of the buffer it plays (written by the
 * read-ahead) are published to the clock by one RECORDS command per task;
 * the clock's reports come back as counts, taken from the buffer and told to
 * the lane's OnReleased in order. The session's statistics and lateness
 * pages are handed to the clock once each (again after a clear for good).
 */
export class HighResLane implements ClockLane, ReportedLane {
  generation = 0;
  /** the buffer the clock has (null until a play) */
  private buffer: FrameBuffer | null = null;
  /** records published to the clock, and reported released (counted since the buffer was made) */
  private published = 0;
  private reportedTail = 0;
  /** released by the clock and reported, in order, not yet told */
  private readonly reported = new Fifo<Released>();
  private stats: ReleaseStats | null = null;
  /** the lateness pages, and how many of them the clock has */
  private readonly pages: { page: number; shared: SharedArrayBuffer }[] = [];
  private pagesSent = 0;
  private statsSent = false;
  readonly sockets: LaneSockets;

  constructor(
    private readonly clock: LaneHost,
    readonly id: number,
    private readonly onReleased: OnReleased,
  ) {
    this.sockets = clock.socketsOf(this);
  }

  /** Deadlines handed over and not reported released yet: while any are, the process stays alive. */
  get outstanding(): number {
    return this.published - this.reportedTail;
  }

  prompt(on: boolean): void {
    this.clock.prompt(this, on);
  }

  keep(stats: ReleaseStats, pages: { page: number; shared: SharedArrayBuffer }[]): void {
    this.stats = stats;
    this.pages.push(...pages);
    this.handOver();
  }

  /** Hands the clock what it does not have yet of the session's statistics and pages. */
  private handOver(): void {
    if (!this.buffer) return;
    if (this.stats && !this.statsSent) {
      this.clock.post({ stats: this.stats.shared });
      this.clock.queue(this, { kind: 'stats' });
      this.statsSent = true;
    }
    for (; this.pagesSent < this.pages.length; this.pagesSent++) {
      const { page, shared } = this.pages[this.pagesSent]!;
      this.clock.post({ log: shared });
      this.clock.queue(this, { kind: 'log', page });
    }
  }

  play(buffer: FrameBuffer, anchor: () => bigint): void {
    if (buffer !== this.buffer) {
      this.buffer = buffer;
      this.published = this.reportedTail = buffer.taken;
      buffer.processedUpTo(0);
      this.clock.post({ ring: buffer.ring });
      this.clock.queue(this, { kind: 'ring', head: buffer.taken });
    }
    this.handOver();
    this.clock.queue(this, { kind: 'anchor', at: this.clock.sinceEpoch(anchor()) });
    this.publish();
    // the anchor is only LEAD_NS ahead: the clock takes it now, not after whatever else this task does
    this.clock.flush();
  }

  publish(): void {
    if (!this.buffer || this.buffer.tail === this.published) return;
    this.handOver();
    this.published = this.buffer.tail;
    this.clock.queue(this, { kind: 'records', tail: this.published });
  }

  clear(forGood = false): Released[] {
    const buffer = this.buffer;
    if (!buffer) return [];
    this.clock.queue(this, { kind: 'clear', forGood: forGood ? 1 : 0 });
    // frames released before this may be on their sockets already: their releases go to the caller
    this.clock.settle();
    const seen: Released[] = [];
    for (let r = this.reported.shift(); r; r = this.reported.shift()) {
      buffer.take(r.count);
      seen.push(r);
    }
    this.generation++;
    this.published = this.reportedTail = buffer.taken;
    if (forGood) {
      // the clock thread has let go of it (the settle above): the next lane to play reuses it
      this.clock.keepSpare(buffer);
      this.buffer = null;
      this.statsSent = false;
      this.pagesSent = 0;
    }
    return seen;
  }

  /** The clock released the next `count` deadlines of `generation` (none if the lane was cleared since). */
  take(generation: number, count: number, releasedAt: bigint, writtenAt: bigint | null): void {
    if (generation !== this.generation) return;
    const n = Math.min(count, this.published - this.reportedTail);
    if (n <= 0) return;
    this.reportedTail += n;
    this.reported.push({ count: n, releasedAt, writtenAt });
  }

  /**
   * Tells the reported releases in order, in slices, until `until`
   * (performance.now()); false when some are left. A release that clears
   * the lane takes the rest.
   */
  run(until: number): boolean {
    for (let r = this.reported.at(0); r; r = this.reported.at(0)) {
      const buffer = this.buffer!;
      const count = Math.min(r.count, RELEASES_PER_CALL);
      if (count === r.count) this.reported.shift();
      else r.count -= count;
      buffer.take(count);
      buffer.processedUpTo(buffer.field(buffer.taken - 1, 'index') + 1);
      this.onReleased({ count, releasedAt: r.releasedAt, writtenAt: r.writtenAt });
      if (performance.now() > until) return this.reported.length === 0;
    }
    return true;
  }
}
