/**
 * One incident's facts (cli/exec/incident-report.ts) and the reports made of them: the stderr
 * text, the JSON report and JUnit each say a fact as the one list holds it.
 */
import type { PlanTarget } from '../../cli/exec/exec-plan';
import { buildReport, reportTable } from '../../cli/exec/exec-report';
import { parseTolerance } from '../../cli/exec/tolerance';
import { verdict } from '../../cli/exec/exec-verdict';
import {
  incidentReport,
  replayStart,
  reportJson,
  reportText,
  type IncidentReport,
  type ReplayFacts,
} from '../../cli/exec/incident-report';
import type { ExecFlags } from '../../cli/exec/exec-flags';
import type { Judgement } from '../../cli/exec/exec-verdict';
import type { IncidentSource } from '../../cli/exec/incident-source';
import type { SupervisedRun } from '../../cli/exec/supervised-build';
import { HOUR_MS, useWallStep } from '../support/wall-step';
import { junitXml } from '../../cli/exec/junit-report';

const MS = 1_000_000n;
const plan: PlanTarget[] = [
  {
    call: 'write',
    match: 'calls',
    recordedBytes: 0,
    recordedErrors: 0,
    target: '/a',
    recorded: '/a',
    kind: 'file',
    keys: ['/a'],
    recordedNs: [5n * MS],
    indices: [0],
    holdsNs: BigInt64Array.from([5n * MS]),
  },
];
const outcome = {
  matched: 1,
  passed: 0,
  failed: 0,
  bytes: 0,
  observedNs: BigInt64Array.from([5n * MS]),
  intendedNs: BigInt64Array.from([5n * MS]),
};
const rows = buildReport(plan, [outcome], [], parseTolerance('10%,1ms'));
const completeness = { known: false, lost: [] };

const report: IncidentReport = {
  incident: 'incidents/a.kri',
  transactionId: 'a',
  digest: 'sha256:00ff',
  sessionId: 's-1',
  command: 'make check',
  exitStatus: 0,
  timestamp: '2026-01-01T00:00:00.000Z',
  speedFactor: 2,
  extraLatencyNs: 0,
  pace: 'duration',
  match: 'calls',
  replayErrors: false,
  strict: false,
  seconds: 1.5,
  firstHeldNs: 2n * MS,
  rows,
  causes: [],
  verdict: verdict({
    buildStatus: 0,
    interrupted: false,
    supervisorFailed: false,
    rows,
    strict: false,
    completeness,
    causes: [],
  }),
  completeness,
  bypassed: 3,
  peersFromProc: 0,
  realtime: true,
};

describe('the report of one incident', () => {
  it('prints the table, then one kreplay: line per fact, the verdict last', () => {
    const text = reportText(report);
    expect(text.startsWith('\nreplay incidents/a.kri against `make check` (session s-1):\n')).toBe(true);
    expect(text).toContain(reportTable(rows));
    expect(text.split('\n').filter((line) => line.startsWith('kreplay: '))).toEqual([
      'kreplay: 3 calls passed untouched after the session stopped',
      "kreplay: the build's first held call came 2.000 ms after it started",
      'kreplay: incidents/a.kri: whether the recording lost events is unknown',
      'kreplay: incidents/a.kri: passed (exit 0)',
    ]);
  });

  it('writes the JSON report and the JUnit testsuite from the same facts', () => {
    const json = reportJson(report);
    expect(Object.keys(json)).toEqual([
      'incident',
      'transaction_id',
      'incident_digest',
      'session_id',
      'command',
      'pace',
      'match',
      'replay_errors',
      'speed_factor',
      'extra_latency_ns',
      'strict',
      'exit_status',
      'verdict',
      'status',
      'reasons',
      'recording_complete',
      'recording_lost',
      'bypassed',
      'first_held_ns',
      'causes',
      'targets',
    ]);
    expect(json).toMatchObject({
      session_id: 's-1',
      verdict: 'passed',
      recording_complete: null,
      bypassed: 3,
    });
    expect(json.targets).toBe(report.rows);
    const xml = junitXml([report]);
    for (const property of [
      'name="session" value="s-1"',
      'name="verdict" value="passed"',
      'name="first_held_ns" value="2000000"',
    ])
      expect(xml).toContain(property);
  });

  describe('under a wall clock step', () => {
    const wall = useWallStep();

    it('tells when the replay began by the wall clock and how long it took by a clock that does not step', () => {
      const facts: ReplayFacts = {
        source: {
          name: report.incident,
          transactionId: 'a',
          digest: report.digest,
          completeness: report.completeness,
        } as IncidentSource,
        argv: ['make', 'check'],
        flags: { speed: 2, extraLatencyNs: 0, pace: 'duration', match: 'calls' } as ExecFlags,
        run: {
          exit: { status: 0 },
          sessionId: 's-1',
          firstHeldNs: 2n * MS,
          results: { bypassed: 3, peersFromProc: 0, realtime: true },
        } as SupervisedRun,
        judgement: { rows, causes: [], verdict: report.verdict } as Judgement,
        started: replayStart(),
      };
      const began = Date.now();
      wall.step(-HOUR_MS);
      const made = incidentReport(facts);
      expect(Date.parse(made.timestamp)).toBeLessThanOrEqual(began);
      expect(Date.parse(made.timestamp)).toBeGreaterThan(began - 60_000);
      expect(made.seconds).toBeGreaterThanOrEqual(0);
      expect(made.seconds).toBeLessThan(60);
    });
  });
});
