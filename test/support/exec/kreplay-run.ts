/** `kreplay ARGS` as a child the test can watch (its stderr collected, stdout drained), optionally behind a prefix. */
import { spawn, type ChildProcess } from 'node:child_process';
import net from 'node:net';
import { KREPLAY_BIN } from '../agent-process';

/** How a child ended, and everything it printed. */
export interface Outcome {
  status: number | null;
  signal: string | null;
  stdout: string;
  stderr: string;
}

/** What kreplay said on stderr (its `kreplay: ` lines: a replay's verdict and reasons), when a run did not pass. */
export const saidOnFailure = (outcome: Pick<Outcome, 'status' | 'stderr'>): string[] =>
  outcome.status === 0 ? [] : outcome.stderr.split('\n').filter((line) => line.startsWith('kreplay: '));

export interface Run {
  child: ChildProcess;
  /** stderr so far */
  stderr(): string;
  done: Promise<Outcome>;
}

/** What a container CI runner gives a job: uid/gid 65534 (nobody), no capabilities, no new privileges. */
export const UNPRIVILEGED = [
  'setpriv',
  '--reuid',
  '65534',
  '--regid',
  '65534',
  '--clear-groups',
  '--inh-caps=-all',
  '--bounding-set=-all',
  '--no-new-privs',
  '--',
];

/** ARGV as a child, its output collected. */
export function runCommand(argv: string[], cwd?: string): Run {
  const child = spawn(argv[0]!, argv.slice(1), { stdio: ['ignore', 'pipe', 'pipe'], cwd });
  let stderr = '';
  let stdout = '';
  child.stderr!.on('data', (chunk: Buffer) => (stderr += chunk.toString()));
  child.stdout!.on('data', (chunk: Buffer) => (stdout += chunk.toString()));
  const done = new Promise<Outcome>((resolve) =>
    child.on('close', (status, signal) => resolve({ status, signal, stderr, stdout })),
  );
  return { child, stderr: () => stderr, done };
}

/** kreplay ARGS, or `prefix… node kreplay ARGS` (e.g. setpriv dropping a capability). */
export function kreplay(args: string[], prefix: string[] = [], cwd?: string): Run {
  return runCommand([...prefix, process.execPath, KREPLAY_BIN, ...args], cwd);
}

/** `kreplay replay --incident FILE --exec --report-json REPORT -- CMD`, optionally behind a prefix. */
export function replayIncident(
  incident: string,
  report: string,
  command: string[],
  prefix: string[] = [],
  cwd?: string,
): Run {
  return kreplay(
    ['replay', '--incident', incident, '--exec', '--report-json', report, '--', ...command],
    prefix,
    cwd,
  );
}

/** A loopback listener that drains what it is sent. */
export async function tcpSink(): Promise<{ port: number; close(): void }> {
  const server = net.createServer((socket) => socket.resume());
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  return { port: (server.address() as net.AddressInfo).port, close: () => server.close() };
}
