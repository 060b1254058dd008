/**
 * The fleet store at scale (issue 17). On a ClickHouse cluster of two shards
 * (two clickhouse-server processes here, as test/support starts them):
 *
 * - shipping: one agent's Shipper sending a node file of SHIP_EVENTS events
 *   to the cluster's Distributed table in each codec (lz4, gzip, none), rows/s
 *   and the process's CPU; beside it, library level: the same batches encoded
 *   (and LZ4-framed) inside SQLite, and each gzip/deflate level, nothing sent.
 * - shipping as users run it: a `kreplay agent --ship clickhouse://…?cluster=…&compression=`
 *   process capturing a write loop (bench/writeloop.c, paced at AGENT_RATE) into
 *   its node file and shipping to the cluster at the same time, one round per
 *   codec: shipped rows/s (the cluster's row count, polled), how many events
 *   reached the cluster within 2 s, and the agent's CPU from /proc, against an
 *   anchor in the same run: the same agent and loop without --ship.
 * - lookups: transaction and trace lookups over HTTP (GET /api/events) from a
 *   daemon reading the cluster (--store clickhouse://…?cluster=) and a daemon
 *   reading the same events in per-node SQLite files, keys interleaved, for
 *   each dataset size (default 1M and 10M events over 20 nodes), so how both
 *   grow shows in one run.
 *
 * The same dataset in both stores: each node file is written through the
 * agent's StoreWriter from a formula of (node, i), and the cluster gets the
 * same rows from INSERT … SELECT over numbers() using the node file's store
 * id, so event ids match; a sample of lookups is compared byte for byte.
 *
 *   make bench BENCH=fleet   (KREPLAY_BENCH_FLEET_EVENTS=1000000,10000000 KREPLAY_BENCH_RUNS=3)
 */
import { mkdtempSync, readdirSync, rmSync } from 'node:fs';
import { Agent, request as httpRequest } from 'node:http';
import { tmpdir } from 'node:os';
import { deflateSync, gzipSync } from 'node:zlib';
import { join } from 'node:path';
import Database from 'better-sqlite3';
import { EventBatch } from '../agent/ingest/event-batch';
import { ShipBatchReader } from '../agent/ship/ship-batch';
import { Shipper } from '../agent/ship/shipper';
import { StoreWriter } from '../agent/store/store-writer';
import { quoteInt, quoteString } from '../core/clickhouse/quote';
import {
  CLICKHOUSE_EVENT_COLUMNS,
  CLICKHOUSE_MIGRATIONS,
  eventsTable,
  lookupTable,
  type LookupKey,
} from '../core/clickhouse/schema';
import {
  ClickHouseHttp,
  INSERT_CODECS,
  type EncodedRows,
  type InsertCodec,
} from '../core/clickhouse/http-client';
import { DEFAULT_LIMIT } from '../daemon/events/events-query';
import { silentLogger } from '../core/log/logger';
import { targetKindCode } from '../core/model';
import { readStoreInfo } from '../core/store/schema';
import { createDaemon, type Daemon } from '../daemon/create-daemon';
import { TestCluster } from './clickhouse-servers';
import { BATCH, FIRST_TS, SPAN_NS } from './query-dataset';
import { printTable } from './table';
import { startBenchAgent, type AgentCpu } from './agent-process';
import { benchLoop, timeLoop } from './bench-loops';
import { repoRoot } from '../core/repo-root';

const env = (name: string, fallback: string) => process.env[name] ?? fallback;
const SIZES = env('KREPLAY_BENCH_FLEET_EVENTS', '1000000,10000000').split(',').map(Number);
const RUNS = Number(env('KREPLAY_BENCH_RUNS', '3'));
const NODES = 20;
const SHIP_EVENTS = Number(env('KREPLAY_BENCH_SHIP_EVENTS', '300000'));
const AGENT_WRITES = Number(env('KREPLAY_BENCH_AGENT_SHIP_WRITES', '1000000'));
/* writes/s of the loop the agent captures: above what one agent ships, so shipping runs flat out meanwhile */
const AGENT_RATE = Number(env('KREPLAY_BENCH_AGENT_SHIP_RATE', '100000'));
/* which parts run: ship (the Shipper in this process), agent (a kreplay agent process), lookups */
const PARTS = env('KREPLAY_BENCH_FLEET_PARTS', 'ship,agent,burst,lookups').split(',');
const BURST_S = Number(env('KREPLAY_BENCH_BURST_S', '60'));
/* the agent part's rounds: one per codec after the anchor (the burst ships with the default) */
const AGENT_CODECS = env('KREPLAY_BENCH_FLEET_CODECS', INSERT_CODECS.join(',')).split(',') as InsertCodec[];
const LOOKUPS = 200;
/* replay sessions created per round and store, FINAL counts timed per round */
const SESSIONS = 20;
/* how the cluster gets the dataset: ship (the agent's Shipper, RowBinary) or sql (INSERT … SELECT numbers()) */
const FILL = env('KREPLAY_BENCH_FLEET_FILL', 'ship');
const FILL_PARALLEL = Number(env('KREPLAY_BENCH_FLEET_FILL_PARALLEL', '2'));
/*
 * Lookups at scales the node files and the Shipper cannot reach here in time (issue 27: 100M):
 * each node's first 1/MULTIPLY of its events go through the agent's writer and Shipper, then each
 * shard copies them MULTIPLY - 1 times server-side into the rest of the span (multiply()).
 */
