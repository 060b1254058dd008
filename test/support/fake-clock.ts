/**
 * A clock that moves only when told, and releases on the dot (or exactly as
 * late as told). With `holding`, it releases without telling the releases,
 * as the real clock does while the main thread is busy: a clear() then hands
 * them back, or runHeld() tells them. With `batching`, every deadline of a
 * lane due when the clock moves is released in one report, at the time it
 * moved to (as the real clock reports all a lane has due at one look);
 * otherwise each deadline is its own report, at its own time.
 */
import type { ClockLane, OnReleased, Released, ReplayClock } from '../../daemon/replay/replay-clock';

/** Writes no frame itself: the main thread writes every one (no sockets). */
class FakeLane implements ClockLane {
  waiting: bigint[] = [];
  /** released while the clock was holding, not told yet */
  held: Released[] = [];
  readonly sockets = null;

  constructor(
    private readonly clock: FakeClock,
    readonly onReleased: OnReleased,
  ) {}

  fits(): boolean {
    return true;
  }

  at(deadline: bigint): void {
    if (this.waiting.length && deadline < this.waiting[this.waiting.length - 1]!)
      throw new Error('deadlines of a lane must not decrease');
    this.waiting.push(deadline);
    this.clock.armed.push(deadline);
  }

  clear(): Released[] {
    this.waiting = [];
    return this.held.splice(0);
  }

  /** Releases `count` deadlines at `releasedAt`: told now, or held. */
  release(count: number, releasedAt: bigint): void {
    this.waiting.splice(0, count);
    const released = { count, releasedAt, writtenAt: null };
    if (this.clock.holding) this.held.push(released);
    else this.onReleased(released);
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

  leadNs(): bigint {
    return this.lead;
  }

  lane(onReleased: OnReleased): ClockLane {
    const lane = new FakeLane(this, onReleased);
    this.lanes.push(lane);
    return lane;
  }

  /** Earliest deadline waiting, if any. */
  next(): bigint | undefined {
    let next: bigint | undefined;
    for (const lane of this.lanes) {
      const d = lane.waiting[0];
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
          const due = lane.waiting.filter((deadline) => deadline <= toNs).length;
          if (due === 0) continue;
          lane.release(due, this.nowNs);
          released = true;
        }
      }
      return;
    }
    for (let next = this.next(); next !== undefined && next <= toNs; next = this.next()) {
      const lane = this.lanes.find((l) => l.waiting[0] === next)!;
      if (next + lateNs > this.nowNs) this.nowNs = next + lateNs;
      lane.release(1, this.nowNs);
    }
    if (toNs > this.nowNs) this.nowNs = toNs;
  }

  /** Tells the releases held so far, in order, as the main thread would once free. */
  runHeld(): void {
    for (const lane of this.lanes) for (const released of lane.held.splice(0)) lane.onReleased(released);
  }

  advanceBy(ns: bigint, lateNs = 0n): void {
    this.advanceTo(this.nowNs + ns, lateNs);
  }

  async close(): Promise<void> {
    this.lanes.length = 0;
  }
}
