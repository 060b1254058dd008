import Database from 'better-sqlite3';
import { ContextResolver } from '../../agent/attribution/context-resolver';
import { ServiceResolver } from '../../agent/attribution/service-resolver';
import { EventBatch } from '../../agent/ingest/event-batch';
import { CorruptRecordError, RecordDecoder } from '../../agent/ingest/record-decoder';
import { silentLogger } from '../../core/log/logger';
import { nativeAddon } from '../../core/native/addon';
import {
  ContextKind,
  ContextLayout,
  EventLayout,
  RecordHead,
  RecordType,
  REQUEST_DATA_LEN,
  RequestLayout,
  targetKindCode,
  TARGET_ID_WINDOW,
  TargetLayout,
} from '../../core/model';
import { StoreWriter } from '../../agent/store/store-writer';
import {
  blockIoRecord,
  contextRecord,
  fileTargetRecord,
  sysWriteRecord,
} from '../../core/model/record-encoder';
import { useTempDir } from '../support/temp-dir';

const dir = useTempDir();
const OFFSET = 1_700_000_000_000_000_000n;
/* a pid with no /proc entry, so the service falls back to the comm */
const GONE_PID = 4_000_000;

function setup(batchRows = 16) {
  const writer = StoreWriter.open(dir.path, 'n');
  const contexts = new ContextResolver(silentLogger);
  const decoder = new RecordDecoder(
    writer,
    new ServiceResolver([{ service: 'db', match: { comm: 'postgres*' } }]),
    contexts,
    () => OFFSET,
  );
  const batch = new EventBatch(batchRows);
  return { writer, contexts, decoder, batch, sink: { current: batch, flush: () => undefined } };
}

/* A context record as the capture session passes it on: cut after its data, rounded up to 8. */
function trimmed(record: Buffer): Buffer {
  const size = (ContextLayout.data + record.readUInt32LE(ContextLayout.len) + 7) & ~7;
  const out = Buffer.from(record.subarray(0, size));
  out.writeUInt32LE(size, RecordHead.size);
  return out;
}

const write = (over: Partial<Parameters<typeof sysWriteRecord>[0]> = {}) =>
  sysWriteRecord({
    startNs: 10_000_000_000_000n,
    durationNs: 1234,
    pid: GONE_PID,
    tid: GONE_PID + 1,
    comm: 'app',
    fd: 5,
    count: 64,
    ret: 64,
    syscall: 3,
    ...over,
  });

