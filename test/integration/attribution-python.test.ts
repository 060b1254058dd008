/**
 * The Python hook (agent/runtimes/python/) on unmodified servers started the ordinary way with
 * Debian's python3.11 (real kernel, real agent): the agent queues the hook into each CPython process
 * its filters include, through ptrace, whether the process started before it or after; the hook
 * tells the kernel which request each asyncio task, gRPC call and pool work item serves. Ground
 * truth: each request names its files by its x-request-id. A process the hook cannot reach (opted
 * out, traced by another tracer) keeps its events unattributed, never another request's. The
 * injected process keeps answering every request, during the injection and after.
 */
import { execFile, type ChildProcess } from 'node:child_process';
import { mkdirSync, mkdtempSync, readFileSync, rmSync } from 'node:fs';
import { createServer, type Server } from 'node:http';
import type { AddressInfo } from 'node:net';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { promisify } from 'node:util';
import { startAgent, type AgentProcess } from '../support/agent-process';
import { createCgroup, serverInCgroup, type TestCgroup } from '../support/cgroup';
import {
  hookableEnv,
  httpLoad,
  pythonHookLine,
  scoreWrites,
  writesUnder,
  type Accuracy,
} from '../support/request-accuracy';
import { readStoredEvents, type StoredEvent } from '../support/store-rows';
import { waitFor } from '../support/wait';

const SUPPORT = join(__dirname, '..', 'support');
const AIOHTTP_SERVER = join(SUPPORT, 'runtimes', 'aiohttp-server.py');
const SECCOMP_EXEC = join(SUPPORT, 'runtimes', 'seccomp-exec.py');
const PER_LEVEL = 256;

let dir: string;
let store: string;
let cgroup: TestCgroup;
let agent: AgentProcess;
let metricsUrl: string;
let upstream: Server;
let upstreamPort: number;
const children: ChildProcess[] = [];
/** processes a child started that outlive it (strace's tracee): killed at the end too */
const grandchildren: number[] = [];

interface Started {
  child: ChildProcess;
  pid: number;
  port: number;
}

/**
 * Starts `command` in the test cgroup (its pid is the process's: the shell execs it), hookable (the
 * runner's opt-out lifted); resolves with the port it prints.
 */
async function serve(
  command: string,
  args: string[],
  env: NodeJS.ProcessEnv = hookableEnv(),
): Promise<Started> {
  const { child, port } = await serverInCgroup(cgroup, command, args, { env, children });
  return { child, pid: child.pid!, port };
}

const aiohttp = (out: string, env?: NodeJS.ProcessEnv) =>
  serve('/usr/bin/python3', [AIOHTTP_SERVER, out, String(upstreamPort)], env);

/** The agent's line about Python process `pid`, once it queued the hook or said why not. */
const hookLine = (pid: number) => pythonHookLine(agent, pid);
const hooked = async (pid: number) => expect(await hookLine(pid)).toMatch(/queued the Python hook/);

function killQuietly(pid: number): void {
  try {
    process.kill(pid, 'SIGKILL');
  } catch {
    // already gone
  }
}

const formatScore = (s: Accuracy) => `${s.correct}/${s.wrong}/${s.none}/${s.missing}`;

/** Sends PER_LEVEL requests `level` at a time, each answered right, and scores their writes. */
async function measure(
  port: number,
  out: string,
  name: string,
  level: number,
  files: number,
): Promise<Accuracy> {
  const ids = Array.from({ length: PER_LEVEL }, (_, i) => `${name}-c${level}-r${i}`);
  await httpLoad(port, ids, level, { answer: 'ok' });
  const s = scoreWrites(await writesUnder(store, out, `${name}-c${level}-`, PER_LEVEL * files), ids, files);
  process.stdout.write(`${name} at ${level} concurrent, correct/wrong/none/missing: ${formatScore(s)}\n`);
  return s;
}

