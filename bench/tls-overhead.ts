/**
 * What following HTTPS and HTTP/2 requests costs real servers: throughput and latency with and
 * without the agent, interleaved round by round in one run, and the uprobe hits per request
 * (bpf_stats run counts of the agent's uprobe programs: OpenSSL's ssl_*, libuv's uv_*), for
 *   - Node https (OpenSSL linked into the pinned node) and Python's ThreadingHTTPServer over ssl
 *     (libssl.so.3), under wrk (HTTP/1.1, p99);
 *   - a Node http2 h2c server (test/support/h2-node-server.js) under h2load (nghttp2-client), many
 *     streams at a time on one connection; h2load gives the request times' mean and max, no
 *     percentiles.
 * On a shared machine throughput swings with the load: each server's CPU time per request
 * (/proc/PID/stat, user and system) is the steadier figure.
 * The agent hooks each Node server (its default), and the hook stays in a process after the agent
 * stops: so each Node server runs twice, a copy that opted out of the hook (measured without the
 * agent) and one the agent hooks (measured with it).
 *
 * Usage: node dist/bench/tls-overhead.js [rounds=3] [seconds=5]
 */
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { selfSignedCert } from './tls-cert';
import { startBenchAgent } from './agent-process';
import {
  awaitHooked,
  cpuUs,
  h2load,
  losses,
  median,
  nodeEnv,
  programStats,
  range,
  startServer,
  wrk,
  type Load,
  type Served,
} from './server-load';
import { withBpfStats } from './bpf-stats';

const ROOT = path.join(__dirname, '..', '..');
const SUPPORT = path.join(ROOT, 'test', 'support');
const rounds = Number(process.argv[2] ?? 3);
const seconds = Number(process.argv[3] ?? 5);
const H2_STREAMS = 8;

const isUprobe = (name: string) => name.startsWith('ssl_') || name.startsWith('uv_');

/** Starts counting the agent's uprobe runs; the returned function gives the runs, BPF ns and seconds since. */
function measured(agentPid: number): () => { runs: number; ns: number; s: number } {
  const t0 = process.hrtime.bigint();
  const before = programStats(agentPid, isUprobe);
  return () => {
    const after = programStats(agentPid, isUprobe);
    const s = Number(process.hrtime.bigint() - t0) / 1e9;
    return { runs: after.runs - before.runs, ns: after.ns - before.ns, s };
  };
}

interface Bench {
  /** measured without the agent */
  off: Served;
  /** measured with it (hooked, for Node) */
  on: Served;
  node: boolean;
  load(port: number): Promise<Load>;
}

