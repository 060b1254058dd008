/**
 * What the agent costs a server, all in (issue 46): Go net/http, Node http, aiohttp and gunicorn
 * (gthread worker, Flask), each a keep-alive handler appending a line to a file and answering,
 * under `wrk -t1 -c16` with a traceparent and an x-request-id on every request, measured three ways
 * in interleaved rounds:
 *   - without the agent;
 *   - captured, not followed: the agent records the server's system calls but leaves its runtime
 *     alone (Go: the same server built stripped, which it cannot follow; Node, Python:
 *     --hook-exclude pid:N);
 *   - followed: the agent hooks the runtime (Node, Python) or probes its goroutines (Go);
 *   - followed, bpf_stats on: the same with the kernel's per-program run-time statistics on, the
 *     only runs that hold them (bench/bpf-stats.ts): they cost every program run two clock reads,
 *     which no user pays, so the other modes' CPU is measured without them, and the difference
 *     between the two followed runs of a round is what they cost.
 * Each round starts a fresh agent and loads each followed server once unmeasured, which pays the
 * agent's warm-up (at a pace, ~15 µs a request, once charged to the round's first measured run);
 * the three agent modes still take turns at being a round's first measured run.
 * Each server runs twice (a plain copy, never followed, and one the agent follows: a hook stays in
 * a process after its agent stops). The agent runs as users run it, including the servers only and
 * excluding the load generator (--exclude comm:wrk, as a real client is on another host).
 * Reported per server and mode: req/s and its loss against the run without the agent, the server's
 * CPU per request (utime + stime of its processes, /proc), the agent's CPU per request, events stored
 * per request and events dropped, and, from the runs with bpf_stats on, the agent's BPF programs'
 * runs and time per request and the breakdown per program. CPU per request is the steadier
 * figure on a shared machine: the load average is printed with the tables.
 * Each run starts and ends once the agent has stored (or counted lost) every event the kernel sent
 * it, from its metrics: a store stalled on a busy disk would otherwise charge one run's events and
 * CPU to the next. A run that lost events, or stored fewer a request than the server's own writes
 * (or more than it can cause), is marked ⚠, listed, and fails the bench.
 *
 * Usage: node dist/bench/server-cost.js [rounds=3] [seconds=5] [servers=go,node,aiohttp,gunicorn] [pace]
 * pace, CxMS: C connections, each waiting MS ms after each response (wrk's Lua `delay()`), instead
 * of saturation's 16 without a wait: a server at the rates servers really run, where the agent's
 * fixed costs a second and its smaller commits weigh more a request (`2x1`: ~1.2–1.5k Go requests/s
 * on a 2-core host). Its loss column then says only whether the server kept the pace.
 * pace `close`: saturation, but each request asks for `Connection: close`, so each comes on a new
 * connection (clients that keep none: health checks, HTTP/1.0, a proxy without a pool), and each
 * connection is a new target for the agent.
 * KREPLAY_BENCH_ROOT runs another checkout's agent under this bench (its servers, modes and
 * figures stay this one's), to compare two builds in the same hour.
 */
import { execFileSync, spawn } from 'node:child_process';
import fs from 'node:fs';
import { connect, createServer, type AddressInfo } from 'node:net';
import os from 'node:os';
import path from 'node:path';
import { startBenchAgent, type BenchAgent } from './agent-process';
import { hostWideBpfStats, withBpfStats } from './bpf-stats';
import {
  awaitHooked,
  losses,
  median,
  processTree,
  programsByName,
  range,
  startServer,
  treeCpuUs,
  wrk,
  type Load,
  type Served,
} from './server-load';

const ROOT = path.join(__dirname, '..', '..');
const RUNTIMES = path.join(ROOT, 'test', 'support', 'runtimes');
const AGENT_ROOT = process.env.KREPLAY_BENCH_ROOT ?? ROOT;
const rounds = Number(process.argv[2] ?? 3);
const seconds = Number(process.argv[3] ?? 5);
const only = (process.argv[4] ?? 'go,node,aiohttp,gunicorn').split(',');
const pace = parsePace(process.argv[5]);

