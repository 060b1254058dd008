/**
 * What the TLS probes cost a real HTTPS server: wrk throughput and p99 on
 * Node https (OpenSSL linked into the pinned node) and Python's
 * ThreadingHTTPServer over ssl (libssl.so.3), with and without the agent,
 * interleaved in one run; and the uprobe hits per request (bpf_stats).
 *
 * Usage: node dist/bench/tls-overhead.js [rounds=3] [seconds=5]
 */
import { execFileSync, spawn, type ChildProcess } from 'node:child_process';
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { startBenchAgent } from './agent-process';

const ROOT = path.join(__dirname, '..', '..');
const SUPPORT = path.join(ROOT, 'test', 'support');
const rounds = Number(process.argv[2] ?? 3);
const seconds = Number(process.argv[3] ?? 5);

interface Wrk {
  rps: number;
  p99Ms: number;
  requests: number;
}

function startServer(command: string, args: string[]): Promise<{ child: ChildProcess; port: number }> {
  // stderr dropped: Python logs every connection wrk cuts at the end of a run
  const child = spawn(command, args, { stdio: ['ignore', 'pipe', 'ignore'] });
  return new Promise((resolve, reject) => {
    child.once('exit', (code) => reject(new Error(`${command} exited with ${code}`)));
    child.stdout!.once('data', (b: Buffer) => resolve({ child, port: Number(b.toString().trim()) }));
  });
}

function wrk(port: number): Promise<Wrk> {
  const script = path.join(os.tmpdir(), 'kreplay-tls-bench.lua');
  // a valid traceparent so every request opens a context, as a traced service's would
  fs.writeFileSync(
    script,
    `wrk.headers["traceparent"] = "00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01"\n` +
      `wrk.headers["x-request-id"] = "bench"\n`,
  );
  return new Promise((resolve, reject) => {
    const p = spawn('wrk', [
      '-t1',
      '-c8',
      `-d${seconds}s`,
      '--latency',
      '-s',
      script,
      `https://127.0.0.1:${port}/`,
    ]);
    let out = '';
    p.stdout.on('data', (b: Buffer) => (out += b.toString()));
    p.on('error', reject);
    p.on('exit', () => {
      const rps = /Requests\/sec:\s+([\d.]+)/.exec(out);
      const p99 = /99%\s+([\d.]+)(us|ms|s)/.exec(out);
      const total = /(\d+) requests in/.exec(out);
      if (!rps || !p99 || !total) return reject(new Error(`cannot read wrk's output:\n${out}`));
      const scale = { us: 0.001, ms: 1, s: 1000 }[p99[2] as 'us' | 'ms' | 's'];
      resolve({ rps: Number(rps[1]), p99Ms: Number(p99[1]) * scale, requests: Number(total[1]) });
    });
  });
}

/** Runs and run time of the TLS programs (needs kernel.bpf_stats_enabled=1). */
function tlsRuns(): { runs: number; ns: number } {
  const progs = JSON.parse(execFileSync('bpftool', ['-j', 'prog', 'show']).toString()) as {
    name?: string;
    run_cnt?: number;
    run_time_ns?: number;
  }[];
  const tls = progs.filter((p) => p.name?.startsWith('ssl_'));
  return {
    runs: tls.reduce((n, p) => n + (p.run_cnt ?? 0), 0),
    ns: tls.reduce((n, p) => n + (p.run_time_ns ?? 0), 0),
  };
}

const median = (xs: number[]) => [...xs].sort((a, b) => a - b)[Math.floor(xs.length / 2)]!;

async function main(): Promise<void> {
  const dir = fs.mkdtempSync(path.join(os.tmpdir(), 'kreplay-tls-bench-'));
  const cert = path.join(dir, 'cert.pem');
  const key = path.join(dir, 'key.pem');
  execFileSync(
    'openssl',
    [
      'req',
      '-x509',
      '-newkey',
      'rsa:2048',
      '-nodes',
      '-keyout',
      key,
      '-out',
      cert,
      '-subj',
      '/CN=127.0.0.1',
      '-days',
      '1',
    ],
    { stdio: 'ignore' },
  );
  fs.writeFileSync('/proc/sys/kernel/bpf_stats_enabled', '1');
  const servers = {
    'Node https': await startServer(process.execPath, [
      path.join(SUPPORT, 'tls-node-server.js'),
      cert,
      key,
      dir,
    ]),
    'Python ssl ThreadingHTTPServer': await startServer('/usr/bin/python3', [
      path.join(SUPPORT, 'tls-file-server.py'),
      cert,
      key,
      dir,
    ]),
  };
  const results: Record<string, { off: Wrk[]; on: Wrk[]; hits: number[]; ns: number[] }> = {};
  for (const name of Object.keys(servers)) results[name] = { off: [], on: [], hits: [], ns: [] };
  try {
    for (let round = 0; round < rounds; round++) {
      for (const [name, s] of Object.entries(servers)) results[name]!.off.push(await wrk(s.port));
      const agent = await startBenchAgent(ROOT, []);
      try {
        for (const [name, s] of Object.entries(servers)) {
          const before = tlsRuns();
          const r = await wrk(s.port);
          results[name]!.on.push(r);
          const after = tlsRuns();
          results[name]!.hits.push((after.runs - before.runs) / r.requests);
          results[name]!.ns.push((after.ns - before.ns) / r.requests);
        }
      } finally {
        await agent.stop();
      }
    }
  } finally {
    for (const s of Object.values(servers)) s.child.kill();
    fs.rmSync(dir, { recursive: true, force: true });
  }
  console.log(
    `| server | req/s without | req/s with | loss (median, range) | p99 ms without | p99 ms with | uprobe hits/request | TLS program ns/request |`,
  );
  console.log(`| --- | --- | --- | --- | --- | --- | --- | --- |`);
  for (const [name, r] of Object.entries(results)) {
    const losses = r.off.map((o, i) => 100 * (1 - r.on[i]!.rps / o.rps));
    console.log(
      `| ${name} | ${median(r.off.map((x) => x.rps)).toFixed(0)} | ${median(r.on.map((x) => x.rps)).toFixed(0)} | ` +
        `${median(losses).toFixed(1)}% (${Math.min(...losses).toFixed(1)}..${Math.max(...losses).toFixed(1)}) | ` +
        `${median(r.off.map((x) => x.p99Ms)).toFixed(2)} | ${median(r.on.map((x) => x.p99Ms)).toFixed(2)} | ` +
        `${median(r.hits).toFixed(2)} | ${median(r.ns).toFixed(0)} |`,
    );
  }
}

main().catch((err: unknown) => {
  console.error(err);
  process.exit(1);
});