const MULTIPLY = Number(env('KREPLAY_BENCH_FLEET_MULTIPLY', '1'));
/* 3 of every 10 events carry context: a transaction of 12 events per 40, a trace of 30 per node over all 20 nodes */
const TXN_WINDOW = 40;
const TRACE_WINDOW = 100;
const SERVICES = 50;
const FILE_KIND = targetKindCode('file');

const hasContext = (i: number) => i % 10 < 3;
const txnOf = (node: number, i: number) => `txn-${node}-${Math.floor(i / TXN_WINDOW)}`;
const traceOf = (i: number) => `tr-${Math.floor(i / TRACE_WINDOW)}`;

function gapNs(perNode: number): bigint {
  return SPAN_NS / BigInt(perNode);
}

/** Node `node`'s first `count` events of `perNode` (all by default) through the agent's writer; returns its store id. */
function writeNode(dir: string, node: number, perNode: number, count = perNode): string {
  const writer = StoreWriter.open(dir, `node-${node}`);
  const batch = new EventBatch(BATCH);
  const gap = Number(gapNs(perNode));
  try {
    batch.clear(FIRST_TS);
    for (let i = 0; i < count; i++) {
      const s = i % SERVICES;
      const ctx = hasContext(i) ? writer.contexts.id(txnOf(node, i), traceOf(i)) : 0;
      batch.pushSysWrite({
        tsOffset: i * gap + node,
        dur: 10_000 + (i % 1000),
        service: writer.services.id(`service-${s}`),
        ctx,
        pid: 1000 + s,
        tid: 1000 + s,
        comm: writer.comms.id(`worker-${s % 10}`),
        bytes: 512,
        fd: 3,
        ret: 512,
        syscall: 1,
        target: writer.targets.id(FILE_KIND, `/var/lib/service-${s}/3.log`),
      });
      if (batch.full) {
        writer.writeBatch(batch);
        batch.clear(FIRST_TS);
      }
    }
    if (batch.count > 0) writer.writeBatch(batch);
    return writer.info.storeId;
  } finally {
    writer.close();
  }
}

/** The same rows as writeNode's, made by the server from numbers(). */
function insertNodeSql(
  table: string,
  node: number,
  storeId: string,
  perNode: number,
  count = perNode,
): string {
  const ts = `(${quoteInt(FIRST_TS)} + number * ${quoteInt(gapNs(perNode))} + ${quoteInt(node)})`;
  const hex = (v: string, width: number) =>
    `substring(concat(${quoteString('0'.repeat(width))}, lower(hex(${v}))), length(lower(hex(${v}))) + 1, ${width})`;
  const s = `(number % ${SERVICES})`;
  const ctx = `(number % 10 < 3)`;
  return `INSERT INTO ${table}
    SELECT concat(${quoteString(storeId)}, ${hex(ts, 16)}, ${hex('number + 1', 12)}) AS event_id,
      ${quoteString(storeId)} AS store_id, ${ts} AS timestamp_ns, number + 1 AS seq, 'sys_write' AS event_type,
      10000 + number % 1000 AS duration_ns, concat('service-', toString(${s})) AS service_name,
      if(${ctx}, toNullable(concat(${quoteString(`txn-${node}-`)}, toString(intDiv(number, ${TXN_WINDOW})))), NULL) AS transaction_id,
      if(${ctx}, toNullable(concat('tr-', toString(intDiv(number, ${TRACE_WINDOW})))), NULL) AS trace_id,
      ${quoteString(`node-${node}`)} AS node, toUInt32(1000 + ${s}) AS pid, toUInt32(1000 + ${s}) AS tid,
      concat('worker-', toString(${s} % 10)) AS comm, toUInt64(512) AS bytes, toNullable('write') AS syscall,
      toNullable(toInt64(3)) AS fd, toNullable(toInt64(512)) AS ret, toNullable('file') AS target_kind,
      toNullable(concat('/var/lib/service-', toString(${s}), '/3.log')) AS target,
      CAST(NULL AS Nullable(String)) AS device, CAST(NULL AS Nullable(UInt64)) AS sector,
      CAST(NULL AS Nullable(String)) AS op, CAST(NULL AS Nullable(Int64)) AS error
    FROM numbers(${quoteInt(count)})`;
}

const hexSql = (v: string, width: number) =>
  `substring(concat(${quoteString('0'.repeat(width))}, lower(hex(${v}))), length(lower(hex(${v}))) + 1, ${width})`;

/**
 * Copy `copy` of each node's first `base` events (1 ≤ copy < MULTIPLY), as
 * the events table's columns: event i becomes event i + copy * base of its
 * node, exactly the row writeNode would have written for it (base is a
 * multiple of 1,000, so services, durations, transactions of 40 and traces of
 * 100 fall alike): its timestamp and seq moved on, event id remade from them,
 * transaction and trace numbers moved on. No column is aliased: 18.16 would
 * read an alias named like a column in place of the column. Both branches of
 * if() run on every row, hence toUInt64OrZero for the rows without the key.
 */
function copySql(columns: readonly string[], copy: number, base: number, perNode: number): string {
  const ts = `(timestamp_ns + ${quoteInt(BigInt(copy * base) * gapNs(perNode))})`;
  const seq = `(seq + ${quoteInt(copy * base)})`;
  const moved = (key: string, window: number, prefix: string) =>
    `if(isNull(${key}), NULL, concat(${prefix}, toString(toUInt64OrZero(arrayElement(splitByChar('-', assumeNotNull(${key})), -1)) + ${quoteInt((copy * base) / window)})))`;
  const exprs: Record<string, string> = {
    event_id: `concat(store_id, ${hexSql(ts, 16)}, ${hexSql(seq, 12)})`,
    timestamp_ns: ts,
    seq,
    transaction_id: moved(
      'transaction_id',
      TXN_WINDOW,
      `concat('txn-', arrayElement(splitByChar('-', assumeNotNull(transaction_id)), 2), '-')`,
    ),
    trace_id: moved('trace_id', TRACE_WINDOW, "'tr-'"),
  };
  return `INSERT INTO events (${columns.join(', ')})
    SELECT ${columns.map((c) => exprs[c] ?? c).join(', ')} FROM events WHERE seq <= ${quoteInt(base)}`;
}

