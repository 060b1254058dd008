/** A cgroup v2 directory of the test's own, so the agent can be pointed at exactly its processes. */
import { execFile, spawn, type ChildProcess } from 'node:child_process';
import { mkdirSync, readFileSync, rmdirSync, statSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';

export function cgroup2Mount(): string | null {
  for (const line of readFileSync('/proc/self/mountinfo', 'utf8').split('\n')) {
    const fields = line.split(' ');
    const dash = fields.indexOf('-');
    if (dash > 0 && fields[dash + 1] === 'cgroup2') return fields[4] ?? null;
  }
  return null;
}

export interface TestCgroup {
  path: string;
  /** the id bpf_get_current_cgroup_id() reports: the directory's inode */
  id: number;
  /** shell prefix that moves the shell into the cgroup before it execs the rest */
  enter: string;
  remove(): void;
}

export function createCgroup(name: string): TestCgroup {
  const mount = cgroup2Mount();
  if (!mount) throw new Error('no cgroup2 mount: cannot create a test cgroup');
  const path = join(mount, name);
  mkdirSync(path, { recursive: true });
  return {
    path,
    id: statSync(path).ino,
    enter: `echo $$ > ${path}/cgroup.procs && exec`,
    remove: () => {
      // nothing a test started outlives it: what is left is killed (moved to the root, a daemon's
      // worker whose master was killed ran on for good), and the directory goes once it is empty
      writeFileSync(join(path, 'cgroup.kill'), '1');
      const deadline = Date.now() + 5000;
      while (readFileSync(join(path, 'cgroup.procs'), 'utf8').trim() !== '') {
        if (Date.now() > deadline) throw new Error(`cgroup ${path}: processes left 5 s after cgroup.kill`);
        Atomics.wait(new Int32Array(new SharedArrayBuffer(4)), 0, 0, 5);
      }
      rmdirSync(path);
    },
  };
}

/** Runs a command inside the cgroup and resolves with its stdout (async: servers in the test process keep serving). */
export function runInCgroup(cgroup: TestCgroup, command: string, args: string[]): Promise<string> {
  return new Promise((resolve, reject) => {
    execFile(
      '/bin/sh',
      ['-c', `${cgroup.enter} "$@"`, 'sh', command, ...args],
      { timeout: 60000 },
      (err, stdout, stderr) =>
        err ? reject(new Error(`${command} failed: ${err.message}\n${stderr}`)) : resolve(stdout),
    );
  });
}

export interface CgroupServer {
  child: ChildProcess;
  port: number;
}

/**
 * Starts a server inside the cgroup and resolves with it and the port on the first line it prints
 * (a cluster's workers may print theirs in one chunk). `clearContext`: the test thread sent traced
 * requests (their heads set its client-side context) and a child inherits its parent's context, so
 * the server would start inside the last request; a KREPLAY-CTX marker with no id clears it first.
 */
export function serverInCgroup(
  cgroup: TestCgroup,
  command: string,
  args: string[],
  options: {
    env?: NodeJS.ProcessEnv;
    clearContext?: boolean;
    /** the test's processes to kill at its end: the child joins at its spawn, printed a port or not */
    children?: ChildProcess[];
  } = {},
): Promise<CgroupServer> {
  if (options.clearContext) writeFileSync('/dev/null', 'KREPLAY-CTX\n');
  const child = spawn('/bin/sh', ['-c', `${cgroup.enter} "$@"`, 'sh', command, ...args], {
    stdio: ['ignore', 'pipe', 'inherit'],
    env: options.env ?? process.env,
  });
  options.children?.push(child);
  return new Promise((resolve, reject) => {
    child.once('exit', (code) => reject(new Error(`${command} exited with ${code} before listening`)));
    child.stdout!.once('data', (chunk: Buffer) =>
      resolve({ child, port: Number(chunk.toString().trim().split('\n')[0]) }),
    );
  });
}
