/** `kreplay up`: the flags of both commands reach the right child, and a child's death is told and stops the other. */
import { spawn, type ChildProcess } from 'node:child_process';
import { existsSync, mkdtempSync, readFileSync, rmSync } from 'node:fs';
import { createServer, type AddressInfo, type Server } from 'node:net';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { KREPLAY_BIN } from '../support/agent-process';
import { waitFor } from '../support/wait';

let dir: string;
const started: ChildProcess[] = [];

beforeAll(() => {
  dir = mkdtempSync(join(tmpdir(), 'kreplay-up-'));
});

afterAll(() => {
  for (const child of started) if (child.exitCode === null) child.kill('SIGKILL');
  rmSync(dir, { recursive: true, force: true });
});

interface Up {
  child: ChildProcess;
  stderr(): string;
  exited: Promise<number | null>;
  pids(): Promise<{ agent: number; daemon: number }>;
}

function startUp(args: string[]): Up {
  const child = spawn(process.execPath, [KREPLAY_BIN, 'up', '--log-format', 'text', ...args], {
    stdio: ['ignore', 'pipe', 'pipe'],
  });
  started.push(child);
  let stderr = '';
  child.stderr!.on('data', (chunk: Buffer) => (stderr += chunk.toString()));
  child.stdout!.resume();
  const exited = new Promise<number | null>((resolve) => child.once('close', (code) => resolve(code)));
  return {
    child,
    stderr: () => stderr,
    exited,
    pids: () =>
      waitFor(() => {
        const match = /agent pid (\d+), daemon pid (\d+)/.exec(stderr);
        return match ? { agent: Number(match[1]), daemon: Number(match[2]) } : undefined;
      }),
  };
}

/** A child's arguments after the script, once bin/kreplay (which `up` starts it by) has exec'd Node. */
const argvOf = (pid: number): Promise<string[]> =>
  waitFor(
    () => {
      const argv = readFileSync(`/proc/${pid}/cmdline`, 'utf8').split('\0');
      const script = argv.findIndex((arg) => arg.endsWith('kreplay.js'));
      return script === -1 ? undefined : argv.slice(script + 1);
    },
    { what: `pid ${pid} running Node` },
  );
const alive = (pid: number): boolean =>
  existsSync(`/proc/${pid}`) && !/^State:\s+Z/m.test(readFileSync(`/proc/${pid}/status`, 'utf8'));

function freePort(): Promise<{ port: number; server: Server }> {
  return new Promise((resolve) => {
    const server = createServer();
    server.listen(0, '127.0.0.1', () => resolve({ port: (server.address() as AddressInfo).port, server }));
  });
}

/** A port nothing listens on (the daemon takes it). */
async function unusedPort(): Promise<number> {
  const { port, server } = await freePort();
  await new Promise((resolve) => server.close(resolve));
  return port;
}

describe('kreplay up', () => {
  it('gives each child the flags it defines, and stops both on SIGTERM', async () => {
    const data = join(dir, 'flags');
    const port = await unusedPort();
    const agentFlags = ['--node', 'upnode', '--quiet', '--comm', 'nothing-here'];
    const daemonFlags = ['--port', String(port), '--session-ttl', '5'];
    const repeated = ['--allowed-host', 'a.example', '--allowed-host', 'b.example'];
    const up = startUp(['--data-dir', data, ...agentFlags, ...daemonFlags, ...repeated]);
    const pids = await up.pids();
    expect(await argvOf(pids.agent)).toEqual([
      'agent',
      '--log-format',
      'text',
      '--data-dir',
      data,
      ...agentFlags,
      '',
    ]);
    expect(await argvOf(pids.daemon)).toEqual([
      'daemon',
      '--log-format',
      'text',
      '--data-dir',
      data,
      ...daemonFlags,
      ...repeated,
      '',
    ]);
    await waitFor(
      async () =>
        (await fetch(`http://127.0.0.1:${port}/healthz`).catch(() => null))?.ok ? true : undefined,
      30000,
    );
    await waitFor(() => (existsSync(join(data, 'upnode.db')) ? true : undefined), 30000);
    up.child.kill('SIGTERM');
    expect(await up.exited).toBe(0);
    expect(alive(pids.agent)).toBe(false);
    expect(alive(pids.daemon)).toBe(false);
    expect(up.stderr()).not.toMatch(/kreplay up: the (agent|daemon)/);
  });

  it('names the daemon that died, its code and last stderr lines, and stops the agent', async () => {
    const { port, server } = await freePort(); // held: the daemon cannot listen there
    try {
      const up = startUp([
        '--data-dir',
        join(dir, 'daemon-dies'),
        '--node',
        'upd',
        '--quiet',
        '--port',
        String(port),
      ]);
      const pids = await up.pids();
      expect(await up.exited).toBe(1);
      expect(up.stderr()).toMatch(
        new RegExp(`kreplay up: the daemon \\(pid ${pids.daemon}\\) exited with code 1; stopping the agent`),
      );
      expect(up.stderr()).toMatch(/its last lines on stderr:\n( {2}\| .*\n)* {2}\| .*EADDRINUSE/);
      expect(alive(pids.agent)).toBe(false);
    } finally {
      server.close();
    }
  });

  it('names the agent killed by a signal, and stops the daemon', async () => {
    const data = join(dir, 'agent-dies');
    const port = await unusedPort();
    const up = startUp([
      '--data-dir',
      data,
      '--node',
      'upa',
      '--port',
      String(port),
      '--status-interval',
      '1',
    ]);
    const pids = await up.pids();
    await waitFor(() => (/\[agent\] capturing/.test(up.stderr()) ? true : undefined), 30000);
    process.kill(pids.agent, 'SIGKILL');
    expect(await up.exited).toBe(128 + 9);
    expect(up.stderr()).toMatch(
      new RegExp(`kreplay up: the agent \\(pid ${pids.agent}\\) was killed by SIGKILL; stopping the daemon`),
    );
    expect(up.stderr()).toMatch(
      /its last lines on stderr:\n( {2}\| .*\n)* {2}\| .*\[agent\] (capturing|rate\/s)/,
    );
    expect(alive(pids.daemon)).toBe(false);
  });
});
