/**
 * What the benchmarks of real servers under load share (go-, node- and tls-overhead): a server
 * started as a child that prints its port, wrk and h2load runs against it with a traceparent on
 * every request (so each request opens a context, as a traced service's would; wrk's a fresh one
 * each request), whether the agent
 * hooked a Node server, the run counts and times of the agent's BPF programs (bpf_stats), a
 * process's CPU time, and medians with their ranges.
 */
import { execFileSync, spawn, type ChildProcess } from 'node:child_process';
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import type { BenchAgent } from './agent-process';

export const TRACEPARENT = '00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01';

/**
 * wrk's script: a trace and a request id of its own on every request, as real traffic has (one
 * id for all would spare the agent the context row each new transaction costs it). The ids are
 * random, as W3C trace ids are: ids made of a prefix and a counter would sort in arrival order and
 * spare the store's indexes the random inserts real ids cost (issue 46, branch store46). With
 * `close`, each request asks for `Connection: close`: a new connection a request.
 */
const freshIdsLua = (close: boolean) => `
local n = 0
local function r()
  return math.random(0, 0x7fffffff)
end
function init(args)
  math.randomseed(os.time() + tonumber(tostring({}):match("0x(%x+)") or "0", 16))
end
function request()
  n = n + 1
  local id = string.format("%08x%08x%08x%08x", r(), r(), r(), r())
  return wrk.format(nil, nil, {
    ["Host"] = wrk.headers["Host"],${close ? '\n    ["Connection"] = "close",' : ''}
    ["traceparent"] = string.format("00-%s-%016x-01", id, n),
    ["x-request-id"] = "bench-" .. id,
  })
end
`;

export interface Served {
  child: ChildProcess;
  port: number;
}

/** A server that prints its port on its first line; stderr dropped (Python logs each connection a load cuts). */
export function startServer(command: string, args: string[], env = process.env): Promise<Served> {
  const child = spawn(command, args, { stdio: ['ignore', 'pipe', 'ignore'], env });
  return new Promise((resolve, reject) => {
    child.once('exit', (code) => reject(new Error(`${command} ${args.join(' ')} exited with ${code}`)));
    child.stdout!.once('data', (b: Buffer) => {
      resolve({ child, port: Number(b.toString().trim()) });
      // said, so that a server gone mid-run is not a bare ENOENT on its /proc files
      child.once('exit', (code, signal) => {
        if (!child.killed)
          console.error(`${command} ${args.join(' ')} (pid ${child.pid}) exited: ${signal ?? code}`);
      });
    });
  });
}

/** A Node server's environment: hookable by the agent (its default), or opted out of the hook. */
export function nodeEnv(hookable: boolean): NodeJS.ProcessEnv {
  const env: NodeJS.ProcessEnv = { ...process.env, KREPLAY_NODE_HOOK: 'off' };
  if (hookable) delete env.KREPLAY_NODE_HOOK;
  return env;
}

/** What the agent says once it hooked a process of each runtime. */
const HOOKED = {
  Node: 'hooked a Node process',
  Python: 'queued the Python hook',
} as const;

/** Waits until the agent hooked process `pid`; throws with its output if it said it would not. */
export async function awaitHooked(
  agent: BenchAgent,
  pid: number,
  runtime: keyof typeof HOOKED = 'Node',
  timeoutMs = 20_000,
): Promise<void> {
  const word = new RegExp(
    `(${HOOKED[runtime]}|${runtime} process unattributed|could not hook|unhooked for now)[^\\n]* pid=${pid}\\b`,
  );
  const deadline = Date.now() + timeoutMs;
  while (!word.test(agent.output())) {
    if (Date.now() > deadline) throw new Error(`the agent did not hook pid ${pid}:\n${agent.output()}`);
    await new Promise((r) => setTimeout(r, 50));
  }
  if (word.exec(agent.output())![1] !== HOOKED[runtime]) throw new Error(agent.output());
}

export interface Load {
  rps: number;
  requests: number;
  /** wrk's 99th percentile */
  p99Ms?: number;
  /** h2load's request times: it gives no percentiles */
  meanMs?: number;
  maxMs?: number;
}

export interface WrkOptions {
  url: string;
  seconds: number;
  threads: number;
  connections: number;
  /** each connection waits this long after each response (wrk's Lua `delay()`): a rate below saturation */
  delayMs?: number;
  /** each request asks the server to close its connection (`Connection: close`): a new one a request */
  close?: boolean;
}

function run(command: string, args: string[]): Promise<string> {
  return new Promise((resolve, reject) => {
    const p = spawn(command, args);
    let out = '';
    p.stdout.on('data', (b: Buffer) => (out += b.toString()));
    p.on('error', reject);
    p.on('exit', () => resolve(out));
  });
}

const MS = { us: 0.001, ms: 1, s: 1000 };
const toMs = (value: string, unit: string) => Number(value) * MS[unit as keyof typeof MS];

