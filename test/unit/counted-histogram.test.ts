import { Histogram, Registry } from 'prom-client';
import { CountedHistogram } from '../../daemon/metrics/counted-histogram';
import { LATENESS_BOUNDS_S, TimingStats } from '../../daemon/replay/timing-stats';

describe('CountedHistogram', () => {
  it("exports what prom-client's Histogram exports for the same samples, counted by TimingStats", async () => {
    const buckets = [...LATENESS_BOUNDS_S];
    const valuesNs = [
      0, 500_000, 1_000_000, 2_000_000, 50_000_000, 500_000_000, 1e9, 3e9, 1, 10_000_000, 12e9,
    ];
    const ours = new Registry();
    const counted = new CountedHistogram('lateness_seconds', 'how late', buckets, ours);
    const theirs = new Registry();
    const reference = new Histogram({
      name: 'lateness_seconds',
      help: 'how late',
      buckets,
      registers: [theirs],
    });
    const stats = new TimingStats();
    const told = stats.metricMark();
    // told in two deltas, as a session tells the metrics at two looks
    valuesNs.slice(0, 5).forEach((ns) => stats.add(ns));
    counted.add(stats.metricSince(told));
    valuesNs.slice(5).forEach((ns) => stats.add(ns));
    counted.add(stats.metricSince(told));
    for (const ns of valuesNs) reference.observe(ns / 1e9);
    const lines = (text: string) => text.split('\n').filter((line) => !line.includes('_sum'));
    expect(lines(await ours.metrics())).toEqual(lines(await theirs.metrics()));
    const sum = (text: string) => Number(/_sum (\S+)/.exec(text)![1]);
    expect(sum(await ours.metrics())).toBeCloseTo(sum(await theirs.metrics()), 9);
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
