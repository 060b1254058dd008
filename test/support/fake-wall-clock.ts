/** A wall clock that moves only when told, firing what falls due in time order. */
import type { WallClock } from '../../daemon/replay/sessions/wall-clock';

export class FakeWallClock implements WallClock {
  private timers: { atMs: number; fire: () => void }[] = [];

  constructor(private ms = Date.parse('2026-01-01T00:00:00Z')) {}

  nowMs(): number {
    return this.ms;
  }

  at(atMs: number, fire: () => void): () => void {
    const timer = { atMs, fire };
    this.timers.push(timer);
    return () => (this.timers = this.timers.filter((t) => t !== timer));
  }

  /** Moves `ms` on, firing each timer due by then at its own time, earliest first. */
  advanceBy(ms: number): void {
    const to = this.ms + ms;
    for (;;) {
      const due = this.timers.filter((t) => t.atMs <= to).sort((a, b) => a.atMs - b.atMs)[0];
      if (!due) break;
      this.timers = this.timers.filter((t) => t !== due);
      this.ms = Math.max(this.ms, due.atMs);
      due.fire();
    }
    this.ms = to;
  }
}
