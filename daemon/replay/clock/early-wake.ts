/**
 * How long before a deadline the clock thread stops sleeping and spins.
 * Futex timeouts overshoot by the timer slack (~50 µs, none under
 * SCHED_FIFO) plus the wake-up latency, which depends on the load: the
 * margin follows the overshoots it sees (up at once, down slowly) within
 * fixed bounds, so the spin covers a late wake-up and waiting stays nearly
 * free.
 */
export interface EarlyWakeBounds {
  /** where the margin starts, and its bounds (ns) */
  earlyWakeNs: number;
  minEarlyWakeNs: number;
  maxEarlyWakeNs: number;
}

/**
 * A deadline due within this of the last release is part of a dense
 * stretch: the thread sleeps to the deadline itself instead of spinning
 * to it, and releases what is due when it wakes (the wake-up's latency,
 * tens of µs under SCHED_FIFO, is what those events are late). Spinning
 * through a dense replay would hold a core for as long as it plays, which
 * on a small machine is the core the stream's client and the daemon's
 * requests need, and a real-time thread that never sleeps is parked by
 * the kernel's throttling (50 ms of every second) once it has run 950 ms.
 */
export const DENSE_GAP_NS = 1_000_000;
/**
 * In a dense stretch the thread looks at most once per DENSE_LOOK_NS: each
 * look writes what it releases to every stream in one writev, and a write
 * per few events (10 µs apart at 100,000 events/s) would spend more on
 * system calls, and on the client's reads, than on the events. Each look
 * wakes the clock, the stream's reader and whatever reads that: at 100 µs
 * the clock thread took ~0.4 s of CPU a second of a dense play, 250 µs
 * ~0.27 s (the CLI ~20% less too), while an event waits at most one look,
 * so the release stays well inside the 1 ms a reader is allowed (500 µs
 * would save more CPU but leave that reader half of its 1 ms).
 */
export const DENSE_LOOK_NS = 250_000;

export class EarlyWake {
  /** the margin now: half as much again as the overshoot, within its bounds */
  margin: number;
  /** decaying maximum of the recent wake-up overshoots */
  private overshoot = 0;

  constructor(private readonly bounds: EarlyWakeBounds) {
    this.margin = bounds.earlyWakeNs;
  }

  /**
   * When to stop sleeping for a deadline `next`: the margin before it; or,
   * when the last release (at `lastReleaseAt`) was less than DENSE_GAP_NS
   * before it, the deadline itself (no spin), and no sooner than
   * DENSE_LOOK_NS after that release.
   */
  wakeAt(next: number, lastReleaseAt: number): number {
    if (next - lastReleaseAt >= DENSE_GAP_NS) return next - this.margin;
    const look = lastReleaseAt + DENSE_LOOK_NS;
    return next > look ? next : look;
  }

  /** A timed sleep meant to end at the margin woke `over` ns after it. */
  woke(over: number): void {
    this.overshoot = over > this.overshoot ? over : this.overshoot - (this.overshoot - over) / 32;
    this.adapt();
  }

  /**
   * Dense deadlines leave no timed waits to learn from: a late wake-up
   * fades, or the thread would spin without pause, and the kernel parks a
   * real-time thread that never sleeps.
   */
  fade(): void {
    this.overshoot -= this.overshoot / 64;
    this.adapt();
  }

  private adapt(): void {
    const margin = this.overshoot * 1.5;
    const { minEarlyWakeNs: min, maxEarlyWakeNs: max } = this.bounds;
    this.margin = margin < min ? min : margin > max ? max : margin;
  }
}
