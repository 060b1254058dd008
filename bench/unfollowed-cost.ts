/**
 * What the agent costs a Go server it does not follow (issue 46, rule 2): two copies of one
 * net/http server (test/support/runtimes/append-server.go, the same file), the agent following one
 * (`--pid`), wrk loading the other. Three ways, interleaved in each round: no agent (the anchor),
 * the agent with `--filter-transactions` (its Go and TLS uprobes in the followed process alone),
 * and without it (another process's transaction can be stored: its uprobes on every process that
 * runs the file, as every agent did before). Reports the unfollowed server's req/s, its CPU per
 * request (user and system, from /proc) and the agent's Go uprobe runs per request (bpf_stats).
 *
 * Usage: node dist/bench/unfollowed-cost.js [rounds=3] [seconds=5]
 */
import { execFileSync } from 'node:child_process';
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { startBenchAgent } from './agent-process';
import { cpuUs, median, programStats, range, startServer, wrk, type Served } from './server-load';
import { withBpfStats } from './bpf-stats';

const ROOT = path.join(__dirname, '..', '..');
const SERVER = path.join(ROOT, 'test', 'support', 'runtimes', 'append-server.go');
const rounds = Number(process.argv[2] ?? 3);
const seconds = Number(process.argv[3] ?? 5);

const WAYS = ['no agent', 'agent --pid F --filter-transactions', 'agent --pid F (whole host)'] as const;
type Way = (typeof WAYS)[number];

/** The Go uprobes (go_process_exec is a tracepoint's). */
const isGoUprobe = (name: string) => name.startsWith('go_') && name !== 'go_process_exec';

async function measure(other: Served, agentPid: number | undefined) {
  const before = {
    cpu: cpuUs(other.child.pid!),
    runs: agentPid ? programStats(agentPid, isGoUprobe).runs : 0,
  };
  const load = await wrk({ url: `http://127.0.0.1:${other.port}/`, seconds, threads: 1, connections: 16 });
  const runs = agentPid ? programStats(agentPid, isGoUprobe).runs : 0;
  return {
    rps: load.rps,
    cpuUs: (cpuUs(other.child.pid!) - before.cpu) / load.requests,
    hits: (runs - before.runs) / load.requests,
  };
}

async function main(): Promise<void> {
  const dir = fs.mkdtempSync(path.join(os.tmpdir(), 'kreplay-unfollowed-'));
  const binary = path.join(dir, 'append-server');
  execFileSync('go', ['build', '-o', binary, SERVER], {
    env: { ...process.env, GOCACHE: path.join(dir, 'cache'), GO111MODULE: 'off' },
  });
  const followed = await startServer(binary, [path.join(dir, 'followed')]);
  const other = await startServer(binary, [path.join(dir, 'other')]);
  const results = Object.fromEntries(
    WAYS.map((w) => [w, [] as Awaited<ReturnType<typeof measure>>[]]),
  ) as Record<Way, Awaited<ReturnType<typeof measure>>[]>;
  const probed = (output: string) =>
    output.includes(`are followed in process ${followed.child.pid} alone`) ||
    output.includes(`goroutines of ${binary} (`);
  try {
    for (let round = 0; round < rounds; round++) {
      for (const way of WAYS) {
        if (way === 'no agent') {
          results[way].push(await measure(other, undefined));
          continue;
        }
        const scoped = way === 'agent --pid F --filter-transactions' ? ['--filter-transactions'] : [];
        const agent = await startBenchAgent(ROOT, ['--pid', String(followed.child.pid), ...scoped]);
        try {
          const deadline = Date.now() + 120_000;
          while (!probed(agent.output())) {
            if (Date.now() > deadline)
              throw new Error(`the agent did not probe the server:\n${agent.output()}`);
            await new Promise((r) => setTimeout(r, 100));
          }
          results[way].push(await measure(other, agent.pid));
        } finally {
          await agent.stop();
        }
      }
      console.error(`round ${round + 1}/${rounds} done, load ${os.loadavg()[0]!.toFixed(1)}`);
    }
  } finally {
    followed.child.kill();
    other.child.kill();
    fs.rmSync(dir, { recursive: true, force: true });
  }
  console.log(
    '| the unfollowed server, with | req/s, median (min..max) | server CPU µs/request | agent Go uprobe runs/request |',
  );
  console.log('| --- | --- | --- | --- |');
  for (const way of WAYS) {
    const r = results[way];
    console.log(
      `| ${way} | ${range(
        r.map((x) => x.rps),
        0,
      )} | ${range(
        r.map((x) => x.cpuUs),
        1,
      )} | ${median(r.map((x) => x.hits)).toFixed(2)} |`,
    );
  }
}

// bpf_stats on for the bench's run only (bench/bpf-stats.ts)
withBpfStats(main).catch((err: unknown) => {
  console.error(err);
  process.exit(1);
});
