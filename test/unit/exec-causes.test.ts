import { checkCauses } from '../../cli/exec/cause-check';
import { buildPlan, type RecordedCall } from '../../cli/exec/exec-plan';
import type { TargetOutcome, UnmatchedOutcome } from '../../cli/exec/exec-report';
import { buildReport } from '../../cli/exec/exec-report';
import { parseTolerance } from '../../cli/exec/tolerance';
import { EXIT, verdict } from '../../cli/exec/exec-verdict';
import { junitXml } from '../../cli/exec/junit-report';
import { clientPid, TargetSelection } from '../../cli/exec/target-selection';
import { incidentCauses } from '../../core/incident';
import { Schedule } from '../../core/replay/schedule';

const ms = (n: number) => BigInt(Math.round(n * 1_000_000));
const REDIS = 'tcp 10.0.0.5:6379';
const sock = (
  type: string,
  atMs: number,
  durMs: number,
  extra: Partial<RecordedCall> = {},
): RecordedCall => ({
  event_type: type,
  timestamp_ns: ms(1000 + atMs),
  duration_ns: ms(durMs),
  target: REDIS,
  target_kind: 'socket',
  pid: 10,
  fd: 5,
  bytes: 20,
  ret: 20,
  ...extra,
});
/** A service: a health PING answered fast, then GET answered after 1.5 s, then a SQLite write. */
const events: RecordedCall[] = [
  sock('sys_write', 0, 0.01),
  sock('sys_read', 0.2, 0.01, { response_ns: ms(0.2) }),
  sock('sys_write', 1, 0.01),
  sock('sys_read', 1501, 0.01, { response_ns: ms(1500) }),
  sock('sys_write', 1502, 0.3, { target: '/srv/app.db', target_kind: 'file' }),
];

/** The verdict of a build that exited 0, without --strict, on a complete recording. */
function verdictOf(rows: ReturnType<typeof buildReport>, causes: ReturnType<typeof checkCauses>) {
  return verdict({
    buildStatus: 0,
    interrupted: false,
    supervisorFailed: false,
    rows,
    strict: false,
    completeness: { known: true, lost: [] },
    causes,
  });
}

function replay(
  outcome: (target: string, call: string) => Partial<TargetOutcome>,
  map: { from: string; to: string }[] = [],
  skipTarget: string[] = [],
  { calls = events, unplanned = [] }: { calls?: RecordedCall[]; unplanned?: UnmatchedOutcome[] } = {},
) {
  const selection = new TargetSelection({ target: [], skipTarget });
  const plan = buildPlan(calls, {
    maps: map,
    schedule: new Schedule(1, 0n),
    pace: 'duration',
    exclude: selection.exclude,
  });
  const outcomes = plan.map((t) => {
    const o = { matched: 0, passed: 0, failed: 0, bytes: 0, ...outcome(t.target, t.call) };
    return {
      ...o,
      observedNs: BigInt64Array.from(t.holdsNs.slice(0, o.matched)),
      intendedNs: BigInt64Array.from(t.holdsNs.slice(0, o.matched)),
    };
  });
  const causes = checkCauses({
    causes: incidentCauses(calls),
    events: calls,
    plan,
    outcomes,
    excluded: selection.reasons,
    maps: map,
    unmatched: unplanned,
  });
  const rows = buildReport(plan, outcomes, unplanned, parseTolerance('10%,1ms'));
  const v = verdictOf(rows, causes);
  return { causes, v, rows };
}

