/**
 * Issue 31's benchmark: `kreplay replay --incident F --exec` of a real Redis incident.
 *
 * The incident is recorded as users record one: the agent runs, an ordinary service
 * (test/support/exec/redis-service.py: ThreadingHTTPServer, python3-redis, SQLite) serves curl
 * while redis-server is paused 1.5 s (CLIENT PAUSE), and the transaction is exported to a .kri.
 * Then, rounds alternating, the same service build runs once:
 * - alone (Redis answers at once): its wall time;
 * - under `kreplay replay --incident F --exec` (the response held as recorded): its wall time,
 *   and from --report-json the relayed response's observed and intended hold.
 * Added wall time = replay − alone − the intended response hold (what kreplay costs beyond the
 * wait it is asked to replay). Hold error = observed − intended (negative: released early).
 *
 * `make bench BENCH=exec-cause`, or node dist/bench/exec-cause.js [rounds]
 */
import { spawn, spawnSync } from 'node:child_process';
import fs from 'node:fs';
import net from 'node:net';
import os from 'node:os';
import path from 'node:path';
import { silentLogger } from '../core/log/logger';
import { repoRoot } from '../core/repo-root';
import { createDaemon } from '../daemon/create-daemon';
import { median } from './server-load';
import { printTable } from './table';

const TXN = 'bench-checkout';
const PYTHON = '/usr/bin/python3';
const log = (text: string) => process.stderr.write(`[exec-cause bench] ${text}\n`);
const KREPLAY = path.join(repoRoot(), 'bin', 'kreplay.js');
const SERVICE = path.join(repoRoot(), 'test', 'support', 'exec', 'redis-service.py');

async function freePort(): Promise<number> {
  const server = net.createServer();
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  const { port } = server.address() as net.AddressInfo;
  await new Promise((resolve) => server.close(resolve));
  return port;
}

function redis(port: number, ...args: string[]): string {
  return spawnSync('redis-cli', ['-p', String(port), ...args], { encoding: 'utf8' }).stdout.trim();
}

async function until<T>(
  what: string,
  probe: () => Promise<T | undefined> | T | undefined,
  ms = 30_000,
): Promise<T> {
  const end = Date.now() + ms;
  for (;;) {
    const value = await probe();
    if (value !== undefined) return value;
    if (Date.now() > end) throw new Error(`timed out waiting for ${what}`);
    await new Promise((resolve) => setTimeout(resolve, 50));
  }
}

/** Runs argv; resolves to its wall time in ns and its status. */
function timed(argv: string[]): Promise<{ ns: bigint; status: number | null; stderr: string }> {
  return new Promise((resolve, reject) => {
    const start = process.hrtime.bigint();
    const child = spawn(argv[0]!, argv.slice(1), { stdio: ['ignore', 'ignore', 'pipe'] });
    let stderr = '';
    child.stderr.on('data', (chunk: Buffer) => (stderr += chunk.toString()));
    child.on('error', reject);
    child.on('close', (status) => resolve({ ns: process.hrtime.bigint() - start, status, stderr }));
  });
}

async function record(dir: string, redisPort: number, servicePort: number): Promise<string> {
  const data = path.join(dir, 'data');
  const portFile = path.join(dir, 'service.port');
  const service = spawn(
    PYTHON,
    [SERVICE, 'serve', String(redisPort), path.join(dir, 'prod.db'), portFile, '--port', String(servicePort)],
    { stdio: 'ignore' },
  );
  await until('the service', () =>
    fs.existsSync(portFile) && fs.readFileSync(portFile, 'utf8').endsWith('\n') ? true : undefined,
  );
  // the agent records the running service only, as one pointed at a deployed service does (the rest
  // of a busy machine is not this incident's)
  const agent = spawn(
    process.execPath,
    [
      KREPLAY,
      'agent',
      '--data-dir',
      data,
      '--node',
      'prod',
      '--log-format',
      'text',
      '--include',
      `pid:${service.pid}`,
    ],
    { stdio: ['ignore', 'pipe', 'pipe'] },
  );
  let agentOut = '';
  agent.stdout.on('data', (chunk: Buffer) => (agentOut += chunk.toString()));
  agent.stderr.on('data', (chunk: Buffer) => (agentOut += chunk.toString()));
  try {
    await until('the agent to capture', () => (agentOut.includes(' capturing ') ? true : undefined));
    if (redis(redisPort, 'CLIENT', 'PAUSE', '1500', 'ALL') !== 'OK') throw new Error('CLIENT PAUSE failed');
    const answer = spawnSync(
      'curl',
      [
        '-s',
        '-H',
        `traceparent: 00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01`,
        '-H',
        `x-request-id: ${TXN}`,
        `http://127.0.0.1:${servicePort}/checkout`,
      ],
      {
        encoding: 'utf8',
      },
    );
    log(`production request: ${answer.stdout.trim()} (curl exit ${answer.status})`);
    service.kill();
    const daemon = await createDaemon({ dataDir: data, log: silentLogger });
    try {
      await until('the recorded wait', async () => {
        const res = await fetch(
          `${daemon.url}/api/events?transaction_id=${TXN}&event_type=sys_read&int64=string`,
        );
        const { events } = (await res.json()) as { events: { response_ns: string | null }[] };
        return events.some((e) => Number(e.response_ns) >= 1.4e9) ? true : undefined;
      });
      const file = path.join(dir, 'checkout.kri');
      // the daemon serves from this process: the export must not block its event loop
      const out = await timed([
        process.execPath,
        KREPLAY,
        'export',
        TXN,
        '--format',
        'incident',
        '-o',
        file,
        '--server',
        daemon.url,
      ]);
      if (out.status !== 0) throw new Error(`export failed: ${out.stderr}`);
      return file;
    } finally {
      await daemon.close();
    }
  } finally {
    agent.kill('SIGTERM');
    await new Promise((resolve) => agent.once('close', resolve));
    service.kill();
  }
}

