/**
 * Time from `kreplay replay --incident FILE --exec` to the build's first held
 * call, against the same replay from the daemon (`kreplay replay TXN --exec
 * --server URL`, the incident served by the real daemon from its data dir's
 * incidents/), for an incident of N events (default 100,000) whose first is
 * the build's first call. The build (bench/firstcall.c) reads CLOCK_MONOTONIC
 * just before that call; the figure is that reading minus the moment the
 * bench spawned kreplay (process.hrtime, the same clock). Anchors in the same
 * run: the build spawned bare (process start), and `kreplay --version` to its
 * exit (Node start and the CLI's load). Runs interleaved; ranges over them.
 *
 *   make bench BENCH=incident-start, or node dist/bench/incident-start.js [events] [runs]
 */
import { spawn } from 'node:child_process';
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { IncidentWriter } from '../core/incident';
import { silentLogger } from '../core/log/logger';
import type { ApiEvent } from '../core/model';
import { repoRoot } from '../core/repo-root';
import { createDaemon } from '../daemon/create-daemon';
import { benchLoop } from './bench-loops';
import { median } from './server-load';
import { printTable } from './table';

const EVENTS = Number(process.argv[2] ?? 100_000);
const RUNS = Number(process.argv[3] ?? 7);
const TXN = 'bench-start';
const KREPLAY = path.join(repoRoot(), 'bin', 'kreplay.js');

const log = (text: string) => process.stderr.write(`[incident-start bench] ${text}\n`);

/** Event k of the incident: the first to the build's target, the rest to files the build never writes. */
function event(k: number, target: string): ApiEvent {
  const T0 = 1_795_000_000_000_000_000n;
  return {
    event_id: `0000beef0000-${T0 + BigInt(k) * 10_000n}-${k}`,
    event_type: 'sys_write',
    timestamp_ns: T0 + BigInt(k) * 10_000n,
    duration_ns: k === 0 ? 1_000n : 2_000n + BigInt(k % 977),
    service_name: 'bench',
    transaction_id: TXN,
    trace_id: null,
    node: 'bench-node',
    pid: 1,
    tid: 1 + (k % 4),
    comm: 'bench',
    bytes: 2,
    syscall: 'write',
    fd: 3,
    ret: 2,
    target_kind: 'file',
    target: k === 0 ? target : `/var/lib/bench/f${k % 64}.log`,
  };
}

/** Spawns argv at a known moment; resolves to that moment (ns, monotonic) once it exited 0. */
function timed(argv: string[]): Promise<{ startNs: bigint; endNs: bigint }> {
  return new Promise((resolve, reject) => {
    const startNs = process.hrtime.bigint();
    const child = spawn(argv[0]!, argv.slice(1), { stdio: ['ignore', 'ignore', 'pipe'] });
    let err = '';
    child.stderr.on('data', (chunk: Buffer) => (err += chunk.toString()));
    child.on('error', reject);
    child.on('close', (code) =>
      code === 0
        ? resolve({ startNs, endNs: process.hrtime.bigint() })
        : reject(new Error(`${argv.join(' ')} exited ${code}: ${err.slice(-1500)}`)),
    );
  });
}

/** The build's first call, ms after the spawn of argv. */
async function toFirstCall(argv: string[], out: string): Promise<number> {
  fs.rmSync(out, { force: true });
  const { startNs } = await timed(argv);
  const first = /^first (\d+)$/m.exec(fs.readFileSync(out, 'utf8'))![1]!;
  return Number(BigInt(first) - startNs) / 1e6;
}

const fixed = (n: number) => n.toFixed(1);
const summary = (values: number[]) =>
  [fixed(median(values)), `${fixed(Math.min(...values))}..${fixed(Math.max(...values))}`] as const;

async function main(): Promise<void> {
  const build = benchLoop('firstcall');
  const dir = fs.mkdtempSync(path.join(os.tmpdir(), 'kreplay-bench-start-'));
  const target = path.join(dir, 'first.log');
  const out = path.join(dir, 'first.out');
  const data = path.join(dir, 'data');
  fs.mkdirSync(path.join(data, 'incidents'), { recursive: true });
  const writer = new IncidentWriter({ transactionId: TXN, source: 'node-stores' });
  for (let k = 0; k < EVENTS; k++) writer.add(event(k, target));
  const file = path.join(dir, 'incident.kri');
  fs.writeFileSync(file, writer.finish([]));
  fs.copyFileSync(file, path.join(data, 'incidents', 'incident.kri'));
  log(`incident of ${EVENTS} events: ${fs.statSync(file).size} bytes`);
  const daemon = await createDaemon({ dataDir: data, log: silentLogger });
  const node = process.execPath;
  const results: Record<string, number[]> = { bare: [], version: [], file: [], daemon: [] };
  try {
    for (let run = 0; run < RUNS; run++) {
      results.bare!.push(await toFirstCall([build, target, out], out));
      const version = await timed([node, KREPLAY, '--version']);
      results.version!.push(Number(version.endNs - version.startNs) / 1e6);
      results.file!.push(
        await toFirstCall(
          [node, KREPLAY, 'replay', '--incident', file, '--exec', '--', build, target, out],
          out,
        ),
      );
      results.daemon!.push(
        await toFirstCall(
          [node, KREPLAY, 'replay', TXN, '--exec', '--server', daemon.url, '--', build, target, out],
          out,
        ),
      );
      log(
        `run ${run + 1}/${RUNS}: file ${fixed(results.file!.at(-1)!)} ms, daemon ${fixed(results.daemon!.at(-1)!)} ms`,
      );
    }
  } finally {
    await daemon.close();
    fs.rmSync(dir, { recursive: true, force: true });
  }
  const anchor = median(results.version!);
  printTable(
    `time to the build's first held call, ${EVENTS} events, ${RUNS} runs (ms; median, range; ratio: median / kreplay --version's)`,
    [
      [
        'build spawned bare (process start)',
        ...summary(results.bare!),
        (median(results.bare!) / anchor).toFixed(2),
      ],
      ['kreplay --version, to its exit (anchor)', ...summary(results.version!), '1.00'],
      [
        'kreplay replay --incident FILE --exec',
        ...summary(results.file!),
        (median(results.file!) / anchor).toFixed(2),
      ],
      [
        'kreplay replay TXN --exec --server (daemon)',
        ...summary(results.daemon!),
        (median(results.daemon!) / anchor).toFixed(2),
      ],
    ],
    ['WHAT', 'MEDIAN', 'RANGE', 'RATIO'],
  );
}

main().catch((err: unknown) => {
  console.error(err);
  process.exit(1);
});
