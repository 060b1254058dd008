/**
 * The report of `kreplay replay --exec`: per (call kind, target), what the incident
 * recorded, what the build's calls matched, how long they were meant to take
 * and how long they took; as a table (stderr), JUnit XML and JSON.
 */
import { InvalidArgumentError } from 'commander';
import { formatTable } from '../text-table';
import type { CallKind, Match, PlanTarget } from './exec-plan';

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
}

export interface UnmatchedOutcome {
  call: CallKind;
  target: string;
  kind: string;
  calls: number;
}

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
  recorded_p50_ns: bigint | null;
  recorded_p99_ns: bigint | null;
  intended_p50_ns: bigint | null;
  intended_p99_ns: bigint | null;
  observed_p50_ns: bigint | null;
  observed_p99_ns: bigint | null;
  /** why observed and intended differ beyond the tolerance, else null */
  failure: string | null;
}

/** Nearest-rank percentile of unsorted values, null for none. */
export function percentile(values: readonly bigint[], p: number): bigint | null {
  if (values.length === 0) return null;
  const sorted = [...values].sort((a, b) => (a < b ? -1 : a > b ? 1 : 0));
  return sorted[Math.max(0, Math.ceil((p / 100) * sorted.length) - 1)]!;
}

function allowance(intended: bigint, tolerance: Tolerance): bigint {
  const relative = BigInt(Math.round(Number(intended) * tolerance.fraction));
  return relative > tolerance.ns ? relative : tolerance.ns;
}

function compare(
  label: string,
  observed: bigint | null,
  intended: bigint | null,
  tolerance: Tolerance,
): string | null {
  if (observed === null || intended === null) return null;
  const diff = observed > intended ? observed - intended : intended - observed;
  const allowed = allowance(intended, tolerance);
  if (diff <= allowed) return null;
  return `${label}: observed ${formatNs(observed)} vs intended ${formatNs(intended)} (off by ${formatNs(diff)}, tolerance ${formatNs(allowed)})`;
}

export function buildReport(
  plan: readonly PlanTarget[],
  outcomes: readonly TargetOutcome[],
  unmatched: readonly UnmatchedOutcome[],
  tolerance: Tolerance,
): TargetReport[] {
  const rows = plan.map((target, i): TargetReport => {
    const outcome = outcomes[i]!;
    const observed: bigint[] = [];
    const intended: bigint[] = [];
    outcome.intendedNs.forEach((hold, k) => {
      if (hold < 0n) return;
      intended.push(hold);
      observed.push(outcome.observedNs[k]!);
    });
    const row = {
      call: target.call,
      target: target.target,
      kind: target.kind,
      match: target.match,
      recorded_calls: target.recordedNs.length,
      recorded_bytes: target.recordedBytes,
      recorded_errors: target.recordedErrors,
      matched: outcome.matched,
      matched_bytes: outcome.bytes,
      failed: outcome.failed,
      passed_through: outcome.passed,
      cut_short: outcome.matched - intended.length,
      recorded_p50_ns: percentile(target.recordedNs, 50),
      recorded_p99_ns: percentile(target.recordedNs, 99),
      intended_p50_ns: percentile(intended, 50),
      intended_p99_ns: percentile(intended, 99),
      observed_p50_ns: percentile(observed, 50),
      observed_p99_ns: percentile(observed, 99),
    };
    const failures = [
      compare('p50', row.observed_p50_ns, row.intended_p50_ns, tolerance),
      compare('p99', row.observed_p99_ns, row.intended_p99_ns, tolerance),
    ].filter((f) => f !== null);
    return { ...row, failure: failures.length > 0 ? failures.join('; ') : null };
  });
  for (const other of unmatched) {
    rows.push({
      call: other.call,
      target: other.target,
      kind: other.kind,
      match: 'calls',
      recorded_calls: 0,
      recorded_bytes: 0,
      recorded_errors: 0,
      matched: 0,
      matched_bytes: 0,
      failed: 0,
      passed_through: other.calls,
      cut_short: 0,
      recorded_p50_ns: null,
      recorded_p99_ns: null,
      intended_p50_ns: null,
      intended_p99_ns: null,
      observed_p50_ns: null,
      observed_p99_ns: null,
      failure: null,
    });
  }
  return rows;
}

/** 1234567 → "1.235 ms"; units that keep 3-4 significant digits. */
export function formatNs(ns: bigint | null): string {
  if (ns === null) return '-';
  const n = Number(ns);
  if (n < 1_000) return `${n} ns`;
  if (n < 1_000_000) return `${(n / 1_000).toFixed(1)} µs`;
  if (n < 1_000_000_000) return `${(n / 1_000_000).toFixed(3)} ms`;
  return `${(n / 1_000_000_000).toFixed(3)} s`;
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
      r.failure ? 'FAIL' : r.matched > 0 ? 'ok' : 'passed',
    ]),
    header,
  );
}

const xml = (text: string) =>
  text.replace(
    /[&<>"']/g,
    (c) => ({ '&': '&amp;', '<': '&lt;', '>': '&gt;', '"': '&quot;', "'": '&apos;' })[c]!,
  );

export interface ReportContext {
  transactionId: string;
  sessionId: string;
  command: string;
  exitStatus: number;
  timestamp: string;
}

/** JUnit XML: a testcase per (call kind, target), failing where observed and intended differ beyond the tolerance. */
export function junitXml(rows: readonly TargetReport[], context: ReportContext): string {
  const failures = rows.filter((r) => r.failure).length;
  const cases = rows.map((r) => {
    const seconds = Number(r.observed_p50_ns ?? 0n) / 1e9;
    const out =
      `match=${r.match} recorded=${r.recorded_calls} recorded_bytes=${r.recorded_bytes} recorded_errors=${r.recorded_errors} ` +
      `matched=${r.matched} matched_bytes=${r.matched_bytes} failed=${r.failed} passed_through=${r.passed_through} cut_short=${r.cut_short} ` +
      `recorded_p50=${formatNs(r.recorded_p50_ns)} recorded_p99=${formatNs(r.recorded_p99_ns)} ` +
      `intended_p50=${formatNs(r.intended_p50_ns)} observed_p50=${formatNs(r.observed_p50_ns)} observed_p99=${formatNs(r.observed_p99_ns)}`;
    const failure = r.failure
      ? `\n      <failure message="${xml(r.failure)}" type="timing">${xml(r.failure)}</failure>`
      : '';
    return (
      `    <testcase classname="kreplay.exec.${xml(r.call)}.${xml(r.kind)}" name="${xml(r.target)}" time="${seconds.toFixed(6)}">` +
      `${failure}\n      <system-out>${xml(out)}</system-out>\n    </testcase>`
    );
  });
  const name = xml(`replay ${context.transactionId}`);
  return (
    `<?xml version="1.0" encoding="UTF-8"?>\n` +
    `<testsuites name="kreplay replay --exec" tests="${rows.length}" failures="${failures}">\n` +
    `  <testsuite name="${name}" tests="${rows.length}" failures="${failures}" errors="0" timestamp="${xml(context.timestamp)}">\n` +
    `    <properties>\n` +
    `      <property name="session" value="${xml(context.sessionId)}"/>\n` +
    `      <property name="command" value="${xml(context.command)}"/>\n` +
    `      <property name="exit_status" value="${context.exitStatus}"/>\n` +
    `    </properties>\n` +
    `${cases.join('\n')}\n  </testsuite>\n</testsuites>\n`
  );
}