describe('a replay that did not exercise the cause', () => {
  test('the 1.5 s response is the one cause; a build that made every call exercises it and passes', () => {
    const { causes, v } = replay((_t, call) => ({
      matched: call === 'response' ? 2 : call === 'write' ? 2 : 1,
    }));
    expect(causes).toEqual([expect.objectContaining({ index: 3, cause: 'response', exercised: true })]);
    expect(v.kind).toBe('passed');
  });

  test('a build that skipped the upstream is not reproduced without --strict, naming the call: no call to that peer', () => {
    const { v } = replay((target) => ({ matched: target === REDIS ? 0 : 1 }));
    expect(v).toMatchObject({ kind: 'not-reproduced', status: EXIT.notReproduced });
    expect(v.reasons).toEqual([
      `cause not exercised: the 1.500 s response wait on ${REDIS} (event #3): no call to that peer: the build got no response from ${REDIS} through kreplay's relay`,
    ]);
  });

  test('a build that called the peer but got no relayed response is said so, not "no call to that peer"', () => {
    const { v } = replay((target, call) => ({ matched: target === REDIS && call === 'response' ? 0 : 2 }));
    expect(v.kind).toBe('not-reproduced');
    expect(v.reasons[0]).toBe(
      `cause not exercised: the 1.500 s response wait on ${REDIS} (event #3): the build called ${REDIS} (write 2 matched), but no response from it came through kreplay: the connection was not relayed (README, 'the relay')`,
    );
  });

  test('a socket write cause while some of the build writes went to sockets whose peer could not be read: not known, never "no call", and not reproduced', () => {
    // a write blocked 50 ms on a full socket buffer: the cause
    const calls = [sock('sys_write', 0, 0.01), sock('sys_write', 1, 50), sock('sys_write', 60, 0.01)];
    const unnamed: UnmatchedOutcome = { call: 'write', target: 'socket', kind: 'socket', calls: 2 };
    const { causes, v, rows } = replay(() => ({ matched: 1, bytes: 20 }), [], [], {
      calls,
      unplanned: [unnamed],
    });
    expect(causes).toEqual([
      expect.objectContaining({
        index: 1,
        exercised: false,
        reason: `not known: 2 calls of the build went to sockets whose peer could not be read; whether one was to ${REDIS} cannot be told`,
      }),
    ]);
    expect(v).toMatchObject({ kind: 'not-reproduced', status: EXIT.notReproduced });
    expect(rows[0]!.reason).toBe(
      'held 20 of 60 bytes: whether the build sent the others is not known: 2 of its write calls went to sockets whose peer could not be read',
    );
    // without calls it could not name, a shortfall is the build's
    const named = replay(() => ({ matched: 1, bytes: 20 }), [], [], { calls });
    expect(named.rows[0]!.reason).toBe('held 20 of 60 bytes: the build sent fewer (in 1 calls)');
    expect(named.causes[0]!.reason).not.toMatch(/not known/);
  });

  test('only the health probe answered: the cause was the second response', () => {
    const { v } = replay((target, call) => ({ matched: target === REDIS && call === 'response' ? 1 : 2 }));
    expect(v.kind).toBe('not-reproduced');
    expect(v.reasons[0]).toContain(
      "a different request: the build's 1 requests to tcp 10.0.0.5:6379 got 1 of the 2 recorded responses, none the cause's (exchange 2)",
    );
  });

  test('a different request, and a map that matched nothing, are said so', () => {
    const other = replay((target, call) =>
      target === REDIS && call === 'response' ? { matched: 0, passed: 3 } : { matched: 1 },
    );
    expect(other.v.reasons.join('\n')).toContain(
      "a different request: the build's 3 requests to tcp 10.0.0.5:6379 got 0 of the 2 recorded responses, none the cause's (exchange 2); 3 asked what the incident never did",
    );
    const mapped = replay(
      (target) => ({ matched: target.endsWith(':16379') ? 0 : 1 }),
      [{ from: '10.0.0.5:6379', to: '127.0.0.1:16379' }],
    );
    expect(mapped.v.reasons.join('\n')).toContain(
      '--map 10.0.0.5:6379=127.0.0.1:16379 maps it to tcp 127.0.0.1:16379, and the build made no call to that',
    );
  });

  test('a cause the user left out with --skip-target is said, not failed', () => {
    const { causes, v } = replay((target) => ({ matched: target === REDIS ? 0 : 1 }), [], [REDIS]);
    expect(causes[0]).toMatchObject({ exercised: false, deselected: true });
    expect(v.kind).toBe('passed');
    expect(v.reasons[0]).toBe(
      `a cause is not checked: the 1.500 s response wait on ${REDIS} (event #3): left out: not held: --skip-target ${REDIS}`,
    );
  });

  test('JUnit shows the missed cause as a failed testcase', () => {
    const { causes, v, rows } = replay((target) => ({ matched: target === REDIS ? 0 : 1 }));
    const xml = junitXml([
      {
        incident: 'a.kri',
        transactionId: 'a',
        digest: null,
        sessionId: null,
        command: 'build',
        exitStatus: 0,
        timestamp: 'now',
        speedFactor: 1,
        extraLatencyNs: 0,
        pace: 'duration',
        strict: false,
        seconds: 1,
        firstHeldNs: null,
        rows,
        causes,
        verdict: v,
        completeness: { known: true, lost: [] },
      },
    ]);
    expect(xml).toMatch(
      /<testcase classname="kreplay.cause" name="the 1.500 s response wait on tcp 10.0.0.5:6379 \(event #3\)"[^>]*>\n\s*<failure [^>]*type="cause-not-exercised"/,
    );
  });
});

