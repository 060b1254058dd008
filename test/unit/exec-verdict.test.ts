import type { PlanTarget, RecordedCall } from '../../cli/exec/exec-plan';
import { buildPlan } from '../../cli/exec/exec-plan';
import { buildReport, type TargetReport } from '../../cli/exec/exec-report';
import { parseTolerance } from '../../cli/exec/tolerance';
import { combinedStatus, EXIT, verdict, type VerdictInput } from '../../cli/exec/exec-verdict';
import { completenessOf } from '../../cli/exec/incident-source';
import { junitXml, type SuiteReport } from '../../cli/exec/junit-report';
import { isMarkerWrite, TargetSelection } from '../../cli/exec/target-selection';
import { Schedule } from '../../core/replay/schedule';

const ms = (n: number) => BigInt(Math.round(n * 1_000_000));
const target = (name: string, recorded: bigint[]): PlanTarget => ({
  call: 'write',
  match: 'calls',
  recordedBytes: 0,
  recordedErrors: 0,
  target: name,
  recorded: name,
  kind: 'file',
  keys: [name],
  recordedNs: recorded,
  indices: recorded.map((_, i) => i),
  holdsNs: BigInt64Array.from(recorded),
});
const tolerance = parseTolerance('10%,1ms');

/** One target recorded `recorded` times (each `holdMs`), the build's `matched` calls observed at `observedMs`. */
function rows(recorded: number, matched: number, holdMs = 5, observedMs = holdMs): TargetReport[] {
  const plan = [
    target(
      '/a',
      Array.from({ length: recorded }, () => ms(holdMs)),
    ),
  ];
  const outcome = {
    matched,
    passed: 0,
    failed: 0,
    bytes: 0,
    observedNs: BigInt64Array.from(Array.from({ length: matched }, () => ms(observedMs))),
    intendedNs: BigInt64Array.from(Array.from({ length: matched }, () => ms(holdMs))),
  };
  return buildReport(plan, [outcome], [{ call: 'write', target: '/b', kind: 'file', calls: 3 }], tolerance);
}

const base = (over: Partial<VerdictInput>): VerdictInput => ({
  buildStatus: 0,
  interrupted: false,
  supervisorFailed: false,
  rows: rows(2, 2),
  strict: false,
  causes: [],
  completeness: { known: true, lost: [] },
  ...over,
});

