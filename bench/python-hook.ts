/**
 * What the Python hook costs an aiohttp server doing the accuracy scenario (asyncio.sleep 0-20 ms,
 * an upstream GET through a ClientSession, a file written on the loop and one through
 * run_in_executor): wrk throughput and p99, the server's CPU per request and its write system calls
 * per request (the hook's signals are writes; the scenario's own are two), without the agent, with
 * the agent and its hook, with the hook left in the server after the agent stopped (its signals
 * reach no probe), and with the agent and --no-python-hook, interleaved round by round. Two servers
 * run the same code: one the agent never hooks (the "without" runs, and --no-python-hook's), one it
 * includes (--include pid:N) and hooks at its first "with" round.
 *
 * Usage: node dist/bench/python-hook.js [rounds=5] [seconds=5] [connections=64]
 */
import { spawn, type ChildProcess } from 'node:child_process';
import fs from 'node:fs';
import { createServer } from 'node:http';
import type { AddressInfo } from 'node:net';
import os from 'node:os';
import path from 'node:path';
import { startBenchAgent } from './agent-process';
import { median, TRACEPARENT } from './server-load';

const ROOT = path.join(__dirname, '..', '..');
const SERVER = path.join(ROOT, 'test', 'support', 'runtimes', 'aiohttp-server.py');
const rounds = Number(process.argv[2] ?? 5);
const seconds = Number(process.argv[3] ?? 5);
const connections = Number(process.argv[4] ?? 64);
const CLOCK_TICKS = 100;

interface Run {
  rps: number;
  p99Ms: number;
  requests: number;
  /** the server's user + system CPU per request, µs */
  cpuUs: number;
  /** the server's write-family system calls per request */
  writes: number;
}

interface Server {
  child: ChildProcess;
  pid: number;
  port: number;
}

function startServer(dir: string, upstream: number): Promise<Server> {
  const child = spawn('/usr/bin/python3', [SERVER, dir, String(upstream)], {
    stdio: ['ignore', 'pipe', 'ignore'],
  });
  return new Promise((resolve, reject) => {
    child.once('exit', (code) => reject(new Error(`the aiohttp server exited with ${code}`)));
    child.stdout!.once('data', (b: Buffer) =>
      resolve({ child, pid: child.pid!, port: Number(b.toString().trim()) }),
    );
  });
}

/** CPU ticks (user + system, every thread) and write system calls of a process so far. */
function usage(pid: number): { ticks: number; writes: number } {
  const fields = fs.readFileSync(`/proc/${pid}/stat`, 'utf8').split(') ')[1]!.split(' ');
  const writes = /^syscw:\s+(\d+)$/m.exec(fs.readFileSync(`/proc/${pid}/io`, 'utf8'));
  return { ticks: Number(fields[11]) + Number(fields[12]), writes: Number(writes![1]) };
}

function wrk(server: Server, script: string): Promise<Run> {
  const before = usage(server.pid);
  return new Promise((resolve, reject) => {
    const p = spawn('wrk', [
      '-t1',
      `-c${connections}`,
      `-d${seconds}s`,
      '--latency',
      '-s',
      script,
      `http://127.0.0.1:${server.port}/`,
    ]);
    let out = '';
    p.stdout.on('data', (b: Buffer) => (out += b.toString()));
    p.on('error', reject);
    p.on('exit', () => {
      const after = usage(server.pid);
      const rps = /Requests\/sec:\s+([\d.]+)/.exec(out);
      const p99 = /99%\s+([\d.]+)(us|ms|s)/.exec(out);
      const total = /(\d+) requests in/.exec(out);
      if (!rps || !p99 || !total) return reject(new Error(`cannot read wrk's output:\n${out}`));
      if (/Non-2xx|Socket errors/.test(out)) return reject(new Error(`wrk saw errors:\n${out}`));
      const scale = { us: 0.001, ms: 1, s: 1000 }[p99[2] as 'us' | 'ms' | 's'];
      const requests = Number(total[1]);
      resolve({
        rps: Number(rps[1]),
        p99Ms: Number(p99[1]) * scale,
        requests,
        cpuUs: ((after.ticks - before.ticks) / CLOCK_TICKS / requests) * 1e6,
        writes: (after.writes - before.writes) / requests,
      });
    });
  });
}