/** The load's shape: saturation (16 connections, no wait), `close`, or `CxMS` (see the usage above). */
function parsePace(arg: string | undefined): { connections: number; delayMs: number; close: boolean } {
  if (arg === undefined || arg === 'close') return { connections: 16, delayMs: 0, close: arg === 'close' };
  const m = /^([1-9]\d*)x([1-9]\d*)$/.exec(arg);
  if (!m)
    throw new Error(`pace must be close or CxMS (connections x ms each waits after a response), got ${arg}`);
  return { connections: Number(m[1]), delayMs: Number(m[2]), close: false };
}
const STATS_ON = 'followed, bpf_stats on';
const MODES = ['without the agent', 'captured, not followed', 'followed', STATS_ON] as const;

interface Subject {
  name: string;
  /** never followed: measured without the agent and captured */
  plain: Served;
  followed: Served;
  /** whether the agent hooks this runtime: then every process of the plain copy is hook-excluded (read each round) */
  hooked: boolean;
  /** resolves once the agent follows `followed` */
  awaitFollowed(agent: BenchAgent): Promise<void>;
}

interface Run {
  load: Load;
  /** uprobes other processes (another agent on a shared host) held on the server's files at the run's start or end, the more */
  foreignProbes: number;
  /** what the kernel sent to the agent, by metric and label (kreplay_agent_events_total, records_total) */
  sent: Map<string, number>;
  serverUs: number;
  agentUs: number;
  stored: number;
  dropped: number;
  bpf: Map<string, { runs: number; ns: number }>;
  /** the kernel counted the agent's programs though this run did not turn bpf_stats on: another holder or the sysctl did */
  statsByOthers: boolean;
}

function freePort(): Promise<number> {
  const s = createServer();
  return new Promise((resolve) =>
    s.listen(0, '127.0.0.1', () => {
      const { port } = s.address() as AddressInfo;
      s.close(() => resolve(port));
    }),
  );
}

async function untilListening(port: number): Promise<void> {
  for (const deadline = Date.now() + 20_000; Date.now() < deadline;) {
    const up = await new Promise<boolean>((resolve) => {
      const c = connect(port, '127.0.0.1', () => resolve(true)).on('error', () => resolve(false));
      c.once('connect', () => c.end());
    });
    if (up) return;
    await new Promise((r) => setTimeout(r, 100));
  }
  throw new Error(`nothing listens on ${port}`);
}

/** gunicorn with one gthread worker of 4 threads (its master forks the worker). */
async function gunicorn(file: string): Promise<Served> {
  const port = await freePort();
  const child = spawn(
    '/usr/bin/python3',
    [
      ...['-m', 'gunicorn', '-k', 'gthread', '--workers', '1', '--threads', '4'],
      ...['--bind', `127.0.0.1:${port}`, '--chdir', RUNTIMES, 'append_flask:app'],
    ],
    { stdio: 'ignore', env: { ...process.env, APPEND_FILE: file } },
  );
  await untilListening(port);
  return { child, port };
}

/** gunicorn's worker: the process that serves, the one its hook goes into. */
function workerOf(s: Served): number {
  const [, worker] = processTree(s.child.pid!);
  if (worker === undefined) throw new Error(`gunicorn ${s.child.pid} has no worker`);
  return worker;
}