describe('exit-status contract', () => {
  it('keeps the build failing, not reproduced, not faithful and kreplay failing apart', () => {
    expect(verdict(base({})).status).toBe(EXIT.ok);
    expect(verdict(base({ buildStatus: 3, rows: rows(2, 0) })).status).toBe(3);
    expect(verdict(base({ rows: rows(2, 0) }))).toMatchObject({ kind: 'not-reproduced', status: 220 });
    expect(verdict(base({ interrupted: true })).status).toBe(130);
    expect(verdict(base({ supervisorFailed: true })).status).toBe(222);
    // codes above the signal range: no build's exit or death by a signal is one of them
    for (const code of [EXIT.notReproduced, EXIT.notFaithful, EXIT.replayFailed])
      expect(code).toBeGreaterThan(128 + 64);
  });

  it('--strict fails every shortfall; without it they are warnings', () => {
    const fewer = rows(3, 2);
    expect(verdict(base({ rows: fewer }))).toMatchObject({ kind: 'passed', status: 0 });
    expect(verdict(base({ rows: fewer })).reasons[0]).toMatch(
      /\/a: the build made 2 of the 3 recorded calls/,
    );
    expect(verdict(base({ rows: fewer, strict: true }))).toMatchObject({ kind: 'not-faithful', status: 221 });
    const late = rows(2, 2, 5, 9);
    expect(verdict(base({ rows: late, strict: true })).reasons[0]).toMatch(
      /holds off \(p50: observed 9\.000 ms/,
    );
    const lossy = completenessOf([{ node: 'web-1', counters: { sys_write_dropped: 12, stored: 100 } }]);
    expect(lossy.lost).toEqual(['node web-1: sys_write_dropped=12']);
    expect(verdict(base({ completeness: lossy })).status).toBe(0);
    expect(verdict(base({ completeness: lossy, strict: true })).reasons).toEqual([
      'the recording lost events: node web-1: sys_write_dropped=12',
    ]);
    expect(completenessOf(null)).toEqual({ known: false, lost: [] });
    // an older store names the same loss thread_table_full
    expect(
      completenessOf([{ node: 'web-1', counters: { thread_table_full: 3, thread_entry_lost: 2 } }]).lost,
    ).toEqual(['node web-1: thread_table_full=3', 'node web-1: thread_entry_lost=2']);
  });

  it('several incidents: a build failure first, then not reproduced, then not faithful', () => {
    const ok = verdict(base({}));
    const none = verdict(base({ rows: rows(1, 0) }));
    const short = verdict(base({ rows: rows(3, 1), strict: true }));
    const failed = verdict(base({ buildStatus: 5 }));
    expect(combinedStatus([ok, short, none])).toBe(220);
    expect(combinedStatus([ok, short])).toBe(221);
    expect(combinedStatus([none, failed])).toBe(5);
    expect(combinedStatus([ok, ok])).toBe(0);
  });

  it('never fails a sub-millisecond hold on timing: that is noise on a shared machine', () => {
    expect(rows(2, 2, 0.4, 1.9)[0]!.failure).toBeNull();
    expect(rows(2, 2, 2, 4)[0]!.failure).toMatch(/p50: observed 4\.000 ms vs intended 2\.000 ms/);
  });

  it('fails a call released early, never a late tail alone (the machine stalled once)', () => {
    const observed = (observedMs: number[]) => {
      const plan = [
        target(
          '/a',
          observedMs.map(() => ms(5)),
        ),
      ];
      const outcome = {
        matched: observedMs.length,
        passed: 0,
        failed: 0,
        bytes: 0,
        observedNs: BigInt64Array.from(observedMs.map((n) => ms(n))),
        intendedNs: BigInt64Array.from(observedMs.map(() => ms(5))),
      };
      return buildReport(plan, [outcome], [], tolerance)[0]!;
    };
    const tail = observed([5, 5, 5, 5, 5, 5, 5, 5, 5, 50]);
    expect(tail.failure).toBeNull();
    expect(tail.hold_error_p99_ns).toBe(ms(45));
    expect(observed([5, 5, 5, 5, 1]).failure).toBe('1 calls released early (by up to 4.000 ms)');
  });

  it('says why each target was or was not matched', () => {
    expect(rows(2, 2)[0]!.reason).toBe('held: the build made all 2 recorded calls');
    expect(rows(3, 1)[0]!.reason).toBe('held 1 of 3: the build made fewer calls');
    expect(rows(3, 0)[0]!.reason).toBe(
      'never matched: the build made no call to it (it wrote to /b: --map /a=…?)',
    );
    expect(rows(3, 0)[1]).toMatchObject({
      target: '/b',
      held: false,
      reason: 'passed: the incident never wrote to it',
    });
  });
});

describe('JUnit', () => {
  const suite = (over: Partial<SuiteReport> & Pick<SuiteReport, 'rows' | 'verdict'>): SuiteReport => ({
    incident: 'incidents/a.kri',
    transactionId: 'a',
    digest: 'sha256:00ff',
    sessionId: null,
    command: 'build',
    exitStatus: 0,
    timestamp: 'now',
    speedFactor: 10,
    extraLatencyNs: 2_000_000,
    pace: 'duration',
    strict: false,
    seconds: 1,
    firstHeldNs: null,
    causes: [],
    completeness: { known: true, lost: [] },
    ...over,
  });

  it('one testsuite per incident, with its properties, the build exit and a failure for a replay that matched nothing', () => {
    const a = rows(2, 2);
    const b = rows(2, 0);
    const xml = junitXml([
      suite({ rows: a, verdict: verdict(base({ rows: a })) }),
      suite({ incident: 'incidents/b.kri', rows: b, exitStatus: 0, verdict: verdict(base({ rows: b })) }),
    ]);
    expect(xml.match(/<testsuite /g)).toHaveLength(2);
    expect(xml).toMatch(/<testsuites [^>]*failures="1">/);
    expect(xml).toContain('<testsuite id="1" name="replay incidents/b.kri"');
    for (const property of [
      'name="incident_digest" value="sha256:00ff"',
      'name="kreplay_version" value="',
      'name="speed_factor" value="10"',
      'name="extra_latency_ns" value="2000000"',
    ])
      expect(xml).toContain(`<property ${property}`);
    expect(xml).toContain('<testcase classname="kreplay.build" name="exit status"');
    expect(xml).toContain('<failure message="no recorded call was matched');
    expect(xml).toMatch(
      /recorded=2 recorded_bytes=0 recorded_errors=0 matched=2 matched_bytes=0 failed=0 passed_through=0 cut_short=0 gave_up=0 ambiguous=0 hold_error_p50=0 ns hold_error_p99=0 ns/,
    );
  });

  it('--strict: a shortfall and a lossy recording are failures; a build failure always is', () => {
    const short = rows(3, 1);
    const lost = { known: true, lost: ['node n: sys_write_dropped=1'] };
    const strict = junitXml([
      suite({
        rows: short,
        strict: true,
        completeness: lost,
        verdict: verdict(base({ rows: short, strict: true })),
      }),
    ]);
    expect(strict).toContain('type="shortfall"');
    expect(strict).toContain('type="lossy-recording"');
    const lax = junitXml([
      suite({
        rows: short,
        completeness: lost,
        exitStatus: 4,
        verdict: verdict(base({ rows: short, buildStatus: 4 })),
      }),
    ]);
    expect(lax).not.toContain('type="shortfall"');
    expect(lax).toContain('<failure message="the build exited 4: build" type="build">');
  });
});

describe('what is held', () => {
  const write = (over: Partial<RecordedCall & { bytes: number }>): RecordedCall =>
    ({
      event_type: 'sys_write',
      timestamp_ns: 0n,
      duration_ns: 1n,
      target: '/dev/null',
      target_kind: 'char',
      bytes: 'KREPLAY-CTX txn=t1'.length,
      transaction_id: 't1',
      ...over,
    }) as RecordedCall;

  it('never the incident context marker, whatever its newline', () => {
    expect(isMarkerWrite(write({}))).toBe(true);
    expect(isMarkerWrite(write({ bytes: 'KREPLAY-CTX txn=t1\n'.length }))).toBe(true);
    expect(isMarkerWrite(write({ bytes: 4096 }))).toBe(false);
    expect(isMarkerWrite(write({ target: '/tmp/x' }))).toBe(false);
  });

  it('--target keeps only the named targets, --skip-target drops them, each excluded target said why', () => {
    const events = [
      write({}),
      write({ target: '/tmp/app/a.log', target_kind: 'file', bytes: 10 }),
      write({ target: 'tcp 10.0.0.5:5432', target_kind: 'socket', bytes: 10 }),
      write({ target: 'pipe', target_kind: 'pipe', bytes: 10 }),
    ];
    const plan = (target: string[], skipTarget: string[]) => {
      const selection = new TargetSelection({ target, skipTarget });
      const planned = buildPlan(events, {
        maps: [],
        schedule: new Schedule(1, 0n),
        pace: 'duration',
        exclude: selection.exclude,
      });
      return { held: planned.map((t) => t.target), excluded: [...selection.excluded.values()] };
    };
    expect(plan([], []).held).toEqual(['/tmp/app/a.log', 'tcp 10.0.0.5:5432', 'pipe']);
    expect(plan(['/tmp/app/*', 'tcp *:5432'], []).held).toEqual(['/tmp/app/a.log', 'tcp 10.0.0.5:5432']);
    const skipped = plan([], ['pipe']);
    expect(skipped.held).toEqual(['/tmp/app/a.log', 'tcp 10.0.0.5:5432']);
    expect(skipped.excluded.map((e) => [e.target, e.recorded_calls, e.reason])).toEqual([
      ['/dev/null', 1, "not held: the incident's context marker (KREPLAY-CTX), no call of the build"],
      ['pipe', 1, 'not held: --skip-target pipe'],
    ]);
  });
});

describe("a build whose own status is one of kreplay's", () => {
  it("is the build failing, and says that its status is also a code of kreplay's", () => {
    const v = verdict(base({ buildStatus: 220 }));
    expect(v).toMatchObject({ kind: 'build-failed', status: 220 });
    expect(v.reasons[1]).toBe(
      'the build\'s own status 220 is also kreplay\'s "notReproduced" code: the verdict (build-failed) is in the JSON and JUnit reports',
    );
    expect(verdict(base({ buildStatus: 3 })).reasons).toEqual(['the build exited 3']);
  });
});
