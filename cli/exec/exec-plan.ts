/**
 * Matching for `kreplay replay --exec`, pure: the incident's sys_write,
 * sys_fsync and sys_connect events grouped by (call kind, mapped target); the
 * test build's k-th call of a kind to target T matches the incident's k-th
 * (on streams, its bytes [a, b) match the incident's bytes [a, b)), and is
 * held per the pace. The supervisor gets one plan per (kind, target), so it
 * decides every call without asking JS.
 */
import { allTlsRequests, TLS_MATCH_RULE } from './tls-requests';
import type { Schedule } from '../../core/replay/schedule';
import { mapTarget, portKey, type TargetMap } from './target-keys';
import { alike, type Tolerance } from './tolerance';

export type Pace = 'duration' | 'timeline';
export const PACES: readonly Pace[] = ['duration', 'timeline'];

/** How a stream's calls match: by the bytes they carry, or the k-th call to the k-th. */
export type Match = 'bytes' | 'calls';
export const MATCHES: readonly Match[] = ['bytes', 'calls'];

/**
 * The calls the supervisor holds, by the event type that records them; and
 * `response`, the upstream's response time per exchange on a connection (from
 * the sys_read events), which kreplay's relay delays.
 */
export type CallKind = 'write' | 'fsync' | 'connect' | 'response';
const CALL_OF_EVENT: Readonly<Record<string, CallKind>> = {
  sys_write: 'write',
  sys_fsync: 'fsync',
  sys_connect: 'connect',
};

/** Writes at an offset of their own: their target is no byte stream. */
const POSITIONAL = new Set(['pwrite64', 'pwritev', 'pwritev2']);

/** The fields of a recorded event the matching reads. */
export interface RecordedCall {
  event_type: string;
  timestamp_ns: bigint;
  duration_ns: bigint;
  target?: string | null;
  target_kind?: string | null;
  syscall?: string | null;
  /** negative errno on failure */
  ret?: number | null;
  bytes?: number | null;
  pid?: number | null;
  fd?: number | null;
  /** sys_read: the first read after a send on a socket, from the send's end to this read's end (exact JSON gives a string) */
  response_ns?: bigint | string | number | null;
  /** sys_write: a send that started a request, the key of what it asked (native/capture/request_key.h) */
  request_key?: number | null;
}

/** Every field of RecordedCall: what a replay against a build decodes of an incident file's events. */
export const RECORDED_CALL_FIELDS = [
  'event_type',
  'timestamp_ns',
  'duration_ns',
  'target',
  'target_kind',
  'syscall',
  'ret',
  'bytes',
  'pid',
  'fd',
  'response_ns',
  'request_key',
] as const satisfies readonly (keyof RecordedCall)[];
// a field added to RecordedCall and not to the list fails to compile here
const everyFieldListed: Exclude<keyof RecordedCall, (typeof RECORDED_CALL_FIELDS)[number]> extends never
  ? true
  : never = true;
void everyFieldListed;

export interface PlanTarget {
  call: CallKind;
  /** as the test build names it (after --map) */
  target: string;
  /** as recorded */
  recorded: string;
  kind: string;
  /** the names the supervisor matches: the target, then its port key for sockets */
  keys: string[];
  match: Match;
  /** per recorded call, in order */
  recordedNs: bigint[];
  recordedBytes: number;
  /** recorded calls that failed */
  recordedErrors: number;
  /** per recorded call kept (as holdsNs), its event's index in the incident's replay order */
  indices: number[];
  /** duration pace: the hold; timeline pace: the release offset on the session's timeline (per call kept) */
  holdsNs: BigInt64Array;
  /** --replay-errors: per recorded call, the errno its match fails with (0: it runs) */
  errnos?: Int32Array;
  /** match bytes: per recorded call kept, the stream offset its bytes end at */
  bytesEnd?: BigInt64Array;
  /** match bytes, timeline pace: per recorded call kept, its replayed duration */
  spansNs?: BigInt64Array;
  /**
   * responses: per exchange, the key of the request it answered (0: not recorded, matched by
   * order); the relay gives each response of the build the first unused exchange of its request's key
   */
  requestKeys?: Uint32Array;
  /**
   * responses: per exchange, 1 when another exchange of its request's key took a time not alike its
   * own (beyond the tolerance): the matcher cannot tell which one a request of the build is, so none
   * is held, and a cause among them is never exercised
   */
  ambiguous?: Uint8Array;
  /**
   * responses: the later parts of an answer that came after a wait (TLS 1.3's tickets at once, the
   * response later), by their event's index, with the exchange each belongs to (its position)
   */
  laterParts?: Map<number, number>;
  /** responses: how the build's requests were matched to the exchanges, where it is not by what they ask */
  matchRule?: string;
}

export interface PlanOptions {
  maps: readonly TargetMap[];
  schedule: Schedule;
  pace: Pace;
  /** default bytes */
  match?: Match;
  replayErrors?: boolean;
  /** why a recorded call is not to be held (target-selection.ts), or null to plan it */
  exclude?: (event: RecordedCall, call: CallKind, target: string) => string | null;
  /** two responses of one request key whose holds differ by more than this are ambiguous (default: none alike but equal) */
  tolerance?: Tolerance;
}

