/**
 * Attribution on the servers people run, measured as users would: unmodified Node `http`, Go
 * `net/http` and aiohttp servers (a wait, an upstream call, file writes on the loop and on a pool),
 * started the ordinary way, under 1, 8, 64 and 256 concurrent requests. Each request writes files
 * whose names carry its request id, so each write event's target is the ground truth. Every
 * request's writes are stored (missing 0) and none carries another request's transaction (wrong
 * 0): what kreplay cannot follow it leaves unattributed, counted. The figures are printed and kept
 * in docs/internals.md "Attribution".
 */
import { execFileSync, type ChildProcess } from 'node:child_process';
import { mkdirSync, mkdtempSync, realpathSync, rmSync } from 'node:fs';
import { createServer, type Server } from 'node:http';
import type { AddressInfo } from 'node:net';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { startAgent, type AgentProcess } from '../support/agent-process';
import { createCgroup, serverInCgroup, type TestCgroup } from '../support/cgroup';
import {
  httpLoad,
  hookableEnv,
  nodeHookLine,
  pythonHookLine,
  scoreWrites,
  writesUnder,
  type Accuracy,
} from '../support/request-accuracy';
import { buildGo } from '../support/go-build';
import { waitFor } from '../support/wait';

const RUNTIMES = join(__dirname, '..', 'support', 'runtimes');
const LEVELS = [1, 8, 64, 256];
const PER_LEVEL = 256;

let dir: string;
let cgroup: TestCgroup;
let agent: AgentProcess;
let upstream: Server;
let upstreamPort: number;
const servers: ChildProcess[] = [];

beforeAll(async () => {
  dir = mkdtempSync(join(tmpdir(), 'kreplay-runtimes-'));
  cgroup = createCgroup(`kreplay-runtimes-${process.pid}`);
  // the upstream lives in this process, outside the servers' cgroup: its events are not captured
  upstream = createServer((_req, res) => res.end('upstream'));
  upstream.keepAliveTimeout = 60_000;
  await new Promise<void>((resolve) => upstream.listen(0, '127.0.0.1', resolve));
  upstreamPort = (upstream.address() as AddressInfo).port;
  agent = await startAgent([
    '--data-dir',
    join(dir, 'data'),
    '--node',
    'rt',
    '--cgroup-id',
    String(cgroup.id),
  ]);
});

afterAll(async () => {
  for (const s of servers) s.kill('SIGKILL');
  await agent?.stop();
  upstream?.close();
  cgroup?.remove();
  rmSync(dir, { recursive: true, force: true });
});

/** Starts `command` in the test cgroup, the ordinary way, and resolves with the port it prints. */
async function serve(command: string, args: string[], env: NodeJS.ProcessEnv = process.env): Promise<number> {
  return (await serverInCgroup(cgroup, command, args, { env, children: servers })).port;
}

/**
 * correct / wrong / none / missing, per level, of the writes each request made to its own files;
 * `traced`: the requests carry a traceparent (without one a request has no transaction to find).
 */
async function measure(
  name: string,
  port: number,
  out: string,
  filesPerRequest: number,
  traced = false,
): Promise<Record<string, Accuracy>> {
  const table: Record<string, Accuracy> = {};
  for (const level of LEVELS) {
    const ids = Array.from({ length: PER_LEVEL }, (_, i) => `${name}-c${level}-r${i}`);
    await httpLoad(port, ids, level, { traced });
    const events = await writesUnder(
      join(dir, 'data', 'rt.db'),
      out,
      `${name}-c${level}-r`,
      PER_LEVEL * filesPerRequest,
    );
    table[`c=${level}`] = scoreWrites(events, ids, filesPerRequest);
  }
  const cells = Object.entries(table).map(([l, a]) => `${l}: ${a.correct}/${a.wrong}/${a.none}/${a.missing}`);
  process.stdout.write(
    `${name} writes, correct/wrong/none/missing of ${PER_LEVEL} requests a level: ${cells.join(', ')}\n`,
  );
  return table;
}

function expectNeverWrong(table: Record<string, Accuracy>): void {
  for (const [level, { wrong, missing }] of Object.entries(table))
    expect({ level, wrong, missing }).toEqual({ level, wrong: 0, missing: 0 });
}

/** The goal: correct >= 99.9%, wrong 0, missing 0 at every level. */
function expectExact(table: Record<string, Accuracy>, filesPerRequest: number): void {
  expectNeverWrong(table);
  for (const [level, { correct }] of Object.entries(table))
    expect({ level, correct: correct >= 0.999 * PER_LEVEL * filesPerRequest }).toEqual({
      level,
      correct: true,
    });
}

/** The Node scenario on `node`, hooked by the agent once it runs (the runner's opt-out removed). */
async function nodeScenario(name: string, node: string, traced: boolean): Promise<void> {
  const out = join(dir, name);
  mkdirSync(out);
  const port = await serve(
    node,
    [join(RUNTIMES, 'node-server.js'), out, String(upstreamPort)],
    hookableEnv(),
  );
  expect(await nodeHookLine(agent, servers[servers.length - 1]!.pid!)).toMatch(/hooked a Node process/);
  expectExact(await measure(name, port, out, 2, traced), 2);
}

/** Debian's (or the machine's) other Node, when it is another one that can run the server. */
const OTHER_NODE = ['/usr/bin/node', '/usr/bin/nodejs'].find((path) => {
  try {
    return (
      realpathSync(path) !== realpathSync(process.execPath) &&
      Number(execFileSync(path, ['-p', 'process.versions.node.split(".")[0]']).toString()) >= 18
    );
  } catch {
    return false;
  }
});

describe('attribution on unmodified runtimes (real kernel)', () => {
  it('Node http (setTimeout, upstream through a keep-alive agent, fs.promises and writeFileSync), hooked: exact', async () => {
    await nodeScenario('node', process.execPath, true);
  }, 300_000);

  (OTHER_NODE ? it : it.skip)(
    `the same on ${OTHER_NODE ?? "the machine's other Node (none here)"}, x-request-id only: exact`,
    async () => {
      // requests with an x-request-id only (a load balancer's, no tracing): their transaction all the same
      await nodeScenario('node-other', OTHER_NODE!, false);
    },
    300_000,
  );

  it('aiohttp (asyncio.sleep, upstream GET, a write on the loop and one through run_in_executor), hooked: exact', async () => {
    const out = join(dir, 'aiohttp');
    mkdirSync(out);
    // Debian's python3, whose aiohttp comes from apt
    const port = await serve(
      '/usr/bin/python3',
      [join(RUNTIMES, 'aiohttp-server.py'), out, String(upstreamPort)],
      hookableEnv(),
    );
    // the agent queues its Python hook into the server (agent/runtimes/python/); the server's
    // first request runs it. The shell execs python: the child's pid is the server's.
    expect(await pythonHookLine(agent, servers[servers.length - 1]!.pid!)).toMatch(/queued the Python hook/);
    expectExact(await measure('aiohttp', port, out, 2, true), 2);
  }, 300_000);

  it('Go net/http (sleep, upstream GET through the pool, os.WriteFile, a spawned goroutine writes): exact', async () => {
    const out = join(dir, 'go');
    mkdirSync(out);
    const binary = buildGo(join(RUNTIMES, 'go-server.go'), join(dir, 'go-server'));
    const port = await serve(binary, [out, String(upstreamPort)]);
    // goroutines are followed from the agent's scan after the server started
    await waitFor(() => agent.output().includes(`goroutines of ${binary} (`));
    expectExact(await measure('go', port, out, 2, true), 2);
  }, 300_000);
});
