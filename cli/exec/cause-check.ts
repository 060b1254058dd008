/**
 * Whether a replay against a build exercised the incident's causes (the calls
 * marked at export, core/incident/incident-causes.ts). A cause the build did
 * not reach makes the replay "not reproduced" whatever --strict says: a build
 * that skipped the slow upstream has not been tested against it.
 */
import type { IncidentCause } from '../../core/incident';
import { formatNs, unnamedSocketCalls, type TargetOutcome, type UnmatchedOutcome } from './exec-report';
import type { PlanTarget, RecordedCall } from './exec-plan';
import type { TargetMap } from './target-keys';
import { mapTarget } from './target-keys';

export interface CauseCheck {
  /** the event's index in replay order */
  index: number;
  event_type: string;
  /** as recorded */
  target: string | null;
  cause: IncidentCause['cause'];
  wait_ns: bigint;
  exercised: boolean;
  /** left out by the user's --target or --skip-target: said, not failed */
  deselected: boolean;
  /** what the build did with it, in words */
  reason: string;
}

/** The cause in words: `the 1.500 s response of tcp 10.0.0.5:6379 (event #3)`. */
export function causeName(c: CauseCheck): string {
  const what =
    c.cause === 'response'
      ? `${formatNs(c.wait_ns)} response wait on`
      : c.cause === 'error'
        ? `failed ${c.event_type} to`
        : `${formatNs(c.wait_ns)} ${c.event_type} to`;
  return `the ${what} ${c.target ?? '(no target)'} (event #${c.index})`;
}

export interface CauseInput {
  causes: readonly IncidentCause[];
  events: readonly RecordedCall[];
  plan: readonly PlanTarget[];
  outcomes: readonly TargetOutcome[];
  /** why the selection left an event out */
  excluded: ReadonlyMap<RecordedCall, { reason: string; chosen: boolean }>;
  maps: readonly TargetMap[];
  /** calls the build made to targets in no plan, by target as the build named it (the report's) */
  unmatched: readonly UnmatchedOutcome[];
}

function notHeldWhy(event: RecordedCall): string {
  if (event.event_type === 'sys_read')
    return 'kreplay relays a response only after a send on the same connection; this read had none recorded';
  return `kreplay --exec holds no ${event.event_type} (it holds writes, sends, fsyncs, connects and socket responses)`;
}