async function subjects(dir: string): Promise<Subject[]> {
  const file = (name: string) => path.join(dir, `${name}.log`);
  const out: Subject[] = [];
  if (only.includes('go')) {
    const env = { ...process.env, GOCACHE: path.join(dir, 'cache'), GO111MODULE: 'off' };
    const binary = path.join(dir, 'append-server');
    const stripped = path.join(dir, 'append-server-stripped');
    const source = path.join(RUNTIMES, 'append-server.go');
    execFileSync('go', ['build', '-o', binary, source], { env });
    execFileSync('go', ['build', '-ldflags=-s -w', '-o', stripped, source], { env });
    out.push({
      name: `Go net/http (${execFileSync('go', ['env', 'GOVERSION']).toString().trim()})`,
      plain: await startServer(stripped, [file('go-plain')]),
      followed: await startServer(binary, [file('go')]),
      hooked: false,
      async awaitFollowed(agent) {
        for (const deadline = Date.now() + 20_000; !agent.output().includes(`goroutines of ${binary} (`);) {
          if (Date.now() > deadline)
            throw new Error(`the agent did not follow ${binary}:\n${agent.output()}`);
          await new Promise((r) => setTimeout(r, 50));
        }
      },
    });
  }
  if (only.includes('node')) {
    const script = path.join(RUNTIMES, 'append-server.js');
    const plain = await startServer(process.execPath, [script, file('node-plain')]);
    const followed = await startServer(process.execPath, [script, file('node')]);
    out.push({
      name: `Node http (${process.version})`,
      plain,
      followed,
      hooked: true,
      awaitFollowed: (agent) => awaitHooked(agent, followed.child.pid!, 'Node', 90_000),
    });
  }
  if (only.includes('aiohttp')) {
    const script = path.join(RUNTIMES, 'append-aiohttp.py');
    const plain = await startServer('/usr/bin/python3', [script, file('aiohttp-plain')]);
    const followed = await startServer('/usr/bin/python3', [script, file('aiohttp')]);
    out.push({
      name: 'aiohttp',
      plain,
      followed,
      hooked: true,
      awaitFollowed: (agent) => awaitHooked(agent, followed.child.pid!, 'Python', 90_000),
    });
  }
  if (only.includes('gunicorn')) {
    const plain = await gunicorn(file('gunicorn-plain'));
    const followed = await gunicorn(file('gunicorn'));
    out.push({
      name: 'gunicorn gthread + Flask',
      plain,
      followed,
      hooked: true,
      awaitFollowed: (agent) => awaitHooked(agent, workerOf(followed), 'Python', 90_000),
    });
  }
  return out;
}

/** How long the agent may take to store what the kernel sent it before the bench gives up. */
const CATCH_UP_MS = 120_000;
/** Losses counted after the ring: of events the kernel had sent. */
const LOST_AFTER_RING = new Set(['disk_full', 'store_error', 'corrupt_record']);

/** The agent's counters, from its /metrics. */
interface Counts {
  /** what the kernel put in the ring: events by type, context and target records by kind ("events sys_write") */
  sent: Map<string, number>;
  stored: number;
  /** lost anywhere (the ring full, a table full, the store), every reason */
  dropped: number;
  /** events the kernel sent that the agent has neither stored nor counted lost yet */
  pending: number;
}

async function counts(metrics: number): Promise<Counts> {
  const text = await (await fetch(`http://127.0.0.1:${metrics}/metrics`)).text();
  const sent = new Map<string, number>();
  let events = 0;
  let stored = 0;
  let dropped = 0;
  let lostAfterRing = 0;
  for (const [, name, label = '', value] of text.matchAll(
    /^kreplay_agent_(\w+)_total(?:\{\w+="([^"]+)"\})? (\d+)/gm,
  )) {
    const n = Number(value);
    if (name === 'events' || name === 'records') sent.set(`${name} ${label}`, n);
    if (name === 'events') events += n;
    else if (name === 'stored_events') stored = n;
    else if (name === 'dropped') {
      dropped += n;
      if (LOST_AFTER_RING.has(label)) lostAfterRing += n;
    }
  }
  return { sent, stored, dropped, pending: events - stored - lostAfterRing };
}

/**
 * Waits until the agent has stored, or counted lost, every event the kernel sent it: a run's figures
 * are then its own. Status lines that stop moving are no proof: a store stalled on its disk makes
 * none either, and its backlog would be counted in the next run (or never).
 */
async function caughtUp(metrics: number): Promise<Counts> {
  for (const deadline = Date.now() + CATCH_UP_MS; ;) {
    const now = await counts(metrics);
    if (now.pending <= 0) return now;
    if (Date.now() > deadline)
      throw new Error(
        `the agent did not catch up in ${CATCH_UP_MS / 1000} s: ${now.pending} events the kernel sent ` +
          `are neither stored nor counted lost (${now.stored} stored)`,
      );
    await new Promise((r) => setTimeout(r, 200));
  }
}

const diff = (after: Run['bpf'], before: Run['bpf']) =>
  new Map(
    [...after].map(([name, a]) => {
      const b = before.get(name) ?? { runs: 0, ns: 0 };
      return [name, { runs: a.runs - b.runs, ns: a.ns - b.ns }];
    }),
  );

