/**
 * What `--otlp` costs the agent users run: a C loop's writes, each in a
 * sampled W3C trace (its thread sent a request head with a traceparent; a new
 * trace every 500 writes, under the per-trace cap, or every few as short
 * requests give), paced at 100k writes/s,
 * under the `kreplay agent` process without and with --otlp to a receiver on
 * loopback, interleaved round by round. The agent's CPU (user and system,
 * every thread, from /proc) is read once it stored every event and, with
 * --otlp, once the receiver acknowledged every span: the added CPU per
 * exported span is the difference divided by the spans. The wire figure is
 * the gzipped request bytes the receiver took per span. Then, in this
 * process, what each step of the export costs per span, on the loop's events
 * written into a node store: the native encoder and request (what
 * http/protobuf runs), and the path before it (rows read into JavaScript,
 * spans built and written there, Node's gzip) beside the OpenTelemetry
 * serializers.
 *
 *   node dist/bench/otlp.js [writes per round] [rounds] [rate] [writes per trace]
 */
import Database from 'better-sqlite3';
import { mkdtempSync, rmSync } from 'node:fs';
import { createServer, type Server } from 'node:http';
import type { AddressInfo } from 'node:net';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { gzipSync } from 'node:zlib';
import { ProtobufTraceSerializer } from '@opentelemetry/otlp-transformer';
import { EventBatch } from '../agent/ingest/event-batch';
import { groupResource, NativeSpanReader } from '../agent/otlp/otlp-native-spans';
import { StoreWriter } from '../agent/store/store-writer';
import { repoRoot } from '../core/repo-root';
import { RecordType, rowToEvent, targetKindCode, type ApiEvent } from '../core/model';
import { eventSpan, SpanResources, type KernelSpan } from '../core/otlp/event-span';
import { encodeSpansJson } from '../core/otlp/otlp-encoding';
import { spanIdFor } from '../core/otlp/span-ids';
import { SpanProtobufWriter } from '../core/otlp/span-protobuf';
import { eventColumnsOf, type EventRow } from '../core/store/event-columns';
import { readStoreInfo, SCHEMA_VERSION } from '../core/store/schema';
import { StoreNameCache } from '../core/store/store-names';
import { startBenchAgent, type AgentCpu } from './agent-process';
import { benchLoop, timeLoop } from './bench-loops';
import { printTable } from './table';

const WRITES = Number(process.argv[2] ?? 500_000);
const ROUNDS = Number(process.argv[3] ?? 3);
const RATE = Number(process.argv[4] ?? 100_000);
/** writes a trace holds: 500 (the default) under the per-trace cap; a request's few (e.g. 4) for traffic of short requests */
const PER_TRACE = Number(process.argv[5] ?? 500);
const LOOP_COMM = 'traceloop';

/** A receiver that takes every request and counts its bytes (spans are counted by the agent's status line). */
async function startReceiver(): Promise<{ server: Server; url: string; bytes: () => number }> {
  let bytes = 0;
  const server = createServer((req, res) => {
    req.on('data', (chunk: Buffer) => (bytes += chunk.length));
    req.on('end', () => res.writeHead(200).end());
  });
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  return { server, url: `http://127.0.0.1:${(server.address() as AddressInfo).port}`, bytes: () => bytes };
}

const EXPORTED = /otlp=\w+ spans=(\d+) queued=(\d+) dropped=(\d+)/g;

interface Round {
  mode: 'without' | 'with --otlp';
  stored: number;
  spans: number;
  dropped: number;
  cpuS: number;
  nsPerWrite: number;
  wireBytes: number;
}

async function round(otlp: string | null, exe: string, receiverBytes: () => number): Promise<Round> {
  // --filter-transactions: other processes' transactions (a shared machine) are not captured either
  const args = ['--include', `comm:${LOOP_COMM}`, '--filter-transactions', ...(otlp ? ['--otlp', otlp] : [])];
  const agent = await startBenchAgent(repoRoot(), args);
  try {
    const bytes0 = receiverBytes();
    const before: AgentCpu = agent.cpu();
    const nsPerWrite = await timeLoop(exe, [String(WRITES), String(RATE), String(PER_TRACE)]);
    // every event the loop makes, so that the count read is the round's whole (a status line read at
    // the first count past a part of them left the rest uncounted, and the export's wait short of
    // them): the writes, each trace's head sent and read back on its socket pair, the loop's line out
    const events = WRITES + 2 * Math.ceil(WRITES / PER_TRACE) + 1;
    const { stored } = await agent.caughtUp(events);
    let spans = 0;
    let dropped = 0;
    if (otlp) {
      const deadline = Date.now() + 120_000;
      for (;;) {
        const last = [...agent.output().matchAll(EXPORTED)].pop();
        spans = Number(last?.[1] ?? 0);
        dropped = Number(last?.[3] ?? 0);
        if (spans + dropped >= stored && Number(last?.[2]) === 0) break;
        if (Date.now() > deadline) throw new Error(`the export did not catch up:\n${agent.output()}`);
        await new Promise((r) => setTimeout(r, 100));
      }
    }
    const after = agent.cpu();
    return {
      mode: otlp ? 'with --otlp' : 'without',
      stored,
      spans,
      dropped,
      cpuS: after.userS + after.systemS - before.userS - before.systemS,
      nsPerWrite,
      wireBytes: receiverBytes() - bytes0,
    };
  } finally {
    await agent.stop();
  }
}

