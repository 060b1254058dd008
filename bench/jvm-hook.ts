/**
 * What the JVM hook costs a Java server doing the accuracy scenario (test/support/runtimes/
 * JvmPoolServer.java: com.sun.net.httpserver on a fixed pool of 8, an upstream call through
 * java.net.http.HttpClient, five files written: on the handler's thread, through an
 * ExecutorService, CompletableFuture.runAsync, a ForkJoinPool and a ScheduledExecutorService):
 * wrk throughput and p99, the server's CPU per request and its write system calls per request (the
 * hook's signals are writes; the scenario's own are five), without the agent, with the agent and
 * its hook, with the hook left in the JVM after the agent stopped (its signals reach no probe), and
 * with the agent and the server opted out (KREPLAY_JVM_HOOK=off), interleaved round by round. Two
 * JVMs run the same code: one opted out (the "without" runs and the opted-out ones), one the agent
 * hooks at its first "with" round.
 *
 * Usage: node dist/bench/jvm-hook.js [rounds=5] [seconds=5] [connections=64]
 */
import fs from 'node:fs';
import { createServer } from 'node:http';
import type { AddressInfo } from 'node:net';
import os from 'node:os';
import path from 'node:path';
import { startBenchAgent, type BenchAgent } from './agent-process';
import { cpuUs, losses, range, startServer, wrk, type Load, type Served } from './server-load';

const ROOT = path.join(__dirname, '..', '..');
const SERVER = path.join(ROOT, 'test', 'support', 'runtimes', 'JvmPoolServer.java');
const rounds = Number(process.argv[2] ?? 5);
const seconds = Number(process.argv[3] ?? 5);
const connections = Number(process.argv[4] ?? 64);

interface Run extends Load {
  /** the server's user + system CPU per request, µs */
  cpuUs: number;
  /** the server's write-family system calls per request */
  writes: number;
}

const writeCalls = (pid: number) =>
  Number(/^syscw:\s+(\d+)$/m.exec(fs.readFileSync(`/proc/${pid}/io`, 'utf8'))![1]);

async function measure(server: Served): Promise<Run> {
  const pid = server.child.pid!;
  const cpu = cpuUs(pid);
  const writes = writeCalls(pid);
  const load = await wrk({ url: `http://127.0.0.1:${server.port}/`, seconds, threads: 1, connections });
  return {
    ...load,
    cpuUs: (cpuUs(pid) - cpu) / load.requests,
    writes: (writeCalls(pid) - writes) / load.requests,
  };
}

/** Waits for the agent's word on JVM `pid`; throws with its output unless it loaded the hook. */
async function awaitJvmHooked(agent: BenchAgent, pid: number): Promise<void> {
  const word = new RegExp(
    `(loaded the JVM hook|JVM process unattributed|could not hook)[^\\n]* pid=${pid}\\b`,
  );
  const deadline = Date.now() + 20_000;
  while (!word.test(agent.output())) {
    if (Date.now() > deadline) throw new Error(`no word on JVM ${pid}:\n${agent.output()}`);
    await new Promise((r) => setTimeout(r, 50));
  }
  if (word.exec(agent.output())![1] !== 'loaded the JVM hook') throw new Error(agent.output());
}

async function main(): Promise<void> {
  const dir = fs.mkdtempSync(path.join(os.tmpdir(), 'kreplay-jvm-bench-'));
  const upstream = createServer((_req, res) => res.end('upstream'));
  upstream.keepAliveTimeout = 60_000;
  await new Promise<void>((resolve) => upstream.listen(0, '127.0.0.1', resolve));
  const upstreamPort = (upstream.address() as AddressInfo).port;
  const start = (env: NodeJS.ProcessEnv) =>
    startServer('/usr/bin/java', [SERVER, dir, String(upstreamPort)], env);
  const optedOut = { ...process.env, KREPLAY_JVM_HOOK: 'off' };
  const hookable = { ...process.env };
  delete hookable.KREPLAY_JVM_HOOK;
  const plain = await start(optedOut);
  const hooked = await start(hookable);
  const modes = [
    'without the agent',
    'agent, JVM hook',
    'the hook, agent stopped',
    'agent, KREPLAY_JVM_HOOK=off',
  ] as const;
  const runs = Object.fromEntries(modes.map((mode) => [mode, [] as Run[]])) as Record<
    (typeof modes)[number],
    Run[]
  >;
  try {
    // both JVMs warmed up (JIT) before the first measured round
    await measure(plain);
    await measure(hooked);
    for (let round = 0; round < rounds; round++) {
      runs['without the agent'].push(await measure(plain));
      const agent = await startBenchAgent(ROOT, ['--include', `pid:${hooked.child.pid}`]);
      try {
        await awaitJvmHooked(agent, hooked.child.pid!);
        runs['agent, JVM hook'].push(await measure(hooked));
      } finally {
        await agent.stop();
      }
      runs['the hook, agent stopped'].push(await measure(hooked));
      const unhooked = await startBenchAgent(ROOT, ['--include', `pid:${plain.child.pid}`]);
      try {
        runs['agent, KREPLAY_JVM_HOOK=off'].push(await measure(plain));
      } finally {
        await unhooked.stop();
      }
    }
  } finally {
    plain.child.kill();
    hooked.child.kill();
    upstream.close();
    upstream.closeAllConnections();
    fs.rmSync(dir, { recursive: true, force: true });
  }
  const base = runs['without the agent'];
  console.log(
    `| ${connections} connections, median (range of ${rounds}) | req/s | loss vs without | p99 ms | server CPU µs/request | writes/request |`,
  );
  console.log('| --- | --- | --- | --- | --- | --- |');
  for (const mode of modes) {
    const r = runs[mode];
    const cells = [
      range(
        r.map((x) => x.rps),
        0,
      ),
      mode === modes[0] ? '' : `${range(losses(base, r), 1)}%`,
      range(
        r.map((x) => x.p99Ms!),
        2,
      ),
      range(
        r.map((x) => x.cpuUs),
        0,
      ),
      range(
        r.map((x) => x.writes),
        2,
      ),
    ];
    console.log(`| ${mode} | ${cells.join(' | ')} |`);
  }
}

main().catch((err: unknown) => {
  console.error(err);
  process.exit(1);
});