/**
 * Per exchange, 1 when an exchange of the same recorded request key (not 0: requests not recorded
 * match by order) took a time not alike its own.
 */
export function ambiguousExchanges(
  keys: Uint32Array,
  holds: BigInt64Array,
  tolerance?: Tolerance,
): Uint8Array {
  const out = new Uint8Array(keys.length);
  const byKey = new Map<number, number[]>();
  keys.forEach((key, k) => {
    if (key !== 0) byKey.set(key, [...(byKey.get(key) ?? []), k]);
  });
  for (const group of byKey.values()) {
    let low = holds[group[0]!]!;
    let high = low;
    for (const k of group) {
      if (holds[k]! < low) low = holds[k]!;
      if (holds[k]! > high) high = holds[k]!;
    }
    if (!alike(low, high, tolerance)) for (const k of group) out[k] = 1;
  }
  return out;
}

interface Recorded {
  /** the event's index in replay order */
  index: number;
  durationNs: bigint;
  replayedNs: bigint;
  /** timeline: the event's replayed end on the session's timeline */
  endNs: bigint;
  bytes: number;
  errno: number;
  positional: boolean;
  /** a response: the key of the request it answered, 0 when not recorded */
  requestKey: number;
}

/**
 * A stream's writes match by bytes: sockets and pipes, and files written only
 * at their end (no pwrite), when every call's size is known and, under
 * --replay-errors, none failed (a failed call has no bytes to match on).
 */
function byBytes(call: CallKind, kind: string, calls: readonly Recorded[], options: PlanOptions): boolean {
  if ((options.match ?? 'bytes') !== 'bytes' || call !== 'write') return false;
  if (kind !== 'socket' && kind !== 'pipe' && kind !== 'file') return false;
  if (calls.some((c) => c.positional || (options.replayErrors && c.errno !== 0))) return false;
  return calls.some((c) => c.bytes > 0);
}

/**
 * Per socket target, in order, the upstream's response time of each exchange:
 * a sys_read's `response_ns`, or, for recordings without it, the gap from the
 * end of the last send on the same (pid, fd, target) to the end of the first
 * read after it; and the key of the request it answered (that of the send
 * on the connection that started it), 0 when not recorded. A later read of
 * the same answer that carries a wait of its own (the capture gives one to a
 * read that follows an EAGAIN) is a later part of that exchange: the
 * exchange's time runs from the send to the end of that read, so the relay
 * holds the whole answer as long as its last part took.
 */
const EAGAIN = 11;

interface ResponseCall {
  responseNs: bigint;
  requestKey: number;
  /** the reads of later parts of the answer */
  laterParts: RecordedCall[];
}

function responseCalls(events: readonly RecordedCall[]): Map<RecordedCall, ResponseCall> {
  const lastSendEnd = new Map<string, bigint>();
  const requestKeys = new Map<string, number>();
  const out = new Map<RecordedCall, ResponseCall>();
  // the exchange an answer's later parts extend, and when its request was sent
  const answering = new Map<string, { call: ResponseCall; sentEnd: bigint }>();
  for (const event of events) {
    if (event.target_kind !== 'socket' || !event.target) continue;
    const conn = `${event.pid ?? ''}\t${event.fd ?? ''}\t${event.target}`;
    const end = event.timestamp_ns + event.duration_ns;
    if (event.event_type === 'sys_write' && (event.ret ?? 0) >= 0) {
      lastSendEnd.set(conn, end);
      answering.delete(conn);
      if (event.request_key) requestKeys.set(conn, event.request_key);
    }
    // a read of the stream's end (ret 0) ends the exchange without a response; one that found the
    // socket empty (EAGAIN, as Go's and libuv's first try does) brought nothing and leaves the
    // exchange open for the read that does
    if (event.event_type !== 'sys_read' || (event.bytes ?? 0) <= 0 || event.ret === -EAGAIN) continue;
    if (event.ret === 0) {
      lastSendEnd.delete(conn);
      requestKeys.delete(conn);
      answering.delete(conn);
      continue;
    }
    const sent = lastSendEnd.get(conn);
    const given = event.response_ns;
    const waited = given !== null && given !== undefined;
    const open = answering.get(conn);
    if (sent === undefined && open && waited) {
      open.call.responseNs = end - open.sentEnd;
      open.call.laterParts.push(event);
      continue;
    }
    // a read with no send before it on this (pid, fd) is an exchange only if the capture timed it
    if (sent === undefined && !waited) continue;
    lastSendEnd.delete(conn);
    const requestKey = requestKeys.get(conn) ?? 0;
    requestKeys.delete(conn);
    const responseNs = waited ? BigInt(given) : end - sent!;
    if (responseNs < 0n) continue;
    const call = { responseNs, requestKey, laterParts: [] };
    out.set(event, call);
    answering.set(conn, { call, sentEnd: end - responseNs });
  }
  return out;
}

/**
 * `events`: the whole transaction in replay order (every type: the timeline's
 * offsets count every event, as the daemon's schedule does).
 */
