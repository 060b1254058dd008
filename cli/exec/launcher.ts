/**
 * The build under test, started through build/kreplay-exec (native/exec/launcher):
 * the launcher hands over the seccomp listener and CMD's pid on a socket, runs
 * CMD once told the transaction to mark, and reports CMD's wait status there.
 */
import { spawn, type ChildProcess } from 'node:child_process';
import fs from 'node:fs';
import net from 'node:net';
import os from 'node:os';
import path from 'node:path';
import { KreplayError } from '../../core/errors';
import { nativeAddon } from '../../core/native/addon';
import { repoRoot } from '../../core/repo-root';

/** How long the launcher may take to install its filter and hand the listener over. */
const HANDOFF_TIMEOUT_MS = 10_000;

/** What the launcher's seccomp(SECCOMP_FILTER_FLAG_NEW_LISTENER) failing with `errno` means, as said to the user. */
export function seccompUnavailable(errno: number): KreplayError {
  const name = Object.entries(os.constants.errno).find(([, n]) => n === errno)?.[0] ?? `errno ${errno}`;
  return new KreplayError(
    'E_EXEC_SECCOMP',
    `replay needs seccomp user notification, and seccomp(SECCOMP_SET_MODE_FILTER, SECCOMP_FILTER_FLAG_NEW_LISTENER) failed with ${name}: ` +
      (name === 'EPERM' || name === 'EACCES'
        ? "this system's or container's seccomp profile forbids it (podman's and Docker's default profiles allow it)"
        : 'this kernel lacks it (Linux 5.0 or later has it)') +
      '; nothing can be held, so the build was not run',
  );
}

export interface BuildExit {
  /** CMD's exit status, 128 + N when signal N killed it */
  status: number;
  /** the signal's name when one killed it */
  signal: string | null;
}

/** CMD as `kreplay-exec` runs it: a path, or a name found on PATH. Throws when there is nothing to run. */
export function resolveCommand(name: string): string {
  const candidates = name.includes('/')
    ? [name]
    : (process.env.PATH ?? '').split(':').map((dir) => path.join(dir || '.', name));
  for (const file of candidates) {
    try {
      fs.accessSync(file, fs.constants.X_OK);
      if (fs.statSync(file).isFile()) return file;
    } catch {
      // next candidate
    }
  }
  throw new Error(`cannot run ${name}: ${name.includes('/') ? 'no such executable' : 'not found on PATH'}`);
}

/** A command line as one string a shell would read back the same. */
export function commandLine(argv: readonly string[]): string {
  return argv.map((a) => (/^[\w@%+=:,./-]+$/.test(a) ? a : `'${a.replace(/'/g, `'\\''`)}'`)).join(' ');
}

function waitStatus(raw: number): BuildExit {
  const signal = raw & 0x7f;
  if (signal === 0) return { status: (raw >> 8) & 0xff, signal: null };
  const name = Object.entries(os.constants.signals).find(([, n]) => n === signal)?.[0];
  return { status: 128 + signal, signal: name ?? `signal ${signal}` };
}

export class LaunchedBuild {
  /** CMD's pid (the launcher's child) */
  readonly pid: number;
  /** CMD's exit, or a failure of the launcher itself */
  readonly exited: Promise<BuildExit>;
  private socket: net.Socket | null = null;
  private statusText = '';
  private launcherDone = false;

  private constructor(
    private readonly launcher: ChildProcess,
    private readonly socketFd: number,
  ) {
    try {
      const hello = nativeAddon().receiveMessage(socketFd, HANDOFF_TIMEOUT_MS);
      const pid = /^pid (\d+)\n$/.exec(hello.text);
      if (!pid) throw new Error(`the launcher said ${JSON.stringify(hello.text)} instead of its pid`);
      this.pid = Number(pid[1]);
    } catch (err) {
      this.kill();
      fs.closeSync(socketFd);
      throw err;
    }
    this.exited = new Promise((resolve, reject) => {
      launcher.once('exit', (code, signal) => {
        this.launcherDone = true;
        const settle = () => {
          const status = /^status (\d+)\n/.exec(this.statusText);
          if (status) resolve(waitStatus(Number(status[1])));
          else
            reject(
              new Error(
                `the launcher of the build failed (${signal ?? `exit ${code}`}); see its message above`,
              ),
            );
        };
        // the status line may still be on its way when the exit is seen
        if (this.socket && !this.socket.closed) this.socket.once('close', settle);
        else settle();
      });
    });
    // reported through `exited`; never an unhandled rejection while nobody waits yet
    this.exited.catch(() => undefined);
  }

  /** Starts the launcher; its child tells its pid and waits for markAs(). */
  static start(argv: readonly string[]): LaunchedBuild {
    const launcherPath = path.join(repoRoot(), 'build', 'kreplay-exec');
    if (!fs.existsSync(launcherPath))
      throw new Error(`the launcher ${launcherPath} is not built: run \`make build\``);
    const [ours, theirs] = nativeAddon().execSocketPair();
    let launcher: ChildProcess;
    try {
      launcher = spawn(launcherPath, [String(process.pid), ...argv], {
        stdio: ['inherit', 'inherit', 'inherit', theirs],
      });
    } finally {
      fs.closeSync(theirs);
    }
    return new LaunchedBuild(launcher, ours);
  }

  /** The child marks itself as `transactionId`, installs the filter and hands over its listener fd. */
  markAs(transactionId: string): number {
    fs.writeSync(this.socketFd, `txn ${transactionId}\n`);
    const message = nativeAddon().receiveMessage(this.socketFd, HANDOFF_TIMEOUT_MS);
    // the launcher's own status line may come in the same read
    const refused = /^no-listener (\d+)\n/.exec(message.text);
    if (refused) throw seccompUnavailable(Number(refused[1]));
    if (message.text !== 'listener\n' || message.fd < 0)
      throw new KreplayError(
        'E_EXEC_HANDOFF',
        `the launcher said ${JSON.stringify(message.text)} instead of handing over its listener`,
      );
    return message.fd;
  }

  /** CMD starts. */
  go(): void {
    fs.writeSync(this.socketFd, 'go\n');
    this.socket = new net.Socket({ fd: this.socketFd, readable: true, writable: false });
    this.socket.on('data', (chunk) => (this.statusText += chunk.toString()));
    this.socket.on('error', () => undefined);
  }

  /** SIGTERM to CMD, as Ctrl-C asks. */
  terminate(): void {
    try {
      process.kill(this.pid, 'SIGTERM');
    } catch {
      // already gone
    }
  }

  /** Ends CMD and everything it started (the launcher SIGKILLs the tree on SIGTERM). */
  kill(): void {
    if (!this.launcherDone) this.launcher.kill('SIGTERM');
  }

  /** Our end of the socket, when go() never came. */
  release(): void {
    if (!this.socket) fs.closeSync(this.socketFd);
  }
}
