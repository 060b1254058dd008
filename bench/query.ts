/**
 * Query benchmark: GET /api/events over HTTP against a daemon child process
 * on a multi-node dataset, per query shape: p50/p99 latency over many keys,
 * the same SQL timed in the sqlite3 CLI in the same run, requests/s under
 * wrk, and the daemon's RSS around a 10,000-event page. The daemon runs once
 * per query-worker count (KREPLAY_BENCH_QUERY_WORKERS, default 1,2,4), and
 * each also serves a `mixed` wrk load cycling through every shape's keys.
 *
 *   node dist/bench/query.js            (KREPLAY_BENCH_EVENTS=10000000 by default)
 *   KREPLAY_BENCH_EVENTS=300000 KREPLAY_BENCH_REQUESTS=200 KREPLAY_BENCH_WRK_SECONDS=3 node dist/bench/query.js
 */
import { spawnSync } from 'node:child_process';
import { existsSync, mkdirSync, readFileSync, writeFileSync } from 'node:fs';
import { Agent, get as httpGet } from 'node:http';
import { dirname, join } from 'node:path';
import { parse } from 'node:querystring';
import { silentLogger } from '../core/log/logger';
import { storePath } from '../agent/store/store-writer';
import type { EventFilter } from '../daemon/store/event-filter';
import { eventsQuerySchema, toFilter, DEFAULT_LIMIT } from '../daemon/events/events-query';
import { parseQuery } from '../daemon/http/query-params';
import { rangeFor } from '../daemon/store/key-range';
import { NodeStore } from '../daemon/store/node-store';
import { NodeStores } from '../daemon/store/node-stores';
import { eventsSql, rangeParams } from '../daemon/store/query-sql';
import { ensureDataset, type Dataset } from './query-dataset';
import { inlineParams, SqliteCli } from './sqlite-cli';
import { startDaemonProcess } from './daemon-process';
import { printTable } from './table';

export interface QueryBenchOptions {
  events: number;
  nodes: number;
  services: number;
  /** keys (distinct requests) per shape */
  requests: number;
  wrkSeconds: number;
  /** the daemon's --query-workers, one run each */
  workerCounts: number[];
}

interface Key {
  query: string;
  filter: EventFilter;
  limit: number;
}

/** A key as the daemon sees it: its filter and limit come from the daemon's own query parsing. */
function keyOf(query: string): Key {
  const parsed = parseQuery(eventsQuerySchema, parse(query));
  return { query, filter: toFilter(parsed), limit: parsed.limit ?? DEFAULT_LIMIT };
}

interface Shape {
  name: string;
  keys: Key[];
}

export interface ShapeResult {
  workers: number;
  shape: string;
  keys: number;
  medianEvents: number;
  httpP50Ms: number;
  httpP99Ms: number;
  sqliteP50Ms: number;
  sqliteP99Ms: number;
  wrkRequestsPerSecond: number;
  wrkErrors: string;
}

export interface QueryBenchResult {
  options: QueryBenchOptions;
  shapes: ShapeResult[];
  rssStartMiB: number;
  /** after five 10,000-event pages on the fresh daemon */
  rssAfterBigPagesMiB: number;
  bigPageMedianMs: number;
  rssAfterRunsMiB: number;
  peakRssMiB: number;
}

const ROOT = (() => {
  let dir = __dirname;
  while (!existsSync(join(dir, 'package.json'))) dir = dirname(dir);
  return dir;
})();
const OUT = join(ROOT, 'bench', 'out');
/** requests run before timing, so the JIT, SQLite's caches and the OS page cache are warm */
const WARMUP = 200;

const log = (msg: string) => process.stderr.write(`[bench:query] ${msg}\n`);

function seeded(seed: number): () => number {
  let s = seed;
  return () => {
    s = (s * 1103515245 + 12345) & 0x7fffffff;
    return s / 0x80000000;
  };
}

function percentile(sorted: number[], p: number): number {
  return sorted[Math.min(sorted.length - 1, Math.floor((sorted.length * p) / 100))]!;
}