const STEP_EVENTS = 20_480;

/** A node store of the loop's events: writes to /dev/null, 500 to a sampled trace. */
function writeStepStore(dir: string): string {
  const writer = StoreWriter.open(dir, 'bench');
  const batch = new EventBatch(STEP_EVENTS);
  batch.clear(1_795_338_478_000_000_000n);
  const service = writer.services.id(LOOP_COMM);
  const comm = writer.comms.id(LOOP_COMM);
  const target = writer.targets.id(targetKindCode('char'), '/dev/null');
  for (let i = 0; i < STEP_EVENTS; i++) {
    const trace = `4bf92f3577b34da6${(Math.floor(i / PER_TRACE) + 1).toString(16).padStart(16, '0')}`;
    batch.pushSysWrite({
      ...{ tsOffset: i * 10_000, dur: 1234 + ((i * 7919) % 3000), service, comm, pid: 4242, tid: 4242 },
      ...{ ctx: writer.contexts.id(trace, trace, '00f067aa0ba902b7', 1), bytes: 64, fd: 3, ret: 64 },
      ...{ type: RecordType.SysWrite, syscall: 1, target },
    });
  }
  writer.writeBatch(batch);
  const path = writer.path;
  writer.close();
  return path;
}

/** µs of this process's CPU per span of `f` (run twice: the first warms up). */
function cpuPerSpan(f: () => number): number {
  let us = 0;
  for (let pass = 0; pass < 2; pass++) {
    const t0 = process.cpuUsage();
    const spans = f();
    const t = process.cpuUsage(t0);
    us = (t.user + t.system) / spans;
  }
  return us;
}

