/**
 * `kreplay agent --otlp` end to end (real kernel, real agent): a traced
 * request (curl, with a W3C traceparent) to Python's ThreadingHTTPServer
 * whose handler writes and fsyncs a file, has a connection refused and asks a
 * real Redis (redis-server from apt) for PING. An OTLP/HTTP receiver that
 * decodes with the OpenTelemetry project's generated code gets one span per
 * stored event of the trace, each a child of the traceparent's span, with the
 * stored event's exact start and end and the conventions' attributes.
 * Unsampled traces give nothing; a receiver that asks to wait, drops the
 * connection or is down never holds the capture up, nothing is lost while
 * the queue holds, and what is dropped past it is counted.
 */
import { execFile, spawn, type ChildProcess } from 'node:child_process';
import { mkdtempSync, readFileSync, rmSync } from 'node:fs';
import { createServer } from 'node:net';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import Database from 'better-sqlite3';
import { eventTypeName, formatEventId } from '../../core/model';
import { startAgent, type AgentProcess } from '../support/agent-process';
import { createCgroup, serverInCgroup, type TestCgroup } from '../support/cgroup';
import { startEventsServer } from '../support/events-http';
import { runKreplay } from '../support/kreplay-cli';
import { decodeTraceJson, type DecodedSpan } from '../support/otlp-decode';
import { OtlpReceiver } from '../support/otlp-receiver';
import { storedCounter } from '../support/store-rows';
import { waitFor } from '../support/wait';

const PYTHON = '/usr/bin/python3';
const SERVICE = join(__dirname, '..', 'support', 'otlp-service.py');
const PARENT = '00f067aa0ba902b7';
const trace = (n: number) => `${n.toString(16).padStart(4, '0')}${'c'.repeat(28)}`;
const QUEUE_SPANS = 40;

interface Stored {
  eventId: string;
  type: string;
  ts: bigint;
  dur: bigint;
  pid: number;
  tid: number;
  service: string;
  parent: string | null;
}

/** The stored events of a trace, with their event ids. */
function storedOf(store: string, traceId: string): Stored[] {
  const db = new Database(store, { readonly: true });
  try {
    const storeId = db.prepare(`SELECT value FROM meta WHERE key = 'store_id'`).pluck().get() as string;
    const rows = db
      .prepare(
        `SELECT e.ts, e.seq, e.type, e.dur, e.pid, e.tid, s.name AS service, c.parent_span_id AS parent
         FROM events e JOIN contexts c ON c.id = e.ctx JOIN services s ON s.id = e.service
         WHERE c.trace_id = ? ORDER BY e.seq`,
      )
      .safeIntegers(true)
      .all(traceId) as Record<string, bigint | string | null>[];
    return rows.map((r) => ({
      eventId: formatEventId(storeId, r.ts as bigint, Number(r.seq)),
      type: eventTypeName(Number(r.type)),
      ts: r.ts as bigint,
      dur: r.dur as bigint,
      pid: Number(r.pid),
      tid: Number(r.tid),
      service: r.service as string,
      parent: r.parent as string | null,
    }));
  } finally {
    db.close();
  }
}

function freePort(): Promise<number> {
  const server = createServer();
  return new Promise((resolve) =>
    server.listen(0, '127.0.0.1', () => {
      const { port } = server.address() as { port: number };
      server.close(() => resolve(port));
    }),
  );
}

function curl(port: number, traceId: string, flags: string): Promise<string> {
  return new Promise((resolve, reject) =>
    execFile(
      'curl',
      ['-sf', '-H', `traceparent: 00-${traceId}-${PARENT}-${flags}`, `http://127.0.0.1:${port}/work`],
      { timeout: 30000 },
      (err, stdout) => (err ? reject(err) : resolve(stdout)),
    ),
  );
}

