import type { PlanTarget } from '../../cli/exec/exec-plan';
import { buildReport, percentile, reportTable } from '../../cli/exec/exec-report';
import { parseTolerance } from '../../cli/exec/tolerance';
import { verdict } from '../../cli/exec/exec-verdict';
import { junitXml, type SuiteReport } from '../../cli/exec/junit-report';

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
const ms = (n: number) => BigInt(n * 1_000_000);

function suite(over: Partial<SuiteReport> & Pick<SuiteReport, 'rows' | 'verdict'>): SuiteReport {
  return {
    incident: 't<1>.kri',
    transactionId: 't<1>',
    digest: 'sha256:ab',
    sessionId: null,
    command: 'build',
    exitStatus: 0,
    timestamp: 'now',
    speedFactor: 1,
    extraLatencyNs: 0,
    pace: 'duration',
    strict: false,
    seconds: 1,
    firstHeldNs: 2_500_000n,
    causes: [],
    completeness: { known: true, lost: [] },
    ...over,
  };
}

describe('exec report', () => {
  it('parses tolerances: percent, duration or both', () => {
    expect(parseTolerance('10%,1ms')).toEqual({ fraction: 0.1, ns: 1_000_000n });
    expect(parseTolerance('500us')).toEqual({ fraction: 0, ns: 500_000n });
    expect(parseTolerance('2.5%')).toEqual({ fraction: 0.025, ns: 0n });
    expect(() => parseTolerance('10')).toThrow(/percentage/);
  });

  it('takes nearest-rank percentiles', () => {
    expect(percentile([5n, 1n, 3n, 2n, 4n], 50)).toBe(3n);
    expect(percentile([5n, 1n, 3n, 2n, 4n], 99)).toBe(5n);
    expect(percentile([], 50)).toBeNull();
  });

  it('fails a target whose observed holds differ beyond the larger of 10% and 1 ms, ignoring calls cut short', () => {
    const plan = [target('/a', [ms(20), ms(20)]), target('/b', [ms(5)]), target('/c', [ms(100)])];
    const outcomes = [
      // 20 ms intended, 21.5 ms observed: within 10% (2 ms)
      {
        matched: 2,
        passed: 3,
        failed: 0,
        bytes: 0,
        observedNs: BigInt64Array.from([ms(21.5), ms(21.5)]),
        intendedNs: BigInt64Array.from([ms(20), ms(20)]),
      },
      // 5 ms intended, 6.5 ms observed: beyond max(0.5 ms, 1 ms)
      {
        matched: 1,
        passed: 0,
        failed: 0,
        bytes: 0,
        observedNs: BigInt64Array.from([ms(6.5)]),
        intendedNs: BigInt64Array.from([ms(5)]),
      },
      // released by a stop: not compared
      {
        matched: 1,
        passed: 0,
        failed: 0,
        bytes: 0,
        observedNs: BigInt64Array.from([ms(1)]),
        intendedNs: BigInt64Array.from([-1n]),
      },
    ];
    const rows = buildReport(
      plan,
      outcomes,
      [{ call: 'write', target: 'pipe', kind: 'pipe', calls: 4 }],
      parseTolerance('10%,1ms'),
    );
    expect(rows.map((r) => [r.target, r.matched, r.passed_through, r.cut_short, r.failure !== null])).toEqual(
      [
        ['/a', 2, 3, 0, false],
        ['/b', 1, 0, 0, true],
        ['/c', 1, 0, 1, false],
        ['pipe', 0, 4, 0, false],
      ],
    );
    expect(rows[1]!.failure).toMatch(/p50: observed 6\.500 ms vs intended 5\.000 ms/);
    expect(reportTable(rows)).toMatch(/\| \/b +\| file +\| 1 +\| 1 +\| 0 .*\| FAIL +\|/);

    const completeness = { known: true, lost: [] };
    const xml = junitXml([
      suite({
        rows,
        command: 'a && b',
        verdict: verdict({
          buildStatus: 0,
          interrupted: false,
          supervisorFailed: false,
          rows,
          strict: false,
          causes: [],
          completeness,
        }),
      }),
    ]);
    // a testcase per target, then the build's exit, reproduced, and the recording's completeness
    expect(xml).toContain('<testsuites name="kreplay replay --exec" tests="7" failures="1">');
    expect(xml).toContain('name="replay t&lt;1&gt;.kri"');
    expect(xml).toContain('<property name="command" value="a &amp;&amp; b"/>');
    expect(xml).toContain('<property name="first_held_ns" value="2500000"/>');
    expect(xml.match(/<testcase /g)).toHaveLength(7);
    expect(xml.match(/<failure /g)).toHaveLength(1);
  });
});

