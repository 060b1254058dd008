/**
 * The report of `kreplay replay --exec`: per (call kind, target), what the incident
 * recorded, what the build's calls matched, how long they were meant to take
 * and how long they took, and why each was or was not matched; as a table
 * (stderr) and JSON (JUnit: junit-report.ts).
 */
import { formatTable } from '../text-table';
import { ACCEPTED_SOCKET } from '../../core/model/target';
import type { CallKind, Match, PlanTarget } from './exec-plan';
import { allowance, TIMING_NOISE_FLOOR_NS, type Tolerance } from './tolerance';

/** What the supervisor counted for one planned target. */
export interface TargetOutcome {
  matched: number;
  passed: number;
  /** matched calls failed with the incident's errno (--replay-errors) */
  failed: number;
  /** bytes of the matched calls (a stream matched by bytes) */
  bytes: number;
  /** per matched call */
  observedNs: BigInt64Array;
  /** per matched call; -1 where a stop released it before its deadline */
  intendedNs: BigInt64Array;
  /** responses: per matched response, the recorded exchange it took (by its request) */
  exchanges?: Uint32Array;
  /** responses: the exchanges the build's requests took without a hold, the incident having made others like them (ambiguous) */
  ambiguous?: Uint32Array;
}

export interface UnmatchedOutcome {
  call: CallKind;
  target: string;
  kind: string;
  calls: number;
}

export interface TargetReport {
  /** write (sys_write: writes and sends), fsync or connect */
  call: CallKind;
  target: string;
  kind: string;
  /** bytes: a stream's bytes matched the incident's; calls: the k-th call the k-th */
  match: Match;
  recorded_calls: number;
  recorded_bytes: number;
  /** recorded calls that failed */
  recorded_errors: number;
  matched: number;
  /** bytes the matched calls asked to write */
  matched_bytes: number;
  /** matched calls failed with the incident's errno (--replay-errors) */
  failed: number;
  passed_through: number;
  /** matched calls a stop released before their deadline (not compared) */
  cut_short: number;
  /** matched calls held that the build gave up on before their release (it closed or timed out): held, not compared */
  gave_up: number;
  /**
   * responses matched but not held: the incident made other requests the matcher cannot tell theirs
   * from, which took other times (ambiguous)
   */
  ambiguous: number;
  recorded_p50_ns: bigint | null;
  recorded_p99_ns: bigint | null;
  intended_p50_ns: bigint | null;
  intended_p99_ns: bigint | null;
  observed_p50_ns: bigint | null;
  observed_p99_ns: bigint | null;
  /** observed − intended per compared call (positive: released late) */
  hold_error_p50_ns: bigint | null;
  hold_error_p99_ns: bigint | null;
  /** whether the supervisor held this target's calls (false: excluded, or never recorded) */
  held: boolean;
  /** why it was or was not matched, in words */
  reason: string;
  /** the build made fewer calls to it than the incident, else null (a failure under --strict) */
  shortfall: string | null;
  /** every recorded call made, how their content differs (fewer bytes: the service's replies, its requests' values), else null: reported, never failed on */
  difference: string | null;
  /** why observed and intended differ beyond the tolerance, else null */
  failure: string | null;
}

/** Nearest-rank percentile of unsorted values, null for none. */
export function percentile(values: readonly bigint[], p: number): bigint | null {
  if (values.length === 0) return null;
  const sorted = [...values].sort((a, b) => (a < b ? -1 : a > b ? 1 : 0));
  return sorted[Math.max(0, Math.ceil((p / 100) * sorted.length) - 1)]!;
}

function compare(
  label: string,
  observed: bigint | null,
  intended: bigint | null,
  tolerance: Tolerance,
): string | null {
  if (observed === null || intended === null || intended < TIMING_NOISE_FLOOR_NS) return null;
  const diff = observed > intended ? observed - intended : intended - observed;
  const allowed = allowance(intended, tolerance);
  if (diff <= allowed) return null;
  return `${label}: observed ${formatNs(observed)} vs intended ${formatNs(intended)} (off by ${formatNs(diff)}, tolerance ${formatNs(allowed)})`;
}

