/**
 * When the agent hands its pending rows to the store's writer, one transaction each. A commit
 * rewrites every index page its rows touched, however few rows it gained, so rows held longer
 * cost the writer less each (bench/RESULTS.md, issue 46: ~6 µs a Go request less at ~1.4k
 * requests/s with a commit a second instead of every 200 ms); and a reader sees a row only once
 * it is committed. So a stream's rows are held until the oldest is nearly `maxWaitMs` old, while
 * the rows of a burst, after which nothing arrives for `quietMs`, are committed then.
 */
export interface CommitRule {
  /** commit once no row has arrived for this long */
  quietMs: number;
  /** never hold a row longer than this */
  maxWaitMs: number;
}

/** `--max-commit-wait-ms`: its default, and its bounds (a batch of 65,536 rows is committed when full anyway). */
export const MAX_COMMIT_WAIT_MS = { default: 1000, min: 200, max: 10_000 };

/**
 * The rule for a max wait. The quiet is longer than the capture's poll period (100 ms,
 * agent/capture/capture-options.ts), at which a stream's records reach the decoder at least, where
 * the max wait leaves room (a commit for a pause that was only a late poll costs what every
 * commit cost before); and at most half the max wait, so that a stream is committed at most
 * twice as often as the max wait says.
 */
export function commitRule(maxWaitMs: number): CommitRule {
  return { maxWaitMs, quietMs: Math.min(150, maxWaitMs / 2) };
}

export class CommitCadence {
  /** when the oldest pending row arrived; NaN: none pending */
  private oldest = NaN;
  private quiet: NodeJS.Timeout | null = null;
  private stopped = false;

  constructor(
    private readonly commit: () => void,
    private readonly rule: CommitRule,
  ) {}

  /** Rows arrived: commits them at once if the oldest pending one could not wait for a quiet. */
  arrived(): void {
    if (this.stopped) return;
    const now = performance.now();
    if (Number.isNaN(this.oldest)) this.oldest = now;
    if (now + this.rule.quietMs >= this.oldest + this.rule.maxWaitMs) {
      this.commitNow();
      return;
    }
    // a debounce: each arrival puts the quiet's end off (refresh() also rearms a timer that fired)
    if (this.quiet) this.quiet.refresh();
    else this.quiet = setTimeout(() => this.onQuiet(), this.rule.quietMs);
  }

  /** Every pending row was handed over elsewhere (a full batch). */
  committed(): void {
    this.oldest = NaN;
  }

  /** For good: no timer is left, and rows arriving after are the caller's to drain. */
  stop(): void {
    this.stopped = true;
    if (this.quiet) clearTimeout(this.quiet);
  }

  private onQuiet(): void {
    // armed by the last arrival that was not committed at once: no row arrived since
    if (!Number.isNaN(this.oldest)) this.commitNow();
  }

  private commitNow(): void {
    this.oldest = NaN;
    this.commit();
  }
}