/**
 * Uprobes that processes other than `agentPid` hold on the files process `pid` and its children run: a uprobe
 * is on the file, every process that runs it pays for every probe on it, whoever placed it.
 */
function foreignUprobes(pid: number, agentPid: number): number {
  const files = new Set(
    processTree(pid).flatMap((p) => {
      try {
        return [`/proc/${p}/exe`, fs.readlinkSync(`/proc/${p}/exe`)];
      } catch {
        return [];
      }
    }),
  );
  const perf = JSON.parse(execFileSync('bpftool', ['-j', 'perf', 'show']).toString()) as {
    pid: number;
    fd_type?: string;
    filename?: string;
  }[];
  return perf.filter((p) => p.fd_type === 'uprobe' && p.pid !== agentPid && files.has(p.filename ?? ''))
    .length;
}

/** One load on `s`, with the server's (and the agent's) CPU and the agent's figures over it. */
async function measure(s: Served, agent?: BenchAgent, metrics = 0, statsOn = false): Promise<Run> {
  const url = `http://127.0.0.1:${s.port}/`;
  const before = agent && (await caughtUp(metrics));
  const server0 = treeCpuUs(s.child.pid!);
  const agent0 = agent ? treeCpuUs(agent.pid) : 0;
  const bpf0 = agent ? programsByName(agent.pid) : new Map();
  const foreign0 = foreignUprobes(s.child.pid!, agent?.pid ?? 0);
  const load = await wrk({ url, seconds, threads: 1, ...pace });
  const serverUs = (treeCpuUs(s.child.pid!) - server0) / load.requests;
  const after = agent && (await caughtUp(metrics));
  const bpf: Run['bpf'] = agent ? diff(programsByName(agent.pid), bpf0) : new Map();
  return {
    load,
    serverUs,
    agentUs: agent ? (treeCpuUs(agent.pid) - agent0) / load.requests : 0,
    stored: after && before ? (after.stored - before.stored) / load.requests : 0,
    dropped: after && before ? after.dropped - before.dropped : 0,
    bpf,
    statsByOthers: !statsOn && (hostWideBpfStats() || [...bpf.values()].some((p) => p.ns > 0)),
    foreignProbes: Math.max(foreign0, foreignUprobes(s.child.pid!, agent?.pid ?? 0)),
    sent: new Map(
      [...(after?.sent ?? new Map<string, number>())].map(([k, n]) => [
        k,
        (n - (before?.sent.get(k) ?? 0)) / load.requests,
      ]),
    ),
  };
}

/** The server's own writes a request (the appended line, the response): the fewest events a capture of it stores. */
const SERVER_WRITES = 2;
/** The most events a request can give: the server's 2–3 writes and 1–2 reads; more is a storm. */
const MOST_EVENTS = 6;

/** What makes a run's figures not the server's: events lost, or stored in numbers the server cannot cause. */
function problems(name: string, mode: string, r: Run[]): string[] {
  return r.flatMap((x, round) => {
    const found: string[] = [];
    if (x.dropped > 0) found.push(`${x.dropped} events lost`);
    if (x.stored < SERVER_WRITES)
      found.push(
        `${x.stored.toFixed(2)} events stored a request, fewer than its own ${SERVER_WRITES} writes`,
      );
    if (x.stored > MOST_EVENTS)
      found.push(`${x.stored.toFixed(2)} events stored a request, more than it can cause (${MOST_EVENTS})`);
    return found.map((p) => `${name}, ${mode}, round ${round + 1}: ${p}`);
  });
}