/** The calls of a target released before their hold (beyond the tolerance), said once; null when none was. */
function releasedEarly(
  intended: readonly bigint[],
  observed: readonly bigint[],
  tolerance: Tolerance,
): string | null {
  let early = 0;
  let worst = 0n;
  intended.forEach((hold, k) => {
    if (hold < TIMING_NOISE_FLOOR_NS) return;
    const short = hold - observed[k]!;
    if (short <= allowance(hold, tolerance)) return;
    early++;
    if (short > worst) worst = short;
  });
  return early === 0 ? null : `${early} calls released early (by up to ${formatNs(worst)})`;
}

/** A recorded target the plan left out (target-selection.ts), or one the build wrote to that is in no plan. */
export interface OtherTarget {
  call: CallKind;
  target: string;
  kind: string;
  recorded_calls: number;
  calls: number;
  reason: string;
}

/** How the supervisor labels a socket whose peer it could not read (never held, never matched). */
const UNNAMED_SOCKET = 'socket';

/** The build's calls of one kind to sockets whose peer could not be read. */
export function unnamedSocketCalls(
  unmatched: readonly Pick<UnmatchedOutcome, 'call' | 'target' | 'calls'>[],
  call: CallKind,
): number {
  return unmatched
    .filter((u) => u.call === call && u.target === UNNAMED_SOCKET)
    .reduce((sum, u) => sum + u.calls, 0);
}

/** Targets the supervisor never holds whatever the plan: the stdout and stderr kreplay hands the build. */
export const NEVER_HELD_LABELS: Record<string, string> = {
  '(stdout)': 'never held: the stdout kreplay handed the build',
  '(stderr)': 'never held: the stderr kreplay handed the build',
};

function plannedReason(
  target: PlanTarget,
  counts: { matched: number; bytes: number; passed: number; gaveUp: number },
  unmatched: readonly UnmatchedOutcome[],
): string {
  const recorded = target.recordedNs.length;
  const rule = target.matchRule ? `; ${target.matchRule}` : '';
  const extra = `${counts.passed > 0 ? `; ${counts.passed} later calls passed` : ''}${rule}`;
  const gaveUp =
    counts.gaveUp > 0
      ? `; the build gave up on ${counts.gaveUp} before their release (it closed or timed out while held)`
      : '';
  // calls to sockets kreplay could not name may have been this target's: never "made no/fewer calls"
  const unnamed = target.kind === 'socket' ? unnamedSocketCalls(unmatched, target.call) : 0;
  const unknowable = `: ${unnamed} of its ${target.call} calls went to sockets whose peer could not be read`;
  if (target.match === 'bytes' && counts.matched > 0) {
    const all = target.recordedBytes;
    if (counts.bytes >= all)
      return `held: the build's ${counts.matched} calls carried all ${all} recorded bytes${gaveUp}${extra}`;
    return unnamed > 0
      ? `held ${counts.bytes} of ${all} bytes: whether the build sent the others is not known${unknowable}${gaveUp}`
      : `held ${counts.bytes} of ${all} bytes: the build sent fewer (in ${counts.matched} calls)${gaveUp}`;
  }
  if (counts.matched === recorded)
    return `held: the build made all ${recorded} recorded calls${gaveUp}${extra}`;
  if (counts.matched > 0)
    return unnamed > 0
      ? `held ${counts.matched} of ${recorded}: whether the build made the others is not known${unknowable}${gaveUp}${rule}`
      : `held ${counts.matched} of ${recorded}: the build made fewer calls${gaveUp}${rule}`;
  // the build did call it: none of its calls was one the incident recorded
  if (counts.passed > 0)
    return target.call === 'response'
      ? `never matched: the build's ${counts.passed} requests to it asked what the incident never did (a different request)${rule}`
      : `never matched: the build's ${counts.passed} calls to it matched none of the recorded ones${rule}`;
  if (unnamed > 0) return `never matched: not known whether the build called it${unknowable}`;
  // what the build wrote to instead, of the same kind: the likely --map
  const same = unmatched.filter(
    (u) => u.call === target.call && u.kind === target.kind && !(u.target in NEVER_HELD_LABELS),
  );
  const hint =
    same.length > 0
      ? ` (it wrote to ${same
          .slice(0, 3)
          .map((u) => u.target)
          .join(', ')}: --map ${target.recorded}=…?)`
      : '';
  return `never matched: the build made no call to it${hint}`;
}