/** wrk (HTTP/1.1) with its latency distribution. */
export async function wrk({ url, seconds, threads, connections, delayMs, close }: WrkOptions): Promise<Load> {
  const script = path.join(os.tmpdir(), `kreplay-bench-${process.pid}.lua`);
  const lua = freshIdsLua(close ?? false);
  fs.writeFileSync(script, delayMs ? `${lua}function delay()\n  return ${delayMs}\nend\n` : lua);
  const out = await run('wrk', [
    `-t${threads}`,
    `-c${connections}`,
    `-d${seconds}s`,
    '--latency',
    '-s',
    script,
    url,
  ]);
  const rps = /Requests\/sec:\s+([\d.]+)/.exec(out);
  const p99 = /99%\s+([\d.]+)(us|ms|s)/.exec(out);
  const total = /(\d+) requests in/.exec(out);
  if (!rps || !p99 || !total) throw new Error(`cannot read wrk's output:\n${out}`);
  return { rps: Number(rps[1]), p99Ms: toMs(p99[1]!, p99[2]!), requests: Number(total[1]) };
}

/** h2load (nghttp2-client): `streams` at a time on each of `connections` HTTP/2 connections. */
export async function h2load(
  url: string,
  seconds: number,
  connections: number,
  streams: number,
): Promise<Load> {
  const out = await run('h2load', [
    ...['-D', String(seconds), '-t1', `-c${connections}`, `-m${streams}`],
    ...['-H', `traceparent: ${TRACEPARENT}`, '-H', 'x-request-id: bench'],
    url,
  ]);
  const rps = /finished in [\d.]+\w+, ([\d.]+) req\/s/.exec(out);
  const done = /requests: \d+ total, \d+ started, \d+ done, (\d+) succeeded, (\d+) failed/.exec(out);
  const time = /time for request:\s+[\d.]+\w+\s+([\d.]+)(us|ms|s)\s+([\d.]+)(us|ms|s)/.exec(out);
  if (!rps || !done || !time) throw new Error(`cannot read h2load's output:\n${out}`);
  if (done[2] !== '0') throw new Error(`h2load: ${done[2]} requests failed:\n${out}`);
  return {
    rps: Number(rps[1]),
    requests: Number(done[1]),
    maxMs: toMs(time[1]!, time[2]!),
    meanMs: toMs(time[3]!, time[4]!),
  };
}

/** The ids of the BPF programs process `pid` holds: its own, not another agent's on this machine. */
function programIdsOf(pid: number): Set<number> {
  const ids = new Set<number>();
  for (const fd of fs.readdirSync(`/proc/${pid}/fdinfo`)) {
    let info: string;
    try {
      info = fs.readFileSync(`/proc/${pid}/fdinfo/${fd}`, 'utf8');
    } catch {
      continue; // closed meanwhile
    }
    const id = /^prog_id:\s+(\d+)$/m.exec(info);
    if (id) ids.add(Number(id[1]));
  }
  return ids;
}

/** Each of the agent's programs by name: its runs and run time so far (programs of one name summed). */
export function programsByName(agentPid: number): Map<string, { runs: number; ns: number }> {
  const ids = programIdsOf(agentPid);
  const progs = JSON.parse(execFileSync('bpftool', ['-j', 'prog', 'show']).toString()) as {
    id: number;
    name?: string;
    run_cnt?: number;
    run_time_ns?: number;
  }[];
  const byName = new Map<string, { runs: number; ns: number }>();
  for (const p of progs.filter((p) => ids.has(p.id))) {
    const sum = byName.get(p.name ?? '') ?? { runs: 0, ns: 0 };
    sum.runs += p.run_cnt ?? 0;
    sum.ns += p.run_time_ns ?? 0;
    byName.set(p.name ?? '', sum);
  }
  return byName;
}

/** Runs and run time so far of the agent's programs whose names `match`. */
export function programStats(
  agentPid: number,
  match: (name: string) => boolean,
): { runs: number; ns: number } {
  const mine = [...programsByName(agentPid)].filter(([name]) => match(name)).map(([, p]) => p);
  return {
    runs: mine.reduce((n, p) => n + p.runs, 0),
    ns: mine.reduce((n, p) => n + p.ns, 0),
  };
}

const CLOCK_TICKS = 100; // sysconf(_SC_CLK_TCK) on Linux

/** The process's CPU time so far (user and system, all threads), µs. */
export function cpuUs(pid: number): number {
  const fields = fs.readFileSync(`/proc/${pid}/stat`, 'utf8').split(') ')[1]!.split(' ');
  return ((Number(fields[11]) + Number(fields[12])) / CLOCK_TICKS) * 1e6;
}

/** Process `pid` and its descendants (a pre-fork server's workers). */
export function processTree(pid: number): number[] {
  const children: number[] = [];
  for (const task of fs.readdirSync(`/proc/${pid}/task`)) {
    const listed = fs.readFileSync(`/proc/${pid}/task/${task}/children`, 'utf8').trim();
    if (listed) children.push(...listed.split(' ').map(Number));
  }
  return [pid, ...children.flatMap(processTree)];
}

/** The CPU time so far of process `pid` and its descendants, µs. */
export const treeCpuUs = (pid: number) => processTree(pid).reduce((sum, p) => sum + cpuUs(p), 0);

export const median = (xs: number[]) => [...xs].sort((a, b) => a - b)[Math.floor(xs.length / 2)]!;

/** "median (min..max)" */
export const range = (xs: number[], digits: number) =>
  `${median(xs).toFixed(digits)} (${Math.min(...xs).toFixed(digits)}..${Math.max(...xs).toFixed(digits)})`;

/** The throughput lost with the agent, %, round by round. */
export const losses = (off: Load[], on: Load[]) => off.map((o, i) => 100 * (1 - on[i]!.rps / o.rps));