/**
 * Fills each node's span from its first `base` events (shipped): on each
 * shard, its own rows copied MULTIPLY - 1 times by INSERT … SELECT into its
 * local table (the shard of a node's copies is the node's, as the sharding key
 * says; the lookup views fill the lookup tables).
 */
async function multiply(
  cluster: TestCluster,
  database: string,
  base: number,
  perNode: number,
): Promise<void> {
  const shards = cluster.shards.map((_, i) => cluster.client(database, i, 600_000));
  const columns = CLICKHOUSE_EVENT_COLUMNS.map((c) => c.name);
  await Promise.all(
    shards.map(async (shard) => {
      for (let copy = 1; copy < MULTIPLY; copy++)
        await shard.exec(copySql(columns, copy, base, perNode), undefined, undefined, 600_000);
    }),
  );
}

/** Ships every node file of `dir` to the cluster with the agent's Shipper, FILL_PARALLEL at a time. */
async function shipNodes(cluster: TestCluster, database: string, dir: string): Promise<void> {
  const files = readdirSync(dir).filter((name) => name.endsWith('.db'));
  let next = 0;
  const worker = async (w: number): Promise<void> => {
    for (let file = files[next++]; file !== undefined; file = files[next++]) {
      const shipper = new Shipper(join(dir, file), cluster.client(database, w % 2, 600_000), {
        batchRows: 100_000,
        maxDelayMs: 0,
      });
      shipper.start();
      while (shipper.status().lagEvents > 0 || shipper.status(false).state !== 'shipping') {
        const s = shipper.status(false);
        if (s.state === 'retrying' && s.retries > 5) throw new Error(`shipping ${file}: ${s.lastError}`);
        await new Promise((r) => setTimeout(r, 200));
      }
      await shipper.stop();
    }
  };
  await Promise.all(Array.from({ length: FILL_PARALLEL }, (_, w) => worker(w)));
}

function get(agent: Agent, base: string, path: string): Promise<{ ms: number; body: string }> {
  return new Promise((resolve, reject) => {
    const started = process.hrtime.bigint();
    httpRequest(`${base}${path}`, { agent }, (res) => {
      let body = '';
      res.setEncoding('utf8');
      res.on('data', (chunk: string) => (body += chunk));
      res.on('end', () => {
        const ms = Number(process.hrtime.bigint() - started) / 1e6;
        if (res.statusCode !== 200) reject(new Error(`${path}: ${res.statusCode} ${body.slice(0, 300)}`));
        else resolve({ ms, body });
      });
    })
      .on('error', reject)
      .end();
  });
}

function percentile(values: number[], p: number): number {
  const sorted = [...values].sort((a, b) => a - b);
  return sorted[Math.min(sorted.length - 1, Math.floor((p / 100) * sorted.length))]!;
}

const range = (xs: number[], digits = 1) =>
  `${Math.min(...xs).toFixed(digits)}–${Math.max(...xs).toFixed(digits)}`;

async function shipping(cluster: TestCluster, runs: number): Promise<void> {
  const dir = mkdtempSync(join(tmpdir(), 'kreplay-fleet-ship-'));
  try {
    writeNode(dir, 0, SHIP_EVENTS);
    const path = join(dir, 'node-0.db');
    const rows: (string | number)[][] = [];
    const cpuUs = (from: NodeJS.CpuUsage) => {
      const u = process.cpuUsage(from);
      return (u.user + u.system) / SHIP_EVENTS;
    };
    for (let run = 0; run < runs; run++) {
      // the Shipper (its thread included: CPU of this whole process) with each codec, same round
      const shipped = [];
      for (const codec of INSERT_CODECS) {
        const database = `ship_${process.pid}_${run}_${codec}`;
        await cluster.migrate(database);
        const ch = cluster.client(database, run % 2, 60_000);
        const shipper = new Shipper(path, new ClickHouseHttp({ ...ch.endpoint, compression: codec }), {
          maxDelayMs: 0,
        });
        const cpu = process.cpuUsage();
        const t = process.hrtime.bigint();
        shipper.start();
        while (shipper.status(false).shipped < SHIP_EVENTS) await new Promise((r) => setTimeout(r, 5));
        const seconds = Number(process.hrtime.bigint() - t) / 1e9;
        shipped.push(`${Math.round(SHIP_EVENTS / seconds)}/s, ${cpuUs(cpu).toFixed(2)} µs`);
        await shipper.stop();
        // the next codec starts from seq 1 again, into a fresh database
        const w = new Database(path);
        w.prepare('DELETE FROM ship_cursors').run();
        w.close();
        await dropDatabase(cluster, database);
      }
      // library level: the same batches read and encoded in each codec, nothing sent
      const db = new Database(path, { readonly: true });
      const encode = (codec: InsertCodec) => {
        const reader = new ShipBatchReader(db, readStoreInfo(db), undefined, codec);
        const batches: EncodedRows[] = [];
        const c = process.cpuUsage();
        for (let seq = 1; ;) {
          const batch = reader.read(seq, 10_000);
          if (batch.count === 0) break;
          batches.push(batch.rows);
          seq = batch.nextSeq;
        }
        return { us: cpuUs(c), batches };
      };
      const bytes = (batches: Uint8Array[]) =>
        (batches.reduce((sum, b) => sum + b.length, 0) / SHIP_EVENTS).toFixed(1);
      const plain = encode('none');
      const lz4 = encode('lz4');
      db.close();
      const codecs = GZIP_LEVELS.map(([, compress]) => {
        const c = process.cpuUsage();
        const out = plain.batches.map((b) => compress(b.bytes));
        return `${cpuUs(c).toFixed(2)} µs, ${bytes(out)} B`;
      });
      rows.push([
        run + 1,
        ...shipped,
        plain.us.toFixed(2),
        bytes(plain.batches.map((b) => b.bytes)),
        `${(lz4.us - plain.us).toFixed(2)} µs, ${bytes(lz4.batches.map((b) => b.bytes))} B`,
        ...codecs,
      ]);
    }
    printTable(
      `shipping one node file of ${SHIP_EVENTS} events to the cluster (Distributed table, insert_distributed_sync)`,
      rows,
      [
        'run',
        ...INSERT_CODECS.map((codec) => `Shipper ${codec}: rows/s, process CPU/event`),
        'encode CPU µs/event',
        'RowBinary B/event',
        'lz4 framing (in SQLite, beside the encoding): CPU/event, B/event',
        ...GZIP_LEVELS.map(([name]) => `${name}: CPU/event, B/event`),
      ],
    );
  } finally {
    rmSync(dir, { recursive: true, force: true });
  }
}

