import { readFileSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { silentLogger } from '../../core/log/logger';
import type { ApiEvent } from '../../core/model';
import { createDaemon } from '../../daemon/create-daemon';
import { MAX_EXPORT_EVENTS } from '../../daemon/events/export/export-query';
import { checkTrace, parseChromeTrace, type Trace } from '../support/chrome-trace';
import { clickhouseAvailable, useClickHouse } from '../support/clickhouse-server';
import { writeStore, type TestEvent } from '../support/event-store';
import {
  get,
  readEvents,
  startEventsServer,
  useEventsBackends,
  type EventsServer,
} from '../support/events-http';
import { runKreplay } from '../support/kreplay-cli';
import { useTempDir } from '../support/temp-dir';

const dir = useTempDir('kreplay-export-');
/* from the node files, and from the same files shipped to ClickHouse */
const BACKENDS = useEventsBackends();
const BASE = 1795345678123456789n;
const at = (i: number, offset = 0) => BASE + BigInt(i * 10_000 + offset);

/*
 * One thread per node writing every 10 µs for 5 µs. On alpha, every even
 * write's thread issues a 30 µs block request 1 µs into it (overlapping the
 * next ones on the device: tied to the write), and every fifth write is
 * followed by one issued after it returned (not tied). beta uses the same pid.
 */
function alpha(txn: string): TestEvent[] {
  return Array.from({ length: 50 }, (_, i): TestEvent[] => [
    {
      ts: at(i),
      dur: 5000,
      service: 'api',
      txn,
      pid: 100,
      comm: 'api-worker',
      bytes: i,
      target: ['file', `/var/lib/a${i}`],
    },
    ...(i % 2 === 0
      ? [{ ts: at(i, 1000), type: 'block_io', dur: 30_000, service: 'api', txn, pid: 100 } as TestEvent]
      : []),
    ...(i % 5 === 0
      ? [{ ts: at(i, 7000), type: 'block_io', dur: 1500, service: 'api', txn, pid: 100 } as TestEvent]
      : []),
  ]).flat();
}
const beta = (txn: string): TestEvent[] =>
  Array.from({ length: 20 }, (_, i) => ({
    ts: at(i, 3),
    dur: 2000,
    service: 'db',
    txn,
    pid: 100,
    comm: 'db',
  }));

describe.each(BACKENDS)('GET /api/events/export from $kind', (backend) => {
  let server: EventsServer;
  beforeEach(async () => {
    writeStore(dir.path, 'alpha', [...alpha('T1'), { ts: at(60), txn: 'T2', pid: 7 }]);
    writeStore(dir.path, 'beta', beta('T1'));
    server = await startEventsServer(dir.path, backend);
  });
  afterEach(() => server.close());

  const exportOf = async (query: string): Promise<Trace> => {
    const reply = await get(`${server.url}/api/events/export?${query}`);
    expect(reply.status).toBe(200);
    expect(reply.contentType).toMatch(/^application\/json/);
    const trace = parseChromeTrace(reply.text);
    checkTrace(trace);
    return trace;
  };
  const apiEvents = async (query: string): Promise<ApiEvent[]> =>
    readEvents((await get(`${server.url}/api/events?int64=string&limit=10000&${query}`)).text).events;

  it("exports a transaction's events with exact ns, nested per thread, async ids paired, flows where the thread was in a write", async () => {
    const trace = await exportOf('format=chrome-trace&transaction_id=T1');
    const events = await apiEvents('transaction_id=T1');
    expect(events).toHaveLength(50 + 25 + 10 + 20);
    const byId = new Map(events.map((e) => [e.event_id, e]));
    const slices = trace.events.filter((e) => e.ph === 'X');
    const begins = trace.events.filter((e) => e.ph === 'b');
    const ends = new Map(trace.events.filter((e) => e.ph === 'e').map((e) => [e.id, e]));
    expect(slices).toHaveLength(70);
    expect(begins).toHaveLength(35);
    for (const slice of slices) {
      const event = byId.get(slice.args!.event_id as string)!;
      expect(event.event_type).toBe('sys_write');
      expect([slice.tsNs, slice.durNs]).toEqual([event.timestamp_ns, event.duration_ns]);
      expect(slice.args).toEqual({
        syscall: 'write',
        fd: 3,
        ...(event.node === 'alpha' ? { target: `/var/lib/a${event.bytes}`, target_kind: 'file' } : {}),
        bytes: event.bytes,
        ret: event.bytes,
        event_id: event.event_id,
      });
    }
    for (const begin of begins) {
      const event = byId.get(begin.id!)!;
      expect(event.event_type).toBe('block_io');
      expect(begin.tsNs).toBe(event.timestamp_ns);
      expect(ends.get(begin.id)!.tsNs! - begin.tsNs!).toBe(event.duration_ns);
    }
    // a process per (node, pid): the same pid on two nodes is two processes
    const names = [...trace.processNames.values()].sort();
    expect(names).toEqual(['api (api-worker 100) @ alpha', 'block 8:0 @ alpha', 'db (db 100) @ beta']);
    // exactly the requests issued while their thread was in a write are tied to it
    const tied = begins.filter((b) => b.flow_in);
    expect(tied).toHaveLength(25);
    expect(trace.otherData).toEqual({ source: 'kreplay', events: 105, flows: 25 });
    const writeOf = new Map(slices.filter((s) => s.flow_out).map((s) => [s.bind_id, s]));
    for (const b of tied) {
      const write = writeOf.get(b.bind_id)!;
      expect(b.tsNs! - write.tsNs!).toBe(1000n);
    }
  });

  it('takes the filters of GET /api/events', async () => {
    const trace = await exportOf('node=beta&from=' + at(10, 3) + '&service=db');
    expect(trace.events).toHaveLength(10);
    expect((await exportOf('transaction_id=nope')).events).toEqual([]);
    const blocks = await exportOf('event_type=block_io&min_duration_ms=0.02');
    expect(blocks.events.filter((e) => e.ph === 'b')).toHaveLength(25);
  });

  it('answers bad parameters with problem+json naming them', async () => {
    for (const query of ['format=xml', 'limit=5', 'from=2&to=1', 'event_type=read']) {
      const reply = await get(`${server.url}/api/events/export?${query}`);
      expect(reply.status).toBe(400);
      expect(reply.contentType).toMatch(/^application\/problem\+json/);
    }
  });

  it('kreplay export TXN -o writes the same file', async () => {
    const out = join(dir.path, 'incident.json');
    const result = await runKreplay(['export', 'T1', '-o', out, '--server', server.url]);
    expect(result.status).toBe(0);
    const fromCli = readFileSync(out, 'utf8');
    expect(fromCli).toBe((await get(`${server.url}/api/events/export?transaction_id=T1`)).text);
    const failed = await runKreplay(['export', 'T1', '--from', 'yesterday', '--server', server.url]);
    expect(failed.status).toBe(2);
  });
});

describe('export under --tokens', () => {
  it('needs a read token; kreplay export sends KREPLAY_TOKEN', async () => {
    writeStore(dir.path, 'alpha', alpha('T1'));
    const token = `reader-${'r'.repeat(20)}`;
    writeFileSync(join(dir.path, 'tokens'), `${token} read grafana\n`);
    const daemon = await createDaemon({
      dataDir: dir.path,
      log: silentLogger,
      tokensFile: join(dir.path, 'tokens'),
    });
    const out = join(dir.path, 'incident.json');
    try {
      const url = `${daemon.url}/api/events/export?transaction_id=T1`;
      expect((await fetch(url)).status).toBe(401);
      const reply = await fetch(url, { headers: { authorization: `Bearer ${token}` } });
      expect(reply.status).toBe(200);
      const text = await reply.text();
      expect((await runKreplay(['export', 'T1', '-o', out, '--server', daemon.url])).status).toBe(1);
      const sent = await runKreplay(['export', 'T1', '-o', out, '--server', daemon.url], 60_000, {
        KREPLAY_TOKEN: token,
      });
      expect(sent.stderr).toMatch(/^wrote /);
      expect(sent.status).toBe(0);
      expect(readFileSync(out, 'utf8')).toBe(text);
    } finally {
      await daemon.close();
    }
  });
});

describe('export size cap', () => {
  it(`answers 413 past ${MAX_EXPORT_EVENTS} events, before sending any`, async () => {
    const events: TestEvent[] = Array.from({ length: MAX_EXPORT_EVENTS + 1 }, (_, i) => ({
      ts: at(i),
      txn: 'big',
    }));
    writeStore(dir.path, 'alpha', events);
    const server = await startEventsServer(dir.path);
    try {
      const reply = await get(`${server.url}/api/events/export?transaction_id=big`);
      expect(reply.status).toBe(413);
      expect(JSON.parse(reply.text)).toMatchObject({ code: 'E_EXPORT_TOO_LARGE', status: 413 });
    } finally {
      await server.close();
    }
  });
});

if (!clickhouseAvailable)
  console.warn('SKIPPED: the export from the ClickHouse store (clickhouse-server is not installed)');
(clickhouseAvailable ? describe : describe.skip)('GET /api/events/export from the ClickHouse store', () => {
  const clickhouse = useClickHouse();

  it('writes the same file as from the node files, byte for byte', async () => {
    writeStore(dir.path, 'alpha', [...alpha('T1'), { ts: at(60), txn: 'T2', pid: 7 }]);
    writeStore(dir.path, 'beta', beta('T1'));
    const files = await startEventsServer(dir.path);
    const fleet = await startEventsServer(dir.path, { kind: 'clickhouse', server: () => clickhouse.server });
    try {
      for (const query of [
        'transaction_id=T1',
        'node=beta&service=db',
        'event_type=block_io',
        'trace_id=none',
      ]) {
        const expected = await get(`${files.url}/api/events/export?${query}`);
        const reply = await get(`${fleet.url}/api/events/export?${query}`);
        expect(reply.status).toBe(200);
        expect(reply.text).toBe(expected.text);
      }
    } finally {
      await fleet.close();
      await files.close();
    }
  }, 60_000);
});
