/**
 * `kreplay replay --exec` on a real child, against strace's delay injector:
 *
 * 1. pass-through: a loop of 64-byte writes to /dev/null (bench/writeloop.c)
 *    bare, under `kreplay replay --exec` with nothing matched, and under
 *    `strace -f --inject=write:delay_enter=0`, rounds interleaved; the cost
 *    per call is the median ns/write minus the bare loop's.
 * 2. holds: 8 threads × 125 writes, each thread to its own file (bench/holdloop.c),
 *    pausing 0..D at random after each write, per delay D in 50 µs..50 ms
 *    (1,000 calls per D, 10,000 in all): under
 *    kreplay, the incident holds every call D; under strace, delay_enter=D.
 *    Hold error = the duration the writer measured − D.
 *
 * The incident is written to a node store and served by the real daemon
 * (createDaemon, over HTTP). `make bench BENCH=exec`, or
 *   node dist/bench/exec.js [passWrites] [rounds]
 */
import { spawn } from 'node:child_process';
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { EventBatch } from '../agent/ingest/event-batch';
import { StoreWriter } from '../agent/store/store-writer';
import { silentLogger } from '../core/log/logger';
import { targetKindCode } from '../core/model/target';
import { repoRoot } from '../core/repo-root';
import { createDaemon, type Daemon } from '../daemon/create-daemon';
import { benchLoop } from './bench-loops';
import { printTable } from './table';

const DELAYS_US = [50, 100, 200, 500, 1000, 2000, 5000, 10000, 20000, 50000];
const THREADS = 8;
const WRITES_PER_THREAD = 125;

const log = (text: string) => process.stderr.write(`[exec bench] ${text}\n`);

/** Runs argv to its end; resolves to its stdout, rejects on a non-zero exit. */
function run(argv: string[]): Promise<string> {
  return new Promise((resolve, reject) => {
    const child = spawn(argv[0]!, argv.slice(1), { stdio: ['ignore', 'pipe', 'pipe'] });
    let out = '';
    let err = '';
    child.stdout.on('data', (chunk: Buffer) => (out += chunk.toString()));
    child.stderr.on('data', (chunk: Buffer) => (err += chunk.toString()));
    child.on('error', reject);
    child.on('close', (code) =>
      code === 0 ? resolve(out) : reject(new Error(`${argv.join(' ')} exited ${code}: ${err.slice(-2000)}`)),
    );
  });
}

const kreplayExec = (daemon: Daemon, txn: string, argv: string[]) => [
  process.execPath,
  path.join(repoRoot(), 'bin', 'kreplay.js'),
  'replay',
  txn,
  '--exec',
  '--server',
  daemon.url,
  '--',
  ...argv,
];
const straceInject = (delay: string, argv: string[]) => [
  'strace',
  '-f',
  '-qq',
  '-o',
  '/dev/null',
  '-e',
  'trace=write',
  `--inject=write:delay_enter=${delay}`,
  ...argv,
];

const median = (values: number[]) => [...values].sort((a, b) => a - b)[Math.floor((values.length - 1) / 2)]!;
function quantile(sorted: number[], q: number): number {
  return sorted[Math.max(0, Math.ceil(q * sorted.length) - 1)]!;
}
const us = (ns: number) => (ns / 1000).toFixed(1);
const range = (values: number[]) => `${us(Math.min(...values))}..${us(Math.max(...values))}`;

type Tool = 'kreplay' | 'strace';

/**
 * The recorded incident, in a node store as the agent writes it: one write of
 * `bench-pass` to a file the loop never writes, and per delay D 8 threads ×
 * 125 writes of `bench-hold-D`, each thread to its own file, each taking D.
 */
function writeIncident(dir: string): void {
  const T0 = 1_795_000_000_000_000_000n;
  const writer = StoreWriter.open(dir, 'bench-node');
  const batch = new EventBatch(1 + DELAYS_US.length * THREADS * WRITES_PER_THREAD);
  batch.clear(T0);
  const push = (txn: string, tsOffset: number, dur: number, file: string) =>
    batch.pushSysWrite({
      tsOffset,
      dur,
      service: writer.services.id('bench'),
      ctx: writer.contexts.id(txn, null),
      pid: 1,
      tid: 1,
      comm: writer.comms.id('incident'),
      bytes: 64,
      fd: 3,
      ret: 64,
      syscall: 1,
      target: writer.targets.id(targetKindCode('file'), file),
    });
  push('bench-pass', 0, 1_000_000, '/nonexistent/never-written');
  for (const delayUs of DELAYS_US)
    for (let t = 0; t < THREADS; t++)
      for (let i = 0; i < WRITES_PER_THREAD; i++)
        push(`bench-hold-${delayUs}`, (i * 1000 + t) * 1e6, delayUs * 1000, path.join(dir, `t${t}`));
  writer.writeBatch(batch);
  writer.close();
}