describe('exec report truth', () => {
  it('is true: never more matched than recorded, never a negative hold, a held response the build gave up on is held', () => {
    const responses = {
      ...target('tcp 10.0.0.5:6379', [ms(1500)]),
      call: 'response' as const,
      kind: 'socket',
    };
    const [row] = buildReport(
      [responses],
      [
        {
          // the relay counted two exchanges for one recorded; the build gave up on the held one
          matched: 2,
          passed: 0,
          failed: 0,
          bytes: 0,
          observedNs: BigInt64Array.from([-1n, ms(0.01)]),
          intendedNs: BigInt64Array.from([ms(1500), 0n]),
        },
      ],
      [],
      parseTolerance('10%,1ms'),
    );
    expect(row).toMatchObject({ matched: 1, passed_through: 1, gave_up: 1, cut_short: 0, held: true });
    expect(row!.reason).toBe(
      'held: the build made all 1 recorded calls; the build gave up on 1 before their release (it closed or timed out while held); 1 later calls passed',
    );
    for (const value of [row!.observed_p50_ns, row!.hold_error_p50_ns, row!.hold_error_p99_ns])
      expect(value === null || value >= 0n).toBe(true);
    expect(reportTable([row!])).not.toMatch(/-\d+ ns|held 2 of 1/);
  });

  it('a target the build called without matching is not "made no call to it"', () => {
    const outcome = (passed: number) => ({
      matched: 0,
      passed,
      failed: 0,
      bytes: 0,
      observedNs: new BigInt64Array(0),
      intendedNs: new BigInt64Array(0),
    });
    const response = {
      ...target('tcp 10.0.0.5:5432', [ms(1500)]),
      call: 'response' as const,
      kind: 'socket',
    };
    const [asked, silent] = buildReport(
      [response, response],
      [outcome(2), outcome(0)],
      [],
      parseTolerance('10%,1ms'),
    );
    expect(asked).toMatchObject({
      matched: 0,
      passed_through: 2,
      reason:
        "never matched: the build's 2 requests to it asked what the incident never did (a different request)",
    });
    expect(silent!.reason).toBe('never matched: the build made no call to it');
  });

  it('a stream matched by bytes says bytes, not "held 40 of 20"', () => {
    const stream = {
      ...target(
        'tcp 10.0.0.5:5432',
        Array.from({ length: 20 }, () => ms(1)),
      ),
      match: 'bytes' as const,
      kind: 'socket',
      recordedBytes: 8000,
    };
    const outcome = (calls: number, bytes: number) => ({
      matched: calls,
      passed: 0,
      failed: 0,
      bytes,
      observedNs: BigInt64Array.from(Array.from({ length: calls }, () => ms(1))),
      intendedNs: BigInt64Array.from(Array.from({ length: calls }, () => ms(1))),
    });
    const [all] = buildReport([stream], [outcome(40, 8000)], [], parseTolerance('10%,1ms'));
    expect(all).toMatchObject({
      matched: 40,
      passed_through: 0,
      shortfall: null,
      reason: "held: the build's 40 calls carried all 8000 recorded bytes",
    });
    const [some] = buildReport([stream], [outcome(2, 3000)], [], parseTolerance('10%,1ms'));
    expect(some).toMatchObject({
      shortfall: 'the build made 2 of the 20 recorded calls, carrying 3000 of the 8000 recorded bytes',
      difference: null,
      reason: 'held 3000 of 8000 bytes: the build sent fewer (in 2 calls)',
    });
    // every call made with fewer bytes (a literal value, a timing): their content, said and not failed on
    const [content] = buildReport([stream], [outcome(20, 7990)], [], parseTolerance('10%,1ms'));
    expect(content).toMatchObject({
      shortfall: null,
      difference:
        "the build's calls carried 7990 of the 8000 recorded bytes: their content differs (reported, never failed on)",
    });
    const reply = { ...stream, target: 'tcp accepted 127.0.0.1:8080' };
    expect(buildReport([reply], [outcome(20, 7990)], [], parseTolerance('10%,1ms'))[0]!.difference).toMatch(
      /^the build's replies carried 7990 of the 8000 recorded bytes/,
    );
  });
});
