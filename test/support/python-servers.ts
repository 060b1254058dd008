/**
 * The Python servers people deploy (gunicorn, uWSGI, uvicorn; Flask, FastAPI, Django), started the
 * ordinary way in a test cgroup beside a real agent, and scored as users would: each request's
 * writes are named by its x-request-id (test/support/runtimes/wsgi_app.py, asgi_app.py,
 * django_asgi.py) and must carry its transaction, at each concurrency, keep-alive and not.
 */
import { spawn, type ChildProcess } from 'node:child_process';
import { mkdirSync, mkdtempSync, rmSync } from 'node:fs';
import { createServer, type Server } from 'node:http';
import type { AddressInfo } from 'node:net';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import {
  accepts,
  argsFor,
  freePort,
  processTree,
  PYTHON_APPS,
  type ServerCommand,
} from '../../bench/python-server-commands';
import { startAgent, type AgentProcess } from './agent-process';
import { createCgroup, type TestCgroup } from './cgroup';
import {
  hookableEnv,
  httpLoad,
  pythonHookLine,
  scoreWrites,
  writesUnder,
  type Accuracy,
} from './request-accuracy';
import { waitFor } from './wait';

export const LEVELS = [1, 8, 64, 256];
export const PER_LEVEL = 256;

export interface PythonServer {
  child: ChildProcess;
  port: number;
  /** where its requests write */
  out: string;
}

export const formatScore = (s: Accuracy) => `${s.correct}/${s.wrong}/${s.none}/${s.missing}`;

/** The goal: at least 99.9% correct, none wrong, none missing. */
export function isGoal(s: Accuracy, total: number): boolean {
  return s.correct >= 0.999 * total && s.wrong === 0 && s.missing === 0;
}

export class PythonServers {
  dir = '';
  store = '';
  cgroup!: TestCgroup;
  agent!: AgentProcess;
  upstreamPort = 0;
  private upstream!: Server;
  private readonly children: ChildProcess[] = [];

  /** The agent, following the test cgroup (`hook`: the hook on, the default, or off). */
  async start(name: string, hook = true): Promise<void> {
    this.dir = mkdtempSync(join(tmpdir(), `kreplay-${name}-`));
    this.store = join(this.dir, 'data', 'py.db');
    this.cgroup = createCgroup(`kreplay-${name}-${process.pid}`);
    // the upstream lives in this process, outside the servers' cgroup: its events are not captured
    this.upstream = createServer((_req, res) => res.end('upstream'));
    await new Promise<void>((resolve) => this.upstream.listen(0, '127.0.0.1', resolve));
    this.upstreamPort = (this.upstream.address() as AddressInfo).port;
    this.agent = await startAgent([
      '--data-dir',
      join(this.dir, 'data'),
      '--node',
      'py',
      '--cgroup-id',
      String(this.cgroup.id),
      ...(hook ? [] : ['--no-python-hook']),
    ]);
  }

  async stop(): Promise<void> {
    for (const c of this.children) c.kill('SIGKILL');
    // one a signal ended (a server without a SIGTERM handler) has no exit code: its exit was seen
    await Promise.all(
      this.children.map(
        (c) =>
          c.exitCode === null && c.signalCode === null && new Promise((resolve) => c.once('exit', resolve)),
      ),
    );
    await this.agent?.stop();
    this.upstream?.close();
    this.upstream?.closeAllConnections();
    this.cgroup?.remove();
    rmSync(this.dir, { recursive: true, force: true });
  }

  /**
   * Runs `server` in the cgroup, in test/support/runtimes, with KR_OUT (a directory of its own) and
   * KR_UPSTREAM set (`upstreamPort`: another upstream's than this process's); resolves once it
   * accepts connections and the agent queued the hook into each of its processes.
   */
  async serve(name: string, server: ServerCommand, upstreamPort = this.upstreamPort): Promise<PythonServer> {
    const out = join(this.dir, name);
    mkdirSync(out);
    const port = await freePort();
    const child = spawn(
      '/bin/sh',
      ['-c', `${this.cgroup.enter} "$@"`, 'sh', server.command, ...argsFor(server, port)],
      {
        stdio: ['ignore', 'ignore', 'inherit'],
        cwd: PYTHON_APPS,
        env: { ...hookableEnv(), KR_OUT: out, KR_UPSTREAM: String(upstreamPort) },
      },
    );
    this.children.push(child);
    await waitFor(() => accepts(port), { timeoutMs: 20_000, what: `${server.command} accepting on ${port}` });
    // a pre-fork server's workers are hooked as their master serves; each says so once
    for (const pid of processTree(child.pid!))
      expect(await pythonHookLine(this.agent, pid)).toMatch(/queued the Python hook/);
    return { child, port, out };
  }

  /**
   * Queued, the hook runs at the main thread's next pending-call check: requests until every one
   * of a round is followed.
   */
  async warm(server: PythonServer, path: string, files: number): Promise<void> {
    let n = 0;
    await waitFor(
      async () => {
        const prefix = `warm${n++}-`;
        // as many at once as a server has threads: its main thread (the only one that runs pending
        // calls) serves one of them too (uWSGI's threads take turns at accept)
        const ids = Array.from({ length: 32 }, (_, i) => `${prefix}${i}`);
        await httpLoad(server.port, ids, 16, { answer: 'ok', path, keepAlive: false });
        const s = scoreWrites(
          await writesUnder(this.store, server.out, prefix, ids.length * files),
          ids,
          files,
        );
        process.stdout.write(`warming ${server.out}: ${formatScore(s)}\n`);
        return s.correct === ids.length * files;
      },
      { timeoutMs: 30_000, what: 'a server whose requests are followed' },
    );
  }

  /** PER_LEVEL requests `level` at a time, each answered right, scored by their `files` writes each. */
  async measure(
    server: PythonServer,
    name: string,
    level: number,
    { path = '/', files, keepAlive }: { path?: string; files: number; keepAlive: boolean },
  ): Promise<Accuracy> {
    const prefix = `${name}-${keepAlive ? 'ka' : 'new'}-c${level}-`;
    const ids = Array.from({ length: PER_LEVEL }, (_, i) => `${prefix}r${i}`);
    await httpLoad(server.port, ids, level, { answer: 'ok', path, keepAlive });
    const s = scoreWrites(await writesUnder(this.store, server.out, prefix, PER_LEVEL * files), ids, files);
    process.stdout.write(
      `${name} at ${level} concurrent${keepAlive ? ', keep-alive' : ''}, correct/wrong/none/missing: ${formatScore(s)}\n`,
    );
    return s;
  }

  /**
   * Every level, keep-alive (up to `keepAliveUpTo` connections: a thread-per-connection server
   * serves no more at once) and not: the scores that missed the goal (none: every request followed).
   */
  async everyLevel(
    server: PythonServer,
    name: string,
    options: { path?: string; files: number; keepAliveUpTo?: number },
  ): Promise<string[]> {
    const missed: string[] = [];
    for (const keepAlive of [true, false])
      for (const level of LEVELS.filter((l) => !keepAlive || l <= (options.keepAliveUpTo ?? Infinity))) {
        const s = await this.measure(server, name, level, { ...options, keepAlive });
        if (!isGoal(s, PER_LEVEL * options.files)) {
          missed.push(`${level}${keepAlive ? ' keep-alive' : ''}: ${formatScore(s)}`);
          // what the agent lost, if anything, says why a write is missing
          process.stdout.write(`agent:\n${this.agent.output().split('\n').slice(-6).join('\n')}\n`);
        }
      }
    return missed;
  }
}
