/** Runs the real `kreplay agent` binary for end-to-end tests and waits until it captures. */
import { spawn, type ChildProcess } from 'node:child_process';
import { readFileSync } from 'node:fs';
import { join } from 'node:path';
import { MAX_COMMIT_WAIT_MS } from '../../agent/commit-cadence';
import { lastStatusTotals } from '../../agent/status';

export const KREPLAY_BIN = join(__dirname, '..', '..', 'bin', 'kreplay.js');
/** the command users run: the agent's runtime flags are its (bin/kreplay) */
const KREPLAY_LAUNCHER = join(__dirname, '..', '..', 'bin', 'kreplay');

export interface AgentProcess {
  child: ChildProcess;
  output(): string;
  /** SIGTERM (or the given signal) and the exit code */
  stop(signal?: NodeJS.Signals): Promise<number | null>;
}

/**
 * Tests commit at least every 200 ms, about as they always did: a test waits for what it just
 * caused, and the kernel also sends this agent other tests' transactions (its filters keep the
 * events of excluded tasks that carry a context), a steady stream that the default would commit
 * about once a second. A test of the default passes `--max-commit-wait-ms` itself (the last wins).
 */
const TEST_COMMIT_WAIT_MS = String(MAX_COMMIT_WAIT_MS.min);

export function startAgent(args: string[], readyTimeoutMs = 30000): Promise<AgentProcess> {
  const child = spawn(
    KREPLAY_LAUNCHER,
    [
      'agent',
      '--status-interval',
      '1',
      '--log-format',
      'text',
      '--max-commit-wait-ms',
      TEST_COMMIT_WAIT_MS,
      ...args,
    ],
    {
      stdio: ['ignore', 'pipe', 'pipe'],
    },
  );
  let output = '';
  const exited = new Promise<number | null>((resolve) => child.once('exit', (code) => resolve(code)));
  return new Promise((resolve, reject) => {
    const timer = setTimeout(() => {
      // an agent left running past a failed start would keep jest (and CI) from ever exiting
      child.kill('SIGKILL');
      reject(new Error(`agent not capturing after ${readyTimeoutMs} ms:\n${output}`));
    }, readyTimeoutMs);
    const onData = (chunk: Buffer) => {
      output += chunk.toString();
      if (output.includes(' capturing ')) {
        clearTimeout(timer);
        resolve({
          child,
          output: () => output,
          stop: async (signal = 'SIGTERM') => {
            if (child.exitCode === null) child.kill(signal);
            const code = await exited;
            // an agent that ends in error says why where the failing test is read
            if (code !== 0 && code !== null)
              process.stderr.write(`agent exited with ${code}; its output ends:\n${output.slice(-4000)}\n`);
            return code;
          },
        });
      }
    };
    child.stdout!.on('data', onData);
    child.stderr!.on('data', onData);
    void exited.then((code) => {
      clearTimeout(timer);
      reject(new Error(`agent exited with ${code} before capturing:\n${output}`));
    });
  });
}

/** Events stored plus dropped (every reason) by the agent's last status line, 0 before the first. */
export function eventsHandled(output: string): number {
  const totals = lastStatusTotals(output);
  return totals ? totals.stored + totals.dropped : 0;
}

/** A process's resident memory in bytes: all of it (VmRSS) or its anonymous part. */
export function residentBytes(pid: number, field: 'RssAnon' | 'VmRSS'): number {
  const line = readFileSync(`/proc/${pid}/status`, 'utf8').match(new RegExp(`^${field}:\\s+(\\d+) kB`, 'm'));
  return Number(line![1]) * 1024;
}