describe("an incident is the service's, not its client's", () => {
  const curl = (type: string, atMs: number, extra: Partial<RecordedCall> = {}) =>
    sock(type, atMs, 0.02, { pid: 99, target: 'tcp 127.0.0.1:8080', ...extra });
  const http = [curl('sys_write', -1), ...events, curl('sys_read', 1503, { response_ns: ms(1503) })];

  test('the client is the process whose head write opened the transaction; alone, or first otherwise, none', () => {
    expect(clientPid(http)).toBe(99);
    expect(clientPid(events)).toBeNull();
    expect(clientPid([curl('sys_write', 0)])).toBeNull();
  });

  test("by default the client's calls are left out, said why; --with-client holds them", () => {
    const planned = (withClient: boolean) => {
      const selection = new TargetSelection({ target: [], skipTarget: [], withClient }, clientPid(http));
      const plan = buildPlan(http, {
        maps: [],
        schedule: new Schedule(1, 0n),
        pace: 'duration',
        exclude: selection.exclude,
      });
      return {
        targets: plan.map((t) => `${t.call} ${t.target}`),
        excluded: [...selection.excluded.values()],
      };
    };
    const service = planned(false);
    expect(service.targets).not.toContain('write tcp 127.0.0.1:8080');
    expect(service.excluded.map((e) => [e.call, e.target, e.reason])).toEqual([
      [
        'write',
        'tcp 127.0.0.1:8080',
        "not held: the client's call (pid 99, which wrote the request head): a replay replays the service's side (--with-client holds it too)",
      ],
      [
        'response',
        'tcp 127.0.0.1:8080',
        "not held: the client's call (pid 99, which wrote the request head): a replay replays the service's side (--with-client holds it too)",
      ],
    ]);
    expect(planned(true).targets).toContain('write tcp 127.0.0.1:8080');
  });
});

describe('a cause on a stream matched by bytes', () => {
  const wal = (atMs: number, durMs: number): RecordedCall => ({
    event_type: 'sys_write',
    timestamp_ns: ms(1000 + atMs),
    duration_ns: ms(durMs),
    target: 'pipe',
    target_kind: 'pipe',
    pid: 1,
    bytes: 1000,
    ret: 1000,
  });
  const stream = [wal(0, 0.1), wal(1, 0.1), wal(2, 50), wal(60, 0.1)];
  const check = (bytes: number, calls: number) => {
    const plan = buildPlan(stream, { maps: [], schedule: new Schedule(1, 0n), pace: 'duration' });
    expect(plan[0]!.match).toBe('bytes');
    const outcome = {
      matched: calls,
      passed: 0,
      failed: 0,
      bytes,
      observedNs: new BigInt64Array(),
      intendedNs: new BigInt64Array(),
    };
    return checkCauses({
      causes: incidentCauses(stream),
      events: stream,
      plan,
      outcomes: [outcome],
      excluded: new Map(),
      maps: [],
      unmatched: [],
    })[0]!;
  };

  test("is exercised when the build's bytes reach its end, however few calls carried them", () => {
    expect(check(4000, 1)).toMatchObject({ index: 2, exercised: true });
    expect(check(2500, 3)).toMatchObject({
      exercised: false,
      reason: "the build's calls to it carried 2500 of the 4000 recorded bytes; the cause's end at byte 3000",
    });
  });
});