/** The goal: at least 99.9% correct, none wrong, none missing. */
function expectGoal(s: Accuracy, total: number): void {
  const goal = s.correct >= 0.999 * total && s.wrong === 0 && s.missing === 0;
  // what the agent lost, if anything, says why a write is missing
  if (!goal) process.stdout.write(`agent:\n${agent.output().split('\n').slice(-6).join('\n')}\n`);
  expect({ ...s, goal }).toEqual({ ...s, goal: true });
}

let early: Started;
let earlyOut: string;
/** requests answered while the agent started and queued the hook into `early`; from `captured` on, their writes were captured */
let duringInjection: { sent: number; captured: number; failed: Error[] };

beforeAll(async () => {
  dir = mkdtempSync(join(tmpdir(), 'kreplay-python-'));
  store = join(dir, 'data', 'py.db');
  cgroup = createCgroup(`kreplay-python-${process.pid}`);
  // the upstream lives in this process, outside the servers' cgroup: its events are not captured
  upstream = createServer((_req, res) => res.end('upstream'));
  upstream.keepAliveTimeout = 60_000;
  await new Promise<void>((resolve) => upstream.listen(0, '127.0.0.1', resolve));
  upstreamPort = (upstream.address() as AddressInfo).port;
  // a server running before the agent starts, answering requests all the while
  earlyOut = join(dir, 'early');
  mkdirSync(earlyOut);
  early = await aiohttp(earlyOut);
  duringInjection = { sent: 0, captured: 0, failed: [] };
  let loading = true;
  const load = (async () => {
    while (loading) {
      await httpLoad(early.port, [`during-r${duringInjection.sent++}`], 1, { answer: 'ok' }).catch(
        (err: Error) => duringInjection.failed.push(err),
      );
    }
  })();
  agent = await startAgent([
    '--data-dir',
    join(dir, 'data'),
    '--node',
    'py',
    '--cgroup-id',
    String(cgroup.id),
    '--metrics-listen',
    '127.0.0.1:0',
  ]);
  metricsUrl = /serving metrics url=(\S+)/.exec(agent.output())![1]!;
  // the request under way may have begun before the capture
  duringInjection.captured = duringInjection.sent + 1;
  await hooked(early.pid);
  // a few requests after the hook was queued: the first of them runs it
  const sentAtHook = duringInjection.sent;
  await waitFor(() => duringInjection.sent >= sentAtHook + 5);
  loading = false;
  await load;
}, 120_000);

afterAll(async () => {
  for (const c of children) c.kill('SIGKILL');
  for (const pid of grandchildren) killQuietly(pid);
  await agent?.stop();
  upstream?.close();
  upstream?.closeAllConnections();
  cgroup?.remove();
  rmSync(dir, { recursive: true, force: true });
});

