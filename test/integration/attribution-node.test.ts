/**
 * The agent's Node hook on unmodified servers started the ordinary way (real kernel, real agent,
 * the pinned Node): one started before the agent, the same restarted while it runs, a `cluster` of
 * two workers, an express app (npm) whose route parses a body, awaits and writes; each exact
 * (correct >= 99.9%, wrong 0, missing 0). And what it must leave alone: a process that opted out,
 * and one with its own SIGUSR1 listener, which is never signalled; both logged and counted, their
 * requests unattributed, never another's. The inspector a hook opened is closed again.
 */
import type { ChildProcess } from 'node:child_process';
import { existsSync, mkdirSync, mkdtempSync, readFileSync, rmSync } from 'node:fs';
import { createServer, type Server } from 'node:http';
import type { AddressInfo } from 'node:net';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { processListening } from '../../agent/runtimes/node/listening-sockets';
import { startAgent, type AgentProcess } from '../support/agent-process';
import { createCgroup, serverInCgroup, type CgroupServer, type TestCgroup } from '../support/cgroup';
import {
  hookableEnv,
  httpLoad,
  nodeHookLine,
  scoreWrites,
  writesUnder,
  type Accuracy,
  type LoadOptions,
} from '../support/request-accuracy';
import { storedCounter } from '../support/store-rows';
import { waitFor } from '../support/wait';

const RUNTIMES = join(__dirname, '..', 'support', 'runtimes');
const REQUESTS = 128;
const LEVEL = 16;

let dir: string;
let store: string;
let cgroup: TestCgroup;
let agent: AgentProcess;
let upstream: Server;
let upstreamPort: number;
/** the node-server.js started before the agent */
let early: { child: ChildProcess; port: number };
const children: ChildProcess[] = [];

/** Starts a Node program in the test cgroup, hookable unless `env` says otherwise; its first printed port. */
const node = (script: string, args: string[], env = hookableEnv()): Promise<CgroupServer> =>
  serverInCgroup(cgroup, process.execPath, [script, ...args], { env, children });

/** Sends REQUESTS requests LEVEL at a time; how their writes (files named `<name>-<i>.*`) were attributed. */
async function measure(
  name: string,
  port: number,
  out: string,
  files: number,
  load: LoadOptions = {},
): Promise<Accuracy> {
  const ids = Array.from({ length: REQUESTS }, (_, i) => `${name}-${i}`);
  await httpLoad(port, ids, LEVEL, load);
  const score = scoreWrites(await writesUnder(store, out, `${name}-`, REQUESTS * files), ids, files);
  process.stdout.write(`${name}: ${JSON.stringify(score)} of ${REQUESTS} requests, ${LEVEL} at a time\n`);
  return score;
}

function expectExact(score: Accuracy, files: number): void {
  expect({ wrong: score.wrong, missing: score.missing }).toEqual({ wrong: 0, missing: 0 });
  expect(score.correct).toBeGreaterThanOrEqual(0.999 * REQUESTS * files);
}

/** The agent on the test's cgroup (started again by the restart case, on the same store). */
const startNodeAgent = () =>
  startAgent(['--data-dir', join(dir, 'data'), '--node', 'node', '--cgroup-id', String(cgroup.id)]);

beforeAll(async () => {
  dir = mkdtempSync(join(tmpdir(), 'kreplay-node-'));
  store = join(dir, 'data', 'node.db');
  cgroup = createCgroup(`kreplay-node-${process.pid}`);
  upstream = createServer((_req, res) => res.end('upstream'));
  upstream.keepAliveTimeout = 60_000;
  await new Promise<void>((resolve) => upstream.listen(0, '127.0.0.1', resolve));
  upstreamPort = (upstream.address() as AddressInfo).port;
  mkdirSync(join(dir, 'early'));
  early = await node(join(RUNTIMES, 'node-server.js'), [join(dir, 'early'), String(upstreamPort)]);
  agent = await startNodeAgent();
});

afterAll(async () => {
  for (const c of children) c.kill('SIGKILL');
  await agent?.stop();
  upstream?.close();
  cgroup?.remove();
  rmSync(dir, { recursive: true, force: true });
});

