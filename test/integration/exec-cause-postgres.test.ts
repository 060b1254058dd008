/**
 * Issue 31 on PostgreSQL: a Node service (the pinned Node, the npm `pg` client, node:http) reads an
 * order with a parameterised query (the extended protocol: Parse, Bind, Execute) from a real
 * PostgreSQL server (apt), started as a normal cluster (initdb, pg_ctl). In production another
 * session held a lock on the table for 2.5 s (LOCK TABLE, then pg_sleep), so the service's query
 * waited on it. The agent records it, the incident is exported and the data dir removed. Replayed as
 * uid 65534 without capabilities against a database that answers at once:
 * - a 5 s query timeout passes with the query's response held as recorded, and a health query
 *   (SELECT 1, the simple protocol) made first on the same connection, which the incident never
 *   made, stays fast: responses are matched to the query they answer, not by order;
 * - a 1 s query timeout fails on its own timeout while held;
 * - a build that skips the query is not reproduced, naming the query's wait and why (its one
 *   request, the connection's start-up, asked something else).
 */
import { execFileSync, spawn, type ChildProcess } from 'node:child_process';
import { chmodSync, existsSync, mkdtempSync, readFileSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { formatNs } from '../../cli/exec/exec-report';
import { silentLogger } from '../../core/log/logger';
import { createDaemon } from '../../daemon/create-daemon';
import { startAgent, type AgentProcess } from '../support/agent-process';
import { createCgroup, runInCgroup, type TestCgroup } from '../support/cgroup';
import type { ExecReport } from '../support/exec/exec-report';
import { kreplay, replayIncident, UNPRIVILEGED } from '../support/exec/kreplay-run';
import { startPostgres, type Postgres } from '../support/exec/postgres';
import { waitFor } from '../support/wait';

const SERVICE = join(__dirname, '../support/exec/pg-service.js');
const TXN = `pg-checkout-${process.pid}`;

const dir = { path: '' };
let cgroup: TestCgroup;
let postgres: Postgres | null = null;
let agent: AgentProcess | null = null;
const children: ChildProcess[] = [];
let incident: string;
let pgTarget: string;
/** The query's response wait the incident recorded, in ns. */
let recordedWait: number;

/** One SQL statement through psql (apt postgresql-client), its rows unaligned. */
const psql = (url: string, sql: string) =>
  execFileSync('psql', ['-X', '-q', '-A', '-t', '-v', 'ON_ERROR_STOP=1', '-d', url, '-c', sql], {
    encoding: 'utf8',
  }).trim();

beforeAll(async () => {
  dir.path = mkdtempSync(join(tmpdir(), 'kreplay-cause-postgres-'));
  chmodSync(dir.path, 0o777);
  cgroup = createCgroup(`kreplay-cause-postgres-${process.pid}.service`);
  postgres = await startPostgres();
  const { url } = postgres;
  pgTarget = `tcp 127.0.0.1:${postgres.port}`;
  psql(url, 'CREATE TABLE orders (id int PRIMARY KEY, total numeric); INSERT INTO orders VALUES (42, 99.5)');

  const data = join(dir.path, 'data');
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
  const service = spawn(
    '/bin/sh',
    ['-c', `${cgroup.enter} "$@"`, 'sh', process.execPath, SERVICE, 'serve', String(postgres.port), portFile],
    { stdio: 'ignore' },
  );
  children.push(service);
  await waitFor(() => existsSync(portFile) && readFileSync(portFile, 'utf8').endsWith('\n'));
  const servicePort = readFileSync(portFile, 'utf8').trim();

  // production: another session (outside the service, not recorded) holds the table 2.5 s. The
  // query comes only after psql's polls and curl's exec, which on a cold page cache (CI's fresh
  // machine) read them from disk first: the recorded wait is the hold less that, and must still be
  // well over the 1 s timeout
  const locker = spawn(
    'psql',
    [
      '-X',
      '-q',
      '-v',
      'ON_ERROR_STOP=1',
      '-d',
      url,
      '-c',
      'BEGIN; LOCK TABLE orders IN ACCESS EXCLUSIVE MODE; SELECT pg_sleep(2.5); COMMIT;',
    ],
    { stdio: 'ignore' },
  );
  children.push(locker);
  const lockerDone = new Promise((resolve) => locker.once('exit', resolve));
  await waitFor(
    () =>
      psql(
        url,
        "SELECT count(*) FROM pg_locks WHERE relation = 'orders'::regclass AND mode = 'AccessExclusiveLock' AND granted",
      ) === '1',
    { what: 'the lock on orders' },
  );
  expect(
    await runInCgroup(cgroup, 'curl', [
      '-s',
      '-H',
      'traceparent: 00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01',
      '-H',
      `x-request-id: ${TXN}`,
      `http://127.0.0.1:${servicePort}/checkout`,
    ]),
  ).toBe('ok\n');
  await lockerDone;
  service.kill();

  const daemon = await createDaemon({ dataDir: data, log: silentLogger });
  try {
    recordedWait = await waitFor(async () => {
      const res = await fetch(
        `${daemon.url}/api/events?transaction_id=${TXN}&min_duration_ms=1000&int64=string&limit=10`,
      );
      const { events } = (await res.json()) as {
        events: { target: string | null; response_ns: string | null }[];
      };
      const wait = events.find((e) => e.target === pgTarget && e.response_ns !== null);
      return wait ? Number(wait.response_ns) : undefined;
    });
    // the lock was taken before the request came
    expect(recordedWait).toBeGreaterThan(1.2e9);
    incident = join(dir.path, 'checkout.kri');
    const exported = await kreplay([
      'export',
      TXN,
      '--format',
      'incident',
      '-o',
      incident,
      '--server',
      daemon.url,
    ]).done;
    expect(exported.status).toBe(0);
    chmodSync(incident, 0o644);
  } finally {
    await daemon.close();
  }
  expect(await agent.stop()).toBe(0);
  agent = null;
  rmSync(data, { recursive: true, force: true });
}, 120_000);

afterAll(async () => {
  for (const child of children) child.kill('SIGKILL');
  await agent?.stop();
  postgres?.stop();
  cgroup?.remove();
  if (dir.path) rmSync(dir.path, { recursive: true, force: true });
});

async function replay(name: string, ...flags: string[]) {
  const report = join(dir.path, `${name}.json`);
  const run = await replayIncident(
    incident,
    report,
    [process.execPath, SERVICE, 'once', String(postgres!.port), ...flags],
    UNPRIVILEGED,
    dir.path,
  ).done;
  const parsed = JSON.parse(readFileSync(report, 'utf8')) as ExecReport;
  return {
    run,
    report: parsed,
    row: parsed.targets.find((r) => r.call === 'response' && r.target === pgTarget),
  };
}

it('a query that waited on a 2.5 s lock in production is held as recorded; a health query first stays fast; 1 s times out; skipping the database is not reproduced', async () => {
  // the incident leads with the query's wait
  // the recorded wait as the report writes it
  const waitText = formatNs(BigInt(recordedWait)).replace('.', '\\.');
  const shown = await kreplay(['incident', 'show', incident]).done;
  expect(shown.status).toBe(0);
  expect(shown.stdout.split('\n')[4]).toMatch(
    new RegExp(`\\| sys_read +\\| ${pgTarget} +\\| \\d+ +\\| waited for the response ${waitText}`),
  );

  const patient = await replay('patient', '--timeout', '5', '--probe');
  expect({ status: patient.run.status, verdict: patient.report.verdict }).toEqual({
    status: 0,
    verdict: 'passed',
  });
  // the query (Parse/Bind) took the recorded exchange; the connection's start-up (made before the
  // request, so in no incident) and the health query (Query), which the incident never made, were
  // passed through at once
  expect(patient.row).toEqual(expect.objectContaining({ matched: 1, passed_through: 2 }));
  expect(Number(patient.row!.observed_p50_ns)).toBeGreaterThanOrEqual(recordedWait * 0.99);
  expect(Number(/probe: (\d+\.\d+) s/.exec(patient.run.stderr)![1])).toBeLessThan(0.5);
  expect(patient.report.causes).toEqual([
    expect.objectContaining({ target: pgTarget, cause: 'response', exercised: true }),
  ]);

  const impatient = await replay('impatient', '--timeout', '1', '--probe');
  expect(impatient.run.status).not.toBe(0);
  expect(impatient.run.stderr).toContain('checkout failed: Query read timeout');
  // held, whether the build had exited before the release (given up) or its connection, which pg
  // keeps open after a query_timeout, took the answer late
  expect(impatient.row).toEqual(expect.objectContaining({ matched: 1, held: true }));

  // a build that skips the query still connects at start: its one request (the start-up) is not the
  // incident's query, and the report says so rather than "no call"
  const skipped = await replay('skipped', '--skip-db');
  expect(skipped.run.status).toBe(220);
  expect(skipped.report.verdict).toBe('not-reproduced');
  expect(skipped.run.stderr).toMatch(
    new RegExp(
      `cause not exercised: the ${waitText} response wait on ${pgTarget} \\(event #\\d+\\): a different request: the build's 1 requests to ${pgTarget} got 0 of the 1 recorded responses`,
    ),
  );
  expect(skipped.row).toEqual(
    expect.objectContaining({
      matched: 0,
      passed_through: 1,
      reason: expect.stringContaining(
        "never matched: the build's 1 requests to it asked what the incident never did",
      ),
    }),
  );
}, 120_000);