/** The body compressions 18.16 takes as a Content-Encoding (not br, not zstd), on encoded batches. */
const GZIP_LEVELS: [string, (rows: Uint8Array) => Buffer][] = [
  ['gzip level 1', (rows) => gzipSync(rows, { level: 1 })],
  ['deflate level 1', (rows) => deflateSync(rows, { level: 1 })],
  ['gzip level 6', (rows) => gzipSync(rows)],
];

const cpuSeconds = (a: AgentCpu, b: AgentCpu) => b.userS + b.systemS - (a.userS + a.systemS);

/** Polls of the cluster during a round: when, how many rows, the newest timestamp it held. */
interface Poll {
  atNs: bigint;
  rows: number;
  newestNs: bigint;
}

/** The events late by more than `withinNs`: those whose ts lay in (newest in the cluster, poll - within] at some poll. */
function lateWindows(polls: Poll[], withinNs: bigint): [bigint, bigint][] {
  const windows: [bigint, bigint][] = [];
  for (const p of polls) {
    const due = p.atNs - withinNs;
    if (due <= p.newestNs) continue;
    const last = windows.at(-1);
    if (last && p.newestNs <= last[1]) last[1] = due > last[1] ? due : last[1];
    else windows.push([p.newestNs, due]);
  }
  return windows;
}

const SHIP_WITHIN_NS = 2_000_000_000n;
const wallNs = () => BigInt(Date.now()) * 1_000_000n;
const STATUS_LAG = /ship=\w+ shipped=\d+ lag=(\d+)ev\/([\d.]+)s/g;

/**
 * One round of the agent process: the write loop (`writes` at `rate`/s, 0:
 * as fast as it goes) captured by `kreplay agent` (shipping to `ship` when
 * given) until every event is stored and, with `ship`, counted in the
 * cluster. Times from the loop's start. With `ship`: the cluster polled every
 * 100 ms for its rows and newest timestamp, so the events that reached it
 * more than 2 s after their capture are counted afterwards (the node file's
 * timestamps are wall-clock); and the largest lag the agent's status line showed.
 */
async function agentRound(
  cluster: TestCluster,
  ship: { database: string; shard: number; codec?: InsertCodec } | null,
  writes = AGENT_WRITES,
  rate = AGENT_RATE,
): Promise<{
  stored: number;
  dropped: number;
  loopS: number;
  shippedInLoop: number;
  doneS: number;
  cpuS: number;
  late: number;
  /** rows in the cluster at the end (a few more than stored when another writeloop ran meanwhile) */
  inCluster: number;
  maxLagEvents: number;
  maxLagS: number;
}> {
  const args = ['--include', 'comm:writeloop'];
  if (ship)
    args.push(
      '--ship',
      cluster.url(ship.database, ship.shard, 60) + (ship.codec ? `&compression=${ship.codec}` : ''),
    );
  const agent = await startBenchAgent(repoRoot(), args);
  const ch = ship && cluster.client(ship.database, ship.shard, 60_000);
  const table = ch && eventsTable(ch.endpoint);
  const polls: Poll[] = [];
  // plain count(): a copy would count twice, and the agent sends none here (no retries: checked after)
  const poll = async (): Promise<number> => {
    if (!ch) return 0;
    const atNs = wallNs();
    const [row] = await ch.rows<{ n: string; newest: string }>(
      `SELECT count() AS n, max(timestamp_ns) AS newest FROM ${table}`,
    );
    polls.push({ atNs, rows: Number(row!.n), newestNs: BigInt(row!.newest) });
    return Number(row!.n);
  };
  let polling = true;
  const poller = (async () => {
    while (polling) {
      await poll();
      await new Promise((r) => setTimeout(r, 100));
    }
  })();
  try {
    const before = agent.cpu();
    const started = process.hrtime.bigint();
    const seconds = () => Number(process.hrtime.bigint() - started) / 1e9;
    await timeLoop(benchLoop('writeloop'), [String(writes), '-1', '-', String(rate)]);
    const loopS = seconds();
    const shippedInLoop = await poll();
    const { stored, dropped } = await agent.caughtUp(writes);
    let doneS = seconds();
    let late = 0;
    let inCluster = 0;
    if (ch) {
      const deadline = Date.now() + 300_000;
      while ((await poll()) < stored) {
        if (Date.now() > deadline) throw new Error(`the agent did not ship ${stored} events in 300 s`);
        await new Promise((r) => setTimeout(r, 100));
      }
      doneS = seconds();
      polling = false;
      await poller;
      const [copies] = await ch.rows<{ n: string; ids: string }>(
        `SELECT count() AS n, uniqExact(event_id) AS ids FROM ${table}`,
      );
      // at least what the loop made stored: another writeloop on this shared machine may add a few
      if (copies!.n !== copies!.ids || Number(copies!.n) < stored)
        throw new Error(
          `the cluster holds ${copies!.n} rows, ${copies!.ids} events; the node file ${stored}`,
        );
      inCluster = Number(copies!.n);
      const windows = lateWindows(polls, SHIP_WITHIN_NS);
      if (windows.length) {
        const [row] = await ch.rows<{ n: string }>(
          `SELECT count() AS n FROM ${table} WHERE ${windows.map(([a, b]) => `(timestamp_ns > ${quoteInt(a)} AND timestamp_ns <= ${quoteInt(b)})`).join(' OR ')}`,
        );
        late = Number(row!.n);
      }
    }
    const lags = [...agent.output().matchAll(STATUS_LAG)];
    return {
      stored,
      dropped,
      loopS,
      shippedInLoop,
      doneS,
      cpuS: cpuSeconds(before, agent.cpu()),
      late,
      inCluster,
      maxLagEvents: Math.max(0, ...lags.map((m) => Number(m[1]))),
      maxLagS: Math.max(0, ...lags.map((m) => Number(m[2]))),
    };
  } finally {
    polling = false;
    await poller;
    await agent.stop();
  }
}

