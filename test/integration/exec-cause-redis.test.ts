/**
 * Issue 31 on real programs: a Python ThreadingHTTPServer service (python3-redis, SQLite) called
 * by curl, Redis paused 2.5 s in production (CLIENT PAUSE) so the service's GET waited on it.
 * The agent records it, the incident is exported and the data dir removed. Then:
 * - the incident knows its cause: `incident show` leads with the Redis response wait, and
 *   `kreplay events --min-ms 1000` found it while the daemon ran;
 * - a build that skips Redis is "not reproduced" without --strict, naming the call (uid 65534);
 * - a build that makes the call is never a false "passed": it passes only with the response held
 *   as long as recorded (over 1.2 s), and a 1 s client timeout never passes.
 */
import { spawn, type ChildProcess } from 'node:child_process';
import { chmodSync, existsSync, mkdirSync, readFileSync, rmSync } from 'node:fs';
import { join } from 'node:path';
import { formatNs } from '../../cli/exec/exec-report';
import { silentLogger } from '../../core/log/logger';
import { createDaemon, type Daemon } from '../../daemon/create-daemon';
import { startAgent, type AgentProcess } from '../support/agent-process';
import { createCgroup, runInCgroup, type TestCgroup } from '../support/cgroup';
import { kreplay, UNPRIVILEGED } from '../support/exec/kreplay-run';
import type { ExecReport } from '../support/exec/exec-report';
import { freePort, redisCommand, startRedis } from '../support/exec/redis';
import { useTempDir } from '../support/temp-dir';
import { waitFor } from '../support/wait';

const TXN = `checkout-${process.pid}`;
const TRACEPARENT = `00-${'4bf92f3577b34da6a3ce929d0e0e4736'}-${'00f067aa0ba902b7'}-01`;
const SERVICE = join(__dirname, '../support/exec/redis-service.py');
const PYTHON = '/usr/bin/python3';
/**
 * How long Redis stalls in production. The GET comes only after curl's exec, which on a cold page
 * cache (CI's fresh machine) reads it from disk first: the recorded wait is the stall less that,
 * and must still be well over the 1 s client timeout.
 */
const PAUSE_MS = 2500;

const dir = useTempDir('kreplay-cause-redis-');
let cgroup: TestCgroup;
let agent: AgentProcess | null = null;
let daemon: Daemon | null = null;
const children: ChildProcess[] = [];

beforeAll(() => {
  cgroup = createCgroup(`kreplay-cause-redis-${process.pid}.service`);
});

afterAll(async () => {
  for (const child of children) child.kill('SIGKILL');
  await daemon?.close();
  await agent?.stop();
  cgroup?.remove();
});

