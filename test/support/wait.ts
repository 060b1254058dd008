/**
 * The one way a test waits: on a condition, with a deadline, never on a sleep with a margin.
 * `check` is asked until it gives a value other than undefined or false (that value is returned);
 * between asks the wait is `changed()` where the caller can say when to look again (a stream's next
 * message), else `everyMs`. Past `timeoutMs` it rejects, naming `what` and the last value seen.
 */
export interface WaitOptions {
  timeoutMs?: number;
  everyMs?: number;
  /** what was waited for, for the error (a function: said as it stands at the deadline) */
  what?: string | (() => string);
  changed?: () => Promise<void>;
}

export async function waitFor<T>(
  check: () => T | undefined | false | Promise<T | undefined | false>,
  options: WaitOptions | number = {},
  everyMs?: number,
): Promise<T> {
  const opts = typeof options === 'number' ? { timeoutMs: options, everyMs } : options;
  const timeoutMs = opts.timeoutMs ?? 15_000;
  // performance.now(): a test that steps Date.now must not stretch or end its own waits
  const deadline = performance.now() + timeoutMs;
  for (;;) {
    const value = await check();
    if (value !== undefined && value !== false) return value;
    const left = deadline - performance.now();
    if (left <= 0) {
      const what = typeof opts.what === 'function' ? opts.what() : (opts.what ?? 'condition');
      throw new Error(`${what} not met within ${timeoutMs} ms`);
    }
    await new Promise<void>((resolve) => {
      const timer = setTimeout(resolve, opts.changed ? left : Math.min(left, opts.everyMs ?? 20));
      void opts.changed?.().then(() => {
        clearTimeout(timer);
        resolve();
      });
    });
  }
}
