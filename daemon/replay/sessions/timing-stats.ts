/**
 * Lateness percentiles in bounded memory, whatever the number of events: a
 * log-linear histogram (HdrHistogram's layout) with 32 sub-buckets per power
 * of two, so a reported percentile is at most ~3% above the true value
 * (exact below 64 ns). The maximum is kept exactly.
 */
const SUB_BITS = 5;
const SUB = 1 << SUB_BITS;
/** values below this are their own bucket */
const LINEAR = 2 * SUB;
/** lateness is bucketed up to 2^53 ns (104 days); beyond lands in the last bucket */
const TOP_BIT = 53;
const BUCKETS = LINEAR + (TOP_BIT - SUB_BITS - 1) * SUB;

const TWO_32 = 2 ** 32;
const LINEAR_NS = BigInt(LINEAR);
const TOP_NS = 1n << BigInt(TOP_BIT);

/** The highest set bit of a positive safe integer, exactly (Math.log2 rounds). */
function msbOf(n: number): number {
  return n >= TWO_32 ? 63 - Math.clz32(Math.floor(n / TWO_32)) : 31 - Math.clz32(n);
}

/** Number arithmetic where it is exact (below 2^53, every lateness of a replay), no allocation: called per event. */
function bucketOf(ns: bigint): number {
  if (ns < LINEAR_NS) return Number(ns < 0n ? 0n : ns);
  if (ns >= TOP_NS) return BUCKETS - 1;
  const n = Number(ns);
  const msb = msbOf(n);
  const shift = msb - SUB_BITS;
  // dividing by a power of two is exact in a double
  const sub = Math.floor(n / 2 ** shift) - SUB;
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

export class TimingStats {
  private readonly counts = new Float64Array(BUCKETS);
  private count = 0;
  private max = 0n;

  add(ns: bigint): void {
    this.counts[bucketOf(ns)]! += 1;
    this.count += 1;
    if (ns > this.max) this.max = ns;
  }

  /** The smallest bucket top that at least `q` of the samples do not exceed, capped at the max. */
  quantile(q: number): bigint | null {
    if (this.count === 0) return null;
    const rank = Math.max(1, Math.ceil(q * this.count));
    let seen = 0;
    for (let b = 0; b < BUCKETS; b++) {
      seen += this.counts[b]!;
      if (seen >= rank) {
        // the last bucket holds everything beyond 2^53 ns: only the max bounds it
        const top = b === BUCKETS - 1 ? this.max : bucketTop(b);
        return top < this.max ? top : this.max;
      }
    }
    return this.max;
  }

  summary(): TimingSummary {
    return { p50: this.quantile(0.5), p99: this.quantile(0.99), max: this.count ? this.max : null };
  }

  snapshot(): TimingSnapshot {
    const buckets: [number, number][] = [];
    this.counts.forEach((n, b) => {
      if (n > 0) buckets.push([b, n]);
    });
    return { max: this.max.toString(), buckets };
  }

  static restore(snapshot: TimingSnapshot): TimingStats {
    const stats = new TimingStats();
    for (const [b, n] of snapshot.buckets) {
      if (b < 0 || b >= BUCKETS) continue;
      stats.counts[b] = n;
      stats.count += n;
    }
    stats.max = BigInt(snapshot.max);
    return stats;
  }
}
