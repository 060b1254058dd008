/**
 * A histogram without labels, fed in aggregate: the replay clock counts each
 * release in these buckets itself (TimingStats), and the session adds the
 * counts here a report at a time, where prom-client's Histogram would hash
 * its labels and check the value for every event. Exported in the same text
 * format (cumulative `_bucket`s, `_sum`, `_count`); registered like any
 * prom-client metric.
 */
import type { Registry } from 'prom-client';
import type { MetricDelta } from '../replay/timing-stats';

export class CountedHistogram {
  private readonly counts: Float64Array;
  private sum = 0;
  private count = 0;

  constructor(
    private readonly name: string,
    help: string,
    private readonly upperBounds: readonly number[],
    registry: Registry,
  ) {
    this.counts = new Float64Array(upperBounds.length);
    registerValues(registry, name, help, 'histogram', [], () =>
      histogramValues(name, upperBounds, this.counts, this.sum, this.count, {}),
    );
  }

  /** Samples counted elsewhere in the same buckets (the replay clock's): counts per bucket, their sum in ns. */
  add(delta: MetricDelta): void {
    if (delta.le.length !== this.upperBounds.length)
      throw new Error(
        `${this.name}: ${delta.le.length} bucket counts for ${this.upperBounds.length} buckets`,
      );
    delta.le.forEach((n, b) => (this.counts[b]! += n));
    this.sum += delta.sumNs / 1e9;
    this.count += delta.count;
  }
}

/** What a prom-client registry formats (a metric's `get()`). */
interface MetricValues {
  name: string;
  help: string;
  type: string;
  aggregator: string;
  values: object[];
}

/** One label set's samples as prom-client exports a histogram's: cumulative `_bucket`s, `_sum`, `_count`. */
export function histogramValues(
  name: string,
  upperBounds: readonly number[],
  counts: Float64Array,
  sum: number,
  count: number,
  labels: Record<string, string>,
): object[] {
  let cumulative = 0;
  const values: object[] = upperBounds.map((le, b) => {
    cumulative += counts[b]!;
    return { labels: { le, ...labels }, value: cumulative, metricName: `${name}_bucket` };
  });
  values.push(
    { labels: { le: '+Inf', ...labels }, value: count, metricName: `${name}_bucket` },
    { labels, value: sum, metricName: `${name}_sum` },
    { labels, value: count, metricName: `${name}_count` },
  );
  return values;
}

/**
 * Registers a metric of ours whose values are made at each scrape, in the shape prom-client's
 * registry formats (CountedHistogram's, LabelledHistogram's).
 */
export function registerValues(
  registry: Registry,
  name: string,
  help: string,
  type: 'counter' | 'histogram',
  labelNames: readonly string[],
  values: () => object[],
): void {
  const get = (): MetricValues => ({ name, help, type, aggregator: 'sum', values: values() });
  registry.registerMetric({ name, help, labelNames, get } as never);
}
