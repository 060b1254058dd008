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
import { execFileSync } from 'node:child_process';
import fs from 'node:fs';
import { createServer } from 'node:http';
import type { AddressInfo } from 'node:net';
import os from 'node:os';
import path from 'node:path';
import { startBenchAgent } from './agent-process';
import { losses, median, programStats, range, startServer, wrk, type Load } from './server-load';
import { withBpfStats } from './bpf-stats';

const ROOT = path.join(__dirname, '..', '..');
const SERVER = path.join(ROOT, 'test', 'support', 'runtimes', 'go-server.go');
const rounds = Number(process.argv[2] ?? 3);
const seconds = Number(process.argv[3] ?? 5);
const CONNECTIONS = 16;
const load = (port: number) =>
  wrk({ url: `http://127.0.0.1:${port}/`, seconds, threads: 1, connections: CONNECTIONS });

/** The Go uprobes (go_process_exec is a tracepoint's). */
const isGoUprobe = (name: string) => name.startsWith('go_') && name !== 'go_process_exec';

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
  const servers = {
    'scenario (0-20 ms sleep)': await startServer(binary, [dir, upstreamPort]),
    'no sleep (CPU-bound)': await startServer(binary, [dir, upstreamPort, '0']),
    'no sleep, stripped (anchor: not followed)': await startServer(stripped, [dir, upstreamPort, '0']),
  };
  const results: Record<string, { off: Load[]; on: Load[]; hits: number[]; ns: number[] }> = {};
  for (const name of Object.keys(servers)) results[name] = { off: [], on: [], hits: [], ns: [] };
  try {
    for (let round = 0; round < rounds; round++) {
      for (const [name, s] of Object.entries(servers)) results[name]!.off.push(await load(s.port));
      // the agent as users run it, recording the servers only
      const pids = Object.values(servers).flatMap((s) => ['--pid', String(s.child.pid)]);
      const agent = await startBenchAgent(ROOT, pids);
      try {
        for (const [name, s] of Object.entries(servers)) {
          const before = programStats(agent.pid, isGoUprobe);
          const r = await load(s.port);
          results[name]!.on.push(r);
          const after = programStats(agent.pid, isGoUprobe);
          results[name]!.hits.push((after.runs - before.runs) / r.requests);
          results[name]!.ns.push((after.ns - before.ns) / r.requests);
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
    console.log(
      `| ${name} | ${median(r.off.map((x) => x.rps)).toFixed(0)} | ${median(r.on.map((x) => x.rps)).toFixed(0)} | ` +
        `${range(losses(r.off, r.on), 1)}% | ` +
        `${median(r.off.map((x) => x.p99Ms!)).toFixed(2)} | ${median(r.on.map((x) => x.p99Ms!)).toFixed(2)} | ` +
        `${median(r.hits).toFixed(2)} | ${median(r.ns).toFixed(0)} |`,
    );
  }
}

// bpf_stats on for the bench's run only (bench/bpf-stats.ts)
withBpfStats(main).catch((err: unknown) => {
  console.error(err);
  process.exit(1);
});
