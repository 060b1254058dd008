/**
 * What following Go's goroutines costs a real Go net/http server (test/support/runtimes/go-server.go,
 * as `go build` makes it): wrk throughput and p99 with and without the agent, interleaved in one
 * run, for the scenario (a 0-20 ms sleep, an upstream GET through net/http's pool, a file write and
 * a spawned goroutine's) and for the same handler without the sleep (CPU-bound: where a cost
 * shows). The anchor for what following goroutines adds to the agent's own cost: the same
 * handler built stripped, whose goroutines the agent does not follow (the same syscall programs,
 * no uprobes). The Go uprobe hits and their BPF time per request come from bpf_stats.
 *
 * Usage: node dist/bench/go-overhead.js [rounds=3] [seconds=5]
 */
import { execFileSync, spawn, type ChildProcess } from 'node:child_process';
import fs from 'node:fs';
import { createServer } from 'node:http';
import type { AddressInfo } from 'node:net';
import os from 'node:os';
import path from 'node:path';
import { startBenchAgent } from './agent-process';

const ROOT = path.join(__dirname, '..', '..');
const SERVER = path.join(ROOT, 'test', 'support', 'runtimes', 'go-server.go');
const rounds = Number(process.argv[2] ?? 3);
const seconds = Number(process.argv[3] ?? 5);
const CONNECTIONS = 16;

interface Wrk {
  rps: number;
  p99Ms: number;
  requests: number;
}

function startServer(binary: string, args: string[]): Promise<{ child: ChildProcess; port: number }> {
  const child = spawn(binary, args, { stdio: ['ignore', 'pipe', 'ignore'] });
  return new Promise((resolve, reject) => {
    child.once('exit', (code) => reject(new Error(`${binary} exited with ${code}`)));
    child.stdout!.once('data', (b: Buffer) => resolve({ child, port: Number(b.toString().trim()) }));
  });
}

function wrk(port: number): Promise<Wrk> {
  const script = path.join(os.tmpdir(), 'kreplay-go-bench.lua');
  // a valid traceparent so every request opens a context, as a traced service's would
  fs.writeFileSync(
    script,
    `wrk.headers["traceparent"] = "00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01"\n` +
      `wrk.headers["x-request-id"] = "bench"\n`,
  );
  return new Promise((resolve, reject) => {
    const p = spawn('wrk', [
      '-t1',
      `-c${CONNECTIONS}`,
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

/** Runs of the Go uprobes, and run time of every loaded kreplay program (kernel.bpf_stats_enabled=1). */
function programStats(): { goRuns: number; goNs: number } {
  const progs = JSON.parse(execFileSync('bpftool', ['-j', 'prog', 'show']).toString()) as {
    name?: string;
    run_cnt?: number;
    run_time_ns?: number;
  }[];
  const go = progs.filter((p) => p.name?.startsWith('go_') && p.name !== 'go_process_exec');
  return {
    goRuns: go.reduce((n, p) => n + (p.run_cnt ?? 0), 0),
    goNs: go.reduce((n, p) => n + (p.run_time_ns ?? 0), 0),
  };
}

const median = (xs: number[]) => [...xs].sort((a, b) => a - b)[Math.floor(xs.length / 2)]!;

async function main(): Promise<void> {
  const dir = fs.mkdtempSync(path.join(os.tmpdir(), 'kreplay-go-bench-'));
  const binary = path.join(dir, 'go-server');
  const stripped = path.join(dir, 'go-server-stripped');
  const env = {
    ...process.env,
    GOCACHE: path.join(dir, 'cache'),
    GOPATH: path.join(dir, 'path'),
    GO111MODULE: 'off',
  };
  execFileSync('go', ['build', '-o', binary, SERVER], { env });
  execFileSync('go', ['build', '-ldflags=-s -w', '-o', stripped, SERVER], { env });
  const upstream = createServer((_req, res) => res.end('upstream'));
  upstream.keepAliveTimeout = 60_000;
  await new Promise<void>((resolve) => upstream.listen(0, '127.0.0.1', resolve));
  const upstreamPort = String((upstream.address() as AddressInfo).port);
  fs.writeFileSync('/proc/sys/kernel/bpf_stats_enabled', '1');
  const servers = {
    'scenario (0-20 ms sleep)': await startServer(binary, [dir, upstreamPort]),
    'no sleep (CPU-bound)': await startServer(binary, [dir, upstreamPort, '0']),
    'no sleep, stripped (anchor: not followed)': await startServer(stripped, [dir, upstreamPort, '0']),
  };
  const results: Record<string, { off: Wrk[]; on: Wrk[]; hits: number[]; ns: number[] }> = {};
  for (const name of Object.keys(servers)) results[name] = { off: [], on: [], hits: [], ns: [] };
  try {
    for (let round = 0; round < rounds; round++) {
      for (const [name, s] of Object.entries(servers)) results[name]!.off.push(await wrk(s.port));
      // the agent as users run it, recording the servers only
      const pids = Object.values(servers).flatMap((s) => ['--pid', String(s.child.pid)]);
      const agent = await startBenchAgent(ROOT, pids);
      try {
        for (const [name, s] of Object.entries(servers)) {
          const before = programStats();
          const r = await wrk(s.port);
          results[name]!.on.push(r);
          const after = programStats();
          results[name]!.hits.push((after.goRuns - before.goRuns) / r.requests);
          results[name]!.ns.push((after.goNs - before.goNs) / r.requests);
        }
        if (!agent.output().includes(`goroutines of ${binary} (`))
          throw new Error('the agent did not follow the server');
      } finally {
        await agent.stop();
      }
    }
  } finally {
    for (const s of Object.values(servers)) s.child.kill();
    upstream.close();
    fs.rmSync(dir, { recursive: true, force: true });
  }
  console.log(
    `| handler | req/s without | req/s with | loss (median, range) | p99 ms without | p99 ms with | Go uprobe hits/request | Go uprobe BPF ns/request |`,
  );
  console.log(`| --- | --- | --- | --- | --- | --- | --- | --- |`);
  for (const [name, r] of Object.entries(results)) {
    const losses = r.off.map((o, i) => 100 * (1 - r.on[i]!.rps / o.rps));
    console.log(
      `| ${name} | ${median(r.off.map((x) => x.rps)).toFixed(0)} | ${median(r.on.map((x) => x.rps)).toFixed(0)} | ` +
        `${median(losses).toFixed(1)}% (${Math.min(...losses).toFixed(1)}..${Math.max(...losses).toFixed(1)}) | ` +
        `${median(r.off.map((x) => x.p99Ms)).toFixed(2)} | ${median(r.on.map((x) => x.p99Ms)).toFixed(2)} | ` +
        `${median(r.hits).toFixed(2)} | ${median(r.ns).toFixed(0)} |`,
    );
  }
}

main().catch((err: unknown) => {
  console.error(err);
  process.exit(1);
});
