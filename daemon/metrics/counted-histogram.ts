/**
 * A histogram without labels that costs a few additions per observation:
 * prom-client's Histogram hashes its labels and validates the value on each
 * one, about a microsecond, which a dense replay pays for every event it
 * releases. Exported in the same text format (cumulative `_bucket`s, `_sum`,
 * `_count`); registered like any prom-client metric.
 */
import type { Registry } from 'prom-client';
import type { MetricDelta } from '../replay/timing-stats';

export class CountedHistogram {
  readonly type = 'histogram';
  readonly aggregator = 'sum';
  private readonly counts: Float64Array;
  private sum = 0;
  private count = 0;

  constructor(
    readonly name: string,
    readonly help: string,
    private readonly upperBounds: readonly number[],
    registry: Registry,
  ) {
    this.counts = new Float64Array(upperBounds.length);
    registry.registerMetric(this as never);
  }

  observe(value: number): void {
    this.sum += value;
    this.count++;
    for (let b = 0; b < this.upperBounds.length; b++)
      if (value <= this.upperBounds[b]!) {
        this.counts[b]!++;
        return;
      }
  }

  /** Samples counted elsewhere in the same buckets (the replay clock's): counts per bucket, their sum in ns. */
  add(delta: MetricDelta): void {
    if (delta.le.length !== this.upperBounds.length)
      throw new Error(`${this.name}: ${delta.le.length} bucket counts for ${this.upperBounds.length} buckets`);
    delta.le.forEach((n, b) => (this.counts[b]! += n));
    this.sum += delta.sumNs / 1e9;
    this.count += delta.count;
  }

  /** What the registry formats: prom-client's shape for a histogram's values. */
  get(): { name: string; help: string; type: string; aggregator: string; values: object[] } {
    let cumulative = 0;
    const values: object[] = this.upperBounds.map((le, b) => {
      cumulative += this.counts[b]!;
      return { labels: { le }, value: cumulative, metricName: `${this.name}_bucket` };
    });
    values.push(
      { labels: { le: '+Inf' }, value: this.count, metricName: `${this.name}_bucket` },
      { labels: {}, value: this.sum, metricName: `${this.name}_sum` },
      { labels: {}, value: this.count, metricName: `${this.name}_count` },
    );
    return { name: this.name, help: this.help, type: this.type, aggregator: this.aggregator, values };
  }
}