describe('the Node hook on unmodified servers (real kernel)', () => {
  it('hooks a server started before the agent, and closes the inspector it opened', async () => {
    expect(await nodeHookLine(agent, early.child.pid!)).toMatch(/hooked a Node process/);
    // its own port only: the inspector the hook opened is closed again
    expect(processListening(early.child.pid!).map((s) => s.port)).toEqual([early.port]);
    expectExact(await measure('early', early.port, join(dir, 'early'), 2), 2);
  });

  it('hooks the same server restarted while the agent runs', async () => {
    early.child.kill();
    mkdirSync(join(dir, 'restarted'));
    const restarted = await node(join(RUNTIMES, 'node-server.js'), [
      join(dir, 'restarted'),
      String(upstreamPort),
    ]);
    expect(await nodeHookLine(agent, restarted.child.pid!)).toMatch(/hooked a Node process/);
    expectExact(await measure('restarted', restarted.port, join(dir, 'restarted'), 2), 2);
  });

  it('hooks a cluster: the primary and its two workers', async () => {
    const out = join(dir, 'cluster');
    mkdirSync(out);
    const cluster = await node(join(RUNTIMES, 'cluster-server.js'), [out, String(upstreamPort)]);
    const primary = cluster.child.pid!;
    const workers = await waitFor(() => {
      const pids = readFileSync(`/proc/${primary}/task/${primary}/children`, 'utf8').trim().split(/\s+/);
      return pids.length === 2 && pids.map(Number);
    });
    for (const pid of [primary, ...workers])
      expect(await nodeHookLine(agent, pid)).toMatch(/hooked a Node process/);
    expectExact(await measure('cluster', cluster.port, out, 2), 2);
  });

  it('follows an express route that parses a body, awaits and writes', async () => {
    const out = join(dir, 'express');
    mkdirSync(out);
    const app = await node(join(RUNTIMES, 'express-server.js'), [out]);
    expect(await nodeHookLine(agent, app.child.pid!)).toMatch(/hooked a Node process/);
    expectExact(
      await measure('express', app.port, out, 2, { path: '/orders', body: (id) => ({ item: id }) }),
      2,
    );
  });

  it('leaves a process that opted out alone: unattributed, never wrong, logged and counted', async () => {
    const out = join(dir, 'optout');
    mkdirSync(out);
    const optedOut = await node(join(RUNTIMES, 'node-server.js'), [out, String(upstreamPort)], {
      ...hookableEnv(),
      KREPLAY_NODE_HOOK: 'off',
    });
    expect(await nodeHookLine(agent, optedOut.child.pid!)).toMatch(
      /left a Node process unattributed.*opted out/,
    );
    const score = await measure('optout', optedOut.port, out, 2);
    expect({ wrong: score.wrong, missing: score.missing }).toEqual({ wrong: 0, missing: 0 });
  });

  it('never signals a process with its own SIGUSR1 listener: unattributed, never wrong, logged', async () => {
    const out = join(dir, 'sigusr1');
    mkdirSync(out);
    const own = await node(join(RUNTIMES, 'sigusr1-server.js'), [out]);
    expect(await nodeHookLine(agent, own.child.pid!)).toMatch(
      /left a Node process unattributed.*listens for SIGUSR1 itself/,
    );
    // an event loop the hook is not in: the first head it read is its thread's until a second
    // connection's comes (then none), the old rule
    const score = await measure('sigusr1', own.port, out, 1);
    expect({ wrong: score.wrong, missing: score.missing }).toEqual({ wrong: 0, missing: 0 });
    expect(score.none).toBeGreaterThanOrEqual(REQUESTS - 1);
    expect(existsSync(join(out, 'signalled'))).toBe(false);
  });

  it('counts what it did in the run', async () => {
    // stored with the status line, every second
    const reaches = (name: string, n: number) => waitFor(() => storedCounter(store, name) >= n, 10_000);
    // early, restarted, the cluster's primary and workers, express
    await reaches('node_hooked', 6);
    // opted out, its own SIGUSR1 listener
    await reaches('node_hook_refused', 2);
    expect(storedCounter(store, 'node_hook_failed')).toBe(0);
  });

  it('hooks a process again when the agent restarts (the hook replaces itself)', async () => {
    const out = join(dir, 'again');
    mkdirSync(out);
    const server = await node(join(RUNTIMES, 'node-server.js'), [out, String(upstreamPort)]);
    expect(await nodeHookLine(agent, server.child.pid!)).toMatch(/hooked a Node process/);
    expect(await agent.stop()).toBe(0);
    agent = await startNodeAgent();
    expect(await nodeHookLine(agent, server.child.pid!)).toMatch(/hooked a Node process/);
    expectExact(await measure('again', server.port, out, 2), 2);
  });
});
