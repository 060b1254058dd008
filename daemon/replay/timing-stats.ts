/**
 * Lateness percentiles in bounded memory, whatever the number of events: a
 * log-linear histogram (HdrHistogram's layout) with 32 sub-buckets per power
 * of two, so a reported percentile is at most ~3% above the true value
 * (exact below 64 ns). The maximum is kept exactly, and so are the counts of
 * the metrics' buckets (LATENESS_BOUNDS_S) and the sum, so that the daemon's
 * histograms can be fed in aggregate.
 *
 * The numbers live in a Float64Array that may be shared memory: the replay
 * clock thread adds each release to its session's statistics, and the main
 * thread reads them when asked (ReleaseStats). Exact integers up to 2^53 ns.
 */
const SUB_BITS = 5;
const SUB = 1 << SUB_BITS;
/** values below this are their own bucket */
const LINEAR = 2 * SUB;
/** lateness is bucketed up to 2^53 ns (104 days); beyond lands in the last bucket */
const TOP_BIT = 53;
const BUCKETS = LINEAR + (TOP_BIT - SUB_BITS - 1) * SUB;
const TOP_NS = 2 ** TOP_BIT;
const TWO_32 = 2 ** 32;

/** The metrics' histogram buckets, in seconds (50 µs .. 10 s: a replay's lateness goal is 1 ms, a query's 10 ms). */
export const LATENESS_BOUNDS_S = [
  0.00005, 0.0001, 0.00025, 0.0005, 0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 10,
] as const;
const BOUNDS_NS = LATENESS_BOUNDS_S.map((s) => Math.round(s * 1e9));

/** Where each number is in the array: the buckets, then these, then the metrics' bucket counts. */
const COUNT = BUCKETS;
const MAX = BUCKETS + 1;
const SUM = BUCKETS + 2;
const LE = BUCKETS + 3;
export const TIMING_WORDS = LE + BOUNDS_NS.length;

/** The highest set bit of a positive safe integer, exactly (Math.log2 rounds). */
function msbOf(n: number): number {
  return n >= TWO_32 ? 63 - Math.clz32(Math.floor(n / TWO_32)) : 31 - Math.clz32(n);
}

/** Number arithmetic, exact below 2^53 (every lateness of a replay), no allocation: called per event. */
function bucketOf(ns: number): number {
  if (ns < LINEAR) return ns < 0 ? 0 : Math.floor(ns);
  if (ns >= TOP_NS) return BUCKETS - 1;
  const msb = msbOf(ns);
  const shift = msb - SUB_BITS;
  // dividing by a power of two is exact in a double
  const sub = Math.floor(ns / 2 ** shift) - SUB;
  return LINEAR + (msb - SUB_BITS - 1) * SUB + sub;
}

/** The largest value bucket `b` holds. */
function bucketTop(b: number): bigint {
  if (b < LINEAR) return BigInt(b);
  const shift = BigInt(Math.floor((b - LINEAR) / SUB) + 1);
  const sub = BigInt(((b - LINEAR) % SUB) + SUB);
  return ((sub + 1n) << shift) - 1n;
}

/** Sparse form for the session file: [bucket, count] pairs. */
export interface TimingSnapshot {
  max: string;
  buckets: [number, number][];
}

export interface TimingSummary {
  p50: bigint | null;
  p99: bigint | null;
  max: bigint | null;
}

/** What was added since the last look, in the metrics' terms: counts per bucket (not cumulative), sum in ns, count. */
export interface MetricDelta {
  le: number[];
  sumNs: number;
  count: number;
}

export class TimingStats {
  constructor(private readonly words: Float64Array = new Float64Array(TIMING_WORDS)) {
    if (words.length !== TIMING_WORDS)
      throw new Error(`timing stats: ${words.length} words, not ${TIMING_WORDS}`);
  }

  /** One sample (ns; a bigint beyond 2^53 saturates the buckets, its max is kept as a double). */
  add(late: bigint | number): void {
    const ns = typeof late === 'bigint' ? Number(late) : late;
    const w = this.words;
    w[bucketOf(ns)]! += 1;
    w[COUNT]! += 1;
    if (ns > w[MAX]!) w[MAX] = ns;
    w[SUM]! += ns;
    for (let b = 0; b < BOUNDS_NS.length; b++)
      if (ns <= BOUNDS_NS[b]!) {
        w[LE + b]! += 1;
        return;
      }
  }

  get count(): number {
    return this.words[COUNT]!;
  }

  private get max(): bigint {
    return BigInt(this.words[MAX]!);
  }

  /** The smallest bucket top that at least `q` of the samples do not exceed, capped at the max. */
  quantile(q: number): bigint | null {
    const count = this.count;
    if (count === 0) return null;
    const rank = Math.max(1, Math.ceil(q * count));
    let seen = 0;
    const max = this.max;
    for (let b = 0; b < BUCKETS; b++) {
      seen += this.words[b]!;
      if (seen >= rank) {
        // the last bucket holds everything beyond 2^53 ns: only the max bounds it
        const top = b === BUCKETS - 1 ? max : bucketTop(b);
        return top < max ? top : max;
      }
    }
    return max;
  }

  summary(): TimingSummary {
    return { p50: this.quantile(0.5), p99: this.quantile(0.99), max: this.count ? this.max : null };
  }

  snapshot(): TimingSnapshot {
    const buckets: [number, number][] = [];
    for (let b = 0; b < BUCKETS; b++) if (this.words[b]! > 0) buckets.push([b, this.words[b]!]);
    return { max: this.max.toString(), buckets };
  }

  /** Statistics as `snapshot` kept them, in `words` (fresh memory by default). */
  static restore(snapshot: TimingSnapshot, words?: Float64Array): TimingStats {
    const stats = new TimingStats(words);
    stats.words.fill(0);
    for (const [b, n] of snapshot.buckets) {
      if (b < 0 || b >= BUCKETS) continue;
      stats.words[b] = n;
      stats.words[COUNT]! += n;
    }
    stats.words[MAX] = Number(snapshot.max);
    return stats;
  }

  /**
   * What was added since `seen` (a copy of the metric words this updates),
   * for the daemon's histograms: read in aggregate, never per sample.
   */
  metricSince(seen: Float64Array): MetricDelta {
    const w = this.words;
    const le: number[] = [];
    for (let b = 0; b < BOUNDS_NS.length; b++) {
      le.push(w[LE + b]! - seen[LE + b]!);
      seen[LE + b] = w[LE + b]!;
    }
    const delta = { le, sumNs: w[SUM]! - seen[SUM]!, count: w[COUNT]! - seen[COUNT]! };
    seen[SUM] = w[SUM]!;
    seen[COUNT] = w[COUNT]!;
    return delta;
  }

  /** A copy of the metric words as they are now, to take deltas from (restored samples are not counted again). */
  metricMark(): Float64Array {
    return Float64Array.from(this.words);
  }
}