describe('kreplay agent --otlp', () => {
  let dir: string;
  let cgroup: TestCgroup;
  let receiver: OtlpReceiver;
  let agent: AgentProcess;
  let store: string;
  let redis: ChildProcess;
  let service: ChildProcess;
  let servicePort: number;
  let redisPort: number;
  let closedPort: number;
  let dataFile: string;
  const spansOf = (traceId: string): DecodedSpan[] => receiver.spans.filter((s) => s.traceId === traceId);

  beforeAll(async () => {
    dir = mkdtempSync(join(tmpdir(), 'kreplay-otlp-'));
    cgroup = createCgroup(`kreplay-otlp-${process.pid}.service`);
    receiver = await OtlpReceiver.start();
    [redisPort, closedPort] = [await freePort(), await freePort()];
    redis = spawn(
      'redis-server',
      ['--port', String(redisPort), '--bind', '127.0.0.1', '--save', '', '--appendonly', 'no'],
      {
        stdio: 'ignore',
      },
    );
    store = join(dir, 'data', 'otlp.db');
    agent = await startAgent([
      '--data-dir',
      join(dir, 'data'),
      '--node',
      'otlp',
      '--cgroup-id',
      String(cgroup.id),
      // the test's processes only: another's traced requests on a shared machine are not this test's spans
      '--filter-transactions',
      '--otlp',
      receiver.url,
      '--otlp-queue',
      String(QUEUE_SPANS),
    ]);
    dataFile = join(dir, 'db.sqlite');
    ({ child: service, port: servicePort } = await serverInCgroup(cgroup, PYTHON, [
      SERVICE,
      dataFile,
      String(redisPort),
      String(closedPort),
    ]));
    // Redis answers once it listens
    await waitFor(async () => (await curl(servicePort, trace(0), '01').catch(() => '')).startsWith('+PONG'));
  });

  afterAll(async () => {
    service?.kill();
    redis?.kill();
    const code = await agent?.stop();
    await receiver?.close();
    cgroup?.remove();
    rmSync(dir, { recursive: true, force: true });
    expect(code).toBe(0);
  });

  it('gives each stored event of a sampled trace one span under the traceparent’s span, exact, with the conventions’ attributes', async () => {
    const t = trace(1);
    expect(await curl(servicePort, t, '01')).toBe('+PONG\r\n');
    // every stored event of the trace has come as a span (the store and the export both caught up)
    const stored = await waitFor(() => {
      const events = storedOf(store, t);
      const spans = spansOf(t);
      return events.some((e) => e.type === 'sys_fsync') && spans.length === events.length
        ? events
        : undefined;
    });
    const spans = new Map(spansOf(t).map((s) => [s.attributes['kreplay.event_id'], s]));
    for (const e of stored) {
      const span = spans.get(e.eventId)!;
      expect(span).toMatchObject({ traceId: t, parentSpanId: PARENT, startNs: e.ts, endNs: e.ts + e.dur });
      expect(span.attributes).toMatchObject({
        'process.pid': e.pid,
        'thread.id': e.tid,
        'kreplay.event_type': e.type,
      });
      expect(span.resource).toEqual({ 'service.name': e.service, 'host.name': 'otlp' });
      expect(e.parent).toBe(PARENT);
    }
    const byName = (name: string) => [...spans.values()].filter((s) => s.name === name);
    const [fsync] = byName(`sys_fsync ${dataFile}`);
    expect(fsync!.attributes).toMatchObject({ 'file.path': dataFile, 'kreplay.ret': 0 });
    const [refused] = byName(`sys_connect tcp 127.0.0.1:${closedPort}`);
    expect(refused!.attributes).toMatchObject({
      'error.type': 'ECONNREFUSED',
      'network.peer.address': '127.0.0.1',
      'network.peer.port': closedPort,
    });
    expect(refused!.status.code).toBe(2);
    // Redis's reply: the read of the upstream, with its response time
    const [pong] = byName(`sys_read tcp 127.0.0.1:${redisPort}`);
    expect(pong!.attributes).toMatchObject({ 'network.peer.port': redisPort, 'kreplay.ret': 7 });
    expect(pong!.attributes['kreplay.response_ns']).toBeGreaterThan(0);
    expect(byName(`sys_write tcp 127.0.0.1:${redisPort}`)).toHaveLength(1);
  });

  it('kreplay export TXN --format otlp writes the same spans as an OTLP/JSON file the generated code reads back', async () => {
    const t = trace(1);
    const server = await startEventsServer(join(dir, 'data'));
    try {
      const file = join(dir, 'export.otlp.json');
      const cli = await runKreplay(['export', t, '--format', 'otlp', '-o', file, '--server', server.url]);
      expect(cli).toMatchObject({ status: 0 });
      const n = storedOf(store, t).length;
      expect(cli.stderr).toContain(`wrote ${file} (${n} spans`);
      const exported = decodeTraceJson(readFileSync(file, 'utf8'));
      const live = new Map(spansOf(t).map((span) => [span.spanId, span]));
      expect(exported).toHaveLength(n);
      // the same span ids (made from the event ids), times and attributes as the live export sent
      for (const span of exported) expect(span).toEqual(live.get(span.spanId));
    } finally {
      await server.close();
    }
  });

  it('sends nothing of an unsampled trace', async () => {
    const [unsampled, sampled] = [trace(2), trace(3)];
    await curl(servicePort, unsampled, '00');
    await curl(servicePort, sampled, '01');
    // the later sampled request arrived whole: the unsampled one was read before it
    await waitFor(() => {
      const n = storedOf(store, sampled).length;
      return n > 0 && spansOf(sampled).length === n;
    });
    expect(storedOf(store, unsampled).length).toBeGreaterThan(0);
    expect(spansOf(unsampled)).toEqual([]);
    await waitFor(() => storedCounter(store, 'otlp_unsampled_events') >= storedOf(store, unsampled).length);
  });

  it('goes on capturing while the receiver asks to wait (429, Retry-After) and drops a connection; then delivers all', async () => {
    const t = trace(4);
    const accepted = receiver.requests.length;
    let release = false;
    receiver.answer = (i) =>
      release
        ? { kind: 'accept' }
        : i % 2 === 0
          ? { kind: 'status', status: 429, headers: { 'retry-after': '1' } }
          : { kind: 'drop' };
    await curl(servicePort, t, '01');
    // stored while no request was accepted: the capture did not wait for the export
    await waitFor(() => storedOf(store, t).some((e) => e.type === 'sys_fsync'));
    await waitFor(() => receiver.requests.length >= accepted + 2);
    expect(spansOf(t)).toEqual([]);
    release = true;
    const n = storedOf(store, t).length;
    await waitFor(() => spansOf(t).length === n);
    expect(new Set(spansOf(t).map((s) => s.spanId)).size).toBe(n);
  });

  it('counts the spans a full queue drops while the receiver is down, never losing an event from the store', async () => {
    const port = receiver.port;
    await receiver.close();
    const before = storedCounter(store, 'otlp_dropped_spans');
    // each request makes about ten spans: more than the queue holds
    const traces = Array.from({ length: Math.ceil(QUEUE_SPANS / 4) }, (_, i) => trace(100 + i));
    for (const t of traces) await curl(servicePort, t, '01');
    const dropped = await waitFor(() => storedCounter(store, 'otlp_dropped_spans') - before || undefined);
    expect(dropped).toBeGreaterThan(0);
    // every request is in the store, the fsync of each
    for (const t of traces)
      await waitFor(() => storedOf(store, t).filter((e) => e.type === 'sys_fsync').length === 1);
    expect(storedCounter(store, 'sys_fsync_dropped')).toBe(0);
    receiver = await OtlpReceiver.start(port);
    // what the queue held is delivered
    await waitFor(() => receiver.spans.length > 0 && storedCounter(store, 'otlp_exported_spans') > 0, 60_000);
  });
});