/** Keys per shape; lookups keep only keys returning 1..100 events, the size the latency goal is about. */
function buildShapes(data: Dataset, stores: NodeStores, perShape: number): Shape[] {
  const random = seeded(42);
  const pick = (n: number) => Math.floor(random() * n);
  const someTime = () => data.firstTs + BigInt(pick(Number(data.spanNs / 1_000_000n))) * 1_000_000n;
  const lookups = (make: () => string): Key[] => {
    const keys: Key[] = [];
    for (let tries = 0; keys.length < perShape && tries < perShape * 50; tries++) {
      const key = keyOf(make());
      const { count } = stores.summarize(key.filter);
      if (count >= 1 && count <= 100) keys.push(key);
    }
    return keys;
  };
  const many = (make: () => string): Key[] => Array.from({ length: perShape }, () => keyOf(make()));
  // transactions per node, from the generator's naming: 30% of events in bursts of ~20
  const txnsPerNode = Math.max(1, Math.floor(((data.events / data.nodes) * 0.3) / 20));
  return [
    {
      name: 'transaction_id',
      keys: lookups(() => `transaction_id=txn-${pick(data.nodes)}-${pick(txnsPerNode)}`),
    },
    {
      name: 'trace_id',
      keys: lookups(() => {
        const j = pick(txnsPerNode);
        return `trace_id=${j % 2 === 0 ? `tr-${pick(data.nodes)}-${j}` : `tr-x${Math.floor(j / 6)}`}`;
      }),
    },
    {
      name: 'service + 10 s window',
      keys: many(() => {
        const from = someTime();
        return `service=service-${pick(data.services)}&from=${from}&to=${from + 10_000_000_000n}`;
      }),
    },
    {
      name: 'type + min_duration_ms',
      keys: many(
        () =>
          `event_type=${random() < 0.5 ? 'sys_write' : 'block_io'}` +
          `&min_duration_ms=${['0.5', '1', '2', '5'][pick(4)]}&from=${someTime()}`,
      ),
    },
    {
      name: 'transaction_id + target_kind',
      keys: lookups(() => `transaction_id=txn-${pick(data.nodes)}-${pick(txnsPerNode)}&target_kind=file`),
    },
    {
      // no index on the target: the time window is read and the target checked per row
      name: 'target + 10 s window',
      keys: many(() => {
        const from = someTime();
        return `target=/var/lib/service-${pick(data.services)}/${3 + pick(4)}.log&from=${from}&to=${from + 10_000_000_000n}`;
      }),
    },
    {
      // the worst case: nothing narrows the read but the target itself
      name: 'target alone, limit 100',
      keys: many(() => `target=/var/lib/service-${pick(data.services)}/${3 + pick(4)}.log&limit=100`),
    },
    { name: 'page of 1000', keys: many(() => `from=${someTime()}&limit=1000`) },
  ];
}

/**
 * The statements the daemon runs for a key's first page, per store: the
 * context lookup where there is one, then each index read with the LIMIT of
 * its share of the page (refills, when the merge needs them, are extra
 * daemon work and count against HTTP).
 */
function rawScripts(stores: NodeStore[], key: Key): string[] {
  const reads = stores.map((store) => store.reads(key.filter));
  const total = reads.reduce((n, r) => n + r.length, 0);
  const share = Math.min(key.limit + 1, Math.max(16, Math.ceil((key.limit + 1) / Math.max(1, total))));
  return stores.map((store, i) => {
    const statements: string[] = [];
    const { transactionId, traceId } = key.filter;
    if (transactionId !== undefined || traceId !== undefined) {
      // a dataset kept from an older build is read at its own version, as the daemon reads it
      const { sql, params } = store.contextIdsQuery(key.filter);
      statements.push(inlineParams(sql, params));
    }
    const range = rangeParams(rangeFor(key.filter, store.info.storeId, 'asc'));
    for (const read of reads[i]!)
      statements.push(inlineParams(eventsSql(read.shape, 'asc'), { ...read.params, ...range, limit: share }));
    return statements.join('\n');
  });
}

function request(agent: Agent, base: string, path: string): Promise<{ ms: number; body: string }> {
  return new Promise((resolve, reject) => {
    const started = process.hrtime.bigint();
    httpGet(`${base}${path}`, { agent }, (res) => {
      const chunks: Buffer[] = [];
      res.on('data', (c: Buffer) => chunks.push(c));
      res.on('end', () => {
        const ms = Number(process.hrtime.bigint() - started) / 1e6;
        const body = Buffer.concat(chunks).toString('utf8');
        if (res.statusCode !== 200) reject(new Error(`${path}: ${res.statusCode} ${body.slice(0, 200)}`));
        else resolve({ ms, body });
      });
    }).on('error', reject);
  });
}

/** One keep-alive connection, as a client would hold it; a fresh one per run, as the server drops idle ones. */
async function httpLatencies(base: string, keys: Key[]): Promise<{ ms: number[]; events: number[] }> {
  const agent = new Agent({ keepAlive: true, maxSockets: 1 });
  try {
    for (const key of keys.slice(0, WARMUP)) await request(agent, base, `/api/events?${key.query}`);
    const ms: number[] = [];
    const events: number[] = [];
    for (const key of keys) {
      const reply = await request(agent, base, `/api/events?${key.query}`);
      ms.push(reply.ms);
      events.push(reply.body.split('"event_id"').length - 1);
    }
    return { ms, events };
  } finally {
    agent.destroy();
  }
}

