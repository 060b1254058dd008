/**
 * Replays of recorded database incidents against builds that print each statement's time on stderr
 * (`report: 1.502 s`: test/support/exec/mysql-service.js, pg-prepared-service.js, sql-service.py),
 * as uid 65534 without capabilities, with their JSON reports; and the workspace a test file records
 * and replays in. KREPLAY_TEST_REPORTS=DIR keeps a copy of each report there (bench/RESULTS.md's
 * figures for issue 42 are read from them).
 */
import type { ChildProcess } from 'node:child_process';
import { chmodSync, copyFileSync, mkdtempSync, readFileSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { createCgroup, type TestCgroup } from '../cgroup';
import type { ExecReport, ExecReportRow } from './exec-report';
import { kreplay, saidOnFailure, UNPRIVILEGED } from './kreplay-run';
import type { RecordedIncident } from './record-incident';

/** What a shared CI runner needs of `--tolerance` (docs/replay.md): holds end late on a loaded machine. */
export const CI_TOLERANCE = ['--tolerance', '25%,10ms'];

export interface ReplayWorkspace {
  /** a directory any user may write (the replays run as uid 65534) */
  dir: string;
  cgroup: TestCgroup;
  /** the test's processes, killed at its end */
  children: ChildProcess[];
}

/** A test file's workspace, made before its tests and removed after them (then `stop`, its database's). */
export function useReplayWorkspace(name: string, stop: () => Promise<void> | void): ReplayWorkspace {
  const workspace = { dir: '', children: [] } as unknown as ReplayWorkspace;
  beforeAll(() => {
    workspace.dir = mkdtempSync(join(tmpdir(), `kreplay-${name}-`));
    chmodSync(workspace.dir, 0o777);
    workspace.cgroup = createCgroup(`kreplay-${name}-${process.pid}.service`);
  });
  afterAll(async () => {
    for (const child of workspace.children) child.kill('SIGKILL');
    await stop();
    workspace.cgroup?.remove();
    if (workspace.dir) rmSync(workspace.dir, { recursive: true, force: true });
  });
  return workspace;
}

/** The incident's cause on `target` that waited at least `minNs` (a loaded machine may mark shorter waits too). */
export function slowCause(report: ExecReport, target: string, minNs: number) {
  return report.causes.find((c) => c.target === target && Number(c.wait_ns) >= minNs);
}

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
  const keep = process.env.KREPLAY_TEST_REPORTS;
  if (keep) copyFileSync(report, join(keep, `${options.name}.json`));
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

/** Not reproduced (220): the build ran and passed, but skipped a cause; a build that failed instead shows its own stderr. */
export function notReproduced(run: Replayed): void {
  const build =
    run.report.verdict === 'build-failed'
      ? run.stderr.split('\n').filter((line) => !line.startsWith('kreplay: '))
      : [];
  expect({ status: run.status, verdict: run.report.verdict, build }).toEqual({
    status: 220,
    verdict: 'not-reproduced',
    build: [],
  });
}

/** Passed: the slow statement (`report`) held as recorded, every other at once (the database answers at once). */
export function slowOneHeld(run: Replayed, incident: RecordedIncident, target: string): void {
  // kreplay's own lines say why when it did not pass
  const why = saidOnFailure(run);
  expect({ status: run.status, verdict: run.report.verdict, why }).toEqual({
    status: 0,
    verdict: 'passed',
    why: [],
  });
  expect(run.times.report).toBeGreaterThanOrEqual((incident.waitNs / 1e9) * 0.95);
  // the fast statements, and any the incident never made, at once: no slower than the longest
  // other wait production recorded (a loaded host's, held as recorded), and half a second
  const fastBound = 0.5 + incident.otherWaitNs / 1e9;
  const slow = Object.entries(run.times).filter(([name, s]) => name !== 'report' && s >= fastBound);
  expect(slow).toEqual([]);
  // the slow statement, and any other wait the incident marks (a loaded machine's), exercised
  expect(run.report.causes).toContainEqual(expect.objectContaining({ target, exercised: true }));
  expect(run.report.causes.filter((c) => !c.exercised)).toEqual([]);
}

/**
 * The service's reply (its write to the connection it accepted on `port`) in a faithful replay:
 * made, and when it carried fewer bytes than production's (a timing, the sleep's argument, headers:
 * which is longer varies run to run), said as a difference, never failed on.
 */
export function replySaid(run: Replayed, port: number): void {
  const reply = run.report.targets.find(
    (r) => r.call === 'write' && r.target === `tcp accepted 127.0.0.1:${port}`,
  );
  expect(reply).toEqual(expect.objectContaining({ matched: 1, shortfall: null }));
  if (reply!.matched_bytes < reply!.recorded_bytes)
    expect(reply!.difference).toBe(
      `the build's replies carried ${reply!.matched_bytes} of the ${reply!.recorded_bytes} recorded bytes: their content differs (reported, never failed on)`,
    );
  else expect(reply!.difference).toBeNull();
}