async function main(): Promise<void> {
  const dir = fs.mkdtempSync(path.join(os.tmpdir(), 'kreplay-server-cost-'));
  const all = await subjects(dir);
  const runs = new Map(all.map((s) => [s.name, new Map(MODES.map((m) => [m, [] as Run[]]))]));
  const loadAverages: string[] = [];
  try {
    for (let round = 0; round < rounds; round++) {
      for (const s of all)
        runs
          .get(s.name)!
          .get('without the agent')!
          .push(await measure(s.plain));
      const metrics = await freePort();
      const agent = await startBenchAgent(AGENT_ROOT, [
        ...['--metrics-listen', `127.0.0.1:${metrics}`],
        ...all
          .flatMap((s) => [s.plain, s.followed])
          .flatMap((s) => processTree(s.child.pid!))
          .flatMap((pid) => ['--include', `pid:${pid}`]),
        // read each round: a pre-fork server's new worker must stay out too
        ...all
          .filter((s) => s.hooked)
          .flatMap((s) => processTree(s.plain.child.pid!))
          .flatMap((pid) => ['--hook-exclude', `pid:${pid}`]),
        ...['--exclude', 'comm:wrk'],
        // other processes' requests (a shared machine's) stay out of the figures
        '--filter-transactions',
      ]);
      try {
        // a request each first: the Python hook runs at the interpreter's next check
        for (const s of all) await fetch(`http://127.0.0.1:${s.followed.port}/`).then((r) => r.text());
        for (const s of all) await s.awaitFollowed(agent);
        // a run of each, unmeasured: the fresh agent's warm-up (its code compiled, the store's first
        // pages) is then no measured run's, and each mode's first round no longer its worst
        for (const s of all) await measure(s.followed, agent, metrics);
        for (const s of all) {
          const byMode = runs.get(s.name)!;
          const plain = async () =>
            byMode.get('captured, not followed')!.push(await measure(s.plain, agent, metrics));
          const followed = async () =>
            byMode.get('followed')!.push(await measure(s.followed, agent, metrics));
          const statsOn = async () =>
            byMode.get(STATS_ON)!.push(await withBpfStats(() => measure(s.followed, agent, metrics, true)));
          // each first in turn: a later run finds the store the fuller
          const order = [plain, followed, statsOn];
          for (let k = 0; k < order.length; k++) await order[(round + k) % order.length]!();
        }
      } finally {
        await agent.stop();
      }
      loadAverages.push(os.loadavg()[0]!.toFixed(2));
    }
  } finally {
    for (const s of all) for (const served of [s.plain, s.followed]) served.child.kill();
    fs.rmSync(dir, { recursive: true, force: true });
  }
  console.log(
    `wrk -t1 -c${pace.connections} -d${seconds}s${pace.delayMs ? `, ${pace.delayMs} ms after each response` : ''}` +
      `${pace.close ? ', a new connection a request' : ''}, ` +
      `${rounds} interleaved rounds, median (min..max); ` +
      `load average (1 min) after each round: ${loadAverages.join(', ')}; ${os.cpus().length} CPUs\n`,
  );
  console.log(
    '| server | mode | req/s | loss % | server CPU µs/request | added | agent CPU µs/request | all in µs/request | ' +
      'stored events/request | dropped | BPF runs/request | BPF µs/request |',
  );
  console.log('| --- | --- | --- | --- | --- | --- | --- | --- | --- | --- | --- | --- |');
  const wrong: string[] = [];
  for (const [name, byMode] of runs) {
    const base = byMode.get('without the agent')!;
    for (const mode of MODES) {
      const r = byMode.get(mode)!;
      const agentless = mode === 'without the agent';
      const found = agentless ? [] : problems(name, mode, r);
      wrong.push(...found);
      const added = r.map((x, i) => x.serverUs - base[i]!.serverUs);
      const allIn = r.map((x, i) => added[i]! + x.agentUs);
      const bpf = (pick: 'runs' | 'ns', scale: number) =>
        r.map((x) => [...x.bpf.values()].reduce((n, p) => n + p[pick], 0) / x.load.requests / scale);
      // counted only with bpf_stats on: "off" where this bench held them off and nobody else had them on
      const counted = mode === STATS_ON || r.some((x) => x.statsByOthers);
      const bpfCell = (pick: 'runs' | 'ns', scale: number, digits: number) =>
        agentless ? '' : counted ? range(bpf(pick, scale), digits) : 'off';
      console.log(
        `| ${name} | ${mode} | ${range(
          r.map((x) => x.load.rps),
          0,
        )} | ${
          agentless
            ? ''
            : range(
                losses(
                  base.map((x) => x.load),
                  r.map((x) => x.load),
                ),
                1,
              )
        } | ` +
          `${range(
            r.map((x) => x.serverUs),
            1,
          )} | ${agentless ? '' : range(added, 1)} | ${
            agentless
              ? ''
              : range(
                  r.map((x) => x.agentUs),
                  1,
                )
          } | ` +
          `${agentless ? '' : range(allIn, 1)} | ${
            agentless
              ? ''
              : range(
                  r.map((x) => x.stored),
                  2,
                ) + (found.length ? ' ⚠' : '')
          } | ` +
          `${agentless ? '' : r.map((x) => x.dropped).join(', ')} | ` +
          `${bpfCell('runs', 1, 1)} | ${bpfCell('ns', 1000, 2)} |`,
      );
    }
  }
  const byOthers = [...runs].flatMap(([name, byMode]) =>
    MODES.filter((m) => byMode.get(m)!.some((x) => x.statsByOthers)).map((m) => `${name}, ${m}`),
  );
  if (byOthers.length)
    console.log(
      `\n⚠ bpf_stats were on in runs that should be without them (kernel.bpf_stats_enabled = ` +
        `${hostWideBpfStats() ? 1 : 0} now, or another process held them): their CPU includes the ` +
        `statistics' cost, which users do not pay: ${byOthers.join('; ')}`,
    );
  console.log(
    '\nWhat bpf_stats cost a followed request (the run with them on minus the run without, in the same round; median (min..max)):\n',
  );
  for (const [name, byMode] of runs) {
    const on = byMode.get(STATS_ON)!;
    const off = byMode.get('followed')!;
    const delta = (pick: (x: Run) => number) =>
      range(
        on.map((x, i) => pick(x) - pick(off[i]!)),
        1,
      );
    console.log(
      `- ${name}: server ${delta((x) => x.serverUs)} µs, agent ${delta((x) => x.agentUs)} µs, ` +
        `all in ${delta((x) => x.serverUs + x.agentUs)} µs, req/s ${delta((x) => x.load.rps)}`,
    );
  }
  if (wrong.length) {
    // a row that measured something else must not pass for a figure
    console.log(`\n⚠ Rows that did not measure the server as it is (the bench fails):\n`);
    for (const line of wrong) console.log(`- ${line}`);
    process.exitCode = 1;
  }
  console.log(
    "\nUprobes other processes (agents other than this one) held on the servers' files, at the start or the end of each run (the more), and the server's CPU µs/request in that run:\n",
  );
  for (const [name, byMode] of runs)
    console.log(
      `- ${name}: ${MODES.map(
        (m) =>
          `${m} ${byMode
            .get(m)!
            .map((x) => `${x.foreignProbes} (${x.serverUs.toFixed(1)})`)
            .join(', ')}`,
      ).join('; ')}`,
    );
  console.log('\nWhat the kernel sends the agent per request (events by type, records by kind; medians):\n');
  console.log('| server | mode | sent | per request |');
  console.log('| --- | --- | --- | --- |');
  for (const [name, byMode] of runs)
    for (const mode of MODES.slice(1)) {
      const r = byMode.get(mode)!;
      const kinds = new Set(r.flatMap((x) => [...x.sent.keys()]));
      for (const kind of kinds) {
        const per = median(r.map((x) => x.sent.get(kind) ?? 0));
        if (per >= 0.01) console.log(`| ${name} | ${mode} | ${kind} | ${per.toFixed(2)} |`);
      }
    }
  console.log(
    '\nThe BPF programs that run while a followed server is loaded, per request (medians; the runs with bpf_stats on):\n',
  );
  console.log('| server | program | runs/request | ns/run | µs/request |');
  console.log('| --- | --- | --- | --- | --- |');
  for (const [name, byMode] of runs) {
    const r = byMode.get(STATS_ON)!;
    const names = new Set(r.flatMap((x) => [...x.bpf.keys()]));
    const rows = [...names]
      .map((program) => {
        const per = (pick: 'runs' | 'ns') =>
          median(r.map((x) => (x.bpf.get(program)?.[pick] ?? 0) / x.load.requests));
        return { program, runs: per('runs'), ns: per('ns') };
      })
      .filter((p) => p.runs >= 0.01)
      .sort((a, b) => b.ns - a.ns);
    for (const p of rows)
      console.log(
        `| ${name} | ${p.program} | ${p.runs.toFixed(2)} | ${(p.ns / p.runs).toFixed(0)} | ${(p.ns / 1000).toFixed(2)} |`,
      );
  }
}

main().catch((err: unknown) => {
  console.error(err);
  process.exit(1);
});
