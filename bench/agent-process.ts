/**
 * The `kreplay agent` that users run, as its own process, for benchmarks:
 * started on a scratch data dir, its CPU read from /proc (user and system,
 * every thread), its progress read from its status lines.
 */
import { spawn, type ChildProcess } from 'node:child_process';
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { lastStatusTotals } from '../agent/status';

const CLOCK_TICKS = 100; // sysconf(_SC_CLK_TCK) on Linux

export interface AgentCpu {
  userS: number;
  systemS: number;
}

export interface BenchAgent {
  pid: number;
  cpu(): AgentCpu;
  /** resident memory now (VmRSS), bytes */
  rssBytes(): number;
  /** everything it printed so far (status lines included) */
  output(): string;
  /** resolves once stored + dropped (every reason) reach `events` */
  caughtUp(events: number, timeoutMs?: number): Promise<{ stored: number; dropped: number }>;
  stop(): Promise<void>;
}

export async function startBenchAgent(root: string, args: string[]): Promise<BenchAgent> {
  const dataDir = fs.mkdtempSync(path.join(os.tmpdir(), 'kreplay-bench-agent-'));
  // the command users run, whose runtime flags are the agent's (bin/kreplay)
  const child: ChildProcess = spawn(
    path.join(root, 'bin', 'kreplay'),
    [
      'agent',
      ...['--data-dir', dataDir, '--node', 'bench', '--status-interval', '1', '--max-store-bytes', '0'],
      ...['--log-format', 'text'],
      ...args,
    ],
    { stdio: ['ignore', 'pipe', 'pipe'] },
  );
  let output = '';
  child.stdout!.on('data', (chunk: Buffer) => (output += chunk.toString()));
  child.stderr!.on('data', (chunk: Buffer) => (output += chunk.toString()));
  const exited = new Promise<void>((resolve) => child.once('exit', () => resolve()));
  const deadline = Date.now() + 60_000;
  while (!output.includes(' capturing ')) {
    if (child.exitCode !== null || Date.now() > deadline) throw new Error(`agent did not start:\n${output}`);
    await new Promise((r) => setTimeout(r, 50));
  }
  const pid = child.pid!;
  return {
    pid,
    cpu() {
      const fields = fs.readFileSync(`/proc/${pid}/stat`, 'utf8').split(') ')[1]!.split(' ');
      return { userS: Number(fields[11]) / CLOCK_TICKS, systemS: Number(fields[12]) / CLOCK_TICKS };
    },
    output: () => output,
    rssBytes() {
      const kib = /^VmRSS:\s+(\d+) kB/m.exec(fs.readFileSync(`/proc/${pid}/status`, 'utf8'));
      return kib ? Number(kib[1]) * 1024 : 0;
    },
    async caughtUp(events, timeoutMs = 120_000) {
      const until = Date.now() + timeoutMs;
      for (;;) {
        const now = lastStatusTotals(output);
        if (now && now.stored + now.dropped >= events) return { stored: now.stored, dropped: now.dropped };
        if (Date.now() > until) throw new Error(`agent did not catch up with ${events} events:\n${output}`);
        await new Promise((r) => setTimeout(r, 100));
      }
    },
    async stop() {
      child.kill('SIGTERM');
      await exited;
      fs.rmSync(dataDir, { recursive: true, force: true });
    },
  };
}