async function sqliteLatencies(clis: SqliteCli[], stores: NodeStore[], keys: Key[]): Promise<number[]> {
  const scripts = keys.map((key) => rawScripts(stores, key));
  for (const perStore of scripts.slice(0, WARMUP))
    for (let i = 0; i < clis.length; i++) await clis[i]!.time(perStore[i]!);
  const ms: number[] = [];
  for (const perStore of scripts) {
    let ns = 0;
    for (let i = 0; i < clis.length; i++) ns += await clis[i]!.time(perStore[i]!);
    ms.push(ns / 1e6);
  }
  return ms;
}

function runWrk(
  base: string,
  shape: Shape,
  seconds: number,
): { rps: number; errors: string; p50Ms: number; p99Ms: number } {
  const script = join(OUT, `wrk-${shape.name.replace(/\W+/g, '-')}.lua`);
  const paths = shape.keys.map((k) => JSON.stringify(`/api/events?${k.query}`)).join(',\n');
  writeFileSync(
    script,
    `local paths = {\n${paths}\n}\nlocal threads = 0\nfunction setup(thread)\n  threads = threads + 1\n` +
      `  thread:set("offset", threads * 7919)\nend\nlocal i = 0\nfunction init(args)\n` +
      `  i = tonumber(wrk.thread:get("offset")) or 0\nend\nfunction request()\n  i = i + 1\n` +
      `  return wrk.format("GET", paths[(i % #paths) + 1])\nend\n`,
  );
  const out = spawnSync('wrk', ['-t2', '-c32', `-d${seconds}s`, '--latency', '-s', script, base], {
    encoding: 'utf8',
    timeout: (seconds + 30) * 1000,
  });
  const rps = Number(/Requests\/sec:\s+([\d.]+)/.exec(out.stdout)?.[1] ?? NaN);
  const errors = [/Non-2xx or 3xx responses: \d+/, /Socket errors: .*/]
    .map((re) => re.exec(out.stdout)?.[0])
    .filter(Boolean)
    .join('; ');
  // wrk --latency: "50%  1.23ms" / "99%  15.00ms" (or us, s)
  const quantileMs = (q: string) => {
    const m = new RegExp(`^\\s*${q}%\\s+([\\d.]+)(us|ms|s)$`, 'm').exec(out.stdout);
    return m ? Number(m[1]) * (m[2] === 'us' ? 1e-3 : m[2] === 's' ? 1e3 : 1) : NaN;
  };
  return {
    rps,
    errors: errors || (out.status === 0 ? 'none' : `wrk exited ${out.status}: ${out.stderr}`),
    p50Ms: quantileMs('50'),
    p99Ms: quantileMs('99'),
  };
}

function rssMiB(pid: number, field: 'VmRSS' | 'VmHWM'): number {
  const status = readFileSync(`/proc/${pid}/status`, 'utf8');
  return Number(new RegExp(`${field}:\\s+(\\d+) kB`).exec(status)![1]) / 1024;
}