interface Row {
  call: string;
  target: string;
  intended_p50_ns: string | number | null;
  observed_p50_ns: string | number | null;
}

const ms = (ns: number) => (ns / 1e6).toFixed(2);

async function main(): Promise<void> {
  const rounds = Number(process.argv[2] ?? 5);
  const dir = fs.mkdtempSync(path.join(os.tmpdir(), 'kreplay-bench-cause-'));
  const redisPort = await freePort();
  const servicePort = await freePort();
  const redisServer = spawn(
    'redis-server',
    ['--port', String(redisPort), '--bind', '127.0.0.1', '--save', '', '--appendonly', 'no'],
    { stdio: 'ignore' },
  );
  try {
    await until('redis', () => (redis(redisPort, 'PING') === 'PONG' ? true : undefined));
    const incident = await record(dir, redisPort, servicePort);
    log(`recorded ${incident}`);
    const build = (db: string) => [
      PYTHON,
      SERVICE,
      'once',
      String(redisPort),
      path.join(dir, db),
      '--timeout',
      '5',
      '--port',
      String(servicePort),
    ];
    const added: number[] = [];
    const errors: number[] = [];
    const alone: number[] = [];
    const replayed: number[] = [];
    for (let r = 0; r < rounds; r++) {
      const bare = await timed(build(`alone-${r}.db`));
      if (bare.status !== 0) throw new Error(`the build alone failed: ${bare.stderr}`);
      const report = path.join(dir, `report-${r}.json`);
      const replay = await timed([
        process.execPath,
        KREPLAY,
        'replay',
        '--incident',
        incident,
        '--exec',
        '--report-json',
        report,
        '--',
        ...build(`replay-${r}.db`),
      ]);
      if (replay.status !== 0)
        throw new Error(`the replay failed (${replay.status}): ${replay.stderr.slice(-3000)}`);
      const rows = (JSON.parse(fs.readFileSync(report, 'utf8')) as { targets: Row[] }).targets;
      const response = rows.find(
        (row) => row.call === 'response' && row.target === `tcp 127.0.0.1:${redisPort}`,
      )!;
      const intended = Number(response.intended_p50_ns);
      const observed = Number(response.observed_p50_ns);
      alone.push(Number(bare.ns));
      replayed.push(Number(replay.ns));
      added.push(Number(replay.ns - bare.ns) - intended);
      errors.push(observed - intended);
      log(
        `round ${r + 1}: alone ${ms(Number(bare.ns))} ms, replay ${ms(Number(replay.ns))} ms, intended ${ms(intended)} ms, observed ${ms(observed)} ms`,
      );
    }
    printTable(
      `replay --incident --exec of a real Redis incident (${rounds} rounds, alternating)`,
      [
        [
          'build alone, wall',
          `${ms(median(alone))} ms`,
          `${ms(Math.min(...alone))}–${ms(Math.max(...alone))} ms`,
        ],
        [
          'replay, wall',
          `${ms(median(replayed))} ms`,
          `${ms(Math.min(...replayed))}–${ms(Math.max(...replayed))} ms`,
        ],
        [
          'added wall time (replay − alone − intended hold)',
          `${ms(median(added))} ms`,
          `${ms(Math.min(...added))}–${ms(Math.max(...added))} ms`,
        ],
        [
          'hold error of the relayed response (observed − intended)',
          `${ms(median(errors))} ms`,
          `${ms(Math.min(...errors))}–${ms(Math.max(...errors))} ms`,
        ],
        ['responses released early', String(errors.filter((e) => e < 0).length), ''],
      ],
      ['measure', 'median', 'range'],
    );
  } finally {
    redisServer.kill();
    fs.rmSync(dir, { recursive: true, force: true });
  }
}

main().catch((err: unknown) => {
  process.stderr.write(`${err instanceof Error ? err.stack : String(err)}\n`);
  process.exit(1);
});