describe('the Python hook on unmodified servers (real kernel)', () => {
  it('an aiohttp server running before the agent: hooked without a failed answer, then every request its own writes', async () => {
    expect(duringInjection.failed).toEqual([]);
    // before the hook ran the writes were none's (the loop interleaves requests), never another's
    const { sent, captured } = duringInjection;
    const ids = Array.from({ length: sent - captured }, (_, i) => `during-r${captured + i}`);
    const ours = (e: StoredEvent) => ids.includes(e.target!.slice(earlyOut.length + 1).split('.')[0]!);
    const written = () => readStoredEvents(store, `t.value LIKE '${earlyOut}/during-%'`).filter(ours);
    const before = scoreWrites(
      await waitFor(() => written().length >= 2 * ids.length && written()).catch(() => written()),
      ids,
      2,
    );
    expect({ wrong: before.wrong, missing: before.missing }).toEqual({ wrong: 0, missing: 0 });
    expectGoal(await measure(early.port, earlyOut, 'early', 64, 2), 2 * PER_LEVEL);
  });

  it('a server restarted while the agent runs is hooked again', async () => {
    early.child.kill('SIGKILL');
    const out = join(dir, 'restarted');
    mkdirSync(out);
    const again = await aiohttp(out);
    await hooked(again.pid);
    expectGoal(await measure(again.port, out, 'again', 8, 2), 2 * PER_LEVEL);
    again.child.kill();
  });

  it('ThreadingHTTPServer: what a handler hands to a ThreadPoolExecutor (executor.submit) carries its request', async () => {
    const out = join(dir, 'threads');
    mkdirSync(out);
    const server = await serve('/usr/bin/python3', [
      join(SUPPORT, 'runtimes', 'threading-pool-server.py'),
      out,
    ]);
    await hooked(server.pid);
    for (const level of [1, 8, 64])
      expectGoal(await measure(server.port, out, 'threads', level, 2), 2 * PER_LEVEL);
    server.child.kill();
  });

  it('ThreadingHTTPServer: two calls a request through one shared LifoQueue pool of keep-alive connections: each request its own writes', async () => {
    const out = join(dir, 'shared-pool');
    mkdirSync(out);
    const server = await serve('/usr/bin/python3', [
      join(SUPPORT, 'runtimes', 'threading-shared-pool-server.py'),
      out,
      String(upstreamPort),
    ]);
    await hooked(server.pid);
    for (const level of [1, 8, 64])
      expectGoal(await measure(server.port, out, 'shared', level, 1), PER_LEVEL);
    server.child.kill();
  });

  // grpcio's handlers run on its ThreadPoolExecutor, fed by the C core's poller over one HTTP/2
  // connection: each call's unit is opened from its metadata on the pool thread that runs it
  it.each([
    ['unary', 'Unary', 1],
    ['server-streaming', 'Stream', 4],
  ])(
    'grpcio %s calls at 1, 8 and 64 at a time on one channel: each its own writes',
    async (_name, method, files) => {
      const out = join(dir, `grpc-${method}`);
      mkdirSync(out);
      const server = await serve('/usr/bin/python3', [join(SUPPORT, 'grpc-file-server.py'), out]);
      // exits 0 only when every call succeeded; each call has its x-request-id and a traceparent
      const call = (prefix: string, n: number, level: number) =>
        promisify(execFile)('/usr/bin/python3', [
          join(SUPPORT, 'grpc-client.py'),
          String(server.port),
          method,
          prefix,
          String(n),
          String(level),
        ]);
      await hooked(server.pid);
      // queued, the hook runs at the main thread's next pending-call check (grpcio's wait wakes it
      // every 0.1 s; the calls are served by other threads): calls until one is followed
      let warm = 0;
      await waitFor(async () => {
        const prefix = `warm${warm++}-`;
        await call(prefix, 1, 1);
        return (await writesUnder(store, out, prefix, 1)).some((e) => e.txn === `${prefix}0`);
      });
      for (const level of [1, 8, 64]) {
        const prefix = `g${method}-c${level}-r`;
        await call(prefix, PER_LEVEL, level);
        const ids = Array.from({ length: PER_LEVEL }, (_, i) => `${prefix}${i}`);
        const s = scoreWrites(await writesUnder(store, out, prefix, PER_LEVEL * files), ids, files);
        process.stdout.write(`grpcio ${method} at ${level}, correct/wrong/none/missing: ${formatScore(s)}\n`);
        expectGoal(s, PER_LEVEL * files);
      }
      server.child.kill();
    },
  );

  it('a server under a seccomp filter that kills at getpriority: hooked, its signals written, each request its own', async () => {
    // the hook signals through getpriority only where no filter may refuse it: here that call kills
    const out = join(dir, 'seccomp');
    mkdirSync(out);
    const server = await serve('/usr/bin/python3', [
      SECCOMP_EXEC,
      '/usr/bin/python3',
      AIOHTTP_SERVER,
      out,
      String(upstreamPort),
    ]);
    expect(readFileSync(`/proc/${server.pid}/status`, 'utf8')).toMatch(/^Seccomp:\s+2$/m);
    await hooked(server.pid);
    expectGoal(await measure(server.port, out, 'seccomp', 8, 2), 2 * PER_LEVEL);
    expect(server.child.exitCode).toBeNull();
    server.child.kill();
  });

  it('a server that opts out (KREPLAY_PYTHON_HOOK=off) is not hooked: its writes none, never wrong', async () => {
    const out = join(dir, 'opted-out');
    mkdirSync(out);
    const server = await aiohttp(out, { ...hookableEnv(), KREPLAY_PYTHON_HOOK: 'off' });
    expect(await hookLine(server.pid)).toContain('KREPLAY_PYTHON_HOOK=off in its environment');
    const s = await measure(server.port, out, 'optout', 8, 2);
    expect({ wrong: s.wrong, missing: s.missing }).toEqual({ wrong: 0, missing: 0 });
    expect(s.none).toBeGreaterThan(PER_LEVEL);
    server.child.kill();
  });

  it('a server another tracer holds (strace) is refused: logged, counted, its writes never wrong', async () => {
    const out = join(dir, 'traced');
    mkdirSync(out);
    const strace = await serve('/usr/bin/strace', [
      '-f',
      '-qq',
      '-e',
      'trace=none',
      '-o',
      '/dev/null',
      '/usr/bin/python3',
      AIOHTTP_SERVER,
      out,
      String(upstreamPort),
    ]);
    const python = Number(readFileSync(`/proc/${strace.pid}/task/${strace.pid}/children`, 'utf8').trim());
    // strace killed leaves its tracee running (holding the pipe jest reads): killed itself
    grandchildren.push(python);
    expect(await hookLine(python)).toContain(`already traced by process ${strace.pid}`);
    const s = await measure(strace.port, out, 'traced', 8, 2);
    expect({ wrong: s.wrong, missing: s.missing }).toEqual({ wrong: 0, missing: 0 });
    strace.child.kill();
    killQuietly(python);

    const metrics = await (await fetch(metricsUrl)).text();
    const count = (outcome: string) =>
      Number(
        new RegExp(
          `^kreplay_agent_runtime_hooks_total\\{runtime="python",outcome="${outcome}"\\} (\\d+)$`,
          'm',
        ).exec(metrics)?.[1],
      );
    // the server that opted out and the traced one; every other server here was hooked
    expect({ refused: count('refused'), failed: count('failed') }).toEqual({ refused: 2, failed: 0 });
    expect(count('hooked')).toBeGreaterThanOrEqual(5);
  });

  it('a hooked server serving through an agent restart: never wrong meanwhile, each request its own after', async () => {
    const out = join(dir, 'agent-restart');
    mkdirSync(out);
    const server = await aiohttp(out);
    await hooked(server.pid);
    expectGoal(await measure(server.port, out, 'first', 8, 2), 2 * PER_LEVEL);
    // the hook stays; the next agent's kernel knows nothing of the threads it put in units
    await agent.stop();
    let loading = true;
    let sent = 0;
    const load = (async () => {
      while (loading) {
        const ids = Array.from({ length: 8 }, () => `across-r${sent++}`);
        await httpLoad(server.port, ids, 8, { answer: 'ok' });
      }
    })();
    agent = await startAgent([
      '--data-dir',
      join(dir, 'data'),
      '--node',
      'py',
      '--cgroup-id',
      String(cgroup.id),
    ]);
    // from here the new agent captures; its hook is queued a moment later
    const captured = sent;
    await hooked(server.pid);
    await waitFor(() => sent >= captured + 64);
    loading = false;
    await load;
    // what the new agent captured, once stored
    const across = await waitFor(() => {
      const rows = readStoredEvents(store, `t.value LIKE '${out}/across-%'`);
      return rows.length >= 2 * 64 && rows;
    });
    // requests made while no agent ran are missing; none of those stored is another request's
    const meanwhile = scoreWrites(
      across,
      Array.from({ length: sent }, (_, i) => `across-r${i}`),
      2,
    );
    process.stdout.write(
      `across the agent restart, ${sent} requests, stored writes correct/wrong/none: ${meanwhile.correct}/${meanwhile.wrong}/${meanwhile.none}\n`,
    );
    expect(meanwhile.wrong).toBe(0);
    expect(meanwhile.correct + meanwhile.none).toBeGreaterThanOrEqual(2 * 64);
    expectGoal(await measure(server.port, out, 'second', 8, 2), 2 * PER_LEVEL);
    server.child.kill();
  });
});
