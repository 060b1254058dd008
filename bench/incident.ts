/**
 * Incident files (issue 23): bytes per event and export time, for a
 * transaction of 100,000 and of 1,000,000 events.
 *
 * The transaction is production-shaped and written through the agent's
 * StoreWriter: 32 threads of 3 services on 2 nodes, exponential gaps
 * (mean 20 µs), log-normal durations and sizes (full-entropy nanoseconds,
 * harder to compress than a real recording's), 40 file and socket targets,
 * some failed writes, 10% block I/O, and one background event without a
 * transaction for every four of it, interleaved in the same stores.
 *
 * Measured, several rounds each:
 * - what users run: `kreplay export TXN --format incident -o FILE` against
 *   the real daemon process over HTTP (its query workers read the stores),
 *   wall time of the CLI process, which checks the file whole before writing it;
 * - library level: the daemon's buildIncident over the node stores, in process;
 * - anchor, in the same run: `sqlite3 -json` dumping the same rows with their
 *   names joined, per store, and `zstd -3` of that dump (bytes only).
 *
 * `make bench BENCH=incident`, or node dist/bench/incident.js [rounds]
 */
import { spawnSync } from 'node:child_process';
import { loadavg } from 'node:os';
import { existsSync, mkdirSync, rmSync, statSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { EventBatch } from '../agent/ingest/event-batch';
import { StoreWriter } from '../agent/store/store-writer';
import { silentLogger } from '../core/log/logger';
import { targetKindCode } from '../core/model';
import { repoRoot } from '../core/repo-root';
import { buildIncident } from '../daemon/events/export/incident-export';
import { nodeStoresReader } from '../daemon/store/event-reader';
import { NodeStores } from '../daemon/store/node-stores';
import { startDaemonProcess } from './daemon-process';
import { median } from './server-load';
import { printTable } from './table';

const ROOT = repoRoot();
const OUT = join(ROOT, 'bench', 'out');
const SIZES = [100_000, 1_000_000];
const ROUNDS = Number(process.argv[2] ?? 3);
const TXN = 'incident-bench';
const FIRST_TS = 1_795_340_000_000_000_000n;
const NODES = 2;
const THREADS = 32;
const FORMAT = 1;

const log = (text: string) => process.stderr.write(`[incident bench] ${text}\n`);

/** mulberry32 (as bench/query-dataset.ts). */
function seeded(seed: number): () => number {
  let a = seed >>> 0;
  return () => {
    a = (a + 0x6d2b79f5) >>> 0;
    let t = a;
    t = Math.imul(t ^ (t >>> 15), t | 1);
    t ^= t + Math.imul(t ^ (t >>> 7), t | 61);
    return ((t ^ (t >>> 14)) >>> 0) / 4294967296;
  };
}
function logNormal(random: () => number, median: number, sigma: number): number {
  const normal = Math.sqrt(-2 * Math.log(1 - random())) * Math.cos(2 * Math.PI * random());
  return median * Math.exp(sigma * normal);
}

const TARGETS: [kind: 'file' | 'socket', value: string][] = [
  ...Array.from({ length: 30 }, (_, i): ['file', string] => [
    'file',
    `/var/lib/checkout/${['db', 'wal', 'log', 'cache', 'spool'][i % 5]}/${i}.${['sqlite', 'log', 'tmp'][i % 3]}`,
  ]),
  ...Array.from({ length: 10 }, (_, i): ['socket', string] => [
    'socket',
    `tcp 10.0.${i}.${7 + i}:${5432 + (i % 3)}`,
  ]),
];

function writeNode(dir: string, node: number, events: number): void {
  const random = seeded(node + 17);
  const writer = StoreWriter.open(dir, `node-${node}`);
  const batch = new EventBatch(65536);
  const ctx = writer.contexts.id(TXN, '4bf92f3577b34da6a3ce929d0e0e4736');
  const services = ['checkout', 'payments', 'inventory'].map((s) => writer.services.id(s));
  const comms = ['checkout-api', 'payd', 'inv-worker'].map((c) => writer.comms.id(c));
  const targets = TARGETS.map(([kind, value]) => writer.targets.id(targetKindCode(kind), value));
  let offset = 0;
  batch.clear(FIRST_TS);
  const total = Math.round(events * 1.25);
  for (let i = 0; i < total; i++) {
    offset += Math.max(1, Math.round(-Math.log(1 - random()) * 20_000));
    const inTxn = i % 5 !== 4;
    const thread = Math.floor(random() ** 1.5 * THREADS);
    const service = thread % 3;
    const block = random() < 0.1;
    const bytes = Math.max(1, Math.round(logNormal(random, 900, 1.3)));
    const common = {
      tsOffset: offset,
      dur: Math.max(200, Math.round(block ? logNormal(random, 400_000, 1) : logNormal(random, 15_000, 1.2))),
      service: services[service]!,
      ctx: inTxn ? ctx : 0,
      pid: 3000 + node * 100 + service,
      tid: 3000 + node * 100 + thread,
      comm: comms[service]!,
      bytes,
    };
    if (block)
      batch.pushBlockIo({
        ...common,
        dev: 259 * 0x100000,
        sector: Math.floor(random() * 1e9) * 8,
        op: 1,
        error: 0,
      });
    else {
      const t = Math.floor(random() ** 2 * targets.length);
      const failed = random() < 0.01;
      batch.pushSysWrite({
        ...common,
        fd: 5 + t,
        ret: failed ? -11 : bytes,
        syscall: 1 + (t % 2),
        target: targets[t]!,
      });
    }
    if (batch.full) {
      writer.writeBatch(batch);
      batch.clear(FIRST_TS);
    }
  }
  writer.writeBatch(batch);
  writer.close();
}

/** A data dir holding the transaction of `events` events (cached under bench/out). */
function dataset(events: number): string {
  const dir = join(OUT, `incident-v${FORMAT}-e${events}`);
  const marker = join(dir, 'complete');
  if (existsSync(marker)) return dir;
  rmSync(dir, { recursive: true, force: true });
  mkdirSync(dir, { recursive: true });
  for (let node = 0; node < NODES; node++) writeNode(dir, node, events / NODES);
  writeFileSync(marker, '');
  return dir;
}

const seconds = (ns: bigint) => Number(ns) / 1e9;
const range = (values: number[], digits = 2) => {
  const sorted = [...values].sort((a, b) => a - b);
  return `${sorted[0]!.toFixed(digits)}..${sorted[sorted.length - 1]!.toFixed(digits)}`;
};

/** Runs argv to its end and returns its wall time in seconds; throws on failure. */
function timed(argv: string[], env: NodeJS.ProcessEnv = {}): number {
  const started = process.hrtime.bigint();
  const result = spawnSync(argv[0]!, argv.slice(1), {
    env: { ...process.env, ...env },
    stdio: ['ignore', 'ignore', 'pipe'],
    maxBuffer: 1 << 26,
  });
  const took = seconds(process.hrtime.bigint() - started);
  if (result.status !== 0) throw new Error(`${argv.join(' ')} failed: ${result.stderr.toString()}`);
  return took;
}

/** The transaction's rows as sqlite3 dumps them as JSON, names joined, one store after another. */
const DUMP_SQL = `SELECT e.ts, e.seq, e.type, e.dur, s.name AS service, c.transaction_id, c.trace_id, e.pid, e.tid,
  m.name AS comm, e.bytes, e.fd, e.ret, e.syscall, t.kind AS target_kind, t.value AS target, e.dev, e.sector, e.op, e.error
  FROM events e JOIN contexts c ON e.ctx = c.id JOIN services s ON e.service = s.id JOIN comms m ON e.comm = m.id
  LEFT JOIN targets t ON e.target = t.id WHERE c.transaction_id = '${TXN}' ORDER BY e.ts, e.seq`;

async function main(): Promise<void> {
  mkdirSync(OUT, { recursive: true });
  const loadBefore = loadavg()[0]!.toFixed(1);
  const rows: (string | number)[][] = [];
  for (const events of SIZES) {
    const dir = dataset(events);
    const stores = ['node-0.db', 'node-1.db'].map((f) => join(dir, f));
    const file = join(OUT, `incident-${events}.kri`);
    const daemon = await startDaemonProcess(['--data-dir', dir], join(OUT, `incident-daemon-${events}.log`));
    const cli: number[] = [];
    const library: number[] = [];
    const sqlite: number[] = [];
    let dumpBytes = 0;
    let dumpZstdBytes = 0;
    try {
      for (let round = 0; round < ROUNDS; round++) {
        // the anchor first, then the CLI, then the library, each round
        const dump = join(OUT, `incident-dump-${events}.json`);
        let took = 0;
        dumpBytes = 0;
        dumpZstdBytes = 0;
        for (const store of stores) {
          const part = `${dump}.${dumpBytes}`;
          took += timed(['sh', '-c', `sqlite3 -readonly -json "$0" "$1" > "$2"`, store, DUMP_SQL, part]);
          dumpBytes += statSync(part).size;
          spawnSync('sh', ['-c', `zstd -q -3 -f "$0" -o "$0.zst"`, part]);
          dumpZstdBytes += statSync(`${part}.zst`).size;
          rmSync(part);
          rmSync(`${part}.zst`);
        }
        sqlite.push(took);
        rmSync(file, { force: true });
        cli.push(
          timed(
            [
              process.execPath,
              join(ROOT, 'bin', 'kreplay.js'),
              'export',
              TXN,
              '--format',
              'incident',
              '-o',
              file,
              '--server',
              daemon.url,
            ],
            {
              SOURCE_DATE_EPOCH: '1700000000',
            },
          ),
        );
        const reader = new NodeStores(dir, silentLogger);
        const started = process.hrtime.bigint();
        const runs = (ids: ReadonlySet<string>, from: bigint, to: bigint) =>
          reader.incidentRuns(ids, from, to);
        const bytes = await buildIncident(nodeStoresReader(reader), runs, {
          transactionId: TXN,
          sourceDateEpoch: 1_700_000_000,
        });
        library.push(seconds(process.hrtime.bigint() - started));
        reader.close();
        if (!bytes) throw new Error('the transaction has no events');
        log(
          `${events}: round ${round + 1}: cli ${cli.at(-1)!.toFixed(2)} s, library ${library.at(-1)!.toFixed(2)} s, sqlite3 ${took.toFixed(2)} s`,
        );
      }
    } finally {
      await daemon.stop();
    }
    const size = statSync(file).size;
    rows.push([
      events.toLocaleString('en-US'),
      (size / events).toFixed(1),
      (dumpBytes / events).toFixed(0),
      (dumpZstdBytes / events).toFixed(1),
      range(cli),
      range(library),
      range(sqlite),
      (median(cli) / median(sqlite)).toFixed(1),
    ]);
    rmSync(file, { force: true });
  }
  printTable(
    `Incident files: ${ROUNDS} rounds per size (ranges), file bytes per event, export time in s; load average ${loadBefore} at the start, ${loadavg()[0]!.toFixed(1)} at the end (2 cores)`,
    rows,
    [
      'EVENTS',
      'B/EVENT',
      'SQLITE3 JSON B/EV',
      'ITS ZSTD -3 B/EV',
      'CLI OVER HTTP S',
      'LIBRARY S',
      'SQLITE3 -JSON S',
      'CLI/SQLITE3',
    ],
  );
}

main().catch((err: unknown) => {
  console.error(err);
  process.exit(1);
});
