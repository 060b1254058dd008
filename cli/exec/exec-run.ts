/**
 * `kreplay replay TXN|--incident FILE --exec -- CMD [ARGS...]`: runs CMD under
 * the seccomp supervisor, each of its writes to a target the incident wrote to
 * taking as long as the incident's matching write (docs/replay.md, "Replay against a
 * test build"). With a daemon (TXN, or --incident with --server) the replay is
 * a live session there; without, it runs on the supervisor's own clock and
 * needs nothing else. Several incidents are replayed in turn, each against a
 * fresh CMD (supervised-build.ts), judged (exec-verdict.ts) and reported
 * (incident-report.ts, junit-report.ts). Resolves to the exit status; failures
 * before the build starts throw, with CMD ended first.
 */
import fs from 'node:fs';
import path from 'node:path';
import { exactJson } from '../../core/json/exact-json';
import { Schedule } from '../../core/replay/schedule';
import type { ExecFlags } from './exec-flags';
import { buildPlan } from './exec-plan';
import { combinedStatus, judge } from './exec-verdict';
import type { IncidentSource } from './incident-source';
import { incidentReport, replayStart, reportJson, reportText, type IncidentReport } from './incident-report';
import { junitXml } from './junit-report';
import { resolveCommand } from './launcher';
import { say } from './say';
import { superviseBuild } from './supervised-build';
import { clientPid, TargetSelection } from './target-selection';

/** Plans the incident, supervises a fresh CMD against it, judges and prints the replay. */
async function replayOne(
  source: IncidentSource,
  argv: string[],
  flags: ExecFlags,
  server: string | null,
): Promise<IncidentReport> {
  const started = replayStart();
  const schedule = new Schedule(flags.speed, BigInt(flags.extraLatencyNs));
  const selection = new TargetSelection(flags, clientPid(source.events));
  const plan = buildPlan(source.events, {
    maps: flags.map,
    schedule,
    pace: flags.pace,
    match: flags.match,
    replayErrors: flags.replayErrors ?? false,
    exclude: selection.exclude,
    tolerance: flags.tolerance,
  });
  if (plan.length === 0)
    say(
      `${source.name}: nothing to hold (no sys_write, sys_fsync or sys_connect event with a target is selected): every call of the build passes`,
    );
  const run = await superviseBuild({ source, argv, flags, server, plan, schedule });
  const judgement = judge({ source, plan, run, flags, selection });
  const report = incidentReport({ source, argv, flags, run, judgement, started });
  process.stderr.write(reportText(report));
  return report;
}

/** Throws, naming the flag, when `file` cannot be written (its directory missing or not writable, or it is read-only). */
function checkWritable(flag: string, file: string): void {
  const dir = path.dirname(path.resolve(file));
  try {
    if (fs.existsSync(file)) {
      if (fs.statSync(file).isDirectory()) throw new Error('it is a directory');
      fs.accessSync(file, fs.constants.W_OK);
    } else {
      if (!fs.statSync(dir).isDirectory()) throw new Error(`${dir} is not a directory`);
      fs.accessSync(dir, fs.constants.W_OK);
    }
  } catch (err) {
    throw new Error(`${flag} ${file}: cannot be written (${(err as Error).message}); nothing ran`, {
      cause: err,
    });
  }
}

/**
 * Replays each incident in turn against a fresh CMD; writes the reports (one
 * JUnit testsuite per incident) and resolves to the combined exit status.
 */
export async function runExec(
  sources: readonly IncidentSource[],
  argv: string[],
  flags: ExecFlags,
  server: string | null,
): Promise<number> {
  resolveCommand(argv[0]!);
  // a report that cannot be written is refused before anything runs, not after the build
  for (const [flag, file] of [
    ['--report', flags.report],
    ['--report-json', flags.reportJson],
  ] as const)
    if (file !== undefined) checkWritable(flag, file);
  const reports: IncidentReport[] = [];
  for (const [i, source] of sources.entries()) {
    if (sources.length > 1) say(`incident ${i + 1} of ${sources.length}: ${source.name}`);
    const report = await replayOne(source, argv, flags, server);
    reports.push(report);
    if (report.verdict.kind === 'interrupted' || report.verdict.kind === 'replay-failed') break;
  }
  if (flags.report) fs.writeFileSync(flags.report, junitXml(reports));
  if (flags.reportJson) {
    // one incident: its report as before; several: a list of them
    const json =
      reports.length === 1 && sources.length === 1
        ? reportJson(reports[0]!)
        : { incidents: reports.map(reportJson) };
    fs.writeFileSync(flags.reportJson, `${exactJson(json)}\n`);
  }
  return combinedStatus(reports.map((r) => r.verdict));
}
