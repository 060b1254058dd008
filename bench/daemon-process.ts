/**
 * The real `kreplay daemon` as its own process, as deployed, for the
 * benchmarks and tests that ask it over HTTP. It logs a line per request, as deployed: to a file here, as
 * journald would take them, not to a pipe the bench may not read while wrk
 * or sqlite3 runs synchronously (a full pipe would block the daemon).
 */
import { spawn, type ChildProcess } from 'node:child_process';
import { closeSync, openSync, readFileSync } from 'node:fs';
import { join } from 'node:path';
import { repoRoot } from '../core/repo-root';

/** How long a daemon may take to listen (a loaded machine, a large data dir) before it is called stuck. */
const START_TIMEOUT_MS = 60_000;

export interface DaemonProcess {
  child: ChildProcess;
  url: string;
  /** SIGTERM, and resolves once it has exited (it writes its sessions file as it stops) */
  stop(): Promise<void>;
}

/**
 * `args`: the daemon's flags (--data-dir at least); `logFile`: where its log
 * lines go; `root`: the checkout whose build runs (another build's, to
 * compare two in one bench); `wrapper`: an argv that execs the daemon (e.g.
 * as another user), so that its pid is the daemon's.
 */
export async function startDaemonProcess(
  args: string[],
  logFile: string,
  root = repoRoot(),
  wrapper: string[] = [],
): Promise<DaemonProcess> {
  const fd = openSync(logFile, 'w');
  const argv = [
    ...wrapper,
    process.execPath,
    join(root, 'bin', 'kreplay.js'),
    'daemon',
    '--port',
    '0',
    '--log-format',
    'text',
    ...args,
  ];
  const child = spawn(argv[0]!, argv.slice(1), { stdio: ['ignore', 'ignore', fd] });
  closeSync(fd);
  const exited = new Promise<void>((resolve) => child.once('exit', () => resolve()));
  const stop = async () => {
    if (child.exitCode === null) child.kill('SIGTERM');
    await exited;
  };
  const deadline = Date.now() + START_TIMEOUT_MS;
  for (;;) {
    const text = readFileSync(logFile, 'utf8');
    const url = /listening url=(\S+)/.exec(text)?.[1];
    if (url) return { child, url, stop };
    if (child.exitCode !== null) throw new Error(`daemon exited ${child.exitCode}: ${text}`);
    if (Date.now() > deadline) {
      child.kill('SIGKILL');
      throw new Error(`daemon not listening after ${START_TIMEOUT_MS} ms: ${text}`);
    }
    await new Promise((resolve) => setTimeout(resolve, 50));
  }
}