export function buildReport(
  plan: readonly PlanTarget[],
  outcomes: readonly TargetOutcome[],
  unmatched: readonly UnmatchedOutcome[],
  tolerance: Tolerance,
  excluded: readonly Omit<OtherTarget, 'calls'>[] = [],
): TargetReport[] {
  const none = {
    match: 'calls' as Match,
    recorded_bytes: 0,
    recorded_errors: 0,
    matched_bytes: 0,
    failed: 0,
    cut_short: 0,
    recorded_p50_ns: null,
    recorded_p99_ns: null,
    intended_p50_ns: null,
    intended_p99_ns: null,
    observed_p50_ns: null,
    observed_p99_ns: null,
    hold_error_p50_ns: null,
    hold_error_p99_ns: null,
    gave_up: 0,
    ambiguous: 0,
    held: false,
    shortfall: null,
    difference: null,
    failure: null,
  };
  const rows = plan.map((target, i): TargetReport => {
    const outcome = outcomes[i]!;
    const observed: bigint[] = [];
    const intended: bigint[] = [];
    const errors: bigint[] = [];
    let cutShort = 0;
    let gaveUp = 0;
    outcome.intendedNs.forEach((hold, k) => {
      const seen = outcome.observedNs[k] ?? -1n;
      // -1: a stop released it before its deadline; a hold never answered: the build gave up on it
      if (hold < 0n) cutShort++;
      else if (seen < 0n) gaveUp++;
      else {
        intended.push(hold);
        observed.push(seen);
        errors.push(seen - hold);
      }
    });
    const recorded = target.recordedNs.length;
    // a call beyond the recorded ones is no match, whatever the supervisor counted: it passed
    // matched by calls, a call beyond the recorded ones is no match, whatever the supervisor
    // counted: it passed; matched by bytes, the build's calls carrying the incident's bytes may be
    // more or fewer than the recorded calls, and the bytes say how much was matched
    const byBytes = target.match === 'bytes';
    const matched = byBytes ? outcome.matched : Math.min(outcome.matched, recorded);
    const passed = outcome.passed + (outcome.matched - matched);
    const ambiguous = outcome.ambiguous?.length ?? 0;
    // a stream's calls are the build's calls to it, held or past the recorded bytes
    const calls = byBytes ? outcome.matched + outcome.passed : matched;
    const carried = `${outcome.bytes} of the ${target.recordedBytes} recorded bytes`;
    // every recorded call made, its bytes fewer: content (a literal value, a date, an id, a timing),
    // the build's own: said, never failed on
    const differs = byBytes && calls >= recorded && outcome.bytes < target.recordedBytes;
    const short = [
      calls < recorded
        ? `the build made ${calls} of the ${recorded} recorded calls${byBytes ? `, carrying ${carried}` : ''}`
        : null,
    ].filter((s) => s !== null);
    const row = {
      call: target.call,
      target: target.target,
      kind: target.kind,
      match: target.match,
      recorded_calls: recorded,
      recorded_bytes: target.recordedBytes,
      recorded_errors: target.recordedErrors,
      matched,
      matched_bytes: outcome.bytes,
      failed: outcome.failed,
      passed_through: passed,
      cut_short: cutShort,
      gave_up: gaveUp,
      ambiguous,
      recorded_p50_ns: percentile(target.recordedNs, 50),
      recorded_p99_ns: percentile(target.recordedNs, 99),
      intended_p50_ns: percentile(intended, 50),
      intended_p99_ns: percentile(intended, 99),
      observed_p50_ns: percentile(observed, 50),
      observed_p99_ns: percentile(observed, 99),
      hold_error_p50_ns: percentile(errors, 50),
      hold_error_p99_ns: percentile(errors, 99),
      held: true,
      reason:
        plannedReason(target, { matched, bytes: outcome.bytes, passed, gaveUp }, unmatched) +
        (ambiguous > 0 ? `; ${ambiguousWhy(ambiguous)}` : ''),
      shortfall: short.length > 0 ? short.join('; ') : null,
      difference: differs
        ? `the build's ${isServiceReply(target) ? 'replies' : 'calls'} carried ${carried}: their content differs (reported, never failed on)`
        : null,
    };
    // the median off is systematic; a call released early is a hold missed; a late tail alone is
    // the machine's scheduling noise (hold_error_p99 shows it), nothing a CI engineer can act on
    const failures = [
      compare('p50', row.observed_p50_ns, row.intended_p50_ns, tolerance),
      releasedEarly(intended, observed, tolerance),
    ].filter((f) => f !== null);
    return { ...row, failure: failures.length > 0 ? failures.join('; ') : null };
  });
  const same = (a: { call: CallKind; target: string }, b: { call: CallKind; target: string }) =>
    a.call === b.call && a.target === b.target;
  for (const other of excluded) {
    const calls = unmatched.find((u) => same(u, other))?.calls ?? 0;
    rows.push({ ...none, ...other, matched: 0, passed_through: calls });
  }
  for (const other of unmatched) {
    if (excluded.some((e) => same(e, other))) continue;
    rows.push({
      ...none,
      call: other.call,
      target: other.target,
      kind: other.kind,
      recorded_calls: 0,
      matched: 0,
      passed_through: other.calls,
      reason: NEVER_HELD_LABELS[other.target] ?? 'passed: the incident never wrote to it',
    });
  }
  return rows;
}