/** Hold errors (ns) of every write, tool by tool, delay by delay. */
async function holdRound(
  daemon: Daemon,
  holdloop: string,
  dir: string,
): Promise<Record<Tool, Map<number, number[]>>> {
  const errors: Record<Tool, Map<number, number[]>> = { kreplay: new Map(), strace: new Map() };
  for (const delayUs of DELAYS_US) {
    for (const tool of ['kreplay', 'strace'] as Tool[]) {
      const out = path.join(dir, `times-${tool}`);
      // each thread pauses 0..D between writes: the threads' calls fall due at scattered times
      const argv = [holdloop, dir, String(THREADS), String(WRITES_PER_THREAD), String(delayUs), out];
      await run(
        tool === 'kreplay'
          ? kreplayExec(daemon, `bench-hold-${delayUs}`, argv)
          : straceInject(`${delayUs}us`, argv),
      );
      const observed = fs
        .readFileSync(out, 'utf8')
        .trim()
        .split('\n')
        .map((line) => Number(line.split(' ')[2]) - delayUs * 1000);
      errors[tool].set(delayUs, observed);
    }
    log(`holds of ${delayUs} µs done`);
  }
  return errors;
}

async function main(): Promise<void> {
  const [passArg, roundsArg] = process.argv.slice(2).map(Number);
  const passWrites = passArg || 30_000;
  const rounds = roundsArg || 3;
  const writeloop = benchLoop('writeloop');
  const holdloop = benchLoop('holdloop');
  const dir = fs.mkdtempSync(path.join(os.tmpdir(), 'kreplay-bench-exec-'));
  writeIncident(dir);
  const daemon = await createDaemon({ dataDir: dir, log: silentLogger });
  try {
    const pass: Record<'bare' | Tool, number[]> = { bare: [], kreplay: [], strace: [] };
    for (let round = 0; round < rounds; round++) {
      pass.bare.push(Number(await run([writeloop, String(passWrites)])));
      pass.kreplay.push(
        Number(await run(kreplayExec(daemon, 'bench-pass', [writeloop, String(passWrites)]))),
      );
      pass.strace.push(Number(await run(straceInject('0', [writeloop, String(passWrites)]))));
      log(`pass-through round ${round + 1}/${rounds} done`);
    }
    const bare = median(pass.bare);
    const added = (tool: Tool) => median(pass[tool]) - bare;
    printTable(
      `Pass-through: ${passWrites} writes of 64 bytes to /dev/null, ${rounds} rounds (median, range over rounds)`,
      (['bare', 'kreplay', 'strace'] as const).map((mode) => [
        mode === 'kreplay'
          ? 'kreplay replay --exec (nothing matched)'
          : mode === 'strace'
            ? 'strace -f --inject=write:delay_enter=0'
            : 'bare',
        median(pass[mode]).toFixed(0),
        `${Math.min(...pass[mode]).toFixed(0)}..${Math.max(...pass[mode]).toFixed(0)}`,
        mode === 'bare' ? '-' : added(mode).toFixed(0),
      ]),
      ['mode', 'ns/write', 'range', 'added ns/write'],
    );
    console.log(
      `kreplay costs ${(added('kreplay') / added('strace')).toFixed(3)} of strace per call (goal <= 0.2)`,
    );

    const holdRounds = Math.max(1, Math.min(rounds, 2));
    const all: Record<Tool, Map<number, number[]>[]> = { kreplay: [], strace: [] };
    for (let round = 0; round < holdRounds; round++) {
      const errors = await holdRound(daemon, holdloop, dir);
      all.kreplay.push(errors.kreplay);
      all.strace.push(errors.strace);
    }
    const rows: (string | number)[][] = [];
    for (const delayUs of [...DELAYS_US, 0]) {
      const row: (string | number)[] = [
        delayUs === 0 ? 'all' : delayUs >= 1000 ? `${delayUs / 1000} ms` : `${delayUs} µs`,
      ];
      for (const tool of ['kreplay', 'strace'] as Tool[]) {
        const perRound = all[tool].map((errors) =>
          (delayUs === 0 ? [...errors.values()].flat() : errors.get(delayUs)!).sort((a, b) => a - b),
        );
        const p50 = perRound.map((s) => quantile(s, 0.5));
        const p99 = perRound.map((s) => quantile(s, 0.99));
        const early = perRound.reduce((n, s) => n + s.filter((e) => e < 0).length, 0);
        row.push(`${us(median(p50))} (${range(p50)})`, `${us(median(p99))} (${range(p99)})`, early);
      }
      rows.push(row);
    }
    printTable(
      `Hold error (observed − intended, µs): ${THREADS} threads × ${WRITES_PER_THREAD} writes per delay, ${holdRounds} round(s); median of rounds (range)`,
      rows,
      ['hold', 'kreplay p50', 'kreplay p99', 'kreplay early', 'strace p50', 'strace p99', 'strace early'],
    );
  } finally {
    await daemon.close();
    fs.rmSync(dir, { recursive: true, force: true });
  }
}

main().catch((err: unknown) => {
  console.error(err);
  process.exit(1);
});
