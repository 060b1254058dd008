/**
 * What each Go uprobe hit costs the program that runs it (issue 46): a real Go program
 * (test/support/runtimes/go-spawner.go) creates goroutines (`spawn`), makes non-blocking receives
 * on an empty channel (`poll`, as net/http's context.WithCancel does once a request) and blocking
 * sends and receives on a buffered one (`recv`), `ops` of each, with no agent and followed by each
 * tree's agent (this one, and another given by its root, e.g. a worktree of main), interleaved in
 * each round. Per op: the program's added CPU (user + system from /proc, over the no-agent run of
 * the same round), the agent's Go uprobe runs and their BPF time (bpf_stats); per hit: the added
 * CPU over the runs (the trap, its emulation and the BPF program).
 *
 * Usage: node dist/bench/go-probe-hits.js [rounds=3] [ops=200000] [other tree's root]
 */
import { execFileSync, spawn, type ChildProcess } from 'node:child_process';
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { startBenchAgent } from './agent-process';
import { cpuUs, median, programStats, range } from './server-load';
import { withBpfStats } from './bpf-stats';

const ROOT = path.join(__dirname, '..', '..');
const SPAWNER = path.join(ROOT, 'test', 'support', 'runtimes', 'go-spawner.go');
const rounds = Number(process.argv[2] ?? 3);
const ops = Number(process.argv[3] ?? 200_000);
const trees = { 'this tree': ROOT, ...(process.argv[4] ? { [process.argv[4]]: process.argv[4] } : {}) };
const COMMANDS = ['spawn', 'poll', 'recv'] as const;

const isGoUprobe = (name: string) => name.startsWith('go_') && name !== 'go_process_exec';

interface Spawner {
  child: ChildProcess;
  run(command: string): Promise<void>;
}

async function start(binary: string): Promise<Spawner> {
  const child = spawn(binary, [], { stdio: ['pipe', 'pipe', 'inherit'] });
  let out = '';
  let waiting: (() => void) | undefined;
  child.stdout!.on('data', (d: Buffer) => {
    out += d.toString();
    if (out.endsWith('\n')) waiting?.();
  });
  const line = () => new Promise<void>((resolve) => (waiting = resolve));
  await line();
  return {
    child,
    async run(command) {
      const done = line();
      child.stdin!.write(`${command}\n`);
      await done;
    },
  };
}

interface Sample {
  cpuNs: number;
  runs: number;
  bpfNs: number;
}

/** One command's cost per op in a fresh spawner, followed by the agent of `tree` unless undefined. */
async function measure(binary: string, tree: string | undefined, command: string): Promise<Sample> {
  const spawner = await start(binary);
  const agent = tree
    ? await startBenchAgent(tree, ['--pid', String(spawner.child.pid), '--filter-transactions'])
    : undefined;
  try {
    if (agent) {
      const deadline = Date.now() + 90_000;
      while (!agent.output().includes(`goroutines of ${binary} (`)) {
        if (Date.now() > deadline)
          throw new Error(`the agent of ${tree} did not follow the program:\n${agent.output()}`);
        await new Promise((r) => setTimeout(r, 100));
      }
    }
    const before = agent ? programStats(agent.pid, isGoUprobe) : { runs: 0, ns: 0 };
    const cpu = cpuUs(spawner.child.pid!);
    await spawner.run(`${command} ${ops}`);
    const cpuNs = (cpuUs(spawner.child.pid!) - cpu) * 1000;
    const after = agent ? programStats(agent.pid, isGoUprobe) : { runs: 0, ns: 0 };
    return {
      cpuNs: cpuNs / ops,
      runs: (after.runs - before.runs) / ops,
      bpfNs: (after.ns - before.ns) / ops,
    };
  } finally {
    spawner.child.kill();
    await agent?.stop();
  }
}

async function main(): Promise<void> {
  const dir = fs.mkdtempSync(path.join(os.tmpdir(), 'kreplay-go-hits-'));
  const binary = path.join(dir, 'go-spawner');
  execFileSync('go', ['build', '-o', binary, SPAWNER], {
    env: { ...process.env, GOCACHE: path.join(dir, 'cache'), GO111MODULE: 'off' },
  });
  const ways = { 'no agent': undefined, ...trees };
  const samples = new Map<string, Sample[]>();
  try {
    for (let round = 0; round < rounds; round++) {
      for (const command of COMMANDS) {
        for (const [way, tree] of Object.entries(ways)) {
          const key = `${command}\t${way}`;
          samples.set(key, [...(samples.get(key) ?? []), await measure(binary, tree, command)]);
        }
      }
    }
  } finally {
    fs.rmSync(dir, { recursive: true, force: true });
  }
  console.log(`load average after the rounds: ${os.loadavg()[0]!.toFixed(1)}`);
  console.log('| op | agent | CPU ns/op | added ns/op | Go uprobe runs/op | BPF ns/op | added ns/hit |');
  console.log('| --- | --- | --- | --- | --- | --- | --- |');
  for (const command of COMMANDS) {
    const anchor = samples.get(`${command}\tno agent`)!;
    for (const way of Object.keys(ways)) {
      const s = samples.get(`${command}\t${way}`)!;
      const added = s.map((x, i) => x.cpuNs - anchor[i]!.cpuNs);
      const runs = median(s.map((x) => x.runs));
      const perHit =
        runs > 0
          ? range(
              added.map((a, i) => a / s[i]!.runs),
              0,
            )
          : '';
      console.log(
        `| ${command} | ${way} | ${range(
          s.map((x) => x.cpuNs),
          0,
        )} | ${way === 'no agent' ? '' : range(added, 0)} | ` +
          `${runs.toFixed(2)} | ${median(s.map((x) => x.bpfNs)).toFixed(0)} | ${perHit} |`,
      );
    }
  }
}

// bpf_stats on for the bench's run only (bench/bpf-stats.ts)
withBpfStats(main).catch((err: unknown) => {
  console.error(err);
  process.exit(1);
});
