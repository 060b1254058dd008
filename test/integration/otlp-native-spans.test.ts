/**
 * The spans kreplay_otlp_spans writes inside SQLite (native/sqlite/kreplay_otlp.c,
 * agent/otlp/otlp-native-spans.ts) against the ones core/otlp/event-span.ts
 * makes of the same rows' API events: byte for byte in the request the
 * protobuf writer frames, field by field as the OpenTelemetry project's
 * generated code decodes them, and as OTLP/JSON (what export files and
 * http/json send). Rows of every kind and shape, written into a real node
 * store, including those the native encoder must leave to the TS side.
 */
import Database from 'better-sqlite3';
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { StoreWriter } from '../../agent/store/store-writer';
import { groupResource, NativeSpanReader, type NativeRead } from '../../agent/otlp/otlp-native-spans';
import { RecordType, rowToEvent, type ApiEvent } from '../../core/model';
import { eventColumnsOf, type EventRow } from '../../core/store/event-columns';
import { contextKey } from '../../core/store/context-key';
import { readContextKeySeed } from '../../core/store/context-key-seed';
import { readStoreInfo, SCHEMA_VERSION } from '../../core/store/schema';
import { StoreNameCache } from '../../core/store/store-names';
import {
  eventSpan,
  SAMPLED_FLAG,
  SpanResources,
  W3C_TRACE_ID,
  type KernelSpan,
} from '../../core/otlp/event-span';
import { encodeSpansJson } from '../../core/otlp/otlp-encoding';
import { SpanProtobufWriter } from '../../core/otlp/span-protobuf';
import { spanIdFor } from '../../core/otlp/span-ids';
import { decodeTraceJson, decodeTraceRequest } from '../support/otlp-decode';

const TRACE = '4bf92f3577b34da6a3ce929d0e0e4736';
const PARENT = '00f067aa0ba902b7';
const T0 = 1_795_338_478_123_456_789n;
const { SysWrite, SysRead, SysFsync, SysConnect, BlockIo } = RecordType;
/** Two containers of one service (a pod's, and a plain podman one), as the agent stores them. */
const POD = {
  id: 'a'.repeat(64),
  runtime: 'containerd',
  name: 'web',
  image: 'registry.local/web:1',
  pod: 'web-7d9f',
  namespace: 'shop',
  labels: {},
};
const PLAIN = { ...POD, id: 'b'.repeat(64), runtime: 'podman', name: 'web-2', pod: null, namespace: null };

let dir: string;
let db: Database.Database;

