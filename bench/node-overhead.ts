/**
 * What following Node's requests costs a real Node server doing the scenario
 * (test/support/runtimes/node-server.js: a 0-20 ms timer, an upstream call through a keep-alive
 * agent, a write through libuv's pool and one on the loop): wrk throughput and p99 of two copies of
 * the server, one never hooked and measured without the agent, the other measured with the agent
 * (which hooks it and probes its libuv pool), interleaved round by round; the uprobe hits per
 * request (bpf_stats run counts of the uv_* programs) and the hook's signal writes per request (the
 * hooked server's write(2) calls, /proc/PID/io syscw, beyond the other's). On a shared machine
 * throughput swings with the load; the CPU time each server spends per request (/proc/PID/stat,
 * user and system) is the steadier figure, and the agent's own is given beside it.
 *
 * Usage: node dist/bench/node-overhead.js [rounds=5] [seconds=5] [connections=64]
 */
import { execFileSync, spawn, type ChildProcess } from 'node:child_process';
import fs from 'node:fs';
import { createServer } from 'node:http';
import type { AddressInfo } from 'node:net';
import os from 'node:os';
import path from 'node:path';
import { startBenchAgent } from './agent-process';

const ROOT = path.join(__dirname, '..', '..');
const SERVER = path.join(ROOT, 'test', 'support', 'runtimes', 'node-server.js');
const rounds = Number(process.argv[2] ?? 5);
const seconds = Number(process.argv[3] ?? 5);
const connections = Number(process.argv[4] ?? 64);

interface Wrk {
  rps: number;
  p99Ms: number;
  requests: number;
}

function startServer(
  dir: string,
  upstreamPort: number,
  hook: boolean,
): Promise<{ child: ChildProcess; port: number }> {
  // the agent may hook one (a `make bench` run opts its own processes out)
  const env: NodeJS.ProcessEnv = { ...process.env, KREPLAY_NODE_HOOK: 'off' };
  if (hook) delete env.KREPLAY_NODE_HOOK;
  const child = spawn(process.execPath, [SERVER, dir, String(upstreamPort)], {
    stdio: ['ignore', 'pipe', 'ignore'],
    env,
  });
  return new Promise((resolve, reject) => {
    child.once('exit', (code) => reject(new Error(`node-server.js exited with ${code}`)));
    child.stdout!.once('data', (b: Buffer) => resolve({ child, port: Number(b.toString().trim()) }));
  });
}

function wrk(port: number): Promise<Wrk> {
  const script = path.join(os.tmpdir(), 'kreplay-node-bench.lua');
  // a valid traceparent so every request opens a context, as a traced service's would
  fs.writeFileSync(
    script,
    `wrk.headers["traceparent"] = "00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01"\n` +
      `wrk.headers["x-request-id"] = "bench"\n`,
  );
  return new Promise((resolve, reject) => {
    const p = spawn('wrk', [
      '-t2',
      `-c${connections}`,
      `-d${seconds}s`,
      '--latency',
      '-s',
      script,
      `http://127.0.0.1:${port}/`,
    ]);
    let out = '';
    p.stdout.on('data', (b: Buffer) => (out += b.toString()));
    p.on('error', reject);
    p.on('exit', () => {
      const rps = /Requests\/sec:\s+([\d.]+)/.exec(out);
      const p99 = /99%\s+([\d.]+)(us|ms|s)/.exec(out);
      const total = /(\d+) requests in/.exec(out);
      if (!rps || !p99 || !total) return reject(new Error(`cannot read wrk's output:\n${out}`));
      const scale = { us: 0.001, ms: 1, s: 1000 }[p99[2] as 'us' | 'ms' | 's'];
      resolve({ rps: Number(rps[1]), p99Ms: Number(p99[1]) * scale, requests: Number(total[1]) });
    });
  });
}

/** Runs of the libuv threadpool programs (needs kernel.bpf_stats_enabled=1). */
function uvRuns(): number {
  const progs = JSON.parse(execFileSync('bpftool', ['-j', 'prog', 'show']).toString()) as {
    name?: string;
    run_cnt?: number;
  }[];
  return progs.filter((p) => p.name?.startsWith('uv_')).reduce((n, p) => n + (p.run_cnt ?? 0), 0);
}

const CLOCK_TICKS = 100; // sysconf(_SC_CLK_TCK) on Linux

/** The process's CPU time so far (user and system, all threads), µs. */
function cpuUs(pid: number): number {
  const fields = fs.readFileSync(`/proc/${pid}/stat`, 'utf8').split(') ')[1]!.split(' ');
  return ((Number(fields[11]) + Number(fields[12])) / CLOCK_TICKS) * 1e6;
}

/** The process's write(2)-family calls so far. */
const writeCalls = (pid: number) =>
  Number(/^syscw: (\d+)$/m.exec(fs.readFileSync(`/proc/${pid}/io`, 'utf8'))![1]);

