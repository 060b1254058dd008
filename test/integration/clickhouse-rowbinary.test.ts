/**
 * The shipper's RowBinary (agent/ship/ship-sql.ts, native/sqlite/kreplay_rowbinary.c)
 * against the node file: every column of every event a real clickhouse-server
 * stored equals the field the node file's API gives (store_id and seq: the
 * event id's parts), for both event types and the extremes: nanoseconds near
 * 2^63, the largest u32 pids, negative and unknown codes, empty, long and
 * non-ASCII strings, quotes and NUL, null targets and contexts, every event type;
 * in each codec the shipper sends (LZ4 blocks, gzip, none).
 */
import Database from 'better-sqlite3';
import { mkdirSync } from 'node:fs';
import { join } from 'node:path';
import { StoreWriter } from '../../agent/store/store-writer';
import { ClickHouseHttp, INSERT_CODECS } from '../../core/clickhouse/http-client';
import { CLICKHOUSE_EVENT_COLUMNS } from '../../core/clickhouse/schema';
import { createLogger } from '../../core/log/logger';
import { parseEventId, RecordType, type ApiEvent } from '../../core/model';
import { NodeStores } from '../../daemon/store/node-stores';
import { clickhouseAvailable, shipDataDir, useClickHouse } from '../support/clickhouse-server';
import { writeEvents, type TestEvent } from '../support/event-store';
import { useTempDir } from '../support/temp-dir';

const describeCh = clickhouseAvailable ? describe : describe.skip;
if (!clickhouseAvailable)
  console.warn('SKIPPED: clickhouse-server is not installed (make setup installs it)');

const BASE = 1_763_856_000_000_000_000n;
const MAX_I64 = (1n << 63n) - 1n;
const ODD = ["it's \\ \0 odd", 'naïve 中文 🚀', '', 'x'.repeat(300) + 'é'];

function events(): TestEvent[] {
  return Array.from({ length: 400 }, (_, i) => ({
    ts: BASE + BigInt(i) * 1000n,
    // every type; the first rows of each stay sys_write and block_io (extremes() picks by rank)
    type:
      i % 4 === 3
        ? 'block_io'
        : i < 40
          ? 'sys_write'
          : (['sys_write', 'sys_read', 'sys_fsync', 'sys_connect'] as const)[i % 4],
    response: i % 8 === 1 ? i * 1_000_003 : undefined,
    dur: i * 7,
    service: i % 9 === 0 ? ODD[i % ODD.length]! : `svc-${i % 3}`,
    comm: i % 11 === 0 ? ODD[(i + 1) % ODD.length]! : 'worker',
    txn: i % 3 === 0 ? `tx-${i % 5}` : i % 3 === 1 ? ODD[i % ODD.length]! : null,
    trace: i % 2 === 0 ? `tr-${i % 7}` : null,
    pid: 1 + i,
    bytes: i * 4096,
    target:
      i % 5 === 0
        ? undefined
        : ([
            (['file', 'socket', 'pipe', 'char', 'anon', 'other'] as const)[i % 6]!,
            `${ODD[i % ODD.length]}/${i}`,
          ] as const),
  })) as TestEvent[];
}

const WRITE = 1;
const BLOCK = 2;

/**
 * The extremes, set in the node file directly (the writer's batch holds values as doubles); rows
 * named by type and rank, as the store gives seqs by type within a batch. Returns the seqs of `which`.
 */
function extremes(path: string): Record<string, string> {
  const db = new Database(path);
  db.defaultSafeIntegers(true);
  const seqs: Record<string, string> = {};
  const set = (which: string, type: number, rank: number, sql: string, ...values: unknown[]) => {
    const seq = db
      .prepare(`SELECT seq FROM events WHERE type = ${type} ORDER BY seq LIMIT 1 OFFSET ${rank}`)
      .pluck()
      .get() as bigint;
    db.prepare(`UPDATE events SET ${sql} WHERE seq = ${seq}`).run(...values);
    seqs[which] = String(seq);
  };
  set('max', WRITE, 0, 'ts = ?, dur = ?', MAX_I64, MAX_I64);
  set('near max', BLOCK, 0, 'ts = ?, dur = ?', MAX_I64 - 1n, MAX_I64 - 123_456_789n);
  set(
    'zero',
    WRITE,
    1,
    'ts = 0, dur = 0, pid = 4294967295, tid = 4294967295, bytes = ?',
    BigInt(Number.MAX_SAFE_INTEGER),
  );
  set('uncaptured', WRITE, 2, 'fd = NULL, ret = NULL, syscall = NULL');
  set('odd syscall', WRITE, 3, 'fd = 2147483647, ret = ?, syscall = 99', -BigInt(Number.MAX_SAFE_INTEGER));
  set('ebadf', WRITE, 4, 'fd = -9, ret = -9, syscall = 0, target = NULL');
  set(
    'odd block',
    BLOCK,
    1,
    'dev = ?, sector = ?, op = 200, error = -5',
    (4095n << 20n) + 1048575n,
    BigInt(Number.MAX_SAFE_INTEGER),
  );
  set('null block', BLOCK, 2, 'dev = NULL, sector = NULL, op = NULL, error = NULL');
  set('discard', BLOCK, 3, 'op = 3, error = -95');
  // the other syscall types: their names and the syscall fields, as the API gives them
  set('read', WRITE, 5, `type = ${RecordType.SysRead}, response_ns = 123456`);
  set('fsync', WRITE, 6, `type = ${RecordType.SysFsync}, target = NULL`);
  set('connect', WRITE, 7, `type = ${RecordType.SysConnect}, ret = -111`);
  db.close();
  return seqs;
}

