/**
 * The exit-status contract of `kreplay replay --exec` (docs/replay.md, "Exit status"):
 * "the build failed" is CMD's own status; "the replay was not faithful" and
 * "kreplay failed during the replay" have codes above the signal range
 * (128 + N), which no build's ordinary exit uses. judge() gives one replay its
 * rows, its causes and its verdict.
 */
import { causeName, checkCauses, type CauseCheck } from './cause-check';
import type { ExecFlags } from './exec-flags';
import type { PlanTarget } from './exec-plan';
import { ambiguousWhy, buildReport, type TargetReport } from './exec-report';
import type { Completeness, IncidentSource } from './incident-source';
import type { SupervisedRun } from './supervised-build';
import type { TargetSelection } from './target-selection';

export const EXIT = {
  /** the build exited 0 and the replay reproduced the incident */
  ok: 0,
  /** kreplay could not start (bad flag value, bad incident file, no daemon): nothing ran */
  failed: 1,
  /** a usage error (commander): nothing ran */
  usage: 2,
  /** Ctrl-C or SIGTERM: the build was stopped */
  interrupted: 130,
  /** the build exited 0, but no recorded call was matched, or a cause of the incident was not exercised */
  notReproduced: 220,
  /** --strict: the build exited 0 and matched, but fell short (fewer calls, holds off, a lossy recording) */
  notFaithful: 221,
  /** kreplay failed while the build ran (the supervisor died): the build was stopped */
  replayFailed: 222,
} as const;

export type VerdictKind =
  'passed' | 'build-failed' | 'not-reproduced' | 'not-faithful' | 'interrupted' | 'replay-failed';

export interface Verdict {
  kind: VerdictKind;
  status: number;
  /** why, one line each (shortfalls and warnings too when they do not fail the run) */
  reasons: string[];
}

export interface VerdictInput {
  buildStatus: number;
  interrupted: boolean;
  supervisorFailed: boolean;
  rows: readonly TargetReport[];
  strict: boolean;
  completeness: Completeness;
  /** the incident's causes and whether the build exercised each */
  causes: readonly CauseCheck[];
}

/** A cause the build did not exercise, in words. */
export const causeMissed = (c: CauseCheck) => `cause not exercised: ${causeName(c)}: ${c.reason}`;

/** The shortfalls of a replay that matched something: each a failure under --strict, a warning without. */
export function shortfalls(rows: readonly TargetReport[], completeness: Completeness): string[] {
  const out: string[] = [];
  for (const row of rows) {
    if (!row.held) continue;
    if (row.shortfall) out.push(`${row.target}: ${row.shortfall}`);
    if (row.failure) out.push(`${row.target}: holds off (${row.failure})`);
  }
  for (const lost of completeness.lost) out.push(`the recording lost events: ${lost}`);
  return out;
}

/**
 * What a replay says and never fails on, --strict or not: how the content of calls all made
 * differs, and holds not given to requests the matcher cannot tell apart (a cause among them is
 * not exercised: that fails).
 */
export const notes = (rows: readonly TargetReport[]): string[] =>
  rows.flatMap((r) => [
    ...(r.ambiguous > 0 ? [`${r.target}: ${ambiguousWhy(r.ambiguous)}`] : []),
    ...(r.difference ? [`${r.target}: ${r.difference}`] : []),
  ]);

export function verdict(input: VerdictInput): Verdict {
  const matched = input.rows.some((r) => r.held && r.matched > 0);
  const short = shortfalls(input.rows, input.completeness);
  if (input.interrupted) return { kind: 'interrupted', status: EXIT.interrupted, reasons: ['interrupted'] };
  if (input.supervisorFailed)
    return { kind: 'replay-failed', status: EXIT.replayFailed, reasons: ['the supervisor failed'] };
  if (input.buildStatus !== 0) {
    // the build's own status wins; one equal to a code of kreplay's is said so, once
    const ours = Object.entries(EXIT).find(([, code]) => code === input.buildStatus && code >= 200)?.[0];
    const clash = ours
      ? [
          `the build's own status ${input.buildStatus} is also kreplay's "${ours}" code: the verdict (build-failed) is in the JSON and JUnit reports`,
        ]
      : [];
    return {
      kind: 'build-failed',
      status: input.buildStatus,
      reasons: [`the build exited ${input.buildStatus}`, ...clash, ...short],
    };
  }
  const missed = input.causes.filter((c) => !c.exercised && !c.deselected).map(causeMissed);
  const deselected = input.causes
    .filter((c) => c.deselected)
    .map((c) => `a cause is not checked: ${causeName(c)}: ${c.reason}`);
  if (!matched || missed.length > 0)
    return {
      kind: 'not-reproduced',
      status: EXIT.notReproduced,
      reasons: [
        ...(matched ? [] : ['no recorded call was matched: nothing of the incident was replayed (see WHY)']),
        ...missed,
      ],
    };
  const differ = notes(input.rows);
  if (input.strict && short.length > 0)
    return { kind: 'not-faithful', status: EXIT.notFaithful, reasons: [...short, ...differ] };
  return { kind: 'passed', status: EXIT.ok, reasons: [...deselected, ...short, ...differ] };
}

export interface Judgement {
  rows: TargetReport[];
  causes: CauseCheck[];
  verdict: Verdict;
}

export interface ReplayToJudge {
  source: IncidentSource;
  plan: readonly PlanTarget[];
  run: SupervisedRun;
  flags: ExecFlags;
  selection: TargetSelection;
}

/** One incident's replay judged: a row per target, whether each cause was exercised, the verdict. */
export function judge({ source, plan, run, flags, selection }: ReplayToJudge): Judgement {
  const { results } = run;
  const rows = buildReport(plan, results.targets, results.unmatched, flags.tolerance, [
    ...selection.excluded.values(),
  ]);
  const causes = checkCauses({
    causes: source.causes,
    events: source.events,
    plan,
    outcomes: results.targets,
    excluded: selection.reasons,
    maps: flags.map,
    unmatched: results.unmatched,
  });
  const outcome = verdict({
    buildStatus: run.exit.status,
    interrupted: run.interrupted,
    supervisorFailed: run.supervisorFailed,
    rows,
    strict: flags.strict === true,
    completeness: source.completeness,
    causes,
  });
  return { rows, causes, verdict: outcome };
}

/** Several incidents' verdicts as one status: a build failure first, then not reproduced, then not faithful. */
export function combinedStatus(verdicts: readonly Verdict[]): number {
  const order: VerdictKind[] = [
    'interrupted',
    'replay-failed',
    'build-failed',
    'not-reproduced',
    'not-faithful',
  ];
  for (const kind of order) {
    const first = verdicts.find((v) => v.kind === kind);
    if (first) return first.status;
  }
  return EXIT.ok;
}