async function main(): Promise<void> {
  const dir = fs.mkdtempSync(path.join(os.tmpdir(), 'kreplay-tls-bench-'));
  const { cert, key } = selfSignedCert(dir);
  const https = (port: number) =>
    wrk({ url: `https://127.0.0.1:${port}/`, seconds, threads: 1, connections: 8 });
  const node = async (script: string, args: string[], load: Bench['load']): Promise<Bench> => {
    const start = (hookable: boolean) =>
      startServer(process.execPath, [path.join(SUPPORT, script), ...args], nodeEnv(hookable));
    return { off: await start(false), on: await start(true), node: true, load };
  };
  const python = await startServer('/usr/bin/python3', [
    path.join(SUPPORT, 'tls-file-server.py'),
    cert,
    key,
    dir,
  ]);
  const benches: Record<string, Bench> = {
    'Node https (wrk)': await node('tls-node-server.js', [cert, key, dir], https),
    'Python ssl ThreadingHTTPServer (wrk)': { off: python, on: python, node: false, load: https },
    [`Node http2 h2c, ${H2_STREAMS} streams on 1 connection (h2load)`]: await node(
      'h2-node-server.js',
      [dir],
      (port) => h2load(`http://127.0.0.1:${port}/`, seconds, 1, H2_STREAMS),
    ),
  };
  const results: Record<
    string,
    { off: Load[]; on: Load[]; cpuOff: number[]; cpuOn: number[]; hits: number[]; ns: number[] }
  > = {};
  for (const name of Object.keys(benches))
    results[name] = { off: [], on: [], cpuOff: [], cpuOn: [], hits: [], ns: [] };
  /** The load on a server, and the server's CPU time per request over it (µs). */
  const loaded = async (b: Bench, s: Served) => {
    const cpu = cpuUs(s.child.pid!);
    const r = await b.load(s.port);
    return { r, cpu: (cpuUs(s.child.pid!) - cpu) / r.requests };
  };
  const backgroundHits: number[] = [];
  const included = Object.values(benches).flatMap((b) => ['--include', `pid:${b.on.child.pid}`]);
  try {
    for (let round = 0; round < rounds; round++) {
      for (const [name, b] of Object.entries(benches)) {
        const { r, cpu } = await loaded(b, b.off);
        results[name]!.off.push(r);
        results[name]!.cpuOff.push(cpu);
      }
      // the agent as users run it, capturing (and so hooking) these servers only: not the
      // machine's other Node processes
      const agent = await startBenchAgent(ROOT, included);
      try {
        for (const b of Object.values(benches)) if (b.node) await awaitHooked(agent, b.on.child.pid!);
        // The probes fire in every process that runs the probed files (the machine's other node
        // and libssl users too): their rate with no load here is taken off each run's count.
        const idle = measured(agent.pid);
        await new Promise((r) => setTimeout(r, seconds * 1000));
        const { runs: idleRuns, ns: idleNs, s: idleS } = idle();
        backgroundHits.push(idleRuns / idleS);
        for (const [name, b] of Object.entries(benches)) {
          const during = measured(agent.pid);
          const { r, cpu } = await loaded(b, b.on);
          const { runs, ns, s: runS } = during();
          results[name]!.on.push(r);
          results[name]!.cpuOn.push(cpu);
          results[name]!.hits.push((runs - (idleRuns / idleS) * runS) / r.requests);
          results[name]!.ns.push((ns - (idleNs / idleS) * runS) / r.requests);
        }
      } finally {
        await agent.stop();
      }
    }
  } finally {
    for (const b of Object.values(benches)) for (const s of [b.off, b.on]) s.child.kill();
    fs.rmSync(dir, { recursive: true, force: true });
  }
  console.log(`uprobe hits/s with no load of ours (taken off below): ${range(backgroundHits, 0)}\n`);
  const ms = (xs: (number | undefined)[]) => (xs[0] === undefined ? '-' : median(xs as number[]).toFixed(2));
  console.log(
    `| server (load) | req/s without | req/s with | loss % (median, range of ${rounds}) | p99 ms without | p99 ms with | ` +
      `mean ms without | mean ms with | max ms without | max ms with | server CPU µs/request without | with | ` +
      `uprobe hits/request | uprobe BPF ns/request |`,
  );
  console.log(`| --- | --- | --- | --- | --- | --- | --- | --- | --- | --- | --- | --- | --- | --- |`);
  for (const [name, r] of Object.entries(results)) {
    console.log(
      `| ${name} | ${median(r.off.map((x) => x.rps)).toFixed(0)} | ${median(r.on.map((x) => x.rps)).toFixed(0)} | ` +
        `${range(losses(r.off, r.on), 1)} | ${ms(r.off.map((x) => x.p99Ms))} | ${ms(r.on.map((x) => x.p99Ms))} | ` +
        `${ms(r.off.map((x) => x.meanMs))} | ${ms(r.on.map((x) => x.meanMs))} | ` +
        `${ms(r.off.map((x) => x.maxMs))} | ${ms(r.on.map((x) => x.maxMs))} | ` +
        `${range(r.cpuOff, 0)} | ${range(r.cpuOn, 0)} | ${range(r.hits, 2)} | ${range(r.ns, 0)} |`,
    );
  }
}

// bpf_stats on for the bench's run only (bench/bpf-stats.ts)
withBpfStats(main).catch((err: unknown) => {
  console.error(err);
  process.exit(1);
});
