/**
 * What the Python hook costs the servers people deploy (issue 44), each running the accuracy
 * tests' application (test/support/runtimes/wsgi_app.py, asgi_app.py: a 0-20 ms sleep, an upstream
 * GET, files written named by the request): the server's CPU per request (user + system, every
 * process of it: a pre-fork master and its workers) and wrk's throughput, with the agent and its
 * hook, and with the agent beside a twin of the server that opted out (KREPLAY_PYTHON_HOOK=off:
 * the kernel's capture alone), interleaved round by round under one agent.
 *
 * Usage: node dist/bench/python-servers.js [rounds=3] [seconds=5] [connections=32]
 */
import { spawn, type ChildProcess } from 'node:child_process';
import fs from 'node:fs';
import { createServer } from 'node:http';
import type { AddressInfo } from 'node:net';
import os from 'node:os';
import path from 'node:path';
import { startBenchAgent, type BenchAgent } from './agent-process';
import { range as medianRange, TRACEPARENT } from './server-load';
import {
  accepts,
  argsFor,
  freePort,
  gunicorn,
  processTree,
  PYTHON_APPS,
  uvicorn,
  uwsgi,
  type ServerCommand,
} from './python-server-commands';

const ROOT = path.join(__dirname, '..', '..');
const rounds = Number(process.argv[2] ?? 3);
const seconds = Number(process.argv[3] ?? 5);
const connections = Number(process.argv[4] ?? 32);
const CLOCK_TICKS = 100;

const SERVERS: (ServerCommand & { name: string; path: string })[] = [
  { name: 'gunicorn sync + Flask', ...gunicorn('sync'), path: '/' },
  { name: 'gunicorn gthread + Flask', ...gunicorn('gthread', '--threads', '4'), path: '/' },
  { name: 'gunicorn gevent + Flask', ...gunicorn('gevent'), path: '/' },
  { name: 'uWSGI threads + Flask', ...uwsgi, path: '/' },
  { name: 'uvicorn + FastAPI async def', ...uvicorn('asgi_app:app'), path: '/' },
  { name: 'uvicorn + FastAPI def', ...uvicorn('asgi_app:app'), path: '/sync' },
];

interface Server {
  child: ChildProcess;
  port: number;
}

/** CPU ticks (user + system) of every process of the server so far. */
function ticks(pid: number): number {
  let sum = 0;
  for (const p of processTree(pid)) {
    try {
      const fields = fs.readFileSync(`/proc/${p}/stat`, 'utf8').split(') ')[1]!.split(' ');
      sum += Number(fields[11]) + Number(fields[12]);
    } catch {
      // gone
    }
  }
  return sum;
}

const sleep = (ms: number) => new Promise((r) => setTimeout(r, ms));

async function start(
  spec: (typeof SERVERS)[number],
  out: string,
  upstream: number,
  optOut: boolean,
): Promise<Server> {
  const port = await freePort();
  const child = spawn(spec.command, argsFor(spec, port), {
    cwd: PYTHON_APPS,
    stdio: 'ignore',
    env: {
      ...process.env,
      KR_OUT: out,
      KR_UPSTREAM: String(upstream),
      ...(optOut ? { KREPLAY_PYTHON_HOOK: 'off' } : {}),
    },
  });
  const deadline = Date.now() + 20_000;
  while (!(await accepts(port))) {
    if (Date.now() > deadline) throw new Error(`${spec.name} not accepting on ${port}`);
    await sleep(50);
  }
  return { child, port };
}

/** Once the agent said its word on every process of the server (queued the hook, or why not). */
async function spoken(agent: BenchAgent, server: Server): Promise<void> {
  const deadline = Date.now() + 20_000;
  while (!processTree(server.child.pid!).every((p) => agent.output().includes(`pid=${p} `))) {
    if (Date.now() > deadline) throw new Error(`the agent said nothing of ${server.child.pid}`);
    await sleep(100);
  }
}

function wrk(server: Server, script: string, urlPath: string, duration = seconds): Promise<number> {
  const before = ticks(server.child.pid!);
  return new Promise((resolve, reject) => {
    const p = spawn('wrk', [
      '-t1',
      `-c${connections}`,
      `-d${duration}s`,
      '-s',
      script,
      `http://127.0.0.1:${server.port}${urlPath}`,
    ]);
    let out = '';
    p.stdout.on('data', (b: Buffer) => (out += b.toString()));
    p.on('error', reject);
    p.on('exit', () => {
      const total = /(\d+) requests in/.exec(out);
      if (!total) return reject(new Error(`cannot read wrk's output:\n${out}`));
      if (/Non-2xx/.test(out)) return reject(new Error(`wrk saw errors:\n${out}`));
      const cpu = (ticks(server.child.pid!) - before) / CLOCK_TICKS;
      resolve((cpu / Number(total[1])) * 1e6);
    });
  });
}

/** server-load's "median (min..max)", in whole µs */
const range = (xs: number[]) => medianRange(xs, 0);

async function main(): Promise<void> {
  const dir = fs.mkdtempSync(path.join(os.tmpdir(), 'kreplay-python-servers-'));
  const script = path.join(dir, 'headers.lua');
  fs.writeFileSync(
    script,
    `wrk.headers["traceparent"] = "${TRACEPARENT}"\n` + `wrk.headers["x-request-id"] = "bench"\n`,
  );
  const upstream = createServer((_req, res) => res.end('upstream'));
  await new Promise<void>((resolve) => upstream.listen(0, '127.0.0.1', resolve));
  const upstreamPort = (upstream.address() as AddressInfo).port;
  const agent = await startBenchAgent(ROOT, []);
  console.log(
    `| server (${rounds} rounds of wrk -t1 -c${connections} -d${seconds}s, median (range)) | server CPU µs/request, hook opted out | with the hook | added |`,
  );
  console.log('| --- | --- | --- | --- |');
  try {
    for (const spec of SERVERS) {
      const plain = await start(spec, dir, upstreamPort, true);
      const hooked = await start(spec, dir, upstreamPort, false);
      try {
        await spoken(agent, plain);
        await spoken(agent, hooked);
        // the hook runs at the main thread's next pending-call check: a second of load runs it
        await wrk(hooked, script, spec.path, 1);
        const without: number[] = [];
        const withHook: number[] = [];
        for (let round = 0; round < rounds; round++) {
          without.push(await wrk(plain, script, spec.path));
          withHook.push(await wrk(hooked, script, spec.path));
        }
        console.log(
          `| ${spec.name} | ${range(without)} | ${range(withHook)} | ${range(withHook.map((w, i) => w - without[i]!))} |`,
        );
      } finally {
        plain.child.kill();
        hooked.child.kill();
      }
    }
  } finally {
    await agent.stop();
    upstream.close();
    upstream.closeAllConnections();
    fs.rmSync(dir, { recursive: true, force: true });
  }
}

main().catch((err: unknown) => {
  console.error(err);
  process.exit(1);
});
