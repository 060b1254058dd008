/**
 * One incident's replay as one list of facts, each computed once, and two of the reports made of
 * it: the text kreplay prints on stderr and the JSON report (--report-json). The JUnit report
 * (--report) is junit-report.ts, from the same facts.
 */
import { causeName, type CauseCheck } from './cause-check';
import type { ExecFlags } from './exec-flags';
import type { Match, Pace } from './exec-plan';
import { formatNs, reportTable, type TargetReport } from './exec-report';
import type { Judgement, Verdict } from './exec-verdict';
import type { Completeness, IncidentSource } from './incident-source';
import { commandLine } from './launcher';
import { sayLine } from './say';
import type { SupervisedRun } from './supervised-build';

export interface IncidentReport {
  /** the incident file, or `transaction TXN` */
  incident: string;
  transactionId: string;
  digest: string | null;
  sessionId: string | null;
  command: string;
  exitStatus: number;
  timestamp: string;
  speedFactor: number;
  extraLatencyNs: number;
  pace: Pace;
  match: Match;
  replayErrors: boolean;
  strict: boolean;
  /** wall time of the whole replay */
  seconds: number;
  /** from the build's start to its first call kreplay held; null: none was held */
  firstHeldNs: bigint | null;
  rows: readonly TargetReport[];
  /** the incident's causes, and whether the build exercised each */
  causes: readonly CauseCheck[];
  verdict: Verdict;
  completeness: Completeness;
  /** calls let through untouched after a stop */
  bypassed: number;
  /** socket peers read from /proc/<pid>/net because pidfd_getfd was denied */
  peersFromProc: number;
  /** whether the supervisor ran at real-time priority */
  realtime: boolean;
}

export interface ReplayFacts {
  source: IncidentSource;
  argv: readonly string[];
  flags: ExecFlags;
  run: SupervisedRun;
  judgement: Judgement;
  started: ReplayStart;
}

/** When a replay began: on the wall clock for its timestamp, on performance.now() for its length (which a wall clock step does not change). */
export interface ReplayStart {
  wallMs: number;
  at: number;
}

export const replayStart = (): ReplayStart => ({ wallMs: Date.now(), at: performance.now() });

export function incidentReport({
  source,
  argv,
  flags,
  run,
  judgement,
  started,
}: ReplayFacts): IncidentReport {
  return {
    incident: source.name,
    transactionId: source.transactionId,
    digest: source.digest,
    sessionId: run.sessionId,
    command: commandLine(argv),
    exitStatus: run.exit.status,
    timestamp: new Date(started.wallMs).toISOString(),
    speedFactor: flags.speed,
    extraLatencyNs: flags.extraLatencyNs,
    pace: flags.pace,
    match: flags.match,
    replayErrors: flags.replayErrors ?? false,
    strict: flags.strict === true,
    seconds: (performance.now() - started.at) / 1000,
    firstHeldNs: run.firstHeldNs,
    rows: judgement.rows,
    causes: judgement.causes,
    verdict: judgement.verdict,
    completeness: source.completeness,
    bypassed: run.results.bypassed,
    peersFromProc: run.results.peersFromProc,
    realtime: run.results.realtime,
  };
}

/** The table and the lines after it that kreplay prints on stderr once the build has ended. */
export function reportText(r: IncidentReport): string {
  const lines: string[] = [];
  for (const c of r.causes)
    lines.push(
      `cause ${c.exercised ? 'exercised' : c.deselected ? 'not checked' : 'NOT exercised'}: ${causeName(c)}: ${c.reason}`,
    );
  if (r.bypassed > 0)
    lines.push(
      `${r.bypassed} calls passed untouched after the ${r.sessionId !== null ? 'session' : 'replay'} stopped`,
    );
  if (r.peersFromProc > 0)
    lines.push(
      `pidfd_getfd was denied: ${r.peersFromProc} socket peers were read from the kernel's socket tables instead`,
    );
  if (!r.realtime)
    lines.push(
      'no real-time priority for the supervisor (CAP_SYS_NICE or RLIMIT_RTPRIO): holds may end later on a loaded machine',
    );
  lines.push(
    r.firstHeldNs === null
      ? 'the build made no call kreplay held'
      : `the build's first held call came ${formatNs(r.firstHeldNs)} after it started`,
  );
  if (!r.completeness.known) lines.push(`${r.incident}: whether the recording lost events is unknown`);
  for (const reason of r.verdict.reasons)
    lines.push(`${r.verdict.kind === 'passed' ? 'warning: ' : ''}${reason}`);
  lines.push(`${r.incident}: ${r.verdict.kind} (exit ${r.verdict.status})`);
  const session = r.sessionId !== null ? ` (session ${r.sessionId})` : '';
  return (
    `\nreplay ${r.incident} against \`${r.command}\`${session}:\n${reportTable(r.rows)}\n` +
    lines.map(sayLine).join('')
  );
}

/** The JSON report of one incident (--report-json). */
export function reportJson(r: IncidentReport): Record<string, unknown> {
  return {
    incident: r.incident,
    transaction_id: r.transactionId,
    incident_digest: r.digest,
    session_id: r.sessionId,
    command: r.command,
    pace: r.pace,
    match: r.match,
    replay_errors: r.replayErrors,
    speed_factor: r.speedFactor,
    extra_latency_ns: r.extraLatencyNs,
    strict: r.strict,
    exit_status: r.exitStatus,
    verdict: r.verdict.kind,
    status: r.verdict.status,
    reasons: r.verdict.reasons,
    recording_complete: r.completeness.known ? r.completeness.lost.length === 0 : null,
    recording_lost: r.completeness.lost,
    bypassed: r.bypassed,
    first_held_ns: r.firstHeldNs,
    causes: r.causes,
    targets: r.rows,
  };
}