/** The service's own replies: its writes to a connection it accepted (`tcp accepted 127.0.0.1:8080`). */
export function isServiceReply(target: PlanTarget): boolean {
  return (
    target.call === 'write' && target.kind === 'socket' && target.target.includes(` ${ACCEPTED_SOCKET} `)
  );
}

export const ambiguousWhy = (n: number) =>
  `${n} responses not held: the incident made other requests the matcher cannot tell theirs from, with other times (ambiguous)`;

/** 1234567 → "1.235 ms"; units that keep 3-4 significant digits. */
export function formatNs(ns: bigint | null): string {
  if (ns === null) return '-';
  if (ns < 0n) return `-${formatNs(-ns)}`;
  const n = Number(ns);
  if (n < 1_000) return `${n} ns`;
  if (n < 1_000_000) return `${(n / 1_000).toFixed(1)} µs`;
  if (n < 1_000_000_000) return `${(n / 1_000_000).toFixed(3)} ms`;
  return `${(n / 1_000_000_000).toFixed(3)} s`;
}

/** A row's word in the table: FAIL (timing), ok (held), short (held fewer), or what it was. */
function resultWord(r: TargetReport): string {
  if (r.failure) return 'FAIL';
  if (!r.held) return r.recorded_calls > 0 ? 'excluded' : 'passed';
  if (r.matched === 0) return 'unmatched';
  return r.shortfall ? 'short' : 'ok';
}

export function reportTable(rows: readonly TargetReport[]): string {
  const header = [
    'CALL',
    'TARGET',
    'KIND',
    'RECORDED',
    'MATCHED',
    'PASSED',
    'FAILED',
    'REC P50',
    'REC P99',
    'HOLD P50',
    'OBS P50',
    'OBS P99',
    'RESULT',
    'WHY',
  ];
  return formatTable(
    rows.map((r) => [
      r.call,
      r.target,
      r.kind,
      r.match === 'bytes' ? `${r.recorded_calls} (${r.recorded_bytes} B)` : r.recorded_calls,
      r.match === 'bytes' ? `${r.matched} (${r.matched_bytes} B)` : r.matched,
      r.passed_through,
      r.failed,
      formatNs(r.recorded_p50_ns),
      formatNs(r.recorded_p99_ns),
      formatNs(r.intended_p50_ns),
      formatNs(r.observed_p50_ns),
      formatNs(r.observed_p99_ns),
      resultWord(r),
      r.reason,
    ]),
    header,
  );
}
