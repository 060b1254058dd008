/**
 * LZ4 in ClickHouse's compressed-block framing (native/sqlite/kreplay_clickhouse_lz4.c,
 * its CityHash128 v1.0.2 in cityhash102.c) against a real clickhouse-server 18.16:
 * the server checks every block's checksum before it decompresses it, so
 * bodies whose checksummed bytes take every path of the hash (under 16, 16 to
 * 127, 128 and more with each tail) and bodies of several blocks must be
 * taken with their bytes intact, and a body with one byte changed refused.
 */
import Database from 'better-sqlite3';
import { createHash, randomBytes } from 'node:crypto';
import { EventInsert } from '../../agent/store/event-insert';
import { clickhouseAvailable, useClickHouse } from '../support/clickhouse-server';

const describeCh = clickhouseAvailable ? describe : describe.skip;
if (!clickhouseAvailable)
  console.warn('SKIPPED: clickhouse-server is not installed (make setup installs it)');

/** One RowBinary String: its LEB128 length, then its bytes. */
function rowBinaryString(value: Buffer): Buffer {
  const length: number[] = [];
  let n = value.length;
  do {
    length.push((n & 0x7f) | (n > 0x7f ? 0x80 : 0));
    n >>>= 7;
  } while (n > 0);
  return Buffer.concat([Buffer.from(length), value]);
}

describeCh('LZ4 in ClickHouse block framing', () => {
  jest.setTimeout(90_000);
  const clickhouse = useClickHouse();
  const db = new Database(':memory:');
  EventInsert.prepareConnection(db);
  const frame = db.prepare<[Buffer], Buffer>('SELECT kreplay_clickhouse_lz4(?)').pluck();
  afterAll(() => db.close());

  it('is taken by the server, byte for byte, for every size of block and body', async () => {
    const ch = clickhouse.server.client('lz4');
    await ch.exec('CREATE DATABASE IF NOT EXISTS lz4', undefined, null);
    await ch.exec('CREATE TABLE t (i UInt32, s String) ENGINE = Memory');
    // random bytes hardly compress: the checksummed size follows the input's; then compressible
    // ones, and bodies over the 1 MiB block size (two and three blocks)
    const sizes = [0, 1, 2, 5, 7, 8, 20, 40, 64, 90, 100, 110, 118, 119, 150, 200, 250, 300, 1000, 4099];
    const values = [
      ...sizes.map((n) => randomBytes(n)),
      Buffer.from('kreplay '.repeat(5000)),
      randomBytes(1_300_000),
      Buffer.concat([randomBytes(1_000_000), Buffer.alloc(1_500_000, 'z')]),
    ];
    for (const [i, value] of values.entries()) {
      const rows = Buffer.concat([Buffer.from(Uint32Array.of(i).buffer), rowBinaryString(value)]);
      const bytes = frame.get(rows)!;
      expect(bytes[16]).toBe(0x82);
      await ch.exec('INSERT INTO t FORMAT RowBinary', { codec: 'lz4', bytes });
    }
    const got = await ch.rows<{ i: number; md5: string; n: string }>(
      'SELECT i, hex(MD5(s)) AS md5, length(s) AS n FROM t ORDER BY i',
    );
    const md5 = (b: Buffer) => createHash('md5').update(b).digest('hex').toUpperCase();
    expect(got).toEqual(values.map((v, i) => ({ i, md5: md5(v), n: String(v.length) })));
  });

  it('is refused when a byte of a block changed', async () => {
    const ch = clickhouse.server.client('lz4');
    await ch.exec('CREATE TABLE IF NOT EXISTS u (s String) ENGINE = Memory');
    const bytes = Buffer.from(frame.get(rowBinaryString(randomBytes(500)))!);
    bytes.writeUInt8(bytes.readUInt8(bytes.length - 3) ^ 0x10, bytes.length - 3);
    await expect(ch.exec('INSERT INTO u FORMAT RowBinary', { codec: 'lz4', bytes })).rejects.toThrow(
      /refused.*[Cc]hecksum/,
    );
    const [row] = await ch.rows<{ n: string }>('SELECT count() AS n FROM u');
    expect(row!.n).toBe('0');
  });
});