function missedWhy(target: PlanTarget, outcome: TargetOutcome, position: number, input: CauseInput): string {
  const recorded = target.indices.length;
  if (target.ambiguous?.[position]) {
    const key = target.requestKeys![position];
    const like = target.requestKeys!.filter((k) => k === key).length - 1;
    const taken = outcome.ambiguous?.includes(position)
      ? 'a request of the build took its exchange, but '
      : '';
    return `ambiguous: ${taken}the incident made ${like} other requests to ${target.target} that cannot be told from the cause's (the same request key), with other times: which one a request of the build is cannot be known, so the cause is never exercised`;
  }
  // the build's calls to sockets kreplay could not name: the cause's peer may be among them
  const unnamed = target.kind === 'socket' ? unnamedSocketCalls(input.unmatched, target.call) : 0;
  if (unnamed > 0 && target.call === 'write')
    return `not known: ${unnamed} calls of the build went to sockets whose peer could not be read; whether one was to ${target.target} cannot be told`;
  if (target.match === 'bytes' && target.bytesEnd && outcome.bytes > 0)
    return `the build's calls to it carried ${outcome.bytes} of the ${target.recordedBytes} recorded bytes; the cause's end at byte ${target.bytesEnd[position]}`;
  if (target.call === 'response' && outcome.matched + outcome.passed > 0)
    return `a different request: the build's ${outcome.matched + outcome.passed} requests to ${target.target} got ${outcome.matched} of the ${recorded} recorded responses, none the cause's (exchange ${position + 1}); ${outcome.passed} asked what the incident never did`;
  if (outcome.matched > 0)
    return `the build made ${outcome.matched} of the ${recorded} recorded calls of it; the cause was call ${position + 1}`;
  if (outcome.passed > 0)
    return `the build called ${target.target} ${outcome.passed} times, with different requests: none matched the recorded one`;
  // the build called the peer (its connect or sends matched) but no response came through the relay
  const calls = input.plan
    .map((t, i) => ({ t, matched: input.outcomes[i]!.matched }))
    .filter(({ t, matched }) => t !== target && t.target === target.target && matched > 0);
  if (calls.length > 0)
    return `the build called ${target.target} (${calls
      .map(({ t, matched }) => `${t.call} ${matched} matched`)
      .join(
        ', ',
      )}), but no ${target.call === 'response' ? 'response from it came through kreplay' : `${target.call} to it matched`}: the ${target.call === 'response' ? "connection was not relayed (README, 'the relay')" : 'calls differed'}`;
  const rule = input.maps.find((m) => mapTarget(target.recorded, target.kind, [m]) !== target.recorded);
  if (rule)
    return `--map ${rule.from}=${rule.to} maps it to ${target.target}, and the build made no call to that (the map matched nothing the build did)`;
  const elsewhere = [...new Set(input.unmatched.map((u) => u.target))].filter(
    (t) => t.split(' ')[0] === target.target.split(' ')[0],
  );
  const none =
    target.call === 'response'
      ? `the build got no response from ${target.target} through kreplay's relay`
      : `the build made no ${target.call} to ${target.target}`;
  return `no call to that peer: ${none}${
    elsewhere.length > 0
      ? ` (it called ${elsewhere.slice(0, 3).join(', ')}: --map ${target.recorded}=…?)`
      : ''
  }`;
}

/** Each cause, whether the build exercised it, and why not. */
export function checkCauses(input: CauseInput): CauseCheck[] {
  const where = new Map<number, { target: PlanTarget; outcome: TargetOutcome; position: number }>();
  input.plan.forEach((target, i) => {
    target.indices.forEach((index, position) =>
      where.set(index, { target, outcome: input.outcomes[i]!, position }),
    );
    // a later part of an answer is reached with its exchange
    target.laterParts?.forEach((position, index) =>
      where.set(index, { target, outcome: input.outcomes[i]!, position }),
    );
  });
  return input.causes.map((cause) => {
    const event = input.events[cause.index];
    const base = {
      index: cause.index,
      event_type: event?.event_type ?? '?',
      target: event?.target ?? null,
      cause: cause.cause,
      wait_ns: cause.wait_ns,
      deselected: false,
    };
    if (!event) return { ...base, exercised: false, reason: 'the incident holds no such event' };
    const found = where.get(cause.index);
    if (!found) {
      const excluded = input.excluded.get(event);
      if (excluded?.chosen)
        return { ...base, exercised: false, deselected: true, reason: `left out: ${excluded.reason}` };
      const why =
        excluded?.reason ??
        (event.target ? notHeldWhy(event) : "it has no target to match the build's calls on");
      return { ...base, exercised: false, reason: `not replayed: ${why}` };
    }
    // a stream matched by bytes: the cause is reached when the build's bytes reach the end of its
    const ends = found.target.match === 'bytes' ? found.target.bytesEnd : undefined;
    // a response: reached when a response of the build took its exchange (matched by request)
    const exchanges = found.target.call === 'response' ? found.outcome.exchanges : undefined;
    const reached = ends
      ? BigInt(found.outcome.bytes) >= ends[found.position]!
      : exchanges
        ? exchanges.includes(found.position)
        : found.position < found.outcome.matched;
    if (reached) return { ...base, exercised: true, reason: `exercised: the build made the matching call` };
    return {
      ...base,
      exercised: false,
      reason: missedWhy(found.target, found.outcome, found.position, input),
    };
  });
}
