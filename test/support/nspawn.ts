/**
 * A Debian root file system booted with `systemd-nspawn --boot`, for the system tests: systemd as
 * its PID 1, the host's tracefs, bpffs and BTF bound in, CAP_BPF and CAP_PERFMON kept (as a host
 * gives them). Commands run inside through nsenter into every namespace of its init.
 */
import { execFileSync, spawn, spawnSync, type ChildProcess } from 'node:child_process';
import { readdirSync, readFileSync } from 'node:fs';
import { join } from 'node:path';
import { waitFor } from './wait';

const ROOT = join(__dirname, '..', '..');

/** The cached rootfs (test/system/rootfs.sh), built if missing. */
export function buildRootfs(): string {
  return execFileSync(join(ROOT, 'test', 'system', 'rootfs.sh'), ['build'], {
    encoding: 'utf8',
    stdio: ['ignore', 'pipe', 'inherit'],
  }).trim();
}

/** The bind mounts and capabilities of a host that runs the agent. */
export function hostLikeArgs(): string[] {
  for (const [fs, dir] of [
    ['tracefs', '/sys/kernel/tracing'],
    ['bpf', '/sys/fs/bpf'],
  ] as const)
    if (spawnSync('mountpoint', ['-q', dir]).status !== 0) execFileSync('mount', ['-t', fs, fs, dir]);
  return [
    '--capability=CAP_BPF,CAP_PERFMON',
    // nspawn's own seccomp filter refuses these to everyone in the container, root included
    // (EPERM loading any BPF program): a host has no such filter, the units their own
    '--system-call-filter=bpf perf_event_open',
    '--bind=/sys/kernel/tracing',
    '--bind=/sys/fs/bpf',
    '--bind-ro=/sys/kernel/btf',
  ];
}

export interface CommandResult {
  status: number | null;
  stdout: string;
  stderr: string;
}

export interface Container {
  /** the container's init, as the host sees it */
  leader: number;
  /** runs `sh -c script` inside; resolves its result whatever the exit status */
  run(script: string, timeoutMs?: number): CommandResult;
  /** as run(), but throws with stderr unless it exits 0; returns stdout */
  sh(script: string, timeoutMs?: number): string;
  /** everything nspawn printed (the boot log) */
  console(): string;
  /** powers the container off and waits for nspawn to exit */
  stop(): Promise<void>;
}

/** The descendants of `pid`, read from /proc (ppid of each process). */
function descendants(pid: number): number[] {
  const parents = new Map<number, number[]>();
  for (const entry of readdirSync('/proc')) {
    if (!/^\d+$/.test(entry)) continue;
    try {
      const stat = readFileSync(`/proc/${entry}/stat`, 'utf8');
      const ppid = Number(stat.slice(stat.lastIndexOf(')') + 2).split(' ')[1]);
      parents.set(ppid, [...(parents.get(ppid) ?? []), Number(entry)]);
    } catch {
      // gone meanwhile
    }
  }
  const found: number[] = [];
  const walk = (p: number) => {
    for (const child of parents.get(p) ?? []) {
      found.push(child);
      walk(child);
    }
  };
  walk(pid);
  return found;
}

const comm = (pid: number) => {
  try {
    return readFileSync(`/proc/${pid}/comm`, 'utf8').trim();
  } catch {
    return '';
  }
};

/**
 * Boots `rootfs` as an ephemeral copy (changes vanish when it stops) named `machine`, with
 * `extraArgs` added to nspawn's (binds), and waits until systemd has finished starting up.
 */
export async function bootContainer(
  rootfs: string,
  machine: string,
  extraArgs: string[],
): Promise<Container> {
  const nspawn: ChildProcess = spawn(
    'systemd-nspawn',
    [
      '--boot',
      '--ephemeral',
      `--directory=${rootfs}`,
      `--machine=${machine}`,
      // no systemd on the host to register with or to create a scope for the container
      '--register=no',
      '--keep-unit',
      '--console=passive',
      ...hostLikeArgs(),
      ...extraArgs,
    ],
    { stdio: ['ignore', 'pipe', 'pipe'] },
  );
  let output = '';
  nspawn.stdout!.on('data', (c: Buffer) => (output += c.toString()));
  nspawn.stderr!.on('data', (c: Buffer) => (output += c.toString()));
  const exited = new Promise<void>((resolve) => nspawn.once('close', () => resolve()));

  const leader = await waitFor(
    () => {
      if (nspawn.exitCode !== null) throw new Error(`systemd-nspawn exited ${nspawn.exitCode}:\n${output}`);
      return descendants(nspawn.pid!).find((pid) => comm(pid) === 'systemd');
    },
    60000,
    100,
  );
  const run = (script: string, timeoutMs = 120000): CommandResult => {
    const out = spawnSync('nsenter', ['--target', String(leader), '--all', '--', '/bin/sh', '-c', script], {
      encoding: 'utf8',
      timeout: timeoutMs,
    });
    return { status: out.status, stdout: out.stdout, stderr: out.stderr };
  };
  const sh = (script: string, timeoutMs?: number) => {
    const out = run(script, timeoutMs);
    if (out.status !== 0)
      throw new Error(`in the container: ${script}\nexit ${out.status}: ${out.stderr}${out.stdout}`);
    return out.stdout;
  };
  // running, or degraded where a unit that needs real hardware failed: either way booted
  await waitFor(
    () => {
      const state = run('systemctl is-system-running').stdout.trim();
      return state === 'running' || state === 'degraded' ? state : undefined;
    },
    120000,
    250,
  );
  return {
    leader,
    run,
    sh,
    console: () => output,
    stop: async () => {
      if (nspawn.exitCode === null) nspawn.kill('SIGTERM'); // nspawn asks the container's systemd to power off
      const timer = setTimeout(() => nspawn.kill('SIGKILL'), 60000);
      await exited;
      clearTimeout(timer);
    },
  };
}