describe('RecordDecoder', () => {
  it("keeps the key of a request a send started, from the record's first bytes, beside plain writes", () => {
    const { decoder, batch, sink } = setup();
    const get = Buffer.from('*2\r\n$3\r\nGET\r\n$9\r\ncart:1234\r\n');
    const long = Buffer.concat([
      Buffer.from('Q\x00\x00\x01\x00SELECT * FROM t WHERE id = 7 AND s = '),
      Buffer.alloc(300, 0x61),
    ]);
    decoder.decode(Buffer.concat([write({ request: get }), write(), write({ request: long })]), sink);
    expect(batch.count).toBe(3);
    const { requestKey } = nativeAddon();
    expect([batch.response[0], batch.response[1], batch.response[2]]).toEqual([
      requestKey(get),
      0,
      requestKey(long.subarray(0, REQUEST_DATA_LEN)),
    ]);
  });

  it("keys a server's HTTP/1 response as native code does, without asking it per response", () => {
    const { writer } = setup();
    const native = new (nativeAddon().RequestKeys)();
    const asked: string[] = [];
    const decoder = new RecordDecoder(
      writer,
      new ServiceResolver([]),
      new ContextResolver(silentLogger),
      () => OFFSET,
      1,
      {
        key: (connection: string, bytes: Uint8Array) => {
          asked.push(Buffer.from(bytes).toString('latin1'));
          return native.key(connection, bytes);
        },
      },
    );
    const batch = new EventBatch(8);
    const ok = Buffer.from('HTTP/1.1 200 OK\r\nContent-Length: 2\r\n\r\nok');
    const gone = Buffer.from('HTTP/1.0 404 Not Found\r\n\r\n');
    const get = Buffer.from('GET /cart/12 HTTP/1.1\r\nHost: a\r\n\r\n');
    // a request that only begins like a response is asked about: "HTTP" alone, or "HTTPS" as a word
    const near = Buffer.from('HTTPS\r\n');
    decoder.decode(Buffer.concat([get, ok, gone, near].map((request) => write({ request }))), {
      current: batch,
      flush: () => undefined,
    });
    const { requestKey } = nativeAddon();
    expect(Array.from(batch.response.subarray(0, 4))).toEqual([
      requestKey(get),
      requestKey(ok),
      requestKey(gone),
      requestKey(near),
    ]);
    expect(requestKey(ok)).toBe(requestKey(Buffer.from('unknown request bytes \x01')));
    expect(asked).toEqual([get.toString('latin1'), near.toString('latin1')]);
  });

  it('refuses a sys_write of any other size', () => {
    const { decoder, batch, sink } = setup();
    const odd = write({ request: Buffer.from('PING\r\n') });
    odd.writeUInt32LE(RequestLayout.bytes - 8, RecordHead.size);
    expect(() =>
      decoder.decode(Buffer.concat([write(), odd.subarray(0, RequestLayout.bytes - 8)]), sink),
    ).toThrow(CorruptRecordError);
    expect(batch.count).toBe(1);
  });

  it('decodes sys_write and block_io records into exact columns', () => {
    const { writer, decoder, batch, sink } = setup();
    const buf = Buffer.concat([
      write({ startNs: 2n ** 60n + 5n, ret: -9 }),
      blockIoRecord({
        startNs: 2n ** 60n,
        durationNs: 99_000,
        pid: GONE_PID,
        tid: GONE_PID,
        comm: 'postgres',
        sector: 2 ** 40,
        bytes: 8192,
        major: 254,
        minor: 16,
        op: 1,
        status: 10,
      }),
    ]);
    decoder.decode(buf, sink);
    expect(batch.count).toBe(2);
    expect(batch.baseTs).toBe(2n ** 60n + 5n + OFFSET);
    expect(batch.tsOffset[1]).toBe(-5);
    expect([batch.type[0], batch.result[0], batch.handle[0], batch.kind[0], batch.bytes[0]]).toEqual([
      RecordType.SysWrite,
      -9,
      5,
      3,
      64,
    ]);
    expect([batch.type[1], batch.result[1], batch.handle[1], batch.kind[1], batch.error[1]]).toEqual([
      RecordType.BlockIo,
      2 ** 40,
      254 * 0x100000 + 16,
      1,
      -5,
    ]);
    expect(batch.service[0]).toBe(writer.services.id('app'));
    expect(batch.service[1]).toBe(writer.services.id('db'));
    writer.close();
  });

  it('attributes events to the context their kernel id resolves to', () => {
    const { writer, decoder, batch, sink } = setup();
    decoder.decode(
      Buffer.concat([
        contextRecord({
          contextId: 7,
          parentId: 0,
          kind: ContextKind.Marker,
          data: 'KREPLAY-CTX txn=t1 trace=x',
        }),
        write({ contextId: 7 }),
        write({ contextId: 0 }),
      ]),
      sink,
    );
    expect(batch.ctx[0]).toBe(writer.contexts.id('t1', 'x'));
    expect(batch.ctx[1]).toBe(0);
    expect(decoder.contextRecords).toBe(1);
    writer.close();
  });

  it('gives the context records that resolve alike one id, and a fresh one once the store removed it', () => {
    const { writer, decoder, batch, sink } = setup();
    const tp = '00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01';
    const head = (contextId: number, parentId: number, kind: number, data: string) =>
      contextRecord({ contextId, parentId, kind, data });
    decoder.decode(
      Buffer.concat([
        head(
          7,
          0,
          ContextKind.HttpRequest,
          `GET / HTTP/1.1\r\ntraceparent: ${tp}\r\nx-request-id: r1\r\n\r\n`,
        ),
        write({ contextId: 7 }),
        // the response's head carries no traceparent: the request's context goes on
        head(8, 7, ContextKind.Http, 'HTTP/1.1 200 OK\r\ncontent-length: 2\r\n\r\n'),
        write({ contextId: 8 }),
      ]),
      sink,
    );
    const first = writer.contexts.takePending();
    expect(first).toEqual([[batch.ctx[0], 'r1', '4bf92f3577b34da6a3ce929d0e0e4736', '00f067aa0ba902b7', 1]]);
    expect(batch.ctx[1]).toBe(batch.ctx[0]);
    // the store's retention removed the context: no event may name its id again
    writer.contexts.forget(first);
    decoder.forgetContextIds();
    batch.clear();
    decoder.decode(Buffer.concat([write({ contextId: 8 }), write({ contextId: 7 })]), sink);
    const again = writer.contexts.takePending();
    expect(again).toEqual([[batch.ctx[0], 'r1', '4bf92f3577b34da6a3ce929d0e0e4736', '00f067aa0ba902b7', 1]]);
    expect(batch.ctx[0]).not.toBe(first[0]![0]);
    expect(batch.ctx[1]).toBe(batch.ctx[0]);
    writer.close();
  });

  it('takes context records cut after their data, as the capture session passes them on, beside whole ones', () => {
    const { writer, decoder, batch, sink } = setup();
    const marker = (contextId: number, data: string) =>
      contextRecord({ contextId, parentId: 0, kind: ContextKind.Marker, data });
    const cut = trimmed(marker(7, 'KREPLAY-CTX txn=t1 trace=x'));
    expect(cut.length).toBe(ContextLayout.data + 32);
    decoder.decode(
      Buffer.concat([
        cut,
        write({ contextId: 7 }),
        trimmed(marker(8, 'KREPLAY-CTX txn=t2')),
        marker(9, 'KREPLAY-CTX trace=y'),
        write({ contextId: 8 }),
        write({ contextId: 9 }),
      ]),
      sink,
    );
    expect([batch.ctx[0], batch.ctx[1], batch.ctx[2]]).toEqual([
      writer.contexts.id('t1', 'x'),
      writer.contexts.id('t2', null),
      writer.contexts.id(null, 'y'),
    ]);
    expect(decoder.contextRecords).toBe(3);
    writer.close();
  });

  it('flushes when the batch fills and keeps every record', () => {
    const { writer, decoder, batch } = setup(4);
    const records = Array.from({ length: 10 }, (_, i) => write({ startNs: BigInt(1000 + i) }));
    let flushed = 0;
    decoder.decode(Buffer.concat(records), {
      current: batch,
      flush: () => {
        flushed += batch.count;
        writer.writeBatch(batch);
        batch.clear();
      },
    });
    expect(flushed + batch.count).toBe(10);
    writer.writeBatch(batch);
    writer.close();
    const db = new Database(writer.path, { readonly: true });
    expect(
      db.prepare('SELECT count(*) AS n, min(ts) AS lo, max(ts) AS hi FROM events').safeIntegers(true).get(),
    ).toEqual({
      n: 10n,
      lo: OFFSET + 1000n,
      hi: OFFSET + 1009n,
    });
    db.close();
  });

  it('gives each write the store id of its target, one per distinct (kind, target)', () => {
    const { writer, decoder, batch, sink } = setup();
    const file = targetKindCode('file');
    decoder.decode(
      Buffer.concat([
        fileTargetRecord({ targetId: 1, kind: file, path: '/var/log/a.log' }),
        write({ targetId: 1 }),
        // the kernel forgot the file and sent it again under a new id: same store id
        fileTargetRecord({ targetId: 2, kind: file, path: '/var/log/a.log' }),
        fileTargetRecord({ targetId: 3, kind: targetKindCode('char'), path: '/dev/null' }),
        write({ targetId: 3 }),
        write({ targetId: 2 }),
        write({ targetId: 0 }),
        write({ targetId: 99 }),
      ]),
      sink,
    );
    expect([...batch.target.subarray(0, batch.count)]).toEqual([1, 2, 1, 0, 0]);
    expect([decoder.targetRecords, decoder.unknownTargets]).toEqual([3, 1]);
    // the batch used both, by events without a context, all stamped at its base
    const ts = batch.baseTs;
    expect(writer.targets.takeUsed(ts)).toEqual([
      [1, file, '/var/log/a.log', ts, null],
      [2, targetKindCode('char'), '/dev/null', ts, null],
    ]);
    writer.close();
  });

  it('forgets the targets the kernel no longer names, without walking the ones it kept', () => {
    const { writer, decoder, batch, sink } = setup();
    const file = targetKindCode('file');
    const newest = 2 * TARGET_ID_WINDOW + 100;
    // one record copied for each id, its id set (the path is the same: a write's target is its id's)
    const one = fileTargetRecord({ targetId: 0, kind: file, path: '/t/x' });
    const define = (from: number, to: number) => {
      const buf = Buffer.alloc((to - from) * one.length);
      for (let id = from; id < to; id++) {
        const at = (id - from) * one.length;
        one.copy(buf, at);
        buf.writeUInt32LE(id, at + TargetLayout.targetId);
      }
      return buf;
    };
    decoder.decode(define(1, newest - 100), sink);
    // past twice the kernel's window each new target takes the slot of the oldest: no Map walked for it
    const keys = jest.spyOn(Map.prototype, 'keys');
    const iterate = jest.spyOn(Map.prototype, Symbol.iterator);
    try {
      decoder.decode(define(newest - 100, newest + 1), sink);
      expect(keys).not.toHaveBeenCalled();
      expect(iterate).not.toHaveBeenCalled();
    } finally {
      keys.mockRestore();
      iterate.mockRestore();
    }
    // a record that crossed a newer one in the ring, already out of the window: kept by no write
    decoder.decode(define(50, 51), sink);
    decoder.decode(Buffer.concat([100, 101, newest, 50].map((targetId) => write({ targetId }))), sink);
    // ids at or below newest - 2 * window are forgotten, the rest are known
    expect([...batch.target.subarray(0, batch.count)].map((id) => id > 0)).toEqual([
      false,
      true,
      true,
      false,
    ]);
    expect([decoder.targetRecords, decoder.unknownTargets]).toEqual([newest + 1, 2]);
    writer.close();
  });

  it.each([
    [
      'a target record whose size does not match its data',
      (b: Buffer) =>
        Buffer.concat([
          b.subarray(0, EventLayout.bytes),
          fileTargetRecord({ targetId: 1, kind: 1, path: '/a/b' }).fill(0xff, 30, 32),
          b.subarray(EventLayout.bytes),
        ]),
      /type 4 with size 56, expected/,
    ],
    [
      'a cut context record whose size does not match its data',
      (b: Buffer) => {
        const cut = trimmed(
          contextRecord({ contextId: 3, parentId: 0, kind: ContextKind.Marker, data: 'KREPLAY-CTX' }),
        );
        cut.writeUInt32LE(40, ContextLayout.len);
        return Buffer.concat([b.subarray(0, EventLayout.bytes), cut, b.subarray(EventLayout.bytes)]);
      },
      new RegExp(`type 3 with size ${ContextLayout.data + 16}, expected ${ContextLayout.data + 40}`),
    ],
    ['a truncated head', (b: Buffer) => b.subarray(0, 2 * EventLayout.bytes - 20), /runs past the end/],
    ['an unknown type', (b: Buffer) => (b.writeUInt32LE(42, EventLayout.bytes), b), /unknown record type 42/],
    [
      'a wrong size',
      (b: Buffer) => (b.writeUInt32LE(95, EventLayout.bytes + RecordHead.size), b),
      new RegExp(`size 95, expected ${EventLayout.bytes}`),
    ],
  ])('stops at %s, keeping the records before it', (_name, corrupt, message) => {
    const { writer, decoder, batch, sink } = setup();
    const buf = corrupt(Buffer.concat([write(), write(), write()]));
    let error: unknown;
    try {
      decoder.decode(buf, sink);
    } catch (err) {
      error = err;
    }
    expect(error).toBeInstanceOf(CorruptRecordError);
    expect((error as Error).message).toMatch(message);
    expect(batch.count).toBe(1);
    writer.close();
  });
});