beforeAll(() => {
  dir = mkdtempSync(join(tmpdir(), 'kreplay-otlp-native-'));
  // the schema, as the agent makes it; the rows below are put in by hand, odd ones included
  StoreWriter.open(dir, 'node-1').close();
  db = new Database(join(dir, 'node-1.db'));
  const rows = (sql: string, values: unknown[][]) => values.forEach((v) => db.prepare(sql).run(...v));
  rows('INSERT INTO services (id, name) VALUES (?, ?)', [
    [1, 'app'],
    [2, 'db ü'],
  ]);
  rows('INSERT INTO containers (id, info) VALUES (?, ?)', [
    [1, JSON.stringify(POD)],
    [2, JSON.stringify(PLAIN)],
  ]);
  rows('INSERT INTO comms (id, name) VALUES (?, ?)', [
    [1, 'python3'],
    [2, 'wörker 日本'],
  ]);
  const seed = readContextKeySeed(db);
  const key = (id: unknown) => (typeof id === 'string' ? contextKey(id, seed) : null);
  rows(
    'INSERT INTO contexts (id, transaction_id, trace_id, parent_span_id, trace_flags, transaction_key, trace_key) VALUES (?, ?, ?, ?, ?, ?, ?)',
    (
      [
        [1, 'req-1', TRACE, PARENT, 1],
        [2, null, '5bf92f3577b34da6a3ce929d0e0e4737', null, 3], // no transaction, parent unknown
        [3, 'req-3', '6bf92f3577b34da6a3ce929d0e0e4738', PARENT, 0], // unsampled
        [4, 'marker', 'checkout-42', null, null], // a marker's trace: no W3C trace id
        [5, 'zero', '0'.repeat(32), PARENT, 1],
        [6, 'odd-parent', '7bf92f3577b34da6a3ce929d0e0e4739', 'XYZ', 1], // left to the TS side
      ] as unknown[][]
    ).map((row) => [...row, key(row[1]), key(row[2])]),
  );
  rows('INSERT INTO targets (id, kind, value) VALUES (?, ?, ?)', [
    [1, 1, '/var/lib/app/db.sqlite'],
    [2, 2, 'tcp 10.0.0.5:5432'],
    [3, 2, 'tcp accepted 127.0.0.1:8080'],
    [4, 2, 'udp [::1]:53'],
    [5, 2, 'unix /run/app.sock'],
    [6, 2, 'netlink'],
    [7, 3, 'pipe:[1234]'],
    [8, 1, `/long/${'é'.repeat(9000)}`], // a span over 16 KB: a three-byte length
    [9, 4, '/dev/null'],
    [10, 2, 'udplite 1.2.3.4:0007'],
    [11, 2, 'tcp 1.2.3.4:123456789012345678'], // a port past 15 digits: left to the TS side
  ]);
  db.prepare('INSERT INTO targets (id, kind, value) VALUES (12, 1, CAST(? AS TEXT))').run(
    Buffer.from([0x2f, 0xff, 0x41]), // not UTF-8: left to the TS side
  );
  const insert = db.prepare(
    `INSERT INTO events (ts, seq, type, dur, service, ctx, pid, tid, comm, bytes, fd, ret, syscall, dev, sector, op, error, target, response_ns, request_key, container)
     VALUES (@ts, @seq, @type, @dur, @service, @ctx, @pid, @tid, @comm, @bytes, @fd, @ret, @syscall, @dev, @sector, @op, @error, @target, @response_ns, @request_key, @container)`,
  );
  let seq = 0;
  const event = (values: Record<string, unknown>) => {
    seq++;
    insert.run({
      ...{ ts: T0 + BigInt(seq * 1000), seq, type: SysWrite, dur: 1000 + seq, service: 1, ctx: 1 },
      ...{ pid: 4242, tid: 4243, comm: 1, bytes: 64, fd: 3, ret: 64, syscall: 1, dev: null, sector: null },
      ...{ op: null, error: null, target: null, response_ns: null, request_key: null, container: null },
      ...values,
    });
  };
  for (let target = 1; target <= 11; target++) event({ target });
  event({ target: 12 });
  event({ type: SysFsync, syscall: 18, ret: 0, bytes: 0, target: 1, dur: 800_000_001 });
  event({ type: SysRead, syscall: 15, target: 2, ret: 512, bytes: 512, response_ns: 1_499_000_000 });
  event({ type: SysRead, syscall: 10, target: 2 }); // no response time
  event({ type: SysConnect, syscall: 22, ret: -111, bytes: 0, target: 4 });
  event({ type: SysWrite, syscall: 6, target: 3, request_key: 77 });
  event({ type: SysWrite, ret: -200, target: 7 }); // an errno Linux does not name
  event({ type: SysWrite, ret: -5000 }); // past the encoder's errno table: left to the TS side
  event({ type: SysWrite, syscall: 300 }); // past the encoder's syscall table: left
  event({ type: SysWrite, syscall: null, fd: null, ret: null }); // NULLs, as old rows have them
  event({ type: 42 }); // a type the TS side calls sys_write
  event({ bytes: 2 ** 53 + 2, pid: -7 }); // past 2^53: a double, as Number() makes it; a negative int64
  event({ type: BlockIo, dev: 259 * 0x100000 + 1, sector: 123456, op: 1, error: -5, bytes: 4096 });
  event({ type: BlockIo, dev: 8 * 0x100000, sector: 0, op: 34, error: 0, bytes: 512, service: 2, comm: 2 });
  event({ type: BlockIo, dev: null, sector: null, op: 99, error: null }); // an unnamed op
  event({ ctx: 2, comm: 2, service: 2, target: 9 });
  event({ ctx: 3 }); // unsampled
  event({ ctx: 3 });
  event({ ctx: 4 }); // marker
  event({ ctx: 5 }); // all-zero trace id
  event({ ctx: 6 }); // odd parent id
  event({ ctx: null });
  event({ comm: 99 }); // a comm the dictionary lacks: '#99', left to the TS side
  // one service in two containers and on the host: three resources
  event({ container: 1, target: 2 });
  event({ container: 2, target: 2 });
  event({ container: 1, target: 1 });
});

