/**
 * One replay of a recorded incident against a build that prints each statement's time on stderr
 * (`report: 1.502 s`: test/support/exec/mysql-service.js, pg-prepared-service.js, sql-service.py),
 * as uid 65534 without capabilities, with its JSON report.
 */
import { readFileSync } from 'node:fs';
import { join } from 'node:path';
import type { ExecReport, ExecReportRow } from './exec-report';
import { kreplay, UNPRIVILEGED } from './kreplay-run';
import type { RecordedIncident } from './record-incident';

export interface Replayed {
  status: number | null;
  stderr: string;
  report: ExecReport;
  /** the responses of `target` */
  row: ExecReportRow | undefined;
  /** each statement's time the build printed, in seconds */
  times: Record<string, number>;
}

export async function replayBuild(options: {
  dir: string;
  incident: RecordedIncident;
  /** names the report file */
  name: string;
  build: string[];
  flags: string[];
  target: string;
}): Promise<Replayed> {
  const report = join(options.dir, `${options.name}.json`);
  const run = await kreplay(
    [
      'replay',
      '--incident',
      options.incident.file,
      '--exec',
      '--report-json',
      report,
      ...options.flags,
      '--',
      ...options.build,
    ],
    UNPRIVILEGED,
    options.dir,
  ).done;
  const parsed = JSON.parse(readFileSync(report, 'utf8')) as ExecReport;
  const times = Object.fromEntries(
    [...run.stderr.matchAll(/^(probe|update|report|total): (\d+\.\d+) s$/gm)].map((m) => [
      m[1]!,
      Number(m[2]),
    ]),
  );
  return {
    status: run.status,
    stderr: run.stderr,
    report: parsed,
    row: parsed.targets.find((r) => r.call === 'response' && r.target === options.target),
    times,
  };
}

/** Passed: the slow statement (`report`) held as recorded, every other at once (the database answers at once). */
export function slowOneHeld(run: Replayed, incident: RecordedIncident, target: string): void {
  expect({ status: run.status, verdict: run.report.verdict }).toEqual({ status: 0, verdict: 'passed' });
  expect(run.times.report).toBeGreaterThanOrEqual((incident.waitNs / 1e9) * 0.95);
  // the fast statements, and any the incident never made, at once
  const slow = Object.entries(run.times).filter(([name, s]) => name !== 'report' && s >= 0.5);
  expect(slow).toEqual([]);
  expect(run.report.causes).toEqual([expect.objectContaining({ target, exercised: true })]);
}
