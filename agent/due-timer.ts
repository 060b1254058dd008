/**
 * Runs a task when it is due, woken once for it: a timer set for the due time, not a check every
 * few milliseconds (the agent's status line, every 5 s by default, was looked for ten times a
 * second: an idle agent's main thread woke 13 times a second, 10 of them for it). The task may also
 * run elsewhere (the decode path writes a due status line while a storm keeps the loop busy);
 * the timer then waits for the new due time.
 */
export class DueTimer {
  private timer: NodeJS.Timeout | undefined;
  private stopped = false;

  /**
   * dueAt: when the task is next due, on `now`'s clock (it moves once the task ran); run: the task,
   * which makes dueAt move.
   */
  constructor(
    private readonly dueAt: () => number,
    private readonly run: () => void,
    private readonly now: () => number = () => performance.now(),
  ) {}

  start(): void {
    this.arm();
  }

  /** For good: no timer is left. */
  stop(): void {
    this.stopped = true;
    clearTimeout(this.timer);
  }

  private arm(): void {
    if (this.stopped) return;
    this.timer = setTimeout(() => this.fire(), Math.max(0, this.dueAt() - this.now()));
  }

  private fire(): void {
    // a timer may fire a fraction of a millisecond early on this clock: armed again for the rest
    if (this.now() >= this.dueAt()) this.run();
    this.arm();
  }
}
