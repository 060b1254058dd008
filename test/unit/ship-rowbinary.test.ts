/**
 * kreplay_rowbinary (native/sqlite/kreplay_rowbinary.c), the shipper's
 * encoder, byte for byte against RowBinary as ClickHouse reads it: LEB128
 * string lengths across their byte boundaries, integers of every width in
 * little-endian two's complement, the Nullable flag byte; event ids as
 * formatEventId makes them (kreplay_event_id); and the errors a
 * bad spec or a NULL in a column that is not Nullable give.
 */
import Database from 'better-sqlite3';
import { EventInsert } from '../../agent/store/event-insert';
import { rowBinaryType, shipSql } from '../../agent/ship/ship-sql';
import { CLICKHOUSE_EVENT_COLUMNS } from '../../core/clickhouse/schema';
import { formatEventId } from '../../core/model';

function leb128(n: number): number[] {
  const out: number[] = [];
  do {
    out.push((n & 0x7f) | (n > 0x7f ? 0x80 : 0));
    n = Math.floor(n / 128);
  } while (n);
  return out;
}

function int(value: bigint, width: number): number[] {
  const b = Buffer.alloc(8);
  b.writeBigInt64LE(BigInt.asIntN(64, value));
  return [...b.subarray(0, width)];
}

describe('kreplay_rowbinary', () => {
  const db = new Database(':memory:');
  db.defaultSafeIntegers(true);
  EventInsert.prepareConnection(db);
  const encode = (spec: string, rows: unknown[][]) => {
    const n = rows[0]!.length;
    const select = rows
      .map(() => `SELECT ${Array.from({ length: n }, (_, i) => `? AS c${i}`).join(', ')}`)
      .join(' UNION ALL ');
    const cols = Array.from({ length: n }, (_, i) => `c${i}`).join(', ');
    return db
      .prepare(`SELECT kreplay_rowbinary(?, ${cols}) FROM (${select})`)
      .pluck()
      .get(spec, ...rows.flat()) as Buffer;
  };

  it('writes strings, integers and Nullables as ClickHouse reads them', () => {
    const strings = ['', 'a', 'é中🚀', 'x'.repeat(127), 'y'.repeat(128), 'z'.repeat(16_384)];
    for (const s of strings) {
      const bytes = Buffer.from(s, 'utf8');
      expect([...encode('s', [[s]])]).toEqual([...leb128(bytes.length), ...bytes]);
    }
    const max = (1n << 63n) - 1n;
    const row = ['n', max, -1n, 4294967295n, -2n, 255n, null, 'q', null, 7n];
    expect([...encode('s 8 8 4 2 1 ns ns n8 n8', [row])]).toEqual([
      1,
      0x6e,
      ...int(max, 8),
      ...int(-1n, 8),
      ...int(4294967295n, 4),
      ...int(-2n, 2),
      255,
      1,
      0,
      1,
      0x71,
      1,
      0,
      ...int(7n, 8),
    ]);
    // rows follow one another; a blob is taken as its bytes
    expect([
      ...encode('s 1', [
        [Buffer.from([0, 0xff]), 1n],
        ['b', 2n],
      ]),
    ]).toEqual([2, 0, 0xff, 1, 1, 0x62, 2]);
  });

  it('formats event ids as formatEventId does (kreplay_event_id)', () => {
    const cases: [string, bigint, number][] = [
      ['abcdefabcdef', (1n << 63n) - 1n, 2 ** 48 - 1],
      ['0f0e0d0c0b0a', 0n, 1],
      ['a1b2c3d4e5f6', 1_763_856_000_123_456_789n, 4_294_967_297],
    ];
    const id = db.prepare('SELECT kreplay_event_id(?, ?, ?)').pluck();
    for (const [store, ts, seq] of cases) expect(id.get(store, ts, seq)).toBe(formatEventId(store, ts, seq));
    expect(() => id.get(null, 1n, 1n)).toThrow(/store id must be text/);
  });

  it('names what is wrong with its input', () => {
    expect(() => encode('s 8', [[null, 1n]])).toThrow(/value 1 is NULL and its column is not Nullable/);
    expect(() => encode('s q', [['a', 1n]])).toThrow(/bad type 'q' in spec 's q'/);
    expect(() => encode('s', [['a', 1n]])).toThrow(/spec 's' names 1 columns, 2 values given/);
  });

  it('has a RowBinary type for every column of the fleet table', () => {
    expect(rowBinaryType('Nullable(String)')).toBe('ns');
    expect(rowBinaryType('UInt32')).toBe('4');
    expect(() => rowBinaryType('Float64')).toThrow(/Float64 has no RowBinary encoding/);
    expect(() => shipSql(CLICKHOUSE_EVENT_COLUMNS)).not.toThrow();
    expect(() => shipSql([{ name: 'no_such', type: 'String', since: 1 }])).toThrow(
      /column no_such has no value in a node file/,
    );
  });
});