it('a Redis wait recorded on a real service is the incident cause; a build that skips it is not reproduced', async () => {
  chmodSync(dir.path, 0o777);
  const data = join(dir.path, 'data');
  const incidentFile = join(dir.path, 'checkout.kri');
  const prodDb = join(dir.path, 'prod.db');
  const redis = await startRedis();
  children.push(redis.process);
  const redisPort = redis.port;
  const redisTarget = `tcp 127.0.0.1:${redisPort}`;

  // the test's cgroup only: other transactions on a shared machine (other tests' markers and
  // traceparents) would be kept too, and the agent's drain could outlast its deadline
  agent = await startAgent([
    '--data-dir',
    data,
    '--node',
    'prod',
    '--cgroup-id',
    String(cgroup.id),
    '--filter-transactions',
  ]);
  const portFile = join(dir.path, 'service.port');
  // the service listens on a port of its own, as a deployed one does, and the CI build on the same
  const servicePort = await freePort();
  const service = spawn(
    '/bin/sh',
    [
      '-c',
      `${cgroup.enter} "$@"`,
      'sh',
      PYTHON,
      SERVICE,
      'serve',
      String(redisPort),
      prodDb,
      portFile,
      '--port',
      String(servicePort),
    ],
    { stdio: 'ignore' },
  );
  children.push(service);
  await waitFor(() => existsSync(portFile) && readFileSync(portFile, 'utf8').endsWith('\n'));
  expect(readFileSync(portFile, 'utf8').trim()).toBe(String(servicePort));
  // production: Redis stalls (a pause, as a failover or a long command would)
  expect(await redisCommand(redisPort, 'CLIENT', 'PAUSE', String(PAUSE_MS), 'ALL')).toBe('+OK');
  const answer = await runInCgroup(cgroup, 'curl', [
    '-s',
    '-H',
    `traceparent: ${TRACEPARENT}`,
    '-H',
    `x-request-id: ${TXN}`,
    `http://127.0.0.1:${servicePort}/checkout`,
  ]);
  expect(answer).toBe('ok\n');
  service.kill();

  daemon = await createDaemon({ dataDir: data, log: silentLogger });
  const url = daemon.url;
  // the Redis response wait, as recorded
  const recordedWait = await waitFor(async () => {
    const res = await fetch(
      `${url}/api/events?transaction_id=${TXN}&event_type=sys_read&int64=string&limit=1000`,
    );
    const reads = ((await res.json()) as { events: { target: string | null; response_ns: string | null }[] })
      .events;
    // the GET's (any other call on the connection, its handshake, answered at once)
    const waits = reads.filter((r) => r.target === redisTarget && r.response_ns !== null);
    return waits.length > 0 ? Math.max(...waits.map((r) => Number(r.response_ns))) : undefined;
  });
  // the stall began before the call, by at most curl's exec
  expect(recordedWait).toBeGreaterThan(1.2e9);
  // the wait as the incident and the replay's reports say it, for a pattern
  const waitText = formatNs(BigInt(recordedWait)).replace('.', '\\.');
  // the events API finds the wait by its response time: the read itself took microseconds
  const slow = await kreplay(['events', '--txn', TXN, '--min-ms', '1000', '--server', url, '--json']).done;
  expect(slow.status).toBe(0);
  expect(slow.stdout).toContain(`"target":"${redisTarget}"`);
  expect(
    (await kreplay(['export', TXN, '--format', 'incident', '-o', incidentFile, '--server', url]).done).status,
  ).toBe(0);
  chmodSync(incidentFile, 0o644);
  await daemon.close();
  daemon = null;
  expect(await agent.stop()).toBe(0);
  agent = null;
  rmSync(data, { recursive: true, force: true });

  // the incident leads with its cause
  const shown = await kreplay(['incident', 'show', incidentFile]).done;
  expect(shown.status).toBe(0);
  const lines = shown.stdout.split('\n');
  expect(lines[1]).toBe('CAUSES: what made the transaction slow or fail');
  const causeRows = lines.slice(4, 4 + lines.slice(4).findIndex((l) => !l.startsWith('|')));
  const redisRow = new RegExp(
    `\\| sys_read +\\| ${redisTarget} +\\| \\d+ +\\| waited for the response ${waitText}`,
  );
  expect(causeRows.filter((l) => redisRow.test(l))).toHaveLength(1);
  // a disk a loaded host made slow may make the service's database a cause too: nothing else is
  expect(causeRows.filter((l) => !redisRow.test(l) && !l.includes(prodDb))).toEqual([]);

  const replay = async (name: string, build: string[], flags: string[] = []) => {
    const report = join(dir.path, `${name}.json`);
    const junit = join(dir.path, `${name}.xml`);
    const run = await kreplay(
      [
        'replay',
        '--incident',
        incidentFile,
        '--exec',
        '--report-json',
        report,
        '--report',
        junit,
        '--map',
        `${dir.path}=${join(dir.path, name)}`,
        ...flags,
        '--',
        ...build,
      ],
      UNPRIVILEGED,
      dir.path,
    ).done;
    return {
      run,
      report: JSON.parse(readFileSync(report, 'utf8')) as ExecReport,
      junit: readFileSync(junit, 'utf8'),
    };
  };
  // each build keeps its database in a directory of its own, mapped from production's (--map, in
  // replay), so the recorded database calls are matched, and held if they were slow enough to be causes
  const build = (name: string, ...flags: string[]) => {
    mkdirSync(join(dir.path, name));
    chmodSync(join(dir.path, name), 0o777);
    return [PYTHON, SERVICE, 'once', String(redisPort), join(dir.path, name, 'prod.db'), ...flags];
  };

  // a build that skips the upstream: not reproduced, without --strict, naming the call and why
  const skipped = await replay('skipped', build('skipped', '--skip-redis'));
  expect(skipped.run.status).toBe(220);
  expect(skipped.run.stderr).toMatch(
    new RegExp(
      `cause not exercised: the ${waitText} response wait on ${redisTarget} \\(event #\\d+\\): no call to that peer`,
    ),
  );
  expect(skipped.report.verdict).toBe('not-reproduced');
  // the incident's client (curl, which wrote the request head) is left out, and said so
  for (const call of ['write', 'response'])
    expect(skipped.report.targets).toContainEqual(
      expect.objectContaining({
        call,
        target: `tcp 127.0.0.1:${servicePort}`,
        held: false,
        reason: expect.stringMatching(
          /^not held: the client's call \(pid \d+, which wrote the request head\)/,
        ),
      }),
    );
  expect(skipped.report.causes.filter((c) => c.target === redisTarget)).toEqual([
    expect.objectContaining({ target: redisTarget, cause: 'response', exercised: false }),
  ]);
  expect(skipped.report.causes.filter((c) => c.target !== redisTarget && !c.exercised)).toEqual([]);
  expect(skipped.junit).toMatch(
    new RegExp(
      `<testcase classname="kreplay.cause" name="the ${waitText} response wait on [^"]*"[^>]*>\\n\\s*<failure [^>]*type="cause-not-exercised"`,
    ),
  );

  // the Redis GET made from the request's thread (ThreadingHTTPServer's worker), a thread pool, a
  // forked child, an asyncio event loop (redis.asyncio: a non-blocking socket polled with epoll) and
  // the main thread: each is held the recorded wait, so a 5 s client timeout passes with the
  // response held, and a 1 s one fails on its own timeout while held
  for (const from of ['handler', 'pool', 'fork', 'asyncio', 'main']) {
    const patient = await replay(
      `patient-${from}`,
      build(`patient-${from}`, '--timeout', '5', '--call-from', from),
    );
    expect({ from, status: patient.run.status }).toEqual({ from, status: 0 });
    const row = patient.report.targets.find((r) => r.call === 'response' && r.target === redisTarget)!;
    expect(Number(row.observed_p50_ns)).toBeGreaterThanOrEqual(recordedWait * 0.99);
    expect(patient.report.causes.every((c) => c.exercised)).toBe(true);
    // the database's calls, mapped, are matched
    const own = join(dir.path, `patient-${from}`);
    expect(patient.report.targets.some((r) => r.target.startsWith(own) && r.matched > 0)).toBe(true);
    // redis-py's connect is non-blocking (a socket timeout): completed by the relay, never "given up"
    expect(
      patient.report.targets.filter((r) => r.call === 'connect').map((r) => [r.target, r.gave_up]),
    ).toEqual(patient.report.targets.filter((r) => r.call === 'connect').map((r) => [r.target, 0]));
    // the impatient build goes on serving a second after its failed request, as a deployed service
    // does: the response is released while it still runs, to the connection its timeout closed
    const impatient = await replay(
      `impatient-${from}`,
      build(`impatient-${from}`, '--timeout', '1', '--call-from', from, '--linger', '1'),
    );
    expect({ from, status: impatient.run.status }).not.toEqual({ from, status: 0 });
    expect({ from, stderr: impatient.run.stderr }).toEqual({
      from,
      stderr: expect.stringContaining('redis failed: TimeoutError'),
    });
    // the response the build timed out on (redis-py closes the connection) is reported as held and
    // given up on: neither "never matched" nor delivered
    expect({
      from,
      row: impatient.report.targets.find((r) => r.call === 'response' && r.target === redisTarget),
    }).toEqual({
      from,
      row: expect.objectContaining({
        matched: 1,
        gave_up: 1,
        held: true,
        reason: expect.stringContaining('the build gave up on 1 before their release'),
      }),
    });
    // every thread's socket peer was named through its own pidfd, none from /proc for want of it
    for (const run of [patient, impatient]) expect(run.run.stderr).not.toContain('pidfd_getfd was denied');
  }

  // responses match the request they answer, not the order: a health probe (PING) first on the same
  // connection is passed through fast, and the GET still gets the recorded wait
  const probed = await replay('probed', build('probed', '--timeout', '5', '--probe'));
  expect(probed.run.status).toBe(0);
  // the time to the build's first held call, in the text, the JSON and the JUnit report
  const firstHeld = Number(probed.report.first_held_ns);
  expect(firstHeld).toBeGreaterThan(0);
  expect(firstHeld).toBeLessThan(30e9);
  expect(probed.run.stderr).toMatch(/the build's first held call came [\d.]+ (ns|µs|ms|s) after it started/);
  expect(probed.junit).toContain(`<property name="first_held_ns" value="${probed.report.first_held_ns}"/>`);
  expect(Number(/probe: (\d+\.\d+) s/.exec(probed.run.stderr)![1])).toBeLessThan(0.5);
  const probedRow = probed.report.targets.find((r) => r.call === 'response' && r.target === redisTarget)!;
  expect(probedRow).toEqual(expect.objectContaining({ matched: 1, passed_through: 1 }));
  expect(Number(probedRow.observed_p50_ns)).toBeGreaterThanOrEqual(recordedWait * 0.99);
  expect(probed.report.causes.every((c) => c.exercised)).toBe(true);
  const probedImpatient = await replay(
    'probed-impatient',
    build('probed-impatient', '--timeout', '1', '--probe'),
  );
  expect(probedImpatient.run.status).not.toBe(0);

  // --strict passes on a faithful build of a real HTTP incident: the service's reply goes to the
  // connection it accepted, named by its listening address (not the client's ephemeral port), and
  // its database is mapped by directory
  const strict = await replay('strict', build('strict', '--timeout', '5', '--port', String(servicePort)), [
    '--strict',
  ]);
  expect({ status: strict.run.status, verdict: strict.report.verdict }).toEqual({
    status: 0,
    verdict: 'passed',
  });
  expect(strict.report.targets).toContainEqual(
    expect.objectContaining({ call: 'write', target: `tcp accepted 127.0.0.1:${servicePort}`, held: true }),
  );

  // a build that asks Redis something else (the probe alone) never gets the GET's hold: not reproduced
  const different = await replay('different', build('different', '--timeout', '5', '--probe-only'));
  expect(different.run.status).toBe(220);
  expect(different.run.stderr).toMatch(/cause not exercised: .* a different request/);
  expect(Number(/probe: (\d+\.\d+) s/.exec(different.run.stderr)![1])).toBeLessThan(0.5);
});
