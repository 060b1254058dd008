/**
 * Replay timing benchmark. A 10,000-event transaction (gaps of 10 µs to 2 ms,
 * log-uniform: ~4 s at speed 1) is replayed by `kreplay replay`, a separate
 * process reading the SSE stream, from a daemon running in this process,
 * while wrk loads GET /api/events on the same daemon over loopback. Reported
 * per speed: lateness when the clock thread releases an event, and when the
 * main thread has written it to the stream's socket; and cyclictest's
 * latency on this machine, measured under the same wrk load right before the
 * replay (same scheduling class as the daemon's threads: SCHED_OTHER), as the
 * platform's own timer limit. Then the daemon's CPU while it waits 5 s
 * between two events, with no load.
 *
 *   node dist/bench/replay.js
 */
import { spawn, type ChildProcess } from 'node:child_process';
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { EventBatch } from '../agent/ingest/event-batch';
import { silentLogger } from '../core/log/logger';
import { repoRoot } from '../core/repo-root';
import { StoreWriter } from '../agent/store/store-writer';
import { createDaemon } from '../daemon/create-daemon';
import type { HighResClock } from '../daemon/replay/clock/high-res-clock';
import type { ReplaySession } from '../daemon/replay/sessions/replay-session';
import type { ReplaySessions } from '../daemon/replay/sessions/session-service';
import type { TimingSummary } from '../daemon/replay/timing-stats';
import { printTable } from './table';

export interface ReplayBenchOptions {
  events: number;
  speeds: number[];
  cyclictestSeconds: number;
  /** the two events of the idle transaction are this far apart */
  idleGapSeconds: number;
}

export interface Latency {
  p50: number;
  p99: number;
  max: number;
}

export interface SpeedResult {
  speed: number;
  events: number;
  printed: number;
  replaySeconds: number;
  wrkRequestsPerSecond: number;
  release: Latency;
  delivery: Latency;
  cyclictest: Latency & { samples: number };
}

export interface ReplayBenchResult {
  options: ReplayBenchOptions;
  /** the clock thread's scheduling class, which cyclictest ran in too */
  scheduling: string;
  speeds: SpeedResult[];
  idle: { waitedSeconds: number; cpuMs: number; lateUs: number };
}

const T0 = 1_795_345_678_000_000_000n;
const NODES = 3;
const BACKGROUND_EVENTS = 30_000;
const MIN_GAP_NS = 10_000;
const MAX_GAP_NS = 2_000_000;
const WRK_PATH = '/api/events?limit=100&service=background';

const log = (msg: string) => process.stderr.write(`[bench:replay] ${msg}\n`);
const sleep = (ms: number) => new Promise((resolve) => setTimeout(resolve, ms));

/**
 * Gaps spread log-uniformly between the bounds by a low-discrepancy sequence
 * (fractional multiples of the golden ratio): reproducible without a seed.
 */
function gapNs(i: number): number {
  const u = (i * 0.6180339887498949) % 1;
  return Math.round(MIN_GAP_NS * (MAX_GAP_NS / MIN_GAP_NS) ** u);
}

/** Every node's store: its share of the benchmark's transactions, and background events for the load. */
function writeData(dir: string, events: number, idleGapNs: bigint): void {
  const writers = Array.from({ length: NODES }, (_, n) => StoreWriter.open(dir, `node-${n}`));
  const batches = writers.map(() => new EventBatch(events + BACKGROUND_EVENTS + 2));
  batches.forEach((batch) => batch.clear(T0));
  const push = (n: number, tsOffset: number, txn: string | null, service: string) => {
    const writer = writers[n]!;
    batches[n]!.pushSysWrite({
      tsOffset,
      dur: 20_000,
      service: writer.services.id(service),
      ctx: writer.contexts.id(txn, txn && `${txn}-trace`),
      pid: 100 + n,
      tid: 100 + n,
      comm: writer.comms.id('bench'),
      bytes: 512,
      fd: 3,
      ret: 512,
      syscall: 1,
    });
  };
  let offset = 0;
  for (let i = 0; i < events; i++) {
    offset += i === 0 ? 0 : gapNs(i);
    push(i % NODES, offset, 'bench-txn', 'replayed');
  }
  for (let i = 0; i < BACKGROUND_EVENTS; i++)
    push(i % NODES, Math.floor((i * offset) / BACKGROUND_EVENTS), null, 'background');
  push(0, 0, 'bench-idle', 'idle');
  push(1, Number(idleGapNs), 'bench-idle', 'idle');
  writers.forEach((writer, n) => {
    writer.writeBatch(batches[n]!);
    writer.close();
  });
}