async function dropDatabase(cluster: TestCluster, database: string): Promise<void> {
  for (const shard of [0, 1])
    await cluster
      .client(database, shard)
      .exec(`DROP DATABASE IF EXISTS ${database}`, undefined, null)
      .catch(() => undefined);
}

async function agentShipping(cluster: TestCluster, runs: number): Promise<void> {
  const rows: (string | number)[][] = [];
  for (let run = 0; run < runs; run++) {
    const anchor = await agentRound(cluster, null);
    for (const codec of AGENT_CODECS) {
      const database = `agent_${process.pid}_${run}_${codec}`;
      await cluster.migrate(database);
      const shipping = await agentRound(cluster, { database, shard: run % 2, codec });
      const pct = (cpuS: number, s: number) => ((cpuS / s) * 100).toFixed(0);
      rows.push([
        run + 1,
        codec,
        shipping.stored,
        Math.round(shipping.stored / shipping.loopS),
        Math.round(shipping.shippedInLoop / shipping.loopS),
        Math.round(shipping.stored / shipping.doneS),
        (100 * (1 - shipping.late / shipping.inCluster)).toFixed(2),
        pct(shipping.cpuS, shipping.doneS),
        ((shipping.cpuS * 1e6) / shipping.stored).toFixed(2),
        ((anchor.cpuS * 1e6) / anchor.stored).toFixed(2),
        (((shipping.cpuS - anchor.cpuS * (shipping.stored / anchor.stored)) * 1e6) / shipping.stored).toFixed(
          2,
        ),
        `${shipping.maxLagEvents}ev/${shipping.maxLagS.toFixed(1)}s`,
      ]);
      await dropDatabase(cluster, database);
    }
  }
  printTable(
    `kreplay agent --ship to the cluster while capturing a write loop of ${AGENT_WRITES} writes at ${AGENT_RATE}/s`,
    rows,
    [
      'run',
      'compression',
      'events stored',
      'captured/s (loop)',
      'shipped/s during the loop',
      'shipped/s, start to all shipped',
      '% in the cluster within 2 s of capture',
      'agent CPU % (1 core = 100), start to all shipped',
      'agent CPU µs/event',
      'anchor: no --ship, CPU µs/event',
      'shipping CPU µs/event (difference)',
      'largest lag in the status line',
    ],
  );
}

/**
 * A burst at the most the agent captures: the write loop unpaced for about
 * BURST_S seconds (its count from a first timed second), shipping meanwhile;
 * the lag the agent reported at worst, and how long after the loop the
 * cluster held everything.
 */
async function burst(cluster: TestCluster, runs: number): Promise<void> {
  const rows: (string | number)[][] = [];
  for (let run = 0; run < runs; run++) {
    const database = `burst_${process.pid}_${run}`;
    await cluster.migrate(database);
    const probe = await agentRound(cluster, null, 300_000, 0);
    const writes = Math.round((probe.stored / probe.loopS) * BURST_S);
    const r = await agentRound(cluster, { database, shard: run % 2 }, writes, 0);
    rows.push([
      run + 1,
      r.stored,
      r.dropped,
      Math.round(r.stored / r.loopS),
      r.loopS.toFixed(1),
      Math.round(r.shippedInLoop / r.loopS),
      `${r.maxLagEvents}ev/${r.maxLagS.toFixed(1)}s`,
      (r.doneS - r.loopS).toFixed(1),
      (100 * (1 - r.late / r.inCluster)).toFixed(1),
    ]);
    await dropDatabase(cluster, database);
  }
  printTable(
    `a burst of about ${BURST_S} s of the write loop unpaced, kreplay agent --ship to the cluster`,
    rows,
    [
      'run',
      'events stored',
      'dropped (ring)',
      'captured/s',
      'loop s',
      'shipped/s during the loop',
      'largest lag in the status line',
      's after the loop until all shipped',
      '% within 2 s of capture',
    ],
  );
}

