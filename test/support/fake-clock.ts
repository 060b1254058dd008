/**
 * A clock that moves only when told, and releases on the dot (or exactly as
 * late as told). With `holding`, it releases without running the releases,
 * as the real clock does while the main thread is busy: a clear() then hands
 * them back, or runHeld() runs them.
 */
import type { ClockLane, Release, Released, ReplayClock } from '../../daemon/replay/replay-clock';

interface Waiting {
  deadline: bigint;
  release: Release;
}

/** Writes no frame itself: the main thread writes every one (no sockets). */
class FakeLane implements ClockLane {
  waiting: Waiting[] = [];
  /** released while the clock was holding, not run yet */
  held: Released[] = [];
  readonly sockets = null;

  constructor(private readonly clock: FakeClock) {}

  fits(): boolean {
    return true;
  }

  at(deadline: bigint, release: Release): void {
    if (this.waiting.length && deadline < this.waiting[this.waiting.length - 1]!.deadline)
      throw new Error('deadlines of a lane must not decrease');
    this.waiting.push({ deadline, release });
    this.clock.armed.push(deadline);
  }

  clear(): Released[] {
    this.waiting = [];
    return this.held.splice(0);
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
  /** releases are made but not run (the main thread busy), until runHeld() */
  holding = false;

  leadNs(): bigint {
    return this.lead;
  }

  lane(): ClockLane {
    const lane = new FakeLane(this);
    this.lanes.push(lane);
    return lane;
  }

  /** Earliest deadline waiting, if any. */
  next(): bigint | undefined {
    let next: bigint | undefined;
    for (const lane of this.lanes) {
      const d = lane.waiting[0]?.deadline;
      if (d !== undefined && (next === undefined || d < next)) next = d;
    }
    return next;
  }

  /** Moves to `toNs`, releasing each due deadline in order, `lateNs` after it. */
  advanceTo(toNs: bigint, lateNs = 0n): void {
    for (let next = this.next(); next !== undefined && next <= toNs; next = this.next()) {
      const lane = this.lanes.find((l) => l.waiting[0]?.deadline === next)!;
      const { deadline, release } = lane.waiting.shift()!;
      if (deadline + lateNs > this.nowNs) this.nowNs = deadline + lateNs;
      if (this.holding) lane.held.push({ release, releasedAt: this.nowNs, writtenAt: null });
      else release(this.nowNs, null);
    }
    if (toNs > this.nowNs) this.nowNs = toNs;
  }

  /** Runs the releases held so far, in order, as the main thread would once free. */
  runHeld(): void {
    for (const lane of this.lanes)
      for (const { release, releasedAt, writtenAt } of lane.held.splice(0)) release(releasedAt, writtenAt);
  }

  advanceBy(ns: bigint, lateNs = 0n): void {
    this.advanceTo(this.nowNs + ns, lateNs);
  }

  async close(): Promise<void> {
    this.lanes.length = 0;
  }
}
