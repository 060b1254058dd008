/**
 * What a replay probe's events say against the schedule (bench/replay-client.ts):
 * each event's arrival, taken by the client process, against anchor +
 * replay_offset_ns. The client cannot read the daemon's anchor, so it is
 * taken as the earliest arrival − offset of the run (what the best-served
 * event took to reach it, loopback and the client's reading included,
 * counts as 0).
 */
import { quantile } from './replay-data';
import type { ProbeResult } from './replay-probe';

/** ms */
export interface Timing {
  late: { p50: number; p99: number; max: number };
  /** |(arrival_i − arrival_0) − (offset_i − offset_0)|: the schedule seen relative to the first event */
  vsFirst: { p50: number; max: number };
  firstLate: number;
  /** the server's emitted_late_ns of the first event */
  firstRelease: number;
  /**
   * The latest event: its index and the server's emitted_late_ns of it, which
   * tells whether the daemon released it late or a hop after the release
   * (the socket, the CLI, the pipe, the probe) held it (NaN: null, as after a cut)
   */
  latest: { index: number; release: number };
  releaseP99: number;
}

export function timing(r: ProbeResult): Timing {
  const n = r.events;
  let anchor = Infinity;
  for (let i = 0; i < n; i++) anchor = Math.min(anchor, r.arrivals[i]! - r.offsets[i]!);
  const late: number[] = [];
  const vsFirst: number[] = [];
  let latest = 0;
  for (let i = 0; i < n; i++) {
    late.push((r.arrivals[i]! - r.offsets[i]! - anchor) / 1e6);
    if (late[i]! > late[latest]!) latest = i;
    if (i > 0)
      vsFirst.push(Math.abs(r.arrivals[i]! - r.arrivals[0]! - (r.offsets[i]! - r.offsets[0]!)) / 1e6);
  }
  const released = r.released.filter((x) => !Number.isNaN(x)).map((x) => x / 1e6);
  return {
    late: { p50: quantile(late, 0.5), p99: quantile(late, 0.99), max: Math.max(...late) },
    vsFirst: { p50: quantile(vsFirst, 0.5), max: Math.max(...vsFirst) },
    firstLate: late[0]!,
    firstRelease: r.released[0]! / 1e6,
    latest: { index: latest, release: r.released[latest]! / 1e6 },
    releaseP99: quantile(released, 0.99),
  };
}