/** µs per span of each export step, in this process, on the loop's events in a node store. */
function steps(dir: string): [string, number][] {
  const db = new Database(writeStepStore(dir), { readonly: true });
  const names = new StoreNameCache(db, readStoreInfo(db));
  const resources = new SpanResources();
  const native = new NativeSpanReader(db, names.storeId, 'sampled');
  const writer = new SpanProtobufWriter();
  const READ = 512;
  const REQUEST = 4096;
  const ranges = Array.from({ length: STEP_EVENTS / READ + 1 }, (_, i) => i * READ + 1);
  const rows: [string, number][] = [];
  rows.push([
    'kreplay_otlp_spans: rows to span bytes in SQLite (reads of 512)',
    cpuPerSpan(() => {
      let spans = 0;
      for (const from of ranges) {
        spans += native.read(from, from + READ).groups.reduce((n, g) => n + g.spans, 0);
        native.undo();
      }
      return spans;
    }),
  ]);
  let raw = 0;
  let wire = 0;
  for (const [step, level] of [
    ['kreplay_otlp_request: framed, no compression (the body copied out)', 0],
    ['kreplay_otlp_request: framed, gzip (libdeflate level 1)', 1],
  ] as const) {
    let requestUs = 0;
    // the reads run again each pass; the request's own share is timed around it
    cpuPerSpan(() => {
      let spans = 0;
      requestUs = 0;
      if (level === 0) raw = 0;
      else wire = 0;
      for (let at = 0; at < ranges.length; at += REQUEST / READ) {
        const lengths = new Map<number, number>();
        for (const from of ranges.slice(at, at + REQUEST / READ))
          for (const g of native.read(from, from + READ).groups) {
            lengths.set(g.group, (lengths.get(g.group) ?? 0) + g.length);
            spans += g.spans;
          }
        const kept = [...lengths].map(([group, length]) => ({
          resource: groupResource(group, names, resources),
          service: group,
          length,
        }));
        const t0 = process.cpuUsage();
        const body = native.request(writer.layout([], kept), level);
        const t = process.cpuUsage(t0);
        requestUs += t.user + t.system;
        if (level === 0) raw += body.length;
        else wire += body.length;
      }
      requestUs /= spans;
      return spans;
    });
    rows.push([step, requestUs]);
  }

  // the path before: rows read into JavaScript, made API events, spans, written and gzipped here
  const select = db
    .prepare<[number, number], EventRow>(
      `SELECT ${eventColumnsOf(SCHEMA_VERSION)} FROM events INDEXED BY events_by_seq WHERE seq >= ? AND seq < ? ORDER BY seq`,
    )
    .safeIntegers(true);
  let events: ApiEvent[] = [];
  rows.push([
    'rows read into JavaScript as API events (before)',
    cpuPerSpan(() => {
      events = ranges.flatMap((from) => select.all(from, from + READ).map((row) => rowToEvent(row, names)));
      return events.length;
    }),
  ]);
  let spans: KernelSpan[] = [];
  rows.push([
    'event -> span (attributes, ids): JSON export (before: every span)',
    cpuPerSpan(() => {
      spans = events.map((e, i) => eventSpan(e, resources, 1, spanIdFor(names.storeId, i + 1))!);
      return spans.length;
    }),
  ]);
  const batches = Array.from({ length: Math.ceil(spans.length / 512) }, (_, i) =>
    spans.slice(i * 512, (i + 1) * 512),
  );
  let encoded: Uint8Array[] = [];
  rows.push([
    "kreplay's TS protobuf writer (before; now summaries, odd rows)",
    cpuPerSpan(() => {
      encoded = batches.map((b) => writer.encode(b));
      return spans.length;
    }),
  ]);
  rows.push([
    'OpenTelemetry protobuf serializer (not used)',
    cpuPerSpan(() => {
      batches.forEach((b) => ProtobufTraceSerializer.serializeRequest(b));
      return spans.length;
    }),
  ]);
  rows.push([
    'OpenTelemetry JSON serializer (http/json, files)',
    cpuPerSpan(() => {
      batches.forEach((b) => encodeSpansJson(b));
      return spans.length;
    }),
  ]);
  rows.push([
    "Node's gzip level 1 (before)",
    cpuPerSpan(() => {
      encoded.forEach((b) => gzipSync(b, { level: 1 }));
      return spans.length;
    }),
  ]);
  db.close();
  rows.push(['(protobuf bytes per span, before gzip)', raw / STEP_EVENTS]);
  rows.push(['(gzipped bytes per span, requests of 4,096)', wire / STEP_EVENTS]);
  return rows;
}

async function main(): Promise<void> {
  const exe = benchLoop('traceloop');
  const receiver = await startReceiver();
  const rounds: Round[] = [];
  try {
    for (let r = 0; r < ROUNDS; r++) {
      rounds.push(await round(null, exe, receiver.bytes));
      rounds.push(await round(receiver.url, exe, receiver.bytes));
    }
  } finally {
    receiver.server.close();
  }
  printTable(
    `otlp: ${WRITES.toLocaleString('en-US')} traced writes a round at ${RATE.toLocaleString('en-US')}/s, agent CPU (user + system, all threads)`,
    rounds.map((r) => [
      r.mode,
      r.stored,
      r.spans,
      r.dropped,
      r.cpuS.toFixed(2),
      ((r.cpuS * 1e6) / r.stored).toFixed(3),
      r.spans > 0 ? (r.wireBytes / r.spans).toFixed(1) : '–',
      r.nsPerWrite.toFixed(0),
    ]),
    ['mode', 'stored', 'spans', 'dropped', 'CPU s', 'CPU µs/event', 'wire B/span', 'loop ns/write'],
  );
  const added = Array.from({ length: ROUNDS }, (_, r) => {
    const [without, withOtlp] = [rounds[2 * r]!, rounds[2 * r + 1]!];
    return (
      (withOtlp.cpuS / withOtlp.stored - without.cpuS / without.stored) *
      1e6 *
      (withOtlp.stored / withOtlp.spans)
    );
  });
  console.log(
    `added agent CPU per exported span, by round: ${added.map((a) => a.toFixed(2)).join(', ')} µs (goal ≤ 0.5 µs)`,
  );
  const dir = mkdtempSync(join(tmpdir(), 'kreplay-bench-otlp-'));
  try {
    printTable(
      `the export, step by step (this process, ${STEP_EVENTS.toLocaleString('en-US')} events of the loop in a node store)`,
      steps(dir).map(([step, us]) => [step, us.toFixed(3)]),
      ['step', 'µs per span (bytes for the last rows)'],
    );
  } finally {
    rmSync(dir, { recursive: true, force: true });
  }
}

void main();
