import fc from 'fast-check';
import { TimingStats } from '../../daemon/replay/timing-stats';

/** The q-quantile as TimingStats defines it: the smallest sample that at least q of all do not exceed. */
function exactQuantile(sorted: bigint[], q: number): bigint {
  return sorted[Math.max(1, Math.ceil(q * sorted.length)) - 1]!;
}

describe('TimingStats', () => {
  it('reports nothing before the first sample', () => {
    expect(new TimingStats().summary()).toEqual({ p50: null, p99: null, max: null });
  });

  it('is exact below 64 ns and keeps the maximum exactly', () => {
    const stats = new TimingStats();
    for (let i = 0n; i < 64n; i++) stats.add(i);
    stats.add(123_456_789_012n);
    expect(stats.quantile(0.5)).toBe(32n);
    expect(stats.summary().max).toBe(123_456_789_012n);
    expect(stats.quantile(1)).toBe(123_456_789_012n);
  });

  it('reports percentiles at most ~3% above the true value, never below', () => {
    fc.assert(
      fc.property(
        fc.array(fc.bigInt({ min: 0n, max: 10n ** 12n }), { minLength: 1, maxLength: 400 }),
        fc.constantFrom(0.5, 0.9, 0.99, 1),
        (samples, q) => {
          const stats = new TimingStats();
          samples.forEach((s) => stats.add(s));
          const exact = exactQuantile(
            [...samples].sort((a, b) => (a < b ? -1 : a > b ? 1 : 0)),
            q,
          );
          const reported = stats.quantile(q)!;
          expect(reported).toBeGreaterThanOrEqual(exact);
          expect(Number(reported - exact)).toBeLessThanOrEqual(Number(exact) / 32);
        },
      ),
    );
  });

  it('holds a million samples in the same fixed set of buckets', () => {
    const stats = new TimingStats();
    for (let i = 0; i < 1_000_000; i++) stats.add(BigInt(i * 997));
    expect(stats.snapshot().buckets.length).toBeLessThan(1600);
    expect(stats.quantile(0.5)).toBeGreaterThanOrEqual(498_500_000n);
  });

  it('saturates instead of failing beyond 2^53 ns', () => {
    const stats = new TimingStats();
    stats.add(1n << 60n);
    expect(stats.summary()).toEqual({ p50: 1n << 60n, p99: 1n << 60n, max: 1n << 60n });
  });

  it('puts each value in the bucket of the layout (bit arithmetic on the bigint), at powers of two too', () => {
    // the layout written out on the bigint: 32 sub-buckets per power of two from 64 ns, saturating at 2^53
    const bucketOf = (ns: bigint): number => {
      if (ns < 64n) return Number(ns);
      const msb = Math.min(ns.toString(2).length - 1, 52);
      const sub = Math.min(Number(ns >> BigInt(msb - 5)), 63) - 32;
      return 64 + (msb - 6) * 32 + sub;
    };
    const near = [0n, 1n, 63n, 64n, 65n];
    for (let bit = 6n; bit <= 60n; bit++) near.push((1n << bit) - 1n, 1n << bit, (1n << bit) + 1n);
    fc.assert(
      fc.property(fc.oneof(fc.constantFrom(...near), fc.bigInt({ min: 0n, max: 1n << 56n })), (ns) => {
        const stats = new TimingStats();
        stats.add(ns);
        expect(stats.snapshot().buckets).toEqual([[bucketOf(ns), 1]]);
      }),
      { numRuns: 2000 },
    );
  });

  it('round-trips through its snapshot', () => {
    const stats = new TimingStats();
    [5n, 70n, 9_000n, 1_000_000n, 2_000_000_123n].forEach((s) => stats.add(s));
    const copy = TimingStats.restore(JSON.parse(JSON.stringify(stats.snapshot())));
    expect(copy.summary()).toEqual(stats.summary());
    expect(copy.snapshot()).toEqual(stats.snapshot());
  });
});
