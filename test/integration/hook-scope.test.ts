/**
 * Which processes the agent hooks (docs/operate.md "Runtime processes"), with a real agent and
 * Debian's python3: by default only processes that serve (a listening TCP socket) and their
 * children, so a host's Python tool is never ptraced; --hook-exclude and --hook-include choose
 * otherwise; a bad selector stops the agent naming it. Every process left out is said once.
 */
import { execFile, type ChildProcess } from 'node:child_process';
import { mkdtempSync, rmSync, symlinkSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { promisify } from 'node:util';
import { KREPLAY_BIN, startAgent, type AgentProcess } from '../support/agent-process';
import { createCgroup, serverInCgroup, type TestCgroup } from '../support/cgroup';
import { hookableEnv, pythonHookLine } from '../support/request-accuracy';
import { waitFor } from '../support/wait';

let dir: string;
let cgroup: TestCgroup;
const children: ChildProcess[] = [];
/** the servers' workers: killed by pid at the end */
const workers: number[] = [];

/** A Python program that serves nothing: reads its stdin (here: nothing comes) after printing 0. */
const TOOL = 'import sys, time\nprint(0, flush=True)\ntime.sleep(120)';
/** A server that starts a worker (descriptors closed: it holds no socket) and prints the worker's pid. */
const SERVER = [
  'import socket, subprocess, sys, time',
  's = socket.socket()',
  's.bind(("127.0.0.1", 0))',
  's.listen()',
  'w = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(120)"], close_fds=True, stdout=subprocess.DEVNULL)',
  'print(w.pid, flush=True)',
  'time.sleep(120)',
].join('\n');

async function python(code: string, command = '/usr/bin/python3'): Promise<{ pid: number; line: number }> {
  const { child, port } = await serverInCgroup(cgroup, command, ['-c', code], {
    env: hookableEnv(),
    children,
  });
  return { pid: child.pid!, line: port };
}

beforeAll(() => {
  dir = mkdtempSync(join(tmpdir(), 'kreplay-hook-scope-'));
  cgroup = createCgroup(`kreplay-hook-scope-${process.pid}`);
});

afterAll(() => {
  for (const c of children) c.kill('SIGKILL');
  for (const pid of workers) {
    try {
      process.kill(pid, 'SIGKILL');
    } catch {
      // gone
    }
  }
  try {
    cgroup.remove();
  } catch {
    // a straggler still exiting
  }
  rmSync(dir, { recursive: true, force: true });
});

/** The agent's line about process `pid` leaving it out of the hooks' scope. */
function leftOut(agent: AgentProcess, pid: number): Promise<string> {
  const pattern = new RegExp(`^.*left a Python process unhooked for now: (.*) pid=${pid}\\b.*$`, 'm');
  return waitFor(() => pattern.exec(agent.output())?.[1], {
    timeoutMs: 20_000,
    what: `scope line of ${pid}`,
  });
}

describe('the runtime hooks scope (real agent, real python3)', () => {
  it('hooks a server and its worker, and neither a tool that serves nothing nor what --hook-exclude names', async () => {
    // a comm of its own: exec'd through a symlink of that name
    symlinkSync('/usr/bin/python3', join(dir, 'krscope-excl'));
    const tool = await python(TOOL);
    const server = await python(SERVER);
    const worker = server.line;
    workers.push(worker);
    const excluded = await python(SERVER, join(dir, 'krscope-excl'));
    workers.push(excluded.line);
    const agent = await startAgent([
      '--data-dir',
      join(dir, 'data'),
      '--include',
      `cgroup-id:${cgroup.id}`,
      '--hook-exclude',
      'comm:krscope-excl',
    ]);
    try {
      expect(await pythonHookLine(agent, server.pid)).toMatch(/queued the Python hook/);
      expect(await pythonHookLine(agent, worker)).toMatch(/queued the Python hook/);
      expect(await leftOut(agent, tool.pid)).toBe(
        'it serves nothing (no listening TCP socket of its own nor of its parent): the default scope hooks servers and their children; --hook-include widens it',
      );
      expect(await leftOut(agent, excluded.pid)).toBe('--hook-exclude comm:krscope-excl names it');
      // its worker runs the same program (sys.executable: the symlink), so the same comm: excluded too
      expect(await leftOut(agent, excluded.line)).toBe('--hook-exclude comm:krscope-excl names it');
      // a few scans more: the tool is still never hooked, and was said once
      const scans = (agent.output().match(/rate\/s/g) ?? []).length;
      await waitFor(() => (agent.output().match(/rate\/s/g) ?? []).length >= scans + 3, {
        timeoutMs: 20_000,
      });
      const out = agent.output();
      for (const pid of [tool.pid, excluded.pid, excluded.line]) {
        expect(out).not.toMatch(new RegExp(`queued the Python hook.* pid=${pid}\\b`));
        expect(out.match(new RegExp(`unhooked for now: .* pid=${pid}\\b`, 'g'))).toHaveLength(1);
      }
    } finally {
      expect(await agent.stop()).toBe(0);
    }
  });

  it('with --hook-include, hooks what it names, a tool included, and nothing else', async () => {
    const tool = await python(TOOL);
    const other = await python(SERVER);
    workers.push(other.line);
    const agent = await startAgent([
      '--data-dir',
      join(dir, 'data-include'),
      '--include',
      `cgroup-id:${cgroup.id}`,
      '--hook-include',
      `pid:${tool.pid}`,
    ]);
    try {
      expect(await pythonHookLine(agent, tool.pid)).toMatch(/queued the Python hook/);
      expect(await leftOut(agent, other.pid)).toBe('no --hook-include names it');
    } finally {
      expect(await agent.stop()).toBe(0);
    }
  });

  it('refuses a bad hook selector, naming it', async () => {
    const run = promisify(execFile)(process.execPath, [
      KREPLAY_BIN,
      'agent',
      '--data-dir',
      join(dir, 'bad'),
      '--hook-include',
      'exe:python3',
    ]);
    await expect(run).rejects.toMatchObject({
      stderr: expect.stringContaining('"exe:python3": an executable is an absolute path') as unknown,
    });
  });
});
