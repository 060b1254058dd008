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
import fs from 'node:fs';
import { createServer } from 'node:http';
import type { AddressInfo } from 'node:net';
import os from 'node:os';
import path from 'node:path';
import { startBenchAgent } from './agent-process';
import {
  awaitHooked,
  cpuUs,
  losses,
  median,
  nodeEnv,
  programStats,
  range,
  startServer,
  wrk,
  type Load,
} from './server-load';
import { withBpfStats } from './bpf-stats';

const ROOT = path.join(__dirname, '..', '..');
const SERVER = path.join(ROOT, 'test', 'support', 'runtimes', 'node-server.js');
const rounds = Number(process.argv[2] ?? 5);
const seconds = Number(process.argv[3] ?? 5);
const connections = Number(process.argv[4] ?? 64);
const load = (port: number) => wrk({ url: `http://127.0.0.1:${port}/`, seconds, threads: 2, connections });

/** Runs of the libuv threadpool programs. */
const uvRuns = (agentPid: number) => programStats(agentPid, (name) => name.startsWith('uv_')).runs;

/** The process's write(2)-family calls so far. */
const writeCalls = (pid: number) =>
  Number(/^syscw: (\d+)$/m.exec(fs.readFileSync(`/proc/${pid}/io`, 'utf8'))![1]);

async function main(): Promise<void> {
  const dir = fs.mkdtempSync(path.join(os.tmpdir(), 'kreplay-node-bench-'));
  const upstream = createServer((_req, res) => res.end('upstream'));
  upstream.keepAliveTimeout = 60_000;
  await new Promise<void>((resolve) => upstream.listen(0, '127.0.0.1', resolve));
  const upstreamPort = (upstream.address() as AddressInfo).port;
  // the agent may hook one (a `make bench` run opts its own processes out)
  const start = (hookable: boolean) =>
    startServer(process.execPath, [SERVER, dir, String(upstreamPort)], nodeEnv(hookable));
  const plainServer = await start(false);
  const server = await start(true);
  const off: Load[] = [];
  const on: Load[] = [];
  const hits: number[] = [];
  const writesOff: number[] = [];
  const writesOn: number[] = [];
  const cpuOff: number[] = [];
  const cpuOn: number[] = [];
  const agentCpu: number[] = [];
  // the never-hooked copy with the agent capturing it: what capture costs without the hook
  const captured: Load[] = [];
  const cpuCaptured: number[] = [];
  try {
    for (let round = 0; round < rounds; round++) {
      let before = writeCalls(plainServer.child.pid!);
      let cpu = cpuUs(plainServer.child.pid!);
      const plain = await load(plainServer.port);
      off.push(plain);
      writesOff.push((writeCalls(plainServer.child.pid!) - before) / plain.requests);
      cpuOff.push((cpuUs(plainServer.child.pid!) - cpu) / plain.requests);
      const agent = await startBenchAgent(ROOT, [
        ...['--include', `pid:${server.child.pid}`],
        ...['--include', `pid:${plainServer.child.pid}`],
      ]);
      try {
        await awaitHooked(agent, server.child.pid!);
        cpu = cpuUs(plainServer.child.pid!);
        const capturedRun = await load(plainServer.port);
        captured.push(capturedRun);
        cpuCaptured.push((cpuUs(plainServer.child.pid!) - cpu) / capturedRun.requests);
        const runs = uvRuns(agent.pid);
        before = writeCalls(server.child.pid!);
        cpu = cpuUs(server.child.pid!);
        const agentBefore = cpuUs(agent.pid);
        const r = await load(server.port);
        on.push(r);
        hits.push((uvRuns(agent.pid) - runs) / r.requests);
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
  const p99Added = off.map((o, i) => 1000 * (on[i]!.p99Ms! - o.p99Ms!));
  console.log(
    `| req/s without | req/s with | loss % (median, range of ${rounds}) | p99 ms without | p99 ms with | p99 added µs | ` +
      `server CPU µs/request without | captured, not hooked | hooked | agent CPU µs/request | req/s captured, not hooked | uprobe hits/request | signals/request |`,
  );
  console.log('| --- | --- | --- | --- | --- | --- | --- | --- | --- | --- | --- | --- | --- |');
  console.log(
    `| ${median(off.map((x) => x.rps)).toFixed(0)} | ${median(on.map((x) => x.rps)).toFixed(0)} | ${range(losses(off, on), 1)} | ` +
      `${median(off.map((x) => x.p99Ms!)).toFixed(2)} | ${median(on.map((x) => x.p99Ms!)).toFixed(2)} | ${range(p99Added, 0)} | ` +
      `${range(cpuOff, 0)} | ${range(cpuCaptured, 0)} | ${range(cpuOn, 0)} | ${range(agentCpu, 0)} | ` +
      `${median(captured.map((x) => x.rps)).toFixed(0)} | ${median(hits).toFixed(2)} | ${(median(writesOn) - median(writesOff)).toFixed(2)} |`,
  );
}

// bpf_stats on for the bench's run only (bench/bpf-stats.ts)
withBpfStats(main).catch((err: unknown) => {
  console.error(err);
  process.exit(1);
});