describe("a cause in an answer's later part (TLS 1.3: the session tickets at once, the response 1.5 s later)", () => {
  // the client's request, the tickets read 4 ms later, an EAGAIN, then the response after its wait
  const tls = [
    sock('sys_write', 0, 0.01, { bytes: 141, ret: 141, request_key: 9 }),
    sock('sys_read', 4, 0.01, { bytes: 5, ret: 5, response_ns: ms(4) }),
    sock('sys_read', 4.1, 0.01, { bytes: 5, ret: -11 }),
    sock('sys_read', 1504, 0.01, { bytes: 5, ret: 5, response_ns: ms(1499.9) }),
  ];
  const check = (exchanges: number[]) => {
    const plan = buildPlan(tls, { maps: [], schedule: new Schedule(1, 0n), pace: 'duration' });
    const response = plan.find((t) => t.call === 'response')!;
    const outcomes = plan.map((t) => ({
      matched: t === response ? exchanges.length : 1,
      passed: 0,
      failed: 0,
      bytes: 0,
      observedNs: new BigInt64Array(),
      intendedNs: new BigInt64Array(),
      ...(t === response ? { exchanges: Uint32Array.from(exchanges) } : {}),
    }));
    const causes = checkCauses({
      causes: incidentCauses(tls),
      events: tls,
      plan,
      outcomes,
      excluded: new Map(),
      maps: [],
      unmatched: [],
    });
    return { response, causes };
  };

  test('is one exchange held from the send to the end of its last part, and the later read maps to it', () => {
    const { response, causes } = check([0]);
    // the send ended at 1000.01 ms, the last part's read at 2504.01 ms
    expect(response.recordedNs).toEqual([ms(1504)]);
    expect(response.indices).toEqual([1]);
    expect([...response.laterParts!]).toEqual([[3, 0]]);
    expect(causes).toEqual([expect.objectContaining({ index: 3, cause: 'response', exercised: true })]);
  });

  test('is not exercised when no response of the build took its exchange', () => {
    const { causes } = check([]);
    expect(causes).toEqual([expect.objectContaining({ index: 3, exercised: false })]);
  });
});

describe('requests the matcher cannot tell apart (issue 42: one key, other times)', () => {
  // three executes of statements whose ids the recording could not name: one key, one of them slow
  const unknown = { request_key: 77 };
  const recorded = [
    sock('sys_write', 0, 0.01, unknown),
    sock('sys_read', 2, 0.01, { response_ns: ms(2) }),
    sock('sys_write', 3, 0.01, unknown),
    sock('sys_read', 1504, 0.01, { response_ns: ms(1500) }),
    sock('sys_write', 1505, 0.01, unknown),
    sock('sys_read', 1507, 0.01, { response_ns: ms(1.5) }),
    // another request, its own key: told apart
    sock('sys_write', 1508, 0.01, { request_key: 88 }),
    sock('sys_read', 1510, 0.01, { response_ns: ms(2) }),
  ];
  const plan = buildPlan(recorded, {
    maps: [],
    schedule: new Schedule(1, 0n),
    pace: 'duration',
    tolerance: parseTolerance('10%,1ms'),
  });
  const response = plan.find((t) => t.call === 'response')!;

  test('are ambiguous, each of them; requests of a key alike in time are not', () => {
    expect([...response.ambiguous!]).toEqual([1, 1, 1, 0]);
    const alike = buildPlan(
      recorded.map((e) => (e.response_ns === ms(1500) ? { ...e, response_ns: ms(1.6) } : e)),
      { maps: [], schedule: new Schedule(1, 0n), pace: 'duration', tolerance: parseTolerance('10%,1ms') },
    );
    expect([...alike.find((t) => t.call === 'response')!.ambiguous!]).toEqual([0, 0, 0, 0]);
  });

  test('a build whose requests took them all is never passed: the cause among them is not exercised, and the report says the holds were not given', () => {
    const outcomes = plan.map((t) => ({
      matched: t === response ? 4 : 0,
      passed: 0,
      failed: 0,
      bytes: 0,
      observedNs: BigInt64Array.from(t === response ? [ms(2)] : []),
      intendedNs: BigInt64Array.from(t === response ? [ms(2)] : []),
      ...(t === response ? { exchanges: Uint32Array.from([3]), ambiguous: Uint32Array.from([0, 1, 2]) } : {}),
    }));
    const causes = checkCauses({
      causes: incidentCauses(recorded),
      events: recorded,
      plan,
      outcomes,
      excluded: new Map(),
      maps: [],
      unmatched: [],
    });
    expect(causes).toEqual([
      expect.objectContaining({
        exercised: false,
        reason: expect.stringMatching(
          /^ambiguous: a request of the build took its exchange, but the incident made 2 other requests to tcp 10\.0\.0\.5:6379 that cannot be told from the cause's/,
        ) as string,
      }),
    ]);
    const rows = buildReport(plan, outcomes, [], parseTolerance('10%,1ms'));
    const row = rows.find((r) => r.call === 'response')!;
    expect(row).toMatchObject({ matched: 4, ambiguous: 3 });
    // said, and no shortfall: a build whose calls were all made is faithful but for the cause
    expect(row.shortfall).toBeNull();
    expect(row.reason).toMatch(
      /3 responses not held: the incident made other requests the matcher cannot tell/,
    );
    const v = verdictOf(rows, causes);
    expect(v).toMatchObject({ kind: 'not-reproduced', status: EXIT.notReproduced });
  });
});
