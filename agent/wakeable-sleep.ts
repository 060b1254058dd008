/**
 * A loop's pause that a stop can cut short: the shipping and export loops
 * wait between polls and retries, and a stop must not wait out a backoff.
 */
export class WakeableSleep {
  private wakeNow: (() => void) | null = null;

  sleep(ms: number): Promise<void> {
    return new Promise((resolve) => {
      const done = (): void => {
        clearTimeout(timer);
        this.wakeNow = null;
        resolve();
      };
      const timer = setTimeout(done, ms);
      this.wakeNow = done;
    });
  }

  /** Ends the pause in progress, if any. */
  wake(): void {
    this.wakeNow?.();
  }
}
