/**
 * A transaction's events laid out for drawing: lanes per node → service →
 * thread and per block device, each lane's events as typed arrays of
 * offsets from the first event (ns as doubles: exact below 2^53 ns, 104
 * days), sorted by start so drawing and hit-testing binary-search them.
 * A build that a replay session drives can be laid out beside the incident,
 * in lanes of its own below it, placed on the incident's time axis.
 */
import type { ApiEvent } from './api';

export interface Lane {
  label: string;
  /** node / service header shown above the lane's first thread, when it starts a group */
  group: string | null;
  /** indexes into Model.events, by start */
  index: Int32Array;
  start: Float64Array;
  end: Float64Array;
  /** the longest event of the lane: a binary search by start must look back this far */
  maxDur: number;
}

/** Events laid out beside the incident's (a driven build's writes) and where each falls on its time axis. */
export interface Beside {
  events: ApiEvent[];
  group: string;
  offset(e: ApiEvent): number;
}

export interface Model {
  /** the incident's events first, in order, then those beside it */
  events: ApiEvent[];
  t0: bigint;
  span: number;
  /** each event's offsets on the time axis */
  starts: Float64Array;
  ends: Float64Array;
  lanes: Lane[];
  laneOf: Int32Array;
  byId: Map<string, number>;
}

export function buildModel(incident: ApiEvent[], beside?: Beside): Model {
  const t0 = incident.length ? BigInt(incident[0]!.timestamp_ns) : 0n;
  const events = beside ? [...incident, ...beside.events] : incident;
  const groups = new Map<string, number[]>();
  const keyOf = (e: ApiEvent, i: number) =>
    i >= incident.length
      ? `3\0${e.node}\0${e.service_name}\0${String(e.pid).padStart(10)}\0${String(e.tid).padStart(10)}`
      : e.event_type === 'block_io'
        ? `2\0${e.node}\0${e.device}`
        : `1\0${e.node}\0${e.service_name}\0${String(e.pid).padStart(10)}\0${String(e.tid).padStart(10)}`;
  const starts = new Float64Array(events.length);
  const ends = new Float64Array(events.length);
  let span = 1;
  events.forEach((e, i) => {
    starts[i] = i < incident.length ? Number(BigInt(e.timestamp_ns) - t0) : beside!.offset(e);
    ends[i] = starts[i]! + Number(e.duration_ns);
    if (ends[i]! > span) span = ends[i]!;
    const key = keyOf(e, i);
    let list = groups.get(key);
    if (!list) groups.set(key, (list = []));
    list.push(i);
  });
  const laneOf = new Int32Array(events.length);
  const lanes: Lane[] = [];
  let lastGroup = '';
  for (const key of [...groups.keys()].sort()) {
    const members = groups.get(key)!.sort((a, b) => starts[a]! - starts[b]!);
    const first = events[members[0]!]!;
    const groupName = key.startsWith('3')
      ? `${beside!.group} › ${first.node} › ${first.service_name}`
      : first.event_type === 'block_io'
        ? `block devices @ ${first.node}`
        : `${first.node} › ${first.service_name}`;
    const lane: Lane = {
      label: first.event_type === 'block_io' ? `${first.device}` : `${first.comm} ${first.pid}/${first.tid}`,
      group: groupName === lastGroup ? null : groupName,
      index: Int32Array.from(members),
      start: Float64Array.from(members, (i) => starts[i]!),
      end: Float64Array.from(members, (i) => ends[i]!),
      maxDur: 0,
    };
    lastGroup = groupName;
    for (let k = 0; k < members.length; k++) {
      lane.maxDur = Math.max(lane.maxDur, lane.end[k]! - lane.start[k]!);
      laneOf[members[k]!] = lanes.length;
    }
    lanes.push(lane);
  }
  return {
    events,
    t0,
    span,
    starts,
    ends,
    lanes,
    laneOf,
    byId: new Map(events.map((e, i) => [e.event_id, i])),
  };
}

/** The first position in `lane` whose event may still be running at `t`. */
export function firstVisible(lane: Lane, t: number): number {
  const from = t - lane.maxDur;
  let lo = 0;
  let hi = lane.start.length;
  while (lo < hi) {
    const mid = (lo + hi) >> 1;
    if (lane.start[mid]! < from) lo = mid + 1;
    else hi = mid;
  }
  return lo;
}
