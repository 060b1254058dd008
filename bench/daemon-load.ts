/**
 * The daemon's main thread under query load. `wrk -t1 -c8` fetches pages of
 * 1,000 events from the real daemon over loopback for 5 s, and the main
 * thread's own CPU time (its /proc task, so the query workers are not in it)
 * is divided by the requests served: with the query pool at 1, 2 and 4
 * workers, and, as the anchor in the same run, the same app with its queries
 * on the main thread (createApp over the node stores, as before the pool).
 * Rounds interleave the four; the machine is shared, so read the ranges.
 *
 *   node dist/bench/daemon-load.js [rounds]
 */
import { spawn } from 'node:child_process';
import { mkdtempSync, readFileSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { EventBatch } from '../agent/ingest/event-batch';
import { StoreWriter } from '../agent/store/store-writer';
import { silentLogger } from '../core/log/logger';
import { createApp } from '../daemon/app';
import { createDaemon } from '../daemon/create-daemon';
import { listen } from '../daemon/server';
import { NodeStores } from '../daemon/store/node-stores';
import { printTable } from './table';

const EVENTS = 30_000;
const SECONDS = 5;
const log = (msg: string) => process.stderr.write(`[bench:daemon-load] ${msg}\n`);

function writeData(dir: string): void {
  const writer = StoreWriter.open(dir, 'n1');
  const batch = new EventBatch(EVENTS);
  batch.clear(1_795_000_000_000_000_000n);
  const comm = writer.comms.id('worker');
  const service = writer.services.id('svc');
  for (let i = 0; i < EVENTS; i++) {
    const ctx = writer.contexts.id(`txn-${i % 100}`, null);
    batch.pushSysWrite({
      tsOffset: i * 1000,
      dur: 1000,
      service,
      ctx,
      pid: 1,
      tid: 1,
      comm,
      bytes: 64,
      fd: 3,
      ret: 64,
      syscall: 1,
    });
  }
  writer.writeBatch(batch);
  writer.close();
}

/** This process's main thread's user + system CPU, ms (clock ticks of 10 ms). */
function mainThreadCpuMs(): number {
  const stat = readFileSync(`/proc/${process.pid}/task/${process.pid}/stat`, 'utf8');
  const fields = stat.slice(stat.lastIndexOf(')') + 2).split(' ');
  return (Number(fields[11]) + Number(fields[12])) * 10;
}

interface Load {
  requests: number;
  reqPerS: number;
  mainMsPerRequest: number;
}

async function load(url: string): Promise<Load> {
  const before = mainThreadCpuMs();
  const out = await new Promise<string>((resolve, reject) => {
    const wrk = spawn('wrk', ['-t1', '-c8', `-d${SECONDS}s`, `${url}/api/events?limit=1000`]);
    let text = '';
    wrk.stdout.on('data', (chunk: Buffer) => (text += chunk.toString()));
    wrk.on('error', reject);
    wrk.on('exit', () => resolve(text));
  });
  const cpu = mainThreadCpuMs() - before;
  const requests = Number(/(\d+) requests in/.exec(out)?.[1] ?? 0);
  if (requests === 0) throw new Error(`wrk served nothing:\n${out}`);
  return { requests, reqPerS: requests / SECONDS, mainMsPerRequest: cpu / requests };
}

async function main(): Promise<void> {
  const rounds = Number(process.argv[2] ?? 3);
  const dir = mkdtempSync(join(tmpdir(), 'kreplay-bench-daemon-load-'));
  const results = new Map<string, Load[]>();
  const add = (mode: string, result: Load) => results.set(mode, [...(results.get(mode) ?? []), result]);
  try {
    writeData(dir);
    for (let round = 0; round < rounds; round++) {
      for (const workers of [1, 2, 4]) {
        const daemon = await createDaemon({ dataDir: dir, log: silentLogger, queryWorkers: workers });
        add(`query pool, ${workers} worker${workers > 1 ? 's' : ''}`, await load(daemon.url));
        await daemon.close();
      }
      const stores = new NodeStores(dir, silentLogger);
      const running = await listen(createApp({ log: silentLogger, stores }), '127.0.0.1', 0);
      add('queries on the main thread (anchor)', await load(running.url));
      await running.close();
      stores.close();
      log(`round ${round + 1} of ${rounds} done`);
    }
  } finally {
    rmSync(dir, { recursive: true, force: true });
  }
  const range = (values: number[], digits: number) => {
    const sorted = [...values].sort((a, b) => a - b);
    return `${sorted[Math.floor(sorted.length / 2)]!.toFixed(digits)} (${sorted[0]!.toFixed(digits)}..${sorted.at(-1)!.toFixed(digits)})`;
  };
  const rows = [...results].map(([mode, runs]) => [
    mode,
    range(
      runs.map((r) => r.reqPerS),
      0,
    ),
    range(
      runs.map((r) => r.mainMsPerRequest),
      3,
    ),
  ]);
  printTable(
    `wrk -t1 -c8 -d${SECONDS}s GET /api/events?limit=1000 (${EVENTS} events), ${rounds} rounds: median (range)`,
    rows,
    ['mode', 'req/s', 'main-thread CPU ms per request'],
  );
}

void main().then(
  () => process.exit(0),
  (err: unknown) => {
    console.error(err);
    process.exit(1);
  },
);
