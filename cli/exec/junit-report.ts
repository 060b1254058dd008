/**
 * `kreplay replay --exec --report FILE.xml`: JUnit XML, one testsuite per
 * incident replayed. In each: a testcase per target (recorded, matched and
 * passed-through counts, hold error p50/p99), the build's exit, whether the
 * incident was reproduced, and whether its recording was complete. A failure
 * is something to act on: a timing miss beyond the tolerance on holds of a
 * millisecond or more, a build that failed, a replay that matched nothing;
 * under --strict also every shortfall.
 */
import { VERSION } from '../../core/version';
import { causeName } from './cause-check';
import { formatNs, type TargetReport } from './exec-report';
import type { IncidentReport } from './incident-report';

/** The facts of an incident's replay a testsuite reads. */
export type SuiteReport = Pick<
  IncidentReport,
  | 'incident'
  | 'transactionId'
  | 'digest'
  | 'sessionId'
  | 'command'
  | 'exitStatus'
  | 'timestamp'
  | 'speedFactor'
  | 'extraLatencyNs'
  | 'pace'
  | 'strict'
  | 'seconds'
  | 'firstHeldNs'
  | 'rows'
  | 'causes'
  | 'verdict'
  | 'completeness'
>;

const xml = (text: string) =>
  text.replace(
    /[&<>"']/g,
    (c) => ({ '&': '&amp;', '<': '&lt;', '>': '&gt;', '"': '&quot;', "'": '&apos;' })[c]!,
  );

interface Case {
  classname: string;
  name: string;
  seconds: number;
  failure?: { type: string; message: string };
  skipped?: string;
  out: string;
}

function caseXml(c: Case): string {
  const body = c.failure
    ? `\n      <failure message="${xml(c.failure.message)}" type="${c.failure.type}">${xml(c.failure.message)}</failure>`
    : c.skipped
      ? `\n      <skipped message="${xml(c.skipped)}"/>`
      : '';
  return (
    `    <testcase classname="${xml(c.classname)}" name="${xml(c.name)}" time="${c.seconds.toFixed(6)}">` +
    `${body}\n      <system-out>${xml(c.out)}</system-out>\n    </testcase>`
  );
}

function targetCase(r: TargetReport, suite: SuiteReport): Case {
  const out =
    `match=${r.match} recorded=${r.recorded_calls} recorded_bytes=${r.recorded_bytes} recorded_errors=${r.recorded_errors} ` +
    `matched=${r.matched} matched_bytes=${r.matched_bytes} failed=${r.failed} passed_through=${r.passed_through} cut_short=${r.cut_short} gave_up=${r.gave_up} ambiguous=${r.ambiguous} ` +
    `hold_error_p50=${formatNs(r.hold_error_p50_ns)} hold_error_p99=${formatNs(r.hold_error_p99_ns)} ` +
    `recorded_p50=${formatNs(r.recorded_p50_ns)} recorded_p99=${formatNs(r.recorded_p99_ns)} ` +
    `intended_p50=${formatNs(r.intended_p50_ns)} observed_p50=${formatNs(r.observed_p50_ns)} observed_p99=${formatNs(r.observed_p99_ns)}\n` +
    r.reason;
  const c: Case = {
    classname: `kreplay.exec.${r.call}.${r.kind}`,
    name: r.target,
    seconds: Number(r.observed_p50_ns ?? 0n) / 1e9,
    out,
  };
  if (r.failure) c.failure = { type: 'timing', message: r.failure };
  else if (suite.strict && r.held && r.shortfall) c.failure = { type: 'shortfall', message: r.shortfall };
  else if (!r.held && r.recorded_calls > 0) c.skipped = r.reason;
  return c;
}

function suiteCases(suite: SuiteReport): Case[] {
  const cases = suite.rows.map((r) => targetCase(r, suite));
  const build: Case = {
    classname: 'kreplay.build',
    name: 'exit status',
    seconds: suite.seconds,
    out: suite.command,
  };
  if (suite.exitStatus !== 0)
    build.failure = { type: 'build', message: `the build exited ${suite.exitStatus}: ${suite.command}` };
  const reproduced: Case = {
    classname: 'kreplay.replay',
    name: 'reproduced',
    seconds: 0,
    out: suite.verdict.reasons.join('\n'),
  };
  if (suite.verdict.kind === 'not-reproduced')
    reproduced.failure = { type: 'not-reproduced', message: suite.verdict.reasons[0]! };
  const lost = suite.completeness.lost;
  const complete: Case = {
    classname: 'kreplay.recording',
    name: 'complete',
    seconds: 0,
    out: suite.completeness.known
      ? lost.length > 0
        ? lost.join('\n')
        : 'no event lost over the incident'
      : 'unknown: the source keeps no record of what the recording lost',
  };
  if (lost.length > 0 && suite.strict)
    complete.failure = { type: 'lossy-recording', message: `the recording lost events: ${lost.join('; ')}` };
  const causes = suite.causes.map((c): Case => {
    const cause: Case = {
      classname: 'kreplay.cause',
      name: causeName(c),
      seconds: Number(c.wait_ns) / 1e9,
      out: c.reason,
    };
    if (c.deselected) cause.skipped = c.reason;
    else if (!c.exercised)
      cause.failure = { type: 'cause-not-exercised', message: `${causeName(c)}: ${c.reason}` };
    return cause;
  });
  return [...causes, ...cases, build, reproduced, complete];
}

function suiteXml(suite: SuiteReport, id: number): { xml: string; tests: number; failures: number } {
  const cases = suiteCases(suite);
  const failures = cases.filter((c) => c.failure).length;
  const skipped = cases.filter((c) => c.skipped).length;
  const properties: [string, string | number][] = [
    ['incident', suite.incident],
    ['transaction_id', suite.transactionId],
    ['incident_digest', suite.digest ?? ''],
    ['kreplay_version', VERSION],
    ['speed_factor', suite.speedFactor],
    ['extra_latency_ns', suite.extraLatencyNs],
    ['pace', suite.pace],
    ['strict', String(suite.strict)],
    ['session', suite.sessionId ?? ''],
    ['command', suite.command],
    ['exit_status', suite.exitStatus],
    ['verdict', suite.verdict.kind],
    ['first_held_ns', suite.firstHeldNs === null ? '' : suite.firstHeldNs.toString()],
  ];
  const text =
    `  <testsuite id="${id}" name="${xml(`replay ${suite.incident}`)}" tests="${cases.length}" failures="${failures}" errors="0" skipped="${skipped}" time="${suite.seconds.toFixed(3)}" timestamp="${xml(suite.timestamp)}">\n` +
    `    <properties>\n` +
    properties
      .map(([name, value]) => `      <property name="${name}" value="${xml(String(value))}"/>\n`)
      .join('') +
    `    </properties>\n` +
    `${cases.map(caseXml).join('\n')}\n  </testsuite>\n`;
  return { xml: text, tests: cases.length, failures };
}

export function junitXml(suites: readonly SuiteReport[]): string {
  const parts = suites.map((suite, i) => suiteXml(suite, i));
  const tests = parts.reduce((n, p) => n + p.tests, 0);
  const failures = parts.reduce((n, p) => n + p.failures, 0);
  return (
    `<?xml version="1.0" encoding="UTF-8"?>\n` +
    `<testsuites name="kreplay replay --exec" tests="${tests}" failures="${failures}">\n` +
    parts.map((p) => p.xml).join('') +
    `</testsuites>\n`
  );
}
