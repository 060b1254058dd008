/**
 * Query benchmark: GET /api/events over HTTP against a daemon child process
 * on a multi-node dataset, per query shape: p50/p99 latency over many keys,
 * the same SQL timed in the sqlite3 CLI in the same run, requests/s under
 * wrk, and the daemon's RSS around a 10,000-event page.
 *
 *   node dist/bench/query.js            (KREPLAY_BENCH_EVENTS=10000000 by default)
 *   KREPLAY_BENCH_EVENTS=300000 KREPLAY_BENCH_REQUESTS=200 KREPLAY_BENCH_WRK_SECONDS=3 node dist/bench/query.js
 */
import { spawn, spawnSync, type ChildProcess } from 'node:child_process';
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
import { contextIdsSql, eventsSql, rangeParams } from '../daemon/store/query-sql';
import { ensureDataset, type Dataset } from './query-dataset';
import { inlineParams, SqliteCli } from './sqlite-cli';
import { printTable } from './table';

export interface QueryBenchOptions {
  events: number;
  nodes: number;
  services: number;
  /** keys (distinct requests) per shape */
  requests: number;
  wrkSeconds: number;
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
      const params = { transactionId: transactionId ?? null, traceId: traceId ?? null };
      statements.push(
        inlineParams(contextIdsSql(transactionId !== undefined, traceId !== undefined), params),
      );
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

function runWrk(base: string, shape: Shape, seconds: number): { rps: number; errors: string } {
  const script = join(OUT, `wrk-${shape.name.replace(/\W+/g, '-')}.lua`);
  const paths = shape.keys.map((k) => JSON.stringify(`/api/events?${k.query}`)).join(',\n');
  writeFileSync(
    script,
    `local paths = {\n${paths}\n}\nlocal threads = 0\nfunction setup(thread)\n  threads = threads + 1\n` +
      `  thread:set("offset", threads * 7919)\nend\nlocal i = 0\nfunction init(args)\n` +
      `  i = tonumber(wrk.thread:get("offset")) or 0\nend\nfunction request()\n  i = i + 1\n` +
      `  return wrk.format("GET", paths[(i % #paths) + 1])\nend\n`,
  );
  const out = spawnSync('wrk', ['-t2', '-c32', `-d${seconds}s`, '-s', script, base], {
    encoding: 'utf8',
    timeout: (seconds + 30) * 1000,
  });
  const rps = Number(/Requests\/sec:\s+([\d.]+)/.exec(out.stdout)?.[1] ?? NaN);
  const errors = [/Non-2xx or 3xx responses: \d+/, /Socket errors: .*/]
    .map((re) => re.exec(out.stdout)?.[0])
    .filter(Boolean)
    .join('; ');
  return { rps, errors: errors || (out.status === 0 ? 'none' : `wrk exited ${out.status}: ${out.stderr}`) };
}

function rssMiB(pid: number, field: 'VmRSS' | 'VmHWM'): number {
  const status = readFileSync(`/proc/${pid}/status`, 'utf8');
  return Number(new RegExp(`${field}:\\s+(\\d+) kB`).exec(status)![1]) / 1024;
}

function startDaemon(dataDir: string): Promise<{ child: ChildProcess; url: string }> {
  const child = spawn(
    process.execPath,
    [join(ROOT, 'bin', 'kreplay.js'), 'daemon', '--data-dir', dataDir, '--port', '0', '--log-format', 'text'],
    {
      stdio: ['ignore', 'ignore', 'pipe'],
    },
  );
  return new Promise((resolve, reject) => {
    let stderr = '';
    child.stderr!.setEncoding('utf8');
    child.stderr!.on('data', (chunk: string) => {
      stderr += chunk;
      const url = /listening url=(\S+)/.exec(stderr)?.[1];
      if (url) resolve({ child, url });
    });
    child.once('exit', (code) => reject(new Error(`daemon exited ${code}: ${stderr}`)));
  });
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
  const daemon = await startDaemon(data.dir);
  const pid = daemon.child.pid!;
  try {
    const rssStartMiB = rssMiB(pid, 'VmRSS');
    const agent = new Agent({ keepAlive: true });
    const bigPages: number[] = [];
    for (let i = 1n; i <= 5n; i++) {
      const from = data.firstTs + (data.spanNs * i) / 6n;
      bigPages.push((await request(agent, daemon.url, `/api/events?limit=10000&from=${from}`)).ms);
    }
    agent.destroy();
    const rssAfterBigPagesMiB = rssMiB(pid, 'VmRSS');
    const results: ShapeResult[] = [];
    for (const shape of shapes) {
      log(`${shape.name}: ${shape.keys.length} keys over HTTP, in sqlite3, under wrk`);
      const http = await httpLatencies(daemon.url, shape.keys);
      const raw = (await sqliteLatencies(clis, single, shape.keys)).sort((a, b) => a - b);
      const ms = http.ms.sort((a, b) => a - b);
      const wrk = runWrk(daemon.url, shape, options.wrkSeconds);
      results.push({
        shape: shape.name,
        keys: shape.keys.length,
        medianEvents: percentile(
          http.events.sort((a, b) => a - b),
          50,
        ),
        httpP50Ms: percentile(ms, 50),
        httpP99Ms: percentile(ms, 99),
        sqliteP50Ms: percentile(raw, 50),
        sqliteP99Ms: percentile(raw, 99),
        wrkRequestsPerSecond: wrk.rps,
        wrkErrors: wrk.errors,
      });
    }
    return {
      options,
      shapes: results,
      rssStartMiB,
      rssAfterBigPagesMiB,
      bigPageMedianMs: percentile(
        bigPages.sort((a, b) => a - b),
        50,
      ),
      rssAfterRunsMiB: rssMiB(pid, 'VmRSS'),
      peakRssMiB: rssMiB(pid, 'VmHWM'),
    };
  } finally {
    daemon.child.kill('SIGTERM');
    clis.forEach((cli) => cli.close());
    single.forEach((store) => store.close());
  }
}

export function printQueryBench(result: QueryBenchResult): void {
  const { events, nodes, services } = result.options;
  printTable(
    `query: GET /api/events over HTTP vs the same SQL in the sqlite3 CLI; ${events.toLocaleString('en-US')} events, ` +
      `${nodes} nodes, ${services} services`,
    result.shapes.map((s) => [
      s.shape,
      s.keys,
      s.medianEvents,
      s.httpP50Ms.toFixed(2),
      s.httpP99Ms.toFixed(2),
      s.sqliteP50Ms.toFixed(2),
      s.sqliteP99Ms.toFixed(2),
      (s.httpP50Ms / s.sqliteP50Ms).toFixed(2),
      (s.httpP99Ms / s.sqliteP99Ms).toFixed(2),
      Math.round(s.wrkRequestsPerSecond).toLocaleString('en-US'),
      s.wrkErrors,
    ]),
    [
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
  }).then(printQueryBench);
}
