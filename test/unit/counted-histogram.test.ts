import { Histogram, Registry } from 'prom-client';
import { CountedHistogram } from '../../daemon/metrics/counted-histogram';

describe('CountedHistogram', () => {
  it("exports exactly what prom-client's Histogram exports for the same observations", async () => {
    const buckets = [0.001, 0.01, 0.1, 1];
    const values = [0, 0.0005, 0.001, 0.002, 0.05, 0.5, 1, 3, 1e-9, 0.01];
    const ours = new Registry();
    const counted = new CountedHistogram('lateness_seconds', 'how late', buckets, ours);
    const theirs = new Registry();
    const reference = new Histogram({
      name: 'lateness_seconds',
      help: 'how late',
      buckets,
      registers: [theirs],
    });
    for (const value of values) {
      counted.observe(value);
      reference.observe(value);
    }
    expect(await ours.metrics()).toBe(await theirs.metrics());
  });

  it('exports zero counts before the first observation', async () => {
    const registry = new Registry();
    new CountedHistogram('idle_seconds', 'idle', [1], registry);
    expect(await registry.metrics()).toBe(
      [
        '# HELP idle_seconds idle',
        '# TYPE idle_seconds histogram',
        'idle_seconds_bucket{le="1"} 0',
        'idle_seconds_bucket{le="+Inf"} 0',
        'idle_seconds_sum 0',
        'idle_seconds_count 0',
        '',
      ].join('\n'),
    );
  });
});