export function buildPlan(events: readonly RecordedCall[], options: PlanOptions): PlanTarget[] {
  const firstTs = events[0]?.timestamp_ns ?? 0n;
  type Group = {
    call: CallKind;
    target: string;
    recorded: string;
    kind: string;
    calls: Recorded[];
    /** later parts of answers: [their event's index, the index of the exchange's first read] */
    laterParts: [number, number][];
  };
  const indexOf = new Map(events.map((event, index) => [event, index]));
  const groups = new Map<string, Group>();
  const responses = responseCalls(events);
  // an incident holds few targets and many calls: each (recorded target, kind) is mapped once, and
  // its group found by the call kind, with no key built per event
  const byRecorded = new Map<string, Map<string, { target: string; groups: Map<CallKind, Group> }>>();
  const mappedTarget = (recorded: string, kind: string) => {
    let kinds = byRecorded.get(recorded);
    if (!kinds) byRecorded.set(recorded, (kinds = new Map()));
    let entry = kinds.get(kind);
    if (!entry)
      kinds.set(kind, (entry = { target: mapTarget(recorded, kind, options.maps), groups: new Map() }));
    return entry;
  };
  events.forEach((event, index) => {
    const response = responses.get(event);
    const responseNs = response?.responseNs;
    const call = responseNs === undefined ? CALL_OF_EVENT[event.event_type] : 'response';
    if (!call || !event.target) return;
    const kind = event.target_kind ?? 'other';
    const mapped = mappedTarget(event.target, kind);
    const target = mapped.target;
    if (options.exclude?.(event, call, target)) return;
    let group = mapped.groups.get(call);
    if (!group) {
      // two recorded targets may map onto one: they share its group
      const key = `${call}\t${target}`;
      group = groups.get(key);
      if (!group)
        groups.set(key, (group = { call, target, recorded: event.target, kind, calls: [], laterParts: [] }));
      mapped.groups.set(call, group);
    }
    // a response is the upstream's time, not a call's: scaled, without the per-call extra latency
    const replayedNs =
      responseNs === undefined
        ? options.schedule.replayedDuration(event.duration_ns)
        : options.schedule.replayedDuration(responseNs) - options.schedule.extraLatencyNs;
    group.calls.push({
      index,
      durationNs: responseNs ?? event.duration_ns,
      replayedNs,
      // timeline: event k's replayed end, replay_offset_ns + replayed_duration_ns (unused by duration pace)
      endNs:
        options.pace === 'timeline'
          ? options.schedule.wallOffset(index, event.timestamp_ns - firstTs) + replayedNs
          : 0n,
      bytes: event.bytes ?? 0,
      errno: event.ret !== null && event.ret !== undefined && event.ret < 0 ? -event.ret : 0,
      positional: POSITIONAL.has(event.syscall ?? ''),
      requestKey: response?.requestKey ?? 0,
    });
    for (const part of response?.laterParts ?? []) group.laterParts.push([indexOf.get(part)!, index]);
  });
  return [...groups.values()].map(({ call, target, recorded, kind, calls, laterParts }) => {
    const port = kind === 'socket' ? portKey(target) : null;
    const match: Match = byBytes(call, kind, calls, options) ? 'bytes' : 'calls';
    // a stream's calls without bytes (failed, empty) carry nothing to match
    const kept = match === 'bytes' ? calls.filter((c) => c.bytes > 0) : calls;
    // the relay delays responses by their time whatever the pace
    const hold = (c: Recorded) =>
      options.pace === 'duration' || call === 'response' ? c.replayedNs : c.endNs;
    const plan: PlanTarget = {
      call,
      target,
      recorded,
      kind,
      keys: port ? [target, port] : [target],
      match,
      recordedNs: calls.map((c) => c.durationNs),
      recordedBytes: calls.reduce((sum, c) => sum + c.bytes, 0),
      recordedErrors: calls.filter((c) => c.errno !== 0).length,
      indices: kept.map((c) => c.index),
      holdsNs: BigInt64Array.from(kept.map(hold)),
    };
    if (options.replayErrors && match === 'calls' && calls.some((c) => c.errno !== 0))
      plan.errnos = Int32Array.from(calls.map((c) => c.errno));
    if (call === 'response') {
      plan.requestKeys = Uint32Array.from(kept.map((c) => c.requestKey));
      plan.ambiguous = ambiguousExchanges(plan.requestKeys, plan.holdsNs, options.tolerance);
      if (allTlsRequests(plan.requestKeys)) plan.matchRule = TLS_MATCH_RULE;
      if (laterParts.length > 0) {
        const position = new Map(kept.map((c, k) => [c.index, k]));
        plan.laterParts = new Map(laterParts.map(([part, first]) => [part, position.get(first)!]));
      }
    }
    if (match === 'bytes') {
      let end = 0n;
      plan.bytesEnd = BigInt64Array.from(kept.map((c) => (end += BigInt(c.bytes))));
      if (options.pace === 'timeline') plan.spansNs = BigInt64Array.from(kept.map((c) => c.replayedNs));
    }
    return plan;
  });
}
