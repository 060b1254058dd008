/**
 * A clock that moves only when told, and releases on the dot (or exactly as
 * late as told). With `holding`, it releases without telling the releases,
 * as the real clock does while the main thread is busy: a clear() then hands
 * them back, or runHeld() tells them. With `batching`, every deadline of a
 * lane due when the clock moves is released in one report, at the time it
 * moved to (as the real clock reports all a lane has due at one look);
 * otherwise each deadline is its own report, at its own time. Like the real
 * clock, it reads each deadline from the lane's buffer (anchor + due) and
 * adds each release to the session's statistics and lateness log.
 */
import { FrameBuffer } from '../../daemon/replay/lane/frame-buffer';
import { LatenessLog } from '../../daemon/replay/lateness-log';
import type { ReleaseStats } from '../../daemon/replay/release-stats';
import type { ClockLane, OnReleased, Released, ReplayClock } from '../../daemon/replay/replay-clock';
import { laneBuffer } from '../../daemon/replay/lane/lane-layout';

/** Writes no frame itself: the main thread writes every one (no sockets). */
class FakeLane implements ClockLane {
  private buffer: FrameBuffer | null = null;
  private anchor = 0n;
  /** the next record to release, and how far they are published */
  private head = 0;
  private published = 0;
  /** released while the clock was holding, not told yet */
  held: Released[] = [];
  private stats: ReleaseStats | null = null;
  private readonly log = new LatenessLog();
  readonly sockets = null;

  constructor(
    private readonly clock: FakeClock,
    readonly onReleased: OnReleased,
  ) {}

  /** The fake clock tells every release as it comes. */
  prompt(): void {}

  keep(stats: ReleaseStats, pages: { page: number; shared: SharedArrayBuffer }[]): void {
    this.stats = stats;
    for (const { page, shared } of pages) this.log.adopt(page, shared);
  }

  play(buffer: FrameBuffer, anchor: () => bigint): void {
    if (buffer !== this.buffer) {
      this.buffer = buffer;
      this.head = this.published = buffer.taken;
    }
    this.anchor = anchor();
    this.published = this.head;
    this.publish();
  }

  publish(): void {
    if (!this.buffer) return;
    for (; this.published < this.buffer.tail; this.published++) {
      const deadline = this.deadline(this.published);
      if (this.published > this.head && deadline < this.deadline(this.published - 1))
        throw new Error('deadlines of a lane must not decrease');
      this.clock.armed.push(deadline);
    }
  }

  private deadline(n: number): bigint {
    return this.anchor + BigInt(this.buffer!.field(n, 'due'));
  }

  /** How many deadlines published and not released are due by `toNs`. */
  dueBy(toNs: bigint): number {
    let n = this.head;
    while (n < this.published && this.deadline(n) <= toNs) n++;
    return n - this.head;
  }

  /** The earliest deadline waiting, if any. */
  get first(): bigint | undefined {
    return this.head < this.published ? this.deadline(this.head) : undefined;
  }

  clear(forGood = false): Released[] {
    this.published = this.head;
    const held = this.held.splice(0);
    for (const released of held) this.buffer?.take(released.count);
    if (forGood) this.buffer = null;
    return held;
  }

  /** Releases `count` deadlines at `releasedAt`: told now, or held. */
  release(count: number, releasedAt: bigint): void {
    for (let i = 0; i < count; i++, this.head++) {
      const deadline = this.deadline(this.head);
      const late = releasedAt > deadline ? Number(releasedAt - deadline) : 0;
      this.stats?.released(late);
      this.log.set(this.buffer!.field(this.head, 'index'), late);
    }
    const released = { count, releasedAt, writtenAt: null };
    if (this.clock.holding) this.held.push(released);
    else this.tell(released);
  }

  tell(released: Released): void {
    this.buffer!.take(released.count);
    this.onReleased(released);
  }
}

export class FakeClock implements ReplayClock {
  nowNs = 1_000_000_000n;
  /** every deadline ever handed to the clock, in order */
  readonly armed: bigint[] = [];
  private readonly lanes: FakeLane[] = [];

  now(): bigint {
    return this.nowNs;
  }

  /** the lead a play takes before its first deadline (the real clock's is about a millisecond) */
  lead = 0n;
  /** releases are made but not told (the main thread busy), until runHeld() */
  holding = false;
  /** a lane's deadlines due at one move are released in one report */
  batching = false;
  /** bytes of frames a lane's buffer holds: smaller than the real clock's, since tests make many */
  dataBytes = 16 << 20;

  leadNs(): bigint {
    return this.lead;
  }

  lane(onReleased: OnReleased): ClockLane {
    const lane = new FakeLane(this, onReleased);
    this.lanes.push(lane);
    return lane;
  }

  frameBuffer(): FrameBuffer {
    // one size: tests choose it (dataBytes)
    return new FrameBuffer(laneBuffer(this.dataBytes));
  }

  /** Earliest deadline waiting, if any. */
  next(): bigint | undefined {
    let next: bigint | undefined;
    for (const lane of this.lanes) {
      const d = lane.first;
      if (d !== undefined && (next === undefined || d < next)) next = d;
    }
    return next;
  }

  /** Moves to `toNs`, releasing each due deadline in order, `lateNs` after it (batching: `lateNs` after `toNs`). */
  advanceTo(toNs: bigint, lateNs = 0n): void {
    if (this.batching) {
      if (toNs + lateNs > this.nowNs) this.nowNs = toNs + lateNs;
      // a release may arm more deadlines already due: they go in the next report
      for (let released = true; released;) {
        released = false;
        for (const lane of this.lanes) {
          const due = lane.dueBy(toNs);
          if (due === 0) continue;
          lane.release(due, this.nowNs);
          released = true;
        }
      }
      return;
    }
    for (let next = this.next(); next !== undefined && next <= toNs; next = this.next()) {
      const lane = this.lanes.find((l) => l.first === next)!;
      if (next + lateNs > this.nowNs) this.nowNs = next + lateNs;
      lane.release(1, this.nowNs);
    }
    if (toNs > this.nowNs) this.nowNs = toNs;
  }

  /** Tells the releases held so far, in order, as the main thread would once free. */
  runHeld(): void {
    for (const lane of this.lanes) for (const released of lane.held.splice(0)) lane.tell(released);
  }

  advanceBy(ns: bigint, lateNs = 0n): void {
    this.advanceTo(this.nowNs + ns, lateNs);
  }

  async close(): Promise<void> {
    this.lanes.length = 0;
  }
}