afterAll(() => {
  db?.close();
  rmSync(dir, { recursive: true, force: true });
});

interface Reference {
  spans: KernelSpan[];
  /** seqs eventSpan makes a span of */
  seqs: number[];
  unsampled: number;
}

/** What the TS side makes of the rows, as the loop's consider() does: W3C traces, sampled ones, as spans. */
function reference(names: StoreNameCache, resources: SpanResources, sampling: 'sampled' | 'all'): Reference {
  const rows = db
    .prepare(`SELECT ${eventColumnsOf(SCHEMA_VERSION)} FROM events WHERE ctx IS NOT NULL ORDER BY seq`)
    .safeIntegers(true)
    .all() as EventRow[];
  const out: Reference = { spans: [], seqs: [], unsampled: 0 };
  for (const row of rows) {
    const ctx = names.context(Number(row.ctx));
    if (ctx.trace_id === null || !W3C_TRACE_ID.test(ctx.trace_id)) continue;
    if (sampling === 'sampled' && !((ctx.trace_flags ?? 0) & SAMPLED_FLAG)) {
      out.unsampled++;
      continue;
    }
    const event: ApiEvent = rowToEvent(row, names);
    out.spans.push(eventSpan(event, resources, ctx.trace_flags, spanIdFor(names.storeId, Number(row.seq)))!);
    out.seqs.push(Number(row.seq));
  }
  return out;
}

/** The open request the read made, framed by the TS writer, as it is and gzipped. */
function nativeRequest(
  reader: NativeSpanReader,
  read: NativeRead,
  names: StoreNameCache,
  resources: SpanResources,
): Buffer {
  const kept = read.groups.map((g) => ({
    resource: groupResource(g.group, names, resources),
    service: g.group,
    length: g.length,
  }));
  return reader.request(new SpanProtobufWriter().layout([], kept), 0);
}