function run(command: string, args: string[]): { child: ChildProcess; output: Promise<string> } {
  const child = spawn(command, args, { stdio: ['ignore', 'pipe', 'pipe'] });
  let out = '';
  child.stdout!.setEncoding('utf8').on('data', (chunk: string) => (out += chunk));
  child.stderr!.setEncoding('utf8').on('data', (chunk: string) => (out += chunk));
  const output = new Promise<string>((resolve, reject) => {
    child.once('error', reject);
    child.once('exit', () => resolve(out));
  });
  return { child, output };
}

/** p50, p99 and max from cyclictest's histogram (one µs per row; overflows count as the max). */
export function parseCyclictest(text: string): Latency & { samples: number } {
  const counts: number[] = [];
  for (const m of text.matchAll(/^(\d{6}) (\d+)/gm)) counts[Number(m[1])] = Number(m[2]);
  const max = Number(/# Max Latencies: (\d+)/.exec(text)?.[1] ?? NaN);
  const overflows = Number(/# Histogram Overflows: (\d+)/.exec(text)?.[1] ?? 0);
  const samples = counts.reduce((a, b) => a + (b ?? 0), 0) + overflows;
  const at = (q: number) => {
    let seen = 0;
    for (let us = 0; us < counts.length; us++) {
      seen += counts[us] ?? 0;
      if (seen >= q * samples) return us;
    }
    return max;
  };
  return { p50: at(0.5), p99: at(0.99), max, samples };
}

const micros = (summary: TimingSummary): Latency => ({
  p50: Number(summary.p50 ?? 0n) / 1000,
  p99: Number(summary.p99 ?? 0n) / 1000,
  max: Number(summary.max ?? 0n) / 1000,
});

/** cyclictest's flags for the scheduling class the clock thread got: the platform limit for that class. */
function cyclictestClass(scheduling: string): string[] {
  const fifo = /^SCHED_FIFO (\d+)$/.exec(scheduling);
  return fifo ? ['-p', fifo[1]!] : [];
}

async function replayUnderLoad(
  url: string,
  replay: ReplaySessions,
  clock: HighResClock,
  speed: number,
  options: ReplayBenchOptions,
  expectedWallSeconds: number,
): Promise<SpeedResult> {
  const wrkSeconds = Math.ceil(options.cyclictestSeconds + expectedWallSeconds + 4);
  const wrk = run('wrk', ['-t1', '-c32', `-d${wrkSeconds}s`, `${url}${WRK_PATH}`]);
  await sleep(1000);
  log(`speed ${speed}: cyclictest for ${options.cyclictestSeconds} s under load`);
  const cyclic = run('cyclictest', [
    '-m',
    '-q',
    ...cyclictestClass(clock.scheduling),
    '-D',
    `${options.cyclictestSeconds}s`,
    '-i',
    '1000',
    '-h',
    '2000',
  ]);
  const cyclictest = parseCyclictest(await cyclic.output);
  log(`speed ${speed}: replaying ${options.events} events under load`);
  const started = process.hrtime.bigint();
  const cli = run(process.execPath, [
    join(repoRoot(), 'bin', 'kreplay.js'),
    'replay',
    'bench-txn',
    '--speed',
    String(speed),
    '--server',
    url,
  ]);
  const printed = (await cli.output).split('\n').filter((line) => line.startsWith('{')).length;
  const replaySeconds = Number(process.hrtime.bigint() - started) / 1e9;
  if (cli.child.exitCode !== 0) throw new Error(`kreplay replay exited ${cli.child.exitCode}`);
  const wrkOut = await wrk.output;
  const session: ReplaySession = replay.list().at(-1)!;
  return {
    speed,
    events: session.record().events_emitted,
    printed,
    replaySeconds,
    wrkRequestsPerSecond: Number(/Requests\/sec:\s+([\d.]+)/.exec(wrkOut)?.[1] ?? NaN),
    release: micros(session.lateness.summary()),
    delivery: micros(session.delivery.summary()),
    cyclictest,
  };
}

/** CPU of this process (the daemon: main thread and clock thread) between two events far apart. */
async function idleWait(replay: ReplaySessions, gapSeconds: number): Promise<ReplayBenchResult['idle']> {
  const session = await replay.create({ transaction_id: 'bench-idle', speed_factor: 1, extra_latency_ns: 0 });
  await session.play();
  while (session.record().events_emitted < 1) await sleep(10);
  await sleep(250);
  const cpu = process.cpuUsage();
  const from = process.hrtime.bigint();
  await sleep(gapSeconds * 1000 - 750);
  const used = process.cpuUsage(cpu);
  const waitedSeconds = Number(process.hrtime.bigint() - from) / 1e9;
  while (session.state !== 'finished') await sleep(10);
  return {
    waitedSeconds,
    cpuMs: (used.user + used.system) / 1000,
    lateUs: Number(session.lateness.summary().max ?? 0n) / 1000,
  };
}

export async function runReplayBench(options: ReplayBenchOptions): Promise<ReplayBenchResult> {
  const dir = mkdtempSync(join(tmpdir(), 'kreplay-bench-replay-'));
  const daemon = await createDaemon({ dataDir: dir, sessionTtlMs: 3_600_000, log: silentLogger });
  const { replay, clock } = daemon;
  try {
    log(`writing ${options.events} events (plus ${BACKGROUND_EVENTS} for the query load) to ${dir}`);
    writeData(dir, options.events, BigInt(options.idleGapSeconds * 1e9));
    const recordedNs = Array.from({ length: options.events }, (_, i) => (i ? gapNs(i) : 0)).reduce(
      (a, b) => a + b,
      0,
    );
    const speeds: SpeedResult[] = [];
    for (const speed of options.speeds)
      speeds.push(await replayUnderLoad(daemon.url, replay, clock, speed, options, recordedNs / 1e9 / speed));
    log(`waiting ${options.idleGapSeconds} s between two events, no load`);
    const idle = await idleWait(replay, options.idleGapSeconds);
    return { options, scheduling: clock.scheduling, speeds, idle };
  } finally {
    await daemon.close();
    rmSync(dir, { recursive: true, force: true });
  }
}

export function printReplayBench(result: ReplayBenchResult): void {
  const us = (v: number) => v.toFixed(1);
  printTable(
    `replay: ${result.options.events.toLocaleString('en-US')} events, 10 µs..2 ms gaps, ` +
      `while wrk -t1 -c32 loads GET /api/events; clock thread and cyclictest under ${result.scheduling}; latencies in µs`,
    result.speeds.flatMap((r) => [
      [
        `speed ${r.speed}: released by the clock`,
        r.events,
        us(r.release.p50),
        us(r.release.p99),
        us(r.release.max),
      ],
      [
        `speed ${r.speed}: written to the stream`,
        r.printed,
        us(r.delivery.p50),
        us(r.delivery.p99),
        us(r.delivery.max),
      ],
      [
        `speed ${r.speed}: cyclictest, same load, just before`,
        r.cyclictest.samples,
        us(r.cyclictest.p50),
        us(r.cyclictest.p99),
        us(r.cyclictest.max),
      ],
    ]),
    ['measured', 'events (samples)', 'p50', 'p99', 'max'],
  );
  for (const r of result.speeds) {
    const goal = Math.min(r.cyclictest.p99, 200);
    console.log(
      `speed ${r.speed}: replay took ${r.replaySeconds.toFixed(2)} s, wrk ${Math.round(r.wrkRequestsPerSecond)} req/s; ` +
        `release p99 ${us(r.release.p99)} µs vs goal ${us(goal)} µs (${r.release.p99 <= goal ? 'met' : 'missed'}), ` +
        `p50 ${us(r.release.p50)} µs vs 20 µs (${r.release.p50 <= 20 ? 'met' : 'missed'})`,
    );
  }
  const { idle } = result;
  console.log(
    `waiting between two events ${result.options.idleGapSeconds} s apart: ${idle.cpuMs.toFixed(2)} ms CPU ` +
      `over ${idle.waitedSeconds.toFixed(2)} s (${(idle.cpuMs / 10 / idle.waitedSeconds).toFixed(3)}% of a core); ` +
      `lateness of the two events at most ${us(idle.lateUs)} µs`,
  );
}

if (require.main === module) {
  const env = (name: string, fallback: number) => Number(process.env[name] ?? fallback);
  void runReplayBench({
    events: env('KREPLAY_BENCH_EVENTS', 10_000),
    speeds: [1, 100],
    cyclictestSeconds: env('KREPLAY_BENCH_CYCLICTEST_SECONDS', 10),
    idleGapSeconds: 5,
  }).then(printReplayBench);
}