export async function runQueryBench(options: QueryBenchOptions): Promise<QueryBenchResult> {
  mkdirSync(OUT, { recursive: true });
  const { events, nodes, services } = options;
  const data = ensureDataset(OUT, { events, nodes, services }, log);
  const nodeFiles = Array.from({ length: data.nodes }, (_, n) => storePath(data.dir, `node-${n}`));
  const stores = new NodeStores(data.dir, silentLogger);
  const shapes = buildShapes(data, stores, options.requests);
  stores.close();
  const single = nodeFiles.map((file) => NodeStore.open(file));
  const clis = await Promise.all(nodeFiles.map((file) => SqliteCli.open(file)));
  const mixed: Shape = { name: 'mixed (all shapes in turn)', keys: shapes.flatMap((shape) => shape.keys) };
  let memory: Omit<QueryBenchResult, 'options' | 'shapes'> | undefined;
  const results: ShapeResult[] = [];
  try {
    log('each shape in sqlite3');
    const raw = new Map<Shape, number[]>();
    for (const shape of shapes)
      raw.set(
        shape,
        (await sqliteLatencies(clis, single, shape.keys)).sort((a, b) => a - b),
      );
    for (const workers of options.workerCounts) {
      const daemon = await startDaemonProcess(
        ['--data-dir', data.dir, '--query-workers', String(workers)],
        join(OUT, `daemon-${workers}.log`),
      );
      const pid = daemon.child.pid!;
      try {
        if (!memory) {
          const rssStartMiB = rssMiB(pid, 'VmRSS');
          const agent = new Agent({ keepAlive: true });
          const bigPages: number[] = [];
          for (let i = 1n; i <= 5n; i++) {
            const from = data.firstTs + (data.spanNs * i) / 6n;
            bigPages.push((await request(agent, daemon.url, `/api/events?limit=10000&from=${from}`)).ms);
          }
          agent.destroy();
          memory = {
            rssStartMiB,
            rssAfterBigPagesMiB: rssMiB(pid, 'VmRSS'),
            bigPageMedianMs: percentile(
              bigPages.sort((a, b) => a - b),
              50,
            ),
            rssAfterRunsMiB: 0,
            peakRssMiB: 0,
          };
        }
        for (const shape of shapes) {
          log(`${workers} workers: ${shape.name}: ${shape.keys.length} keys over HTTP, under wrk`);
          const http = await httpLatencies(daemon.url, shape.keys);
          const sqlite = raw.get(shape)!;
          const ms = http.ms.sort((a, b) => a - b);
          const wrk = runWrk(daemon.url, shape, options.wrkSeconds);
          results.push({
            workers,
            shape: shape.name,
            keys: shape.keys.length,
            medianEvents: percentile(
              http.events.sort((a, b) => a - b),
              50,
            ),
            httpP50Ms: percentile(ms, 50),
            httpP99Ms: percentile(ms, 99),
            sqliteP50Ms: percentile(sqlite, 50),
            sqliteP99Ms: percentile(sqlite, 99),
            wrkRequestsPerSecond: wrk.rps,
            wrkErrors: wrk.errors,
          });
        }
        log(`${workers} workers: mixed load under wrk`);
        const wrk = runWrk(daemon.url, mixed, options.wrkSeconds);
        results.push({
          workers,
          shape: mixed.name,
          keys: mixed.keys.length,
          medianEvents: NaN,
          // wrk's own latency (under load, 32 connections), not the one-connection figure of the shapes
          httpP50Ms: wrk.p50Ms,
          httpP99Ms: wrk.p99Ms,
          sqliteP50Ms: NaN,
          sqliteP99Ms: NaN,
          wrkRequestsPerSecond: wrk.rps,
          wrkErrors: wrk.errors,
        });
        if (memory.peakRssMiB === 0) {
          memory.rssAfterRunsMiB = rssMiB(pid, 'VmRSS');
          memory.peakRssMiB = rssMiB(pid, 'VmHWM');
        }
      } finally {
        await daemon.stop();
      }
    }
    return { options, shapes: results, ...memory! };
  } finally {
    clis.forEach((cli) => cli.close());
    single.forEach((store) => store.close());
  }
}

/** Two decimals, or nothing where a figure does not apply (the mixed load has no sqlite3 anchor). */
const fixed = (value: number) => (Number.isNaN(value) ? '' : value.toFixed(2));

export function printQueryBench(result: QueryBenchResult): void {
  const { events, nodes, services } = result.options;
  printTable(
    `query: GET /api/events over HTTP vs the same SQL in the sqlite3 CLI; ${events.toLocaleString('en-US')} events, ` +
      `${nodes} nodes, ${services} services`,
    result.shapes.map((s) => [
      s.workers,
      s.shape,
      s.keys,
      Number.isNaN(s.medianEvents) ? '' : s.medianEvents,
      fixed(s.httpP50Ms),
      fixed(s.httpP99Ms),
      fixed(s.sqliteP50Ms),
      fixed(s.sqliteP99Ms),
      fixed(s.httpP50Ms / s.sqliteP50Ms),
      fixed(s.httpP99Ms / s.sqliteP99Ms),
      Math.round(s.wrkRequestsPerSecond).toLocaleString('en-US'),
      s.wrkErrors,
    ]),
    [
      'query workers',
      'shape',
      'keys',
      'events/req (median)',
      'HTTP p50 ms',
      'HTTP p99 ms',
      'sqlite3 p50 ms',
      'sqlite3 p99 ms',
      'ratio p50',
      'ratio p99',
      'wrk req/s (-t2 -c32)',
      'wrk errors',
    ],
  );
  console.log(
    `daemon RSS: ${result.rssStartMiB.toFixed(0)} MiB at start, ` +
      `${result.rssAfterBigPagesMiB.toFixed(0)} MiB after five 10,000-event pages ` +
      `(median ${result.bigPageMedianMs.toFixed(0)} ms each), ` +
      `${result.rssAfterRunsMiB.toFixed(0)} MiB after all the runs above (peak ${result.peakRssMiB.toFixed(0)} MiB)`,
  );
}

if (require.main === module) {
  const env = (name: string, fallback: number) => Number(process.env[name] ?? fallback);
  void runQueryBench({
    events: env('KREPLAY_BENCH_EVENTS', 10_000_000),
    nodes: 3,
    services: 200,
    requests: env('KREPLAY_BENCH_REQUESTS', 1000),
    wrkSeconds: env('KREPLAY_BENCH_WRK_SECONDS', 10),
    workerCounts: (process.env.KREPLAY_BENCH_QUERY_WORKERS ?? '1,2,4').split(',').map(Number),
  }).then(printQueryBench);
}