/** A column's value as JSONEachRow gives it (64-bit integers quoted), from the API's event. */
function expectedColumn(event: ApiEvent, column: string): unknown {
  const key = parseEventId(event.event_id)!;
  if (column === 'store_id') return key.storeId;
  if (column === 'seq') return String(key.seq);
  const value = (event as unknown as Record<string, unknown>)[column] ?? null;
  return typeof value === 'bigint' ? String(value) : value;
}

describeCh('RowBinary shipping keeps every field of the node file', () => {
  jest.setTimeout(90_000);
  const dir = useTempDir();
  const clickhouse = useClickHouse();

  it.each(INSERT_CODECS)(
    'stores every column of every event as the node file gives it (%s)',
    async (codec) => {
      const data = join(dir.path, codec);
      mkdirSync(data);
      const writer = StoreWriter.open(data, 'n-é');
      writeEvents(writer, events());
      writer.close();
      const seqs = extremes(join(data, 'n-é.db'));
      const ch = new ClickHouseHttp({
        ...clickhouse.server.client(`rowbinary_${codec}`).endpoint,
        compression: codec,
      });
      await shipDataDir(data, ch);

      const sqlite = new NodeStores(data, createLogger({ component: 'test', level: 'error' }));
      try {
        const want = sqlite.page({}, { limit: 10_000, order: 'asc' }).events;
        expect(want).toHaveLength(400);
        const got = await ch.rows<Record<string, unknown>>('SELECT * FROM events FINAL ORDER BY event_id');
        expect(got).toHaveLength(400);
        const byId = new Map(got.map((row) => [row.event_id, row]));
        const columns = CLICKHOUSE_EVENT_COLUMNS.map((c) => c.name);
        for (const event of want) {
          const row = byId.get(event.event_id);
          expect(Object.keys(row!).sort()).toEqual([...columns].sort());
          // int64s come quoted, u32s as numbers: compare as the API types them
          const actual = Object.fromEntries(
            columns.map((c) => [c, typeof row![c] === 'number' ? row![c] : (row![c] ?? null)]),
          );
          const expected = Object.fromEntries(
            columns.map((c) => {
              const v = expectedColumn(event, c);
              return [c, typeof v === 'number' && typeof row![c] === 'string' ? String(v) : v];
            }),
          );
          expect(actual).toEqual(expected);
        }
        // the extremes came through: the largest nanoseconds, unknown codes, NULLs the API names
        const extreme = (which: string) => got.find((r) => r.seq === seqs[which])!;
        expect(extreme('max')).toMatchObject({ timestamp_ns: String(MAX_I64), duration_ns: String(MAX_I64) });
        expect(extreme('near max')).toMatchObject({
          timestamp_ns: String(MAX_I64 - 1n),
          event_type: 'block_io',
        });
        expect(extreme('zero')).toMatchObject({
          timestamp_ns: '0',
          pid: 4294967295,
          bytes: String(Number.MAX_SAFE_INTEGER),
        });
        expect(extreme('uncaptured')).toMatchObject({ syscall: 'unknown', fd: '-1', ret: '0', device: null });
        expect(extreme('odd syscall')).toMatchObject({
          syscall: 'syscall_99',
          ret: String(-Number.MAX_SAFE_INTEGER),
        });
        expect(extreme('ebadf')).toMatchObject({ fd: '-9', target_kind: null, target: null });
        expect(extreme('odd block')).toMatchObject({
          device: '4095:1048575',
          op: 'op_200',
          error: '-5',
          fd: null,
        });
        expect(extreme('null block')).toMatchObject({ device: '0:0', sector: '0', op: 'read', error: '0' });
        expect(extreme('discard')).toMatchObject({ op: 'discard', error: '-95', syscall: null });
        expect(extreme('read')).toMatchObject({ event_type: 'sys_read', device: null });
        expect(extreme('fsync')).toMatchObject({ event_type: 'sys_fsync', target: null });
        expect(extreme('connect')).toMatchObject({ event_type: 'sys_connect', ret: '-111' });
        expect(got.filter((r) => r.target === null).length).toBeGreaterThan(0);
        expect(got.some((r) => r.service_name === '' && r.comm !== '')).toBe(true);
      } finally {
        sqlite.close();
      }
    },
  );
});