const median = (xs: number[]) => [...xs].sort((a, b) => a - b)[Math.floor(xs.length / 2)]!;

async function main(): Promise<void> {
  const dir = fs.mkdtempSync(path.join(os.tmpdir(), 'kreplay-node-bench-'));
  const upstream = createServer((_req, res) => res.end('upstream'));
  upstream.keepAliveTimeout = 60_000;
  await new Promise<void>((resolve) => upstream.listen(0, '127.0.0.1', resolve));
  const upstreamPort = (upstream.address() as AddressInfo).port;
  const plainServer = await startServer(dir, upstreamPort, false);
  const server = await startServer(dir, upstreamPort, true);
  fs.writeFileSync('/proc/sys/kernel/bpf_stats_enabled', '1');
  const off: Wrk[] = [];
  const on: Wrk[] = [];
  const hits: number[] = [];
  const writesOff: number[] = [];
  const writesOn: number[] = [];
  const cpuOff: number[] = [];
  const cpuOn: number[] = [];
  const agentCpu: number[] = [];
  // the never-hooked copy with the agent capturing it: what capture costs without the hook
  const captured: Wrk[] = [];
  const cpuCaptured: number[] = [];
  try {
    for (let round = 0; round < rounds; round++) {
      let before = writeCalls(plainServer.child.pid!);
      let cpu = cpuUs(plainServer.child.pid!);
      const plain = await wrk(plainServer.port);
      off.push(plain);
      writesOff.push((writeCalls(plainServer.child.pid!) - before) / plain.requests);
      cpuOff.push((cpuUs(plainServer.child.pid!) - cpu) / plain.requests);
      const agent = await startBenchAgent(ROOT, [
        ...['--include', `pid:${server.child.pid}`],
        ...['--include', `pid:${plainServer.child.pid}`],
      ]);
      try {
        const word = new RegExp(
          `(hooked a Node process|Node process unattributed|could not hook)[^\\n]* pid=${server.child.pid}\\b`,
        );
        const deadline = Date.now() + 20_000;
        while (!word.test(agent.output())) {
          if (Date.now() > deadline) throw new Error(`the agent did not hook the server:\n${agent.output()}`);
          await new Promise((r) => setTimeout(r, 50));
        }
        if (word.exec(agent.output())![1] !== 'hooked a Node process') throw new Error(agent.output());
        cpu = cpuUs(plainServer.child.pid!);
        const capturedRun = await wrk(plainServer.port);
        captured.push(capturedRun);
        cpuCaptured.push((cpuUs(plainServer.child.pid!) - cpu) / capturedRun.requests);
        const runs = uvRuns();
        before = writeCalls(server.child.pid!);
        cpu = cpuUs(server.child.pid!);
        const agentBefore = cpuUs(agent.pid);
        const r = await wrk(server.port);
        on.push(r);
        hits.push((uvRuns() - runs) / r.requests);
        writesOn.push((writeCalls(server.child.pid!) - before) / r.requests);
        cpuOn.push((cpuUs(server.child.pid!) - cpu) / r.requests);
        agentCpu.push((cpuUs(agent.pid) - agentBefore) / r.requests);
      } finally {
        await agent.stop();
      }
    }
  } finally {
    server.child.kill();
    plainServer.child.kill();
    upstream.close();
    fs.rmSync(dir, { recursive: true, force: true });
  }
  const losses = off.map((o, i) => 100 * (1 - on[i]!.rps / o.rps));
  const p99Added = off.map((o, i) => 1000 * (on[i]!.p99Ms - o.p99Ms));
  const range = (xs: number[], digits: number) =>
    `${median(xs).toFixed(digits)} (${Math.min(...xs).toFixed(digits)}..${Math.max(...xs).toFixed(digits)})`;
  console.log(
    `| req/s without | req/s with | loss % (median, range of ${rounds}) | p99 ms without | p99 ms with | p99 added µs | ` +
      `server CPU µs/request without | captured, not hooked | hooked | agent CPU µs/request | req/s captured, not hooked | uprobe hits/request | signals/request |`,
  );
  console.log('| --- | --- | --- | --- | --- | --- | --- | --- | --- | --- | --- | --- | --- |');
  console.log(
    `| ${median(off.map((x) => x.rps)).toFixed(0)} | ${median(on.map((x) => x.rps)).toFixed(0)} | ${range(losses, 1)} | ` +
      `${median(off.map((x) => x.p99Ms)).toFixed(2)} | ${median(on.map((x) => x.p99Ms)).toFixed(2)} | ${range(p99Added, 0)} | ` +
      `${range(cpuOff, 0)} | ${range(cpuCaptured, 0)} | ${range(cpuOn, 0)} | ${range(agentCpu, 0)} | ` +
      `${median(captured.map((x) => x.rps)).toFixed(0)} | ${median(hits).toFixed(2)} | ${(median(writesOn) - median(writesOff)).toFixed(2)} |`,
  );
}

main().catch((err: unknown) => {
  console.error(err);
  process.exit(1);
});
