/**
 * Which processes the runtime hooks go into (agent/runtimes/discovery/hook-scope.ts) and the hook
 * selectors (agent/filter/selector.ts, process-selectors.ts): the default scope (a process that
 * listens on TCP, or whose parent does) and every selector kind, with real python3 processes.
 */
import { spawn, type ChildProcess } from 'node:child_process';
import { mkdtempSync, rmSync, symlinkSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { CgroupPaths } from '../../agent/attribution/cgroup-paths';
import { readProcCgroupPaths } from '../../agent/attribution/process-info';
import { ServiceResolver } from '../../agent/attribution/service-resolver';
import { readSelectedProcess } from '../../agent/filter/process-selectors';
import { parseHookSelector, parseSelector, type Selector } from '../../agent/filter/selector';
import { HookScope, NOT_SERVING } from '../../agent/runtimes/discovery/hook-scope';
import * as listeningSockets from '../../agent/runtimes/node/listening-sockets';
import { waitFor } from '../support/wait';

const children: ChildProcess[] = [];
/** workers our children started: killed by pid at the end */
const orphans: number[] = [];
let dir: string;
beforeAll(() => (dir = mkdtempSync(join(tmpdir(), 'kreplay-hook-scope-'))));
afterAll(async () => {
  for (const pid of orphans) {
    try {
      process.kill(pid, 'SIGKILL');
    } catch {
      // gone
    }
  }
  await Promise.all(
    children.map((c) => {
      const exited = new Promise((resolve) =>
        (c.exitCode ?? c.signalCode) !== null ? resolve(null) : c.once('exit', resolve),
      );
      c.kill('SIGKILL');
      return exited;
    }),
  );
  rmSync(dir, { recursive: true, force: true });
});

/** python3 running `code` (which prints a first line once ready), its first line. */
async function python(code: string, command = '/usr/bin/python3', prefix: string[] = []) {
  const child = spawn(
    prefix[0] ?? command,
    [...prefix.slice(1), ...(prefix.length ? [command] : []), '-c', code],
    {
      stdio: ['ignore', 'pipe', 'inherit'],
    },
  );
  children.push(child);
  const line = await new Promise<string>((resolve) =>
    child.stdout!.once('data', (b: Buffer) => resolve(b.toString().trim())),
  );
  return { pid: child.pid!, line };
}

const TOOL = 'import sys, time\nprint("up", flush=True)\ntime.sleep(60)';
const SERVER =
  'import socket, time\ns = socket.socket()\ns.bind(("127.0.0.1", 0))\ns.listen()\nprint("up", flush=True)\ntime.sleep(60)';
/** A server whose child (started with its descriptors closed: it holds no socket) prints its pid. */
const SERVER_WITH_CHILD = [
  'import socket, subprocess, sys, time',
  's = socket.socket()',
  's.bind(("127.0.0.1", 0))',
  's.listen()',
  'c = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(60)"], close_fds=True, stdout=subprocess.DEVNULL)',
  'print(c.pid, flush=True)',
  'time.sleep(60)',
].join('\n');

const services = new ServiceResolver([{ service: 'kr-scope-svc', match: { comm: 'krscope-comm' } }]);
const cgroups = new CgroupPaths();

function scope(include: Selector[] | undefined, exclude: Selector[] = [], captured = () => true) {
  return new HookScope({
    include,
    exclude,
    captured,
    read: (pid) => readSelectedProcess(pid, services, cgroups),
  });
}

describe('hook scope', () => {
  it('by default hooks a server and its children, not a tool that serves nothing', async () => {
    const tool = await python(TOOL);
    const server = await python(SERVER);
    const parent = await python(SERVER_WITH_CHILD);
    const child = Number(parent.line);
    orphans.push(child);
    const s = scope(undefined);
    expect(s.check(tool.pid)).toBe(NOT_SERVING);
    expect(s.check(server.pid)).toBeNull();
    expect(s.serves(child)).toBe(false);
    expect(s.check(child)).toBeNull();
    // the capture filters come first
    expect(scope(undefined, [], () => false).check(server.pid)).toBe('the capture filters leave it out');
  });

  it("tells a server in another network namespace by its own namespace's sockets", async () => {
    const server = await python(SERVER, '/usr/bin/python3', ['/usr/bin/unshare', '-n']);
    const tool = await python(TOOL, '/usr/bin/python3', ['/usr/bin/unshare', '-n']);
    // unshare execs python3: the pid is the python's
    await waitFor(() => scope(undefined).check(server.pid) === null, { what: 'the namespaced server seen' });
    expect(scope(undefined).check(tool.pid)).toBe(NOT_SERVING);
  });

  it("reads a process's descriptors again only once a socket started listening in its namespace", async () => {
    // its own namespace: no other program's listener starts there
    const child = spawn(
      '/usr/bin/unshare',
      [
        '-n',
        '/usr/bin/python3',
        '-c',
        'import socket, sys\nprint("up", flush=True)\nsys.stdin.readline()\ns = socket.socket()\ns.bind(("127.0.0.1", 0))\ns.listen()\nprint("listening", flush=True)\nsys.stdin.readline()',
      ],
      { stdio: ['pipe', 'pipe', 'inherit'] },
    );
    children.push(child);
    await new Promise((resolve) => child.stdout!.once('data', resolve));
    const reads = jest.spyOn(listeningSockets, 'socketInodes');
    try {
      const s = scope(undefined);
      const pid = child.pid!;
      for (let i = 0; i < 3; i++) expect(s.check(pid)).toBe(NOT_SERVING);
      expect(reads.mock.calls.filter(([p]) => p === pid)).toHaveLength(1);
      child.stdin!.write('listen\n');
      await new Promise((resolve) => child.stdout!.once('data', resolve));
      await waitFor(() => s.check(pid) === null, { what: 'its new listener seen' });
      expect(reads.mock.calls.filter(([p]) => p === pid)).toHaveLength(2);
    } finally {
      reads.mockRestore();
    }
  });

  it('includes and excludes by service, cgroup, comm, exe, pid and cgroup-id', async () => {
    // a comm of our own: exec'd through a symlink of that name
    symlinkSync('/usr/bin/python3', join(dir, 'krscope-comm'));
    const named = await python(TOOL, join(dir, 'krscope-comm'));
    const other = await python(TOOL);
    const cgroupPath = readProcCgroupPaths(named.pid)!.unified!;
    const cgroupId = cgroups.idOfProcess(named.pid)!;
    const parent = cgroupPath.slice(0, cgroupPath.lastIndexOf('/')) || '/';
    const kinds: [string, boolean][] = [
      ['service:kr-scope-svc', false],
      ['comm:krscope-comm', false],
      [`pid:${named.pid}`, false],
      // the file itself under the symlink's name, or its pattern
      ['exe:/usr/bin/python3', true],
      ['exe:/usr/bin/python3.*', true],
      [`cgroup:${cgroupPath}`, true],
      [`cgroup:${parent}`, true],
      [`cgroup-id:${cgroupId}`, true],
    ];
    for (const [text, namesOtherToo] of kinds) {
      const selector = parseHookSelector(text);
      // an include hooks what it names, server or not
      expect([text, scope([selector]).check(named.pid)]).toEqual([text, null]);
      expect([text, scope([selector]).check(other.pid)]).toEqual([
        text,
        namesOtherToo ? null : 'no --hook-include names it',
      ]);
      // an exclusion wins over an include
      expect([text, scope([selector], [selector]).check(named.pid)]).toEqual([
        text,
        `--hook-exclude ${text} names it`,
      ]);
    }
    expect(scope([parseHookSelector('exe:/usr/bin/perl*')]).check(named.pid)).toBe(
      'no --hook-include names it',
    );
  });

  it('refuses a bad selector with an error naming it', () => {
    expect(() => parseHookSelector('exe:python3')).toThrow(
      '"exe:python3": an executable is an absolute path (as /proc/PID/exe names it)',
    );
    expect(() => parseHookSelector('binary:/usr/bin/python3')).toThrow(
      '"binary:/usr/bin/python3": unknown hook selector kind "binary", expected service:NAME, cgroup:PATH, comm:NAME, pid:N, cgroup-id:N, container:NAME, pod:NAME, namespace:NAME or exe:PATH',
    );
    expect(() => parseHookSelector('comm')).toThrow('"comm" is not a hook selector');
    expect(() => parseHookSelector('cgroup:system.slice')).toThrow('a cgroup path starts with /');
    expect(() => parseHookSelector('constructor:x')).toThrow('unknown hook selector kind "constructor"');
    // the kernel filter cannot tell executables: the capture's selectors have no exe
    expect(() => parseSelector('exe:/usr/bin/python3')).toThrow(
      '"exe:/usr/bin/python3": a filter cannot select by exe, expected service:NAME, cgroup:PATH, comm:NAME, pid:N, cgroup-id:N, container:NAME, pod:NAME or namespace:NAME',
    );
  });
});
