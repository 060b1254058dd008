/**
 * Attribution on the servers people run, measured as users would: unmodified Node `http`, Go
 * `net/http` and aiohttp servers (a wait, an upstream call, file writes on the loop and on a pool),
 * started the ordinary way, under 1, 8, 64 and 256 concurrent requests. Each request writes files
 * whose names carry its request id, so each write event's target is the ground truth. Every
 * request's writes are stored (missing 0) and none carries another request's transaction (wrong
 * 0): what kreplay cannot follow it leaves unattributed, counted. The figures are printed and kept
 * in docs/internals.md "Attribution".
 */
import { execFileSync, spawn, type ChildProcess } from 'node:child_process';
import { mkdirSync, mkdtempSync, rmSync } from 'node:fs';
import { createServer, request, Agent, type Server } from 'node:http';
import type { AddressInfo } from 'node:net';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { startAgent, type AgentProcess } from '../support/agent-process';
import { createCgroup, type TestCgroup } from '../support/cgroup';
import { readStoredEvents } from '../support/store-rows';
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
function serve(command: string, args: string[], env: NodeJS.ProcessEnv = process.env): Promise<number> {
  const child = spawn('/bin/sh', ['-c', `${cgroup.enter} "$@"`, 'sh', command, ...args], {
    stdio: ['ignore', 'pipe', 'inherit'],
    env,
  });
  servers.push(child);
  return new Promise((resolve, reject) => {
    child.once('exit', (code) => reject(new Error(`${command} exited with ${code} before listening`)));
    child.stdout!.once('data', (chunk: Buffer) => resolve(Number(chunk.toString().trim())));
  });
}

/** correct / wrong / none / missing, per level, of the writes each request made to its own files. */
async function measure(
  name: string,
  port: number,
  out: string,
  filesPerRequest: number,
): Promise<Record<string, string>> {
  const table: Record<string, string> = {};
  for (const level of LEVELS) {
    const id = (i: number) => `${name}-c${level}-r${i}`;
    const pool = new Agent({ keepAlive: true, maxSockets: level });
    const get = (i: number) =>
      new Promise<void>((resolve, reject) => {
        request(
          { agent: pool, host: '127.0.0.1', port, path: '/', headers: { 'x-request-id': id(i) } },
          (res) => res.resume().once('end', () => resolve()),
        )
          .once('error', reject)
          .end();
      });
    let next = 0;
    await Promise.all(
      Array.from({ length: level }, async () => {
        while (next < PER_LEVEL) await get(next++);
      }),
    );
    pool.destroy();
    const prefix = join(out, `${name}-c${level}-r`);
    const writesOf = () =>
      readStoredEvents(join(dir, 'data', 'rt.db'), `e.type = 1 AND t.value LIKE '${prefix}%'`);
    // every request's writes stored, or the deadline: what is not there by then is missing
    const events = await waitFor(() => {
      const found = writesOf();
      return found.length >= PER_LEVEL * filesPerRequest && found;
    }, 30_000).catch(() => writesOf());
    let correct = 0;
    let wrong = 0;
    let none = 0;
    for (const e of events) {
      const owner = /-r(\d+)\.\w+$/.exec(e.target ?? '')![1];
      if (e.txn === null) none++;
      else if (e.txn === id(Number(owner))) correct++;
      else wrong++;
    }
    const missing = PER_LEVEL * filesPerRequest - events.length;
    table[`c=${level}`] = `${correct}/${wrong}/${none}/${missing}`;
  }
  process.stdout.write(
    `${name} writes, correct/wrong/none/missing of ${PER_LEVEL} requests a level: ${JSON.stringify(table)}\n`,
  );
  return table;
}

/** At least 99.9% of each level's writes in their own request's transaction. */
function expectCorrect(table: Record<string, string>, filesPerRequest: number): void {
  for (const [level, cell] of Object.entries(table)) {
    const correct = Number(cell.split('/')[0]);
    expect({ level, correct: correct >= 0.999 * PER_LEVEL * filesPerRequest }).toEqual({
      level,
      correct: true,
    });
  }
}

function expectNeverWrong(table: Record<string, string>): void {
  for (const [level, cell] of Object.entries(table)) {
    const [, wrong, , missing] = cell.split('/');
    expect({ level, wrong, missing }).toEqual({ level, wrong: '0', missing: '0' });
  }
}

describe('attribution on unmodified runtimes (real kernel)', () => {
  it('Node http (setTimeout, upstream through a keep-alive agent, fs.promises and writeFileSync): never wrong', async () => {
    const out = join(dir, 'node');
    mkdirSync(out);
    const port = await serve(process.execPath, [join(RUNTIMES, 'node-server.js'), out, String(upstreamPort)]);
    expectNeverWrong(await measure('node', port, out, 2));
  }, 300_000);

  it('aiohttp (asyncio.sleep, upstream GET, a write on the loop and one through run_in_executor): each request its own writes', async () => {
    const out = join(dir, 'aiohttp');
    mkdirSync(out);
    // Debian's python3, whose aiohttp comes from apt
    const port = await serve('/usr/bin/python3', [
      join(RUNTIMES, 'aiohttp-server.py'),
      out,
      String(upstreamPort),
    ]);
    // the agent queues its Python hook into the server (agent/runtimes/python/); the server's
    // first request runs it. The shell execs python: the child's pid is the server's.
    const pid = servers[servers.length - 1]!.pid!;
    await waitFor(() =>
      agent.output().includes(`queued the Python hook (it runs at the interpreter's next check) pid=${pid} `),
    );
    const table = await measure('aiohttp', port, out, 2);
    expectNeverWrong(table);
    expectCorrect(table, 2);
  }, 300_000);

  it('Go net/http (sleep, upstream GET, os.WriteFile): never wrong', async () => {
    const out = join(dir, 'go');
    mkdirSync(out);
    const binary = join(dir, 'go-server');
    const env = {
      ...process.env,
      GOCACHE: join(dir, 'gocache'),
      GOPATH: join(dir, 'gopath'),
      GO111MODULE: 'off',
    };
    execFileSync('go', ['build', '-o', binary, join(RUNTIMES, 'go-server.go')], { env });
    const port = await serve(binary, [out, String(upstreamPort)]);
    expectNeverWrong(await measure('go', port, out, 1));
  }, 300_000);
});