describe('kreplay_otlp_spans', () => {
  it.each(['sampled', 'all'] as const)(
    'writes the spans eventSpan makes, byte for byte, and leaves the rows it cannot be sure of (sampling %s)',
    (sampling) => {
      const names = new StoreNameCache(db, readStoreInfo(db));
      const resources = new SpanResources();
      const reader = new NativeSpanReader(db, names.storeId, sampling);
      const native = reader.read(1, 1000);
      const expected = reference(names, resources, sampling);
      const left = native.left.map((row) => row.seq);
      // the odd ones, and only those: a target not UTF-8, a long port, codes past the tables, '#99', 'XYZ'
      const odd = (sql: string) =>
        db.prepare(`SELECT seq FROM events e WHERE ${sql} ORDER BY seq`).pluck().all() as number[];
      expect(left).toEqual(odd('target IN (11, 12) OR ret = -5000 OR syscall = 300 OR comm = 99 OR ctx = 6'));
      const written = expected.spans.filter((_, i) => !left.includes(expected.seqs[i]!));
      expect(native.groups.reduce((n, g) => n + g.spans, 0)).toBe(written.length);
      expect(native.contexts.reduce((n, c) => n + c.unsampled, 0)).toBe(expected.unsampled);
      expect(native.contexts.reduce((n, c) => n + c.spans, 0)).toBe(written.length);
      // each context counted with its own trace id, the one the trace cap counts by (no lookup a context)
      const traceOf = db.prepare('SELECT trace_id FROM contexts WHERE id = ?').pluck();
      expect(native.contexts.length).toBeGreaterThan(0);
      for (const { ctx, traceId } of native.contexts) expect(traceId).toBe(traceOf.get(ctx));

      const ours = nativeRequest(reader, native, names, resources);
      const theirs = new SpanProtobufWriter().encode(written);
      expect(ours.equals(theirs)).toBe(true);
      const decoded = decodeTraceRequest(ours);
      expect(decoded).toEqual(decodeTraceRequest(theirs));
      // the JSON export's spans (the OpenTelemetry project's serializer) are the same, field by field
      expect(decoded).toEqual(decodeTraceJson(Buffer.from(encodeSpansJson(written)).toString('utf8')));
      expect(decoded.map((s) => s.name)).toEqual(
        expect.arrayContaining([
          'sys_write tcp accepted 127.0.0.1:8080',
          'sys_connect udp [::1]:53',
          'block_io write 259:1',
          'block_io op_99 0:0',
          'sys_write pipe:[1234]',
        ]),
      );
      expect(decoded.find((s) => s.name === 'block_io write 259:1')).toMatchObject({
        status: { code: 2, message: 'EIO' },
      });
      expect(decoded.some((s) => s.attributes['kreplay.bytes'] === 2 ** 53 + 2)).toBe(true);
      // each container's spans under its own resource, with the attributes the daemon's export gives
      const inPod = decoded.filter((s) => s.resource['container.id'] === POD.id);
      expect(inPod.map((s) => s.name)).toEqual([
        'sys_write tcp 10.0.0.5:5432',
        'sys_write /var/lib/app/db.sqlite',
      ]);
      expect(inPod[0]!.resource).toEqual({
        'service.name': 'app',
        'host.name': 'node-1',
        'container.id': POD.id,
        'container.name': 'web',
        'container.image.name': 'registry.local/web:1',
        'container.runtime': 'containerd',
        'k8s.pod.name': 'web-7d9f',
        'k8s.namespace.name': 'shop',
      });
      expect(decoded.filter((s) => s.resource['container.id'] === PLAIN.id).map((s) => s.resource)).toEqual([
        {
          'service.name': 'app',
          'host.name': 'node-1',
          'container.id': PLAIN.id,
          'container.name': 'web-2',
          'container.image.name': 'registry.local/web:1',
          'container.runtime': 'podman',
        },
      ]);
    },
  );

  it('leaves out the held seqs, takes a read back out, and gzips the request', () => {
    const names = new StoreNameCache(db, readStoreInfo(db));
    const resources = new SpanResources();
    const reader = new NativeSpanReader(db, names.storeId, 'sampled');
    const count = (s: NativeRead) => s.groups.reduce((n, g) => n + g.spans, 0);
    const all = reader.read(1, 1000);
    reader.undo();
    const held = reader.read(1, 1000, [2, 3, 5]);
    expect(count(held)).toBe(count(all) - 3);
    reader.undo();
    expect(reader.read(5000, 6000)).toEqual({ groups: [], contexts: [], left: [] });
    // two reads into one request, the second a range
    const first = reader.read(1, 4);
    expect(count(first)).toBe(3);
    const second = reader.read(4, 1000);
    const lengths = new Map<number, number>();
    for (const g of [...first.groups, ...second.groups])
      lengths.set(g.group, (lengths.get(g.group) ?? 0) + g.length);
    const kept = [...lengths].map(([group, length]) => ({
      resource: groupResource(group, names, resources),
      service: group,
      length,
    }));
    const writer = new SpanProtobufWriter();
    const gzipped = reader.request(writer.layout([], kept), 1);
    expect(gzipped.subarray(0, 2)).toEqual(Buffer.from([0x1f, 0x8b]));
    expect(decodeTraceRequest(gzipped, true)).toHaveLength(count(all));
    // a service left out of the layout is refused, named; the request stays open
    reader.read(1, 4);
    expect(() => reader.request([], 0)).toThrow(/the spans of service 1 are not in the layout/);
    reader.undo();
    expect(reader.request([], 0)).toHaveLength(0);
  });

  it('refuses a spec it cannot read, naming what is wrong', () => {
    const reader = new NativeSpanReader(db, 'not-a-store', 'sampled');
    expect(() => reader.read(1, 1000)).toThrow(/the store id 'not-a-store' is not 12 lower-case hex digits/);
  });
});