const range = (xs: number[], digits: number) =>
  `${median(xs).toFixed(digits)} (${Math.min(...xs).toFixed(digits)}..${Math.max(...xs).toFixed(digits)})`;

async function main(): Promise<void> {
  const dir = fs.mkdtempSync(path.join(os.tmpdir(), 'kreplay-python-bench-'));
  const script = path.join(dir, 'headers.lua');
  // a traced request, as the accuracy scenario's: every request opens a unit
  fs.writeFileSync(
    script,
    `wrk.headers["traceparent"] = "${TRACEPARENT}"\n` + `wrk.headers["x-request-id"] = "bench"\n`,
  );
  const upstream = createServer((_req, res) => res.end('upstream'));
  upstream.keepAliveTimeout = 60_000;
  await new Promise<void>((resolve) => upstream.listen(0, '127.0.0.1', resolve));
  const upstreamPort = (upstream.address() as AddressInfo).port;
  const plain = await startServer(dir, upstreamPort);
  const hooked = await startServer(dir, upstreamPort);
  const modes = [
    'without the agent',
    'agent, Python hook',
    'the hook, agent stopped',
    'agent, --no-python-hook',
  ] as const;
  const runs = Object.fromEntries(modes.map((mode) => [mode, [] as Run[]])) as Record<
    (typeof modes)[number],
    Run[]
  >;
  try {
    for (let round = 0; round < rounds; round++) {
      runs['without the agent'].push(await wrk(plain, script));
      const agent = await startBenchAgent(ROOT, ['--include', `pid:${hooked.pid}`]);
      try {
        // queued at once; the first request runs it
        const deadline = Date.now() + 10_000;
        while (!agent.output().includes(`pid=${hooked.pid} `)) {
          if (Date.now() > deadline)
            throw new Error(`the agent did not hook ${hooked.pid}:\n${agent.output()}`);
          await new Promise((r) => setTimeout(r, 50));
        }
        runs['agent, Python hook'].push(await wrk(hooked, script));
      } finally {
        await agent.stop();
      }
      runs['the hook, agent stopped'].push(await wrk(hooked, script));
      const unhooked = await startBenchAgent(ROOT, ['--include', `pid:${plain.pid}`, '--no-python-hook']);
      try {
        runs['agent, --no-python-hook'].push(await wrk(plain, script));
      } finally {
        await unhooked.stop();
      }
    }
  } finally {
    plain.child.kill();
    hooked.child.kill();
    upstream.close();
    upstream.closeAllConnections();
    fs.rmSync(dir, { recursive: true, force: true });
  }
  const base = runs['without the agent'];
  console.log(
    `| runs (${rounds} rounds of wrk -t1 -c${connections} -d${seconds}s, median (range)) | req/s | loss vs without | p99 ms | p99 added ms | server CPU µs/request | writes/request |`,
  );
  console.log('| --- | --- | --- | --- | --- | --- | --- |');
  for (const mode of modes) {
    const r = runs[mode];
    const loss = r.map((x, i) => 100 * (1 - x.rps / base[i]!.rps));
    const added = r.map((x, i) => x.p99Ms - base[i]!.p99Ms);
    console.log(
      `| ${mode} | ${range(
        r.map((x) => x.rps),
        0,
      )} | ${mode === modes[0] ? '' : `${range(loss, 1)}%`} | ${range(
        r.map((x) => x.p99Ms),
        2,
      )} | ${mode === modes[0] ? '' : range(added, 2)} | ${range(
        r.map((x) => x.cpuUs),
        0,
      )} | ${range(
        r.map((x) => x.writes),
        2,
      )} |`,
    );
  }
}

main().catch((err: unknown) => {
  console.error(err);
  process.exit(1);
});
