/**
 * A histogram by label set, observed one value at a time (an HTTP request's duration, a query's
 * wait), with the counter of the same observations when asked (`kreplay_http_requests_total`
 * beside the durations). prom-client's Histogram.observe and Counter.inc check and hash the
 * labels object on every call, and the daemon made three to five such calls a request on its
 * main thread; here a label set is found by its values joined, and its labels object is kept
 * from its first observation. Exported in prom-client's text format, registered like its metrics.
 */
import type { Registry } from 'prom-client';
import { histogramValues, registerValues } from './counted-histogram';

interface LabelSet {
  labels: Record<string, string>;
  counts: Float64Array;
  sum: number;
  count: number;
}

export class LabelledHistogram<L extends Record<string, string>> {
  private readonly sets = new Map<string, LabelSet>();

  constructor(
    name: string,
    help: string,
    /** the labels' names, in the order `observe` is given them (the reference page lists them) */
    labelNames: readonly (keyof L & string)[],
    private readonly upperBounds: readonly number[],
    registry: Registry,
    /** a counter of the same observations by label set, registered (and so exported) before the histogram */
    countedAs?: { name: string; help: string },
  ) {
    if (countedAs)
      registerValues(registry, countedAs.name, countedAs.help, 'counter', labelNames, () =>
        [...this.sets.values()].map((set) => ({ labels: set.labels, value: set.count })),
      );
    registerValues(registry, name, help, 'histogram', labelNames, () =>
      [...this.sets.values()].flatMap((set) =>
        histogramValues(name, upperBounds, set.counts, set.sum, set.count, set.labels),
      ),
    );
  }

  /** One value (seconds) of the label set `labels` (its values hold no newline). */
  observe(labels: L, value: number): void {
    const key = Object.values(labels).join('\n');
    let set = this.sets.get(key);
    if (!set) {
      set = { labels: { ...labels }, counts: new Float64Array(this.upperBounds.length), sum: 0, count: 0 };
      this.sets.set(key, set);
    }
    // a bucket counts the values up to its bound (prom-client's `le`); past the last, only +Inf
    const bucket = this.upperBounds.findIndex((le) => value <= le);
    if (bucket >= 0) set.counts[bucket]!++;
    set.sum += value;
    set.count++;
  }
}
