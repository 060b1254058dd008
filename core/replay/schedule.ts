/**
 * The replay schedule in exact integer arithmetic (docs/replay.md, "Timing"). The
 * speed factor is a double; every finite double is an exact fraction m / 2^k,
 * so recorded nanoseconds are divided by it as bigints and never pass through
 * a JS number.
 */

/** [numerator, denominator] of a positive finite double, exactly. */
function exactFraction(x: number): [bigint, bigint] {
  let scaled = x;
  let den = 1n;
  // doubling is exact, and a double in 0.001..1000 becomes an integer within ~60 doublings
  while (!Number.isInteger(scaled)) {
    scaled *= 2;
    den *= 2n;
  }
  return [BigInt(scaled), den];
}

/** a / b rounded to the nearest integer (halves up), for a >= 0, b > 0. */
function divRound(a: bigint, b: bigint): bigint {
  return (2n * a + b) / (2n * b);
}

export class Schedule {
  private readonly speedNum: bigint;
  private readonly speedDen: bigint;

  constructor(
    readonly speedFactor: number,
    readonly extraLatencyNs: bigint,
  ) {
    [this.speedNum, this.speedDen] = exactFraction(speedFactor);
  }

  /** Recorded nanoseconds played at speed_factor. */
  private scaled(recordedNs: bigint): bigint {
    // speed 1 (1/1) is the common case, and exact without the division's four bigints
    if (this.speedNum === this.speedDen) return recordedNs;
    return divRound(recordedNs * this.speedDen, this.speedNum);
  }

  /**
   * Wall offset from play (pauses excluded) at which event `index`, `recordedNs`
   * after the first, is due: o/speed + index × extra. Also the wall offset of a
   * session sought to position `recordedNs` whose next event is `index`.
   */
  wallOffset(index: number, recordedNs: bigint): bigint {
    return this.scaled(recordedNs) + BigInt(index) * this.extraLatencyNs;
  }

  /** How long a call of `durationNs` takes in the replay. */
  replayedDuration(durationNs: bigint): bigint {
    return this.scaled(durationNs) + this.extraLatencyNs;
  }

  /**
   * The recorded position at wall offset `wallNs` when `nextIndex` events are
   * behind: (wall − nextIndex × extra) × speed, held between the position the
   * last event (or seek) left (`floorNs`) and the next event's offset (`ceilingNs`).
   */
  position(wallNs: bigint, nextIndex: number, floorNs: bigint, ceilingNs: bigint): bigint {
    const running = wallNs - BigInt(nextIndex) * this.extraLatencyNs;
    const recorded = running > 0n ? (running * this.speedNum) / this.speedDen : 0n;
    return recorded < floorNs ? floorNs : recorded > ceilingNs ? ceilingNs : recorded;
  }
}