interface Lookup {
  kind: 'transaction' | 'trace';
  query: string;
}

/**
 * A lookup's first page as SQL, sent to the cluster without the daemon: as
 * daemon/store/clickhouse-events.ts reads it now (plain, when no copies are
 * unmerged), or with FINAL as it read before; the anchor of the change, in the same round.
 */
function lookupSql(ch: ClickHouseHttp, lookup: Lookup, final: boolean): string {
  const [key, value] = lookup.query.split('=') as [LookupKey, string];
  const v = quoteString(value);
  return `SELECT ${'event_id, event_type, timestamp_ns, duration_ns, service_name, transaction_id, trace_id, node, pid, tid, comm, bytes, syscall, fd, ret, target_kind, target, device, sector, op, error'}
    FROM ${eventsTable(ch.endpoint)} ${final ? 'FINAL' : ''}
    WHERE (timestamp_ns, store_id, seq) IN (SELECT timestamp_ns, store_id, seq FROM ${ch.endpoint.database}.${lookupTable(key)} WHERE ${key} = ${v})
      AND ${key} = ${v}
    ORDER BY timestamp_ns, event_id LIMIT ${quoteInt(DEFAULT_LIMIT + 1)}`;
}

async function lookups(cluster: TestCluster, events: number, runs: number): Promise<(string | number)[][]> {
  const perNode = Math.floor(events / NODES);
  // the events each node file holds (and ships): all of them, or the first 1/MULTIPLY
  const base = perNode / MULTIPLY;
  if (MULTIPLY > 1 && base % 1000 !== 0)
    throw new Error(
      `${events} events over ${NODES} nodes is not ${MULTIPLY} copies of a multiple of 1,000 a node`,
    );
  const dir = mkdtempSync(join(tmpdir(), 'kreplay-fleet-'));
  const database = `fleet_${process.pid}_${events}`;
  const daemons: Daemon[] = [];
  try {
    let t = Date.now();
    const storeIds = Array.from({ length: NODES }, (_, n) => writeNode(dir, n, perNode, base));
    const sqliteS = (Date.now() - t) / 1000;
    await cluster.migrate(database);
    const ch = cluster.client(database, 0, 600_000);
    t = Date.now();
    if (FILL === 'ship') await shipNodes(cluster, database, dir);
    else
      for (let n = 0; n < NODES; n++)
        await ch.exec(insertNodeSql(eventsTable(ch.endpoint), n, storeIds[n]!, perNode, base));
    const clickhouseS = (Date.now() - t) / 1000;
    t = Date.now();
    if (MULTIPLY > 1) await multiply(cluster, database, base, perNode);
    const multiplyS = (Date.now() - t) / 1000;
    // lookups on a settled store, as a fleet store is between bursts: not while merges of the fill still run
    t = Date.now();
    const shards = cluster.shards.map((_, i) => cluster.client(database, i));
    const busy = async () => {
      const counts = await Promise.all(
        shards.map((c) => c.rows<{ n: string }>('SELECT count() AS n FROM system.merges')),
      );
      return counts.some((r) => r[0]!.n !== '0');
    };
    while ((await busy()) && Date.now() - t < 180_000) await new Promise((r) => setTimeout(r, 500));
    const parts = await Promise.all(
      shards.map((c) =>
        c.rows<{ n: string }>(
          `SELECT count() AS n FROM system.parts WHERE active AND database = ${quoteString(database)} AND table = 'events'`,
        ),
      ),
    );
    const [stored] = await ch.rows<{ n: string }>(`SELECT count() AS n FROM ${eventsTable(ch.endpoint)}`);
    if (Number(stored!.n) !== events) throw new Error(`the cluster holds ${stored!.n} events, not ${events}`);
    console.log(
      `${events} events: SQLite files of ${base * NODES} written in ${sqliteS.toFixed(0)} s, cluster filled with them ${FILL === 'ship' ? "by the agent's Shipper (RowBinary)" : 'by INSERT … SELECT'} in ${clickhouseS.toFixed(0)} s (${Math.round((base * NODES) / clickhouseS)} rows/s), ` +
        (MULTIPLY > 1
          ? `copied ${MULTIPLY - 1} times on each shard in ${multiplyS.toFixed(0)} s (${Math.round((events - base * NODES) / multiplyS)} rows/s), `
          : '') +
        `merges settled in ${((Date.now() - t) / 1000).toFixed(0)} s (events parts per shard: ${parts.map((p) => p[0]!.n).join(', ')})`,
    );
    // the anchor of schema v2: the same rows in a v1 database (8,192-row granules), copied on each shard
    // (not at multiplied scales: a second copy of every row, for a figure measured at 10M already)
    const v1 = `${database}_v1`;
    for (let i = 0; i < (MULTIPLY > 1 ? 0 : cluster.shards.length); i++) {
      const shard = cluster.client(v1, i, 600_000);
      await shard.exec(`CREATE DATABASE IF NOT EXISTS ${v1}`, undefined, null);
      for (const statement of CLICKHOUSE_MIGRATIONS[0] as readonly string[]) await shard.exec(statement);
      // v1's columns only (response_ns came with v3)
      const v1Columns = CLICKHOUSE_EVENT_COLUMNS.filter((c) => c.since === 1)
        .map((c) => c.name)
        .join(', ');
      await shard.exec(`INSERT INTO events (${v1Columns}) SELECT ${v1Columns} FROM ${database}.events`);
    }
    if (MULTIPLY === 1)
      await cluster.client(v1, 0).exec(
        `CREATE TABLE IF NOT EXISTS ${eventsTable(cluster.endpoint(v1))} AS events
         ENGINE = Distributed(${cluster.name}, ${v1}, events, cityHash64(store_id))`,
      );
    const chV1 = cluster.client(v1, 0, 600_000);
    const files = await createDaemon({ dataDir: dir, log: silentLogger });
    daemons.push(files);
    const fleet = await createDaemon({
      dataDir: dir,
      log: silentLogger,
      store: cluster.url(database, 0, 60),
    });
    daemons.push(fleet);

    let seed = events;
    const pick = (n: number) => {
      seed = (seed * 1103515245 + 12345) % 2 ** 31;
      return seed % n;
    };
    // keys among a node's first `held` events: the cluster's every event, the node files' first `base`
    const keysOf = (held: number): Lookup[] =>
      Array.from({ length: LOOKUPS }, (_, k) =>
        k % 2
          ? { kind: 'trace', query: `trace_id=tr-${pick(Math.floor(held / TRACE_WINDOW))}` }
          : {
              kind: 'transaction',
              query: `transaction_id=txn-${pick(NODES)}-${pick(Math.floor(held / TXN_WINDOW))}`,
            },
      );
    const keys = () => keysOf(perNode);
    const fileKeys = () => keysOf(base);
    const agent = new Agent({ keepAlive: true, maxSockets: 1 });
    // the copies are the rows writeNode would have written: transactions past the shipped events, by id
    for (let k = 0; MULTIPLY > 1 && k < 10; k++) {
      const node = pick(NODES);
      const txn = Math.floor(base / TXN_WINDOW) + pick(Math.floor((perNode - base) / TXN_WINDOW));
      const want: string[] = [];
      for (let i = txn * TXN_WINDOW; i < (txn + 1) * TXN_WINDOW; i++)
        if (hasContext(i)) {
          const ts = FIRST_TS + BigInt(i) * gapNs(perNode) + BigInt(node);
          want.push(
            `${storeIds[node]}${ts.toString(16).padStart(16, '0')}${(i + 1).toString(16).padStart(12, '0')}`,
          );
        }
      const got = (
        JSON.parse((await get(agent, fleet.url, `/api/events?transaction_id=txn-${node}-${txn}`)).body) as {
          events: { event_id: string; transaction_id: string; trace_id: string }[];
        }
      ).events;
      if (
        got.map((e) => e.event_id).join() !== want.join() ||
        got.some((e) => !e.trace_id?.startsWith('tr-'))
      )
        throw new Error(
          `copied transaction txn-${node}-${txn}: ${JSON.stringify(got[0])} (${got.length} events)`,
        );
    }
    // the same dataset: a sample answered byte for byte alike
    for (const key of fileKeys().slice(0, 10)) {
      const [a, b] = [
        await get(agent, files.url, `/api/events?${key.query}`),
        await get(agent, fleet.url, `/api/events?${key.query}`),
      ];
      if (a.body !== b.body || !a.body.includes('event_id'))
        throw new Error(
          `the stores differ for ${key.query}: ${a.body.slice(0, 200)} / ${b.body.slice(0, 200)}`,
        );
    }
    const figures = new Map<string, number[]>();
    const add = (name: string, v: number) => figures.set(name, [...(figures.get(name) ?? []), v]);
    for (let run = 0; run < runs; run++) {
      const ms = {
        sqlite: { transaction: [] as number[], trace: [] as number[] },
        clickhouse: { transaction: [] as number[], trace: [] as number[] },
      };
      const sql = {
        final: { transaction: [] as number[], trace: [] as number[] },
        plain: { transaction: [] as number[], trace: [] as number[] },
        v1: { transaction: [] as number[], trace: [] as number[] },
      };
      const keyList = keys();
      // both stores asked the same keys, unless the node files hold only the first 1/MULTIPLY
      const fileKeyList = MULTIPLY > 1 ? fileKeys() : keyList;
      for (const [k, key] of keyList.entries()) {
        const fileKey = fileKeyList[k]!; // the same kind
        ms.sqlite[key.kind].push((await get(agent, files.url, `/api/events?${fileKey.query}`)).ms);
        ms.clickhouse[key.kind].push((await get(agent, fleet.url, `/api/events?${key.query}`)).ms);
        for (const shape of MULTIPLY > 1
          ? (['final', 'plain'] as const)
          : (['final', 'plain', 'v1'] as const)) {
          const t = process.hrtime.bigint();
          await (shape === 'v1' ? chV1 : ch).rows(
            lookupSql(shape === 'v1' ? chV1 : ch, key, shape === 'final'),
          );
          sql[shape][key.kind].push(Number(process.hrtime.bigint() - t) / 1e6);
        }
      }
      for (const shape of ['final', 'plain', 'v1'] as const)
        for (const kind of ['transaction', 'trace'] as const) {
          if (sql[shape][kind].length === 0) continue;
          add(`sql ${shape} ${kind} p50`, percentile(sql[shape][kind], 50));
          add(`sql ${shape} ${kind} p99`, percentile(sql[shape][kind], 99));
        }
      // a replay session: created with its transaction loaded whole (a FINAL count, then its pages)
      for (const [store, daemon, storeKeys] of [
        ['sqlite', files, fileKeys],
        ['clickhouse', fleet, keys],
      ] as const) {
        const times: number[] = [];
        for (const key of storeKeys()
          .filter((k) => k.kind === 'transaction')
          .slice(0, SESSIONS)) {
          const started = process.hrtime.bigint();
          const created = await fetch(`${daemon.url}/api/replay/sessions`, {
            method: 'POST',
            headers: { 'content-type': 'application/json' },
            body: JSON.stringify({ transaction_id: key.query.split('=')[1] }),
          });
          const body = (await created.json()) as { id: string };
          times.push(Number(process.hrtime.bigint() - started) / 1e6);
          if (created.status !== 201) throw new Error(`session for ${key.query}: ${created.status}`);
          await fetch(`${daemon.url}/api/replay/sessions/${body.id}`, { method: 'DELETE' });
        }
        add(`${store} session p50`, percentile(times, 50));
        add(`${store} session p99`, percentile(times, 99));
      }
      // FINAL counts as export and session creation run them: a transaction's, a minute's, everything
      const counts = { transaction: [] as number[], minute: [] as number[], all: [] as number[] };
      const timed = async (list: number[], sqlText: string) => {
        const started = process.hrtime.bigint();
        await ch.rows(sqlText);
        list.push(Number(process.hrtime.bigint() - started) / 1e6);
      };
      const table = eventsTable(ch.endpoint);
      for (const key of keys()
        .filter((k) => k.kind === 'transaction')
        .slice(0, SESSIONS)) {
        const v = quoteString(key.query.split('=')[1]!);
        await timed(
          counts.transaction,
          `SELECT count() AS n, min(timestamp_ns) AS a, max(timestamp_ns) AS b FROM ${table} FINAL
           WHERE (timestamp_ns, store_id, seq) IN (SELECT timestamp_ns, store_id, seq FROM ${database}.events_by_transaction WHERE transaction_id = ${v})
             AND transaction_id = ${v}`,
        );
        const from = FIRST_TS + BigInt(pick(3540)) * 1_000_000_000n;
        await timed(
          counts.minute,
          `SELECT count() AS n FROM ${table} FINAL WHERE timestamp_ns >= ${quoteInt(from)} AND timestamp_ns < ${quoteInt(from + 60_000_000_000n)}`,
        );
      }
      await timed(counts.all, `SELECT count() AS n FROM ${table} FINAL`);
      for (const [name, list] of Object.entries(counts)) {
        add(`final ${name} p50`, percentile(list, 50));
        add(`final ${name} p99`, percentile(list, 99));
      }
      for (const store of ['sqlite', 'clickhouse'] as const)
        for (const kind of ['transaction', 'trace'] as const) {
          add(`${store} ${kind} p50`, percentile(ms[store][kind], 50));
          add(`${store} ${kind} p99`, percentile(ms[store][kind], 99));
        }
    }
    agent.destroy();
    const f = (name: string) => (figures.has(name) ? range(figures.get(name)!) : '');
    return [
      ...['transaction', 'trace'].map((kind) => [
        events,
        `${kind} lookup`,
        f(`sqlite ${kind} p50`),
        f(`sqlite ${kind} p99`),
        f(`clickhouse ${kind} p50`),
        f(`clickhouse ${kind} p99`),
        f(`sql final ${kind} p50`),
        f(`sql plain ${kind} p50`),
        f(`sql plain ${kind} p99`),
        f(`sql v1 ${kind} p50`),
        f(`sql v1 ${kind} p99`),
      ]),
      [
        events,
        'replay session created (transaction loaded)',
        f('sqlite session p50'),
        f('sqlite session p99'),
        f('clickhouse session p50'),
        f('clickhouse session p99'),
        '',
        '',
        '',
        '',
        '',
      ],
      ...(['transaction', 'minute', 'all'] as const).map((name) => [
        events,
        `FINAL count, ${name === 'all' ? 'whole table (1 a round)' : `a ${name}`}`,
        '',
        '',
        f(`final ${name} p50`),
        f(`final ${name} p99`),
        '',
        '',
        '',
        '',
        '',
      ]),
    ];
  } finally {
    for (const d of daemons) await d.close();
    await dropDatabase(cluster, database);
    await dropDatabase(cluster, `${database}_v1`);
    rmSync(dir, { recursive: true, force: true });
  }
}

