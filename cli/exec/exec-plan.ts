/**
 * Matching for `kreplay replay --exec`, pure: the incident's sys_write events
 * grouped by (mapped) target; the test build's k-th call to target T matches
 * the incident's k-th call to T, and is held per the pace. The supervisor gets
 * one hold array per target, so it decides every call without asking JS.
 */
import type { Schedule } from '../../daemon/replay/sessions/schedule';
import { mapTarget, portKey, type TargetMap } from './target-keys';

export type Pace = 'duration' | 'timeline';
export const PACES: readonly Pace[] = ['duration', 'timeline'];

/** The fields of a recorded event the matching reads. */
export interface RecordedCall {
  event_type: string;
  timestamp_ns: bigint;
  duration_ns: bigint;
  target?: string | null;
  target_kind?: string | null;
}

export interface PlanTarget {
  /** as the test build names it (after --map) */
  target: string;
  /** as recorded */
  recorded: string;
  kind: string;
  /** the names the supervisor matches: the target, then its port key for sockets */
  keys: string[];
  /** per recorded call, in order */
  recordedNs: bigint[];
  /** duration pace: the hold; timeline pace: the release offset on the session's timeline */
  holdsNs: BigInt64Array;
}

export interface PlanOptions {
  maps: readonly TargetMap[];
  schedule: Schedule;
  pace: Pace;
  /** why a recorded call is not to be held (target-selection.ts), or null to plan it */
  exclude?: (event: RecordedCall, target: string) => string | null;
}

/**
 * `events`: the whole transaction in replay order (every type: the timeline's
 * offsets count every event, as the daemon's schedule does).
 */
export function buildPlan(events: readonly RecordedCall[], options: PlanOptions): PlanTarget[] {
  const firstTs = events[0]?.timestamp_ns ?? 0n;
  const byTarget = new Map<
    string,
    { recorded: string; kind: string; recordedNs: bigint[]; holds: bigint[] }
  >();
  events.forEach((event, index) => {
    if (event.event_type !== 'sys_write' || !event.target) return;
    const kind = event.target_kind ?? 'other';
    const target = mapTarget(event.target, kind, options.maps);
    if (options.exclude?.(event, target)) return;
    let group = byTarget.get(target);
    if (!group) {
      group = { recorded: event.target, kind, recordedNs: [], holds: [] };
      byTarget.set(target, group);
    }
    group.recordedNs.push(event.duration_ns);
    const replayed = options.schedule.replayedDuration(event.duration_ns);
    // timeline: event k's replayed end, replay_offset_ns + replayed_duration_ns
    group.holds.push(
      options.pace === 'duration'
        ? replayed
        : options.schedule.wallOffset(index, event.timestamp_ns - firstTs) + replayed,
    );
  });
  return [...byTarget].map(([target, group]) => {
    const port = group.kind === 'socket' ? portKey(target) : null;
    return {
      target,
      recorded: group.recorded,
      kind: group.kind,
      keys: port ? [target, port] : [target],
      recordedNs: group.recordedNs,
      holdsNs: BigInt64Array.from(group.holds),
    };
  });
}
