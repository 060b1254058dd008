/**
 * What `--otlp` costs the agent users run: a C loop's writes, each in a
 * sampled W3C trace (its thread sent a request head with a traceparent; a new
 * trace every 500 writes, under the per-trace cap), paced at 100k writes/s,
 * under the `kreplay agent` process without and with --otlp to a receiver on
 * loopback, interleaved round by round. The agent's CPU (user and system,
 * every thread, from /proc) is read once it stored every event and, with
 * --otlp, once the receiver acknowledged every span: the added CPU per
 * exported span is the difference divided by the spans. The wire figure is
 * the gzipped request bytes the receiver took per span. Then, in this
 * process, what each step of the export costs per span (the OpenTelemetry
 * serializers, gzip).
 *
 *   node dist/bench/otlp.js [writes per round] [rounds] [rate]
 */
import { createServer, type Server } from 'node:http';
import type { AddressInfo } from 'node:net';
import { gzipSync } from 'node:zlib';
import { repoRoot } from '../core/repo-root';
import { formatEventId, type ApiEvent } from '../core/model';
import { eventSpan, SpanResources } from '../core/otlp/event-span';
import { spanIdFor } from '../core/otlp/span-ids';
import { ProtobufTraceSerializer } from '@opentelemetry/otlp-transformer';
import { encodeSpansJson, SpanEncoder } from '../core/otlp/otlp-encoding';
import { startBenchAgent, type AgentCpu } from './agent-process';
import { benchLoop, timeLoop } from './bench-loops';
import { printTable } from './table';

const WRITES = Number(process.argv[2] ?? 500_000);
const ROUNDS = Number(process.argv[3] ?? 3);
const RATE = Number(process.argv[4] ?? 100_000);
const PER_TRACE = 500;
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
    // the writes and the heads that start each trace
    const events = WRITES + Math.ceil(WRITES / PER_TRACE);
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

/** µs per span of each export step, in this process, on spans like the agent makes. */
function steps(): [string, number][] {
  const n = 20_000;
  const resources = new SpanResources();
  const base = 1_795_338_478_000_000_000n;
  const events: ApiEvent[] = Array.from({ length: n }, (_, i) => ({
    event_id: formatEventId('a1b2c3d4e5f6', base + BigInt(i * 10_000), i + 1),
    event_type: 'sys_write',
    timestamp_ns: base + BigInt(i * 10_000),
    duration_ns: 1234n,
    service_name: 'traceloop',
    transaction_id: '4bf92f3577b34da60000000000000001',
    trace_id: '4bf92f3577b34da60000000000000001',
    parent_span_id: '00f067aa0ba902b7',
    node: 'bench',
    pid: 4242,
    tid: 4242,
    comm: 'traceloop',
    bytes: 64,
    syscall: 'write',
    fd: 3,
    ret: 64,
    target_kind: 'char',
    target: '/dev/null',
  }));
  const time = (f: () => void): number => {
    const t0 = process.cpuUsage();
    f();
    const t = process.cpuUsage(t0);
    return (t.user + t.system) / n;
  };
  const spans = events.map((e) => eventSpan(e, resources, 1)!);
  const batches = Array.from({ length: n / 512 }, (_, i) => spans.slice(i * 512, (i + 1) * 512));
  let encoded: Uint8Array[] = [];
  const rows: [string, number][] = [];
  // a warm-up pass, then the measured one
  for (const measured of [false, true]) {
    // the span id from the store id and seq, as the agent's export has them
    const build = time(() =>
      events.forEach((e, i) => eventSpan(e, resources, 1, spanIdFor('a1b2c3d4e5f6', i + 1))),
    );
    const otel = time(() => batches.forEach((b) => ProtobufTraceSerializer.serializeRequest(b)));
    const encoder = new SpanEncoder('http/protobuf');
    const protobuf = time(() => (encoded = batches.map((b) => encoder.encode(b))));
    const json = time(() => batches.forEach((b) => encodeSpansJson(b)));
    const gzip = time(() => encoded.forEach((b) => gzipSync(b, { level: 1 })));
    if (measured)
      rows.push(
        ['event -> span (attributes, ids)', build],
        ['OpenTelemetry protobuf serializer (not used)', otel],
        ["kreplay's protobuf writer (http/protobuf)", protobuf],
        ['OpenTelemetry JSON serializer (http/json, files)', json],
        ['gzip (level 1) of the protobuf', gzip],
      );
  }
  const raw = encoded.reduce((sum, b) => sum + b.length, 0) / n;
  rows.push(['(protobuf bytes per span, before gzip)', raw]);
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
  printTable(
    'the export, step by step (this process, 20,000 spans in requests of 512)',
    steps().map(([step, us]) => [step, us.toFixed(3)]),
    ['step', 'µs per span (bytes for the last row)'],
  );
}

void main();