async function main(): Promise<void> {
  const cluster = await TestCluster.create();
  try {
    const [version] = await cluster.client('default').rows<{ v: string }>('SELECT version() AS v');
    console.log(
      `ClickHouse ${version!.v}, cluster of ${cluster.shards.length} shards on this machine; ${NODES} nodes; ${RUNS} runs`,
    );
    if (PARTS.includes('ship')) await shipping(cluster, RUNS);
    if (PARTS.includes('agent')) await agentShipping(cluster, RUNS);
    if (PARTS.includes('burst')) await burst(cluster, RUNS);
    // a table per size as soon as it is measured: a later size that fails leaves the earlier ones
    if (PARTS.includes('lookups'))
      for (const events of SIZES)
        printTable(
          `lookups over HTTP, ${events} events, ${LOOKUPS / 2} keys of each kind and ${SESSIONS} sessions per round, ms (range of the rounds' p50 and p99)`,
          await lookups(cluster, events, RUNS),
          [
            'events',
            'what',
            'SQLite p50',
            'SQLite p99',
            'ClickHouse p50',
            'ClickHouse p99',
            'SQL alone: FINAL (before) p50',
            'SQL alone: plain (now) p50',
            'SQL alone: plain p99',
            'SQL alone, v1 schema (8,192-row granules) p50',
            'SQL alone, v1 schema p99',
          ],
        );
  } finally {
    await cluster.destroy();
  }
}

main().catch((err: unknown) => {
  console.error(err);
  process.exit(1);
});
