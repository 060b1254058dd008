/**
 * Issue 31 beyond Python: the same Redis incident recorded and replayed on
 * - a Node service (the pinned Node 24, the npm `redis` client connected at start, node:http), whose
 *   GET is made on the event loop over a connection opened before the request arrived;
 * - a Go client (golang-go from apt, the standard library's net), whose GET runs on a goroutine, so on
 *   whichever of Go's threads the scheduler picks.
 * Redis is paused 2.5 s in production (CLIENT PAUSE) while the agent records; the incident is
 * exported and the data dir removed. Replayed as uid 65534 without capabilities: a 5 s timeout passes
 * with the response held as long as recorded (over 1.2 s), a 1 s one fails, and a build that skips
 * Redis is not reproduced.
 */
import { execFileSync, spawn, type ChildProcess } from 'node:child_process';
import { chmodSync, existsSync, mkdirSync, mkdtempSync, readFileSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { silentLogger } from '../../core/log/logger';
import { createDaemon } from '../../daemon/create-daemon';
import { KREPLAY_BIN, startAgent, type AgentProcess } from '../support/agent-process';
import { createCgroup, runInCgroup, type TestCgroup } from '../support/cgroup';
import type { ExecReport } from '../support/exec/exec-report';
import { kreplay, UNPRIVILEGED } from '../support/exec/kreplay-run';
import { redisCommand, startRedis } from '../support/exec/redis';
import { waitFor } from '../support/wait';

const NODE_SERVICE = join(__dirname, '../support/exec/redis-service.js');
const GO_CLIENT = join(__dirname, '../support/exec/redis-client.go');
const NODE_TXN = `node-checkout-${process.pid}`;
const GO_TXN = `go-get-${process.pid}`;
/**
 * How long Redis stalls in production. The call comes only after curl's (or kreplay run's and the Go
 * client's) exec, which on a cold page cache (CI's fresh machine) reads them from disk first: the
 * recorded wait is the stall less that, and must still be well over the 1 s deadline.
 */
const PAUSE_MS = 2500;

const dir = { path: '' };
let cgroup: TestCgroup;
let agent: AgentProcess | null = null;
const children: ChildProcess[] = [];
let redisPort: number;
let goClient: string;
const incidents: Record<string, string> = {};
/** The Redis response wait each transaction recorded, in ns. */
const recordedWait: Record<string, number> = {};

beforeAll(async () => {
  // one directory for the file: the incidents recorded once are replayed by every test
  dir.path = mkdtempSync(join(tmpdir(), 'kreplay-cause-runtimes-'));
  chmodSync(dir.path, 0o777);
  cgroup = createCgroup(`kreplay-cause-runtimes-${process.pid}.service`);
  const redis = await startRedis();
  children.push(redis.process);
  redisPort = redis.port;
  goClient = join(dir.path, 'redis-client');
  execFileSync('go', ['build', '-o', goClient, GO_CLIENT], {
    env: {
      ...process.env,
      GOCACHE: join(dir.path, 'gocache'),
      GOPATH: join(dir.path, 'gopath'),
      GO111MODULE: 'off',
    },
  });
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

  // production, Node: the service serves curl while Redis stalls
  const portFile = join(dir.path, 'node.port');
  const service = spawn(
    '/bin/sh',
    [
      '-c',
      `${cgroup.enter} "$@"`,
      'sh',
      process.execPath,
      NODE_SERVICE,
      'serve',
      String(redisPort),
      join(ordersDir('prod'), 'orders'),
      portFile,
    ],
    { stdio: 'ignore' },
  );
  children.push(service);
  await waitFor(() => existsSync(portFile) && readFileSync(portFile, 'utf8').endsWith('\n'));
  const servicePort = readFileSync(portFile, 'utf8').trim();
  expect(await redisCommand(redisPort, 'CLIENT', 'PAUSE', String(PAUSE_MS), 'ALL')).toBe('+OK');
  expect(
    await runInCgroup(cgroup, 'curl', [
      '-s',
      '-H',
      `traceparent: 00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01`,
      '-H',
      `x-request-id: ${NODE_TXN}`,
      `http://127.0.0.1:${servicePort}/checkout`,
    ]),
  ).toBe('ok\n');
  service.kill();

  // production, Go: a client run as one transaction while Redis stalls
  expect(await redisCommand(redisPort, 'CLIENT', 'PAUSE', String(PAUSE_MS), 'ALL')).toBe('+OK');
  await runInCgroup(cgroup, process.execPath, [
    KREPLAY_BIN,
    'run',
    '--txn',
    GO_TXN,
    '--',
    goClient,
    String(redisPort),
    '5',
  ]);

  const daemon = await createDaemon({ dataDir: data, log: silentLogger });
  try {
    for (const txn of [NODE_TXN, GO_TXN]) {
      // the wait is stored on the transaction's Redis read before it is exported
      recordedWait[txn] = await waitFor(async () => {
        const res = await fetch(
          `${daemon.url}/api/events?transaction_id=${txn}&min_duration_ms=1000&int64=string&limit=10`,
        );
        const { events } = (await res.json()) as {
          events: { target: string | null; response_ns: string | null }[];
        };
        const wait = events.find((e) => e.target === `tcp 127.0.0.1:${redisPort}` && e.response_ns !== null);
        return wait ? Number(wait.response_ns) : undefined;
      });
      // the stall began before the call, by at most the exec of its client
      expect(recordedWait[txn]).toBeGreaterThan(1.2e9);
      incidents[txn] = join(dir.path, `${txn}.kri`);
      const exported = await kreplay([
        'export',
        txn,
        '--format',
        'incident',
        '-o',
        incidents[txn],
        '--server',
        daemon.url,
      ]).done;
      expect(exported.status).toBe(0);
      chmodSync(incidents[txn], 0o644);
    }
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
  cgroup?.remove();
  if (dir.path) rmSync(dir.path, { recursive: true, force: true });
});

/**
 * The directory a run of the Node service appends its orders in, writable by the replays' uid:
 * each build has its own, mapped from production's (--map), so the recorded append and fsync are
 * matched, and held if the host made them slow enough to be among the incident's causes.
 */
function ordersDir(name: string): string {
  const path = join(dir.path, name);
  mkdirSync(path, { recursive: true });
  chmodSync(path, 0o777);
  return path;
}

async function replay(txn: string, name: string, build: string[], flags: string[] = []) {
  const report = join(dir.path, `${name}.json`);
  const run = await kreplay(
    ['replay', '--incident', incidents[txn]!, '--exec', '--report-json', report, ...flags, '--', ...build],
    UNPRIVILEGED,
    dir.path,
  ).done;
  const parsed = JSON.parse(readFileSync(report, 'utf8')) as ExecReport;
  const held = parsed.targets.find((r) => r.call === 'response' && r.target === `tcp 127.0.0.1:${redisPort}`);
  return { run, report: parsed, heldNs: Number(held?.observed_p50_ns ?? 0) };
}

/** A replay's status and verdict, and why when it did not pass (a passed one's warnings are left out). */
const outcome = ({ run, report }: Awaited<ReturnType<typeof replay>>) => ({
  status: run.status,
  verdict: report.verdict,
  why: report.verdict === 'passed' ? [] : report.reasons,
});

describe('a Redis incident replayed on other runtimes (real kernel, uid 65534)', () => {
  it('Node service (npm redis, a connection opened at start): held 2.5 s, 1 s fails, skipping Redis is not reproduced', async () => {
    // a build of the Node service (`once`), its orders mapped from production's directory to its own
    const node = (name: string, ...flags: string[]) =>
      replay(
        NODE_TXN,
        `node-${name}`,
        [
          process.execPath,
          NODE_SERVICE,
          'once',
          String(redisPort),
          join(ordersDir(name), 'orders'),
          ...flags,
        ],
        ['--map', `${join(dir.path, 'prod')}=${join(dir.path, name)}`],
      );
    const patient = await node('patient', '--timeout', '5');
    expect(outcome(patient)).toEqual({ status: 0, verdict: 'passed', why: [] });
    expect(patient.heldNs).toBeGreaterThanOrEqual(recordedWait[NODE_TXN]! * 0.99);
    expect(patient.report.causes.length).toBeGreaterThan(0);
    expect(patient.report.causes.every((c) => c.exercised)).toBe(true);
    // the order's append and fsync, mapped, are matched (a slow fsync in production is a cause too)
    const orders = join(dir.path, 'patient', 'orders');
    expect(patient.report.targets.filter((t) => t.target === orders).map((t) => [t.call, t.matched])).toEqual(
      [
        ['write', 1],
        ['fsync', 1],
      ],
    );

    const impatient = await node('impatient', '--timeout', '1');
    expect(impatient.run.status).not.toBe(0);
    expect(impatient.run.stderr).toContain('Redis took over 1000 ms');

    const skipped = await node('skipped', '--skip-redis');
    expect(skipped.run.status).toBe(220);
    expect(skipped.report.verdict).toBe('not-reproduced');
  }, 120_000);

  it("Go client (a goroutine on Go's threads): held 2.5 s, a 1 s deadline fails", async () => {
    const patient = await replay(GO_TXN, 'go-patient', [goClient, String(redisPort), '5']);
    expect(outcome(patient)).toEqual({ status: 0, verdict: 'passed', why: [] });
    expect(patient.heldNs).toBeGreaterThanOrEqual(recordedWait[GO_TXN]! * 0.99);
    expect(Number(/redis GET: (\d+\.\d+) s/.exec(patient.run.stderr)![1]) * 1e9).toBeGreaterThanOrEqual(
      recordedWait[GO_TXN]! * 0.99,
    );
    expect(patient.report.causes.every((c) => c.exercised)).toBe(true);

    const impatient = await replay(GO_TXN, 'go-impatient', [goClient, String(redisPort), '1']);
    expect(impatient.run.status).not.toBe(0);
    expect(impatient.run.stderr).toContain('i/o timeout');
  }, 120_000);
});
