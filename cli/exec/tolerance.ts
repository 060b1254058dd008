/**
 * How far a replay's observed times may be from the intended ones (`--tolerance`), and which holds
 * are too short to compare: one owner for the report's timing failures and the plan's ambiguous
 * exchanges.
 */
import { InvalidArgumentError } from 'commander';

/** Observed and intended may differ by the larger of `fraction` × intended and `ns`. */
export interface Tolerance {
  fraction: number;
  ns: bigint;
}

export const DEFAULT_TOLERANCE = '10%,1ms';
const UNITS: Record<string, bigint> = { ns: 1n, us: 1_000n, ms: 1_000_000n, s: 1_000_000_000n };

/** `10%`, `1ms`, `500us`, or both (`10%,1ms`: the larger allowance wins). */
export function parseTolerance(value: string): Tolerance {
  const tolerance: Tolerance = { fraction: 0, ns: 0n };
  for (const part of value.split(',')) {
    const percent = /^(\d+(?:\.\d+)?)%$/.exec(part);
    const time = /^(\d+)(ns|us|ms|s)$/.exec(part);
    if (percent) tolerance.fraction = Number(percent[1]) / 100;
    else if (time) tolerance.ns = BigInt(time[1]!) * UNITS[time[2]!]!;
    else
      throw new InvalidArgumentError(
        `expected a percentage and/or a duration (10%,1ms; 500us), got "${value}"`,
      );
  }
  return tolerance;
}

/** Holds shorter than this are timing noise on a shared machine, never a failure (README). */
export const TIMING_NOISE_FLOOR_NS = 1_000_000n;

/** What `intended` may be off by: the larger of the tolerance's share of it and its duration. */
export function allowance(intended: bigint, tolerance: Tolerance): bigint {
  const relative = BigInt(Math.round(Number(intended) * tolerance.fraction));
  return relative > tolerance.ns ? relative : tolerance.ns;
}

/**
 * Whether two holds `low` <= `high` are one for a replay: both timing noise (below the floor), or
 * apart by no more than the tolerance of the longer (without one, only equal holds are).
 */
export function alike(low: bigint, high: bigint, tolerance?: Tolerance): boolean {
  if (high < TIMING_NOISE_FLOOR_NS) return true;
  return high - low <= (tolerance ? allowance(high, tolerance) : 0n);
}
