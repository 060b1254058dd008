/**
 * EventInsert puts a batch's rows in with one INSERT ... SELECT from
 * kreplay_batch (native/sqlite/kreplay_batch.c): every value must come out
 * of the store exactly as the batch held it, as integers, NULL where the
 * batch's id is 0, with the seqs the row-by-row insert gave.
 */
import Database from 'better-sqlite3';
import { EventBatch } from '../../agent/ingest/event-batch';
import { EventInsert } from '../../agent/store/event-insert';
import { StoreWriter, storePath } from '../../agent/store/store-writer';
import { RecordType, SYSCALL_RECORD_TYPES } from '../../core/model';
import { EVENT_COLUMNS } from '../../core/store/event-columns';
import { useTempDir } from '../support/temp-dir';

const dir = useTempDir();
const BASE = 1795345678123456789n;
const ROWS = 1000;

function mixedBatch(): EventBatch {
  const batch = new EventBatch(ROWS);
  batch.clear(BASE);
  for (let i = 0; i < ROWS; i++) {
    const common = {
      // the last offsets reach the largest exact double
      tsOffset: i < ROWS - 2 ? i * 1000 + (i % 7) : Number.MAX_SAFE_INTEGER - (ROWS - i),
      dur: i * 37,
      service: 1 + (i % 3),
      // up to the largest container id the service column holds exactly with a service id beside it
      container: i % 3 === 1 ? 0 : i === 0 ? 2 ** 21 - 1 : 1 + i,
      ctx: i % 5 === 0 ? 0 : 100 + i,
      pid: 4_000_000 + i,
      tid: 0xffff_fff0 + (i % 16),
      comm: 1,
      bytes: i * 4096,
    };
    if (i % 4 === 3) {
      batch.pushBlockIo({
        ...common,
        dev: 8 * 0x100000 + i,
        sector: 2 ** 40 + i,
        op: i % 2,
        error: i % 8 === 3 ? -5 : 0,
      });
    } else {
      batch.pushSysWrite({
        ...common,
        // every syscall type (i % 4 is 0..2 here: the type changes every four rows); reads and
        // writes with and without a response time or request key
        type: SYSCALL_RECORD_TYPES[Math.floor(i / 4) % SYSCALL_RECORD_TYPES.length],
        fd: i % 9 === 0 ? -1 : i,
        ret: i % 6 === 0 ? -28 : i,
        syscall: 1 + (i % 3),
        target: i % 3 === 0 ? 0 : 7 + i,
        response: i % 10 === 1 ? 0 : 2 ** 40 + i,
      });
    }
  }
  return batch;
}

type Row = (bigint | null)[];

/* The rows as the batch holds them, numbered in the batch's order whatever their types. */
function expectedRows(batch: EventBatch, chunks: [number, number][]): Row[] {
  const rows: Row[] = [];
  let seq = 1;
  for (const [start, end] of chunks) {
    for (let i = start; i < end; i++) {
      const type = batch.type[i]!;
      const write = type !== RecordType.BlockIo;
      const id = (v: number) => (v === 0 ? null : BigInt(v));
      rows.push([
        BASE + BigInt(batch.tsOffset[i]!),
        BigInt(seq++),
        BigInt(type),
        BigInt(batch.dur[i]!),
        BigInt(batch.service[i]! % 2 ** 32),
        id(batch.ctx[i]!),
        BigInt(batch.pid[i]!),
        BigInt(batch.tid[i]!),
        BigInt(batch.comm[i]!),
        BigInt(batch.bytes[i]!),
        write ? BigInt(batch.handle[i]!) : null,
        write ? BigInt(batch.result[i]!) : null,
        write ? BigInt(batch.kind[i]!) : null,
        write ? null : BigInt(batch.handle[i]!),
        write ? null : BigInt(batch.result[i]!),
        write ? null : BigInt(batch.kind[i]!),
        write ? null : BigInt(batch.error[i]!),
        write ? id(batch.target[i]!) : null,
        type === RecordType.SysRead ? id(batch.response[i]!) : null,
        type === RecordType.SysWrite ? id(batch.response[i]!) : null,
        id(Math.floor(batch.service[i]! / 2 ** 32)),
      ]);
    }
  }
  return rows.sort((a, b) => (a[0]! < b[0]! ? -1 : a[0]! > b[0]! ? 1 : Number(a[1]! - b[1]!)));
}

function storedRows(path: string): { rows: Row[]; nonIntegers: number } {
  const db = new Database(path, { readonly: true });
  try {
    const rows = db
      .prepare(`SELECT ${EVENT_COLUMNS} FROM events ORDER BY ts, seq`)
      .raw()
      .safeIntegers(true)
      .all() as Row[];
    const typed = EVENT_COLUMNS.split(', ')
      .map((c) => `(typeof(${c}) NOT IN ('integer', 'null'))`)
      .join(' + ');
    const nonIntegers = db.prepare(`SELECT sum(${typed}) FROM events`).pluck().get() as number;
    return { rows, nonIntegers };
  } finally {
    db.close();
  }
}

describe('EventInsert (kreplay_batch)', () => {
  it('stores every value of a mixed batch exactly, as integers, with the row-by-row seqs', () => {
    const writer = StoreWriter.open(dir.path, 'one');
    const batch = mixedBatch();
    expect(new Set(batch.type)).toEqual(new Set([...SYSCALL_RECORD_TYPES, RecordType.BlockIo]));
    writer.writeBatch(batch);
    writer.close();
    const { rows, nonIntegers } = storedRows(storePath(dir.path, 'one'));
    expect(rows).toEqual(expectedRows(batch, [[0, ROWS]]));
    expect(nonIntegers).toBe(0);
  });

  it('puts a batch of every record type in with one statement, in the batch order', () => {
    const writer = StoreWriter.open(dir.path, 'count');
    const batch = mixedBatch();
    const statement = Object.getPrototypeOf(writer.db.prepare('SELECT 1')) as { run: () => unknown };
    const run = jest.spyOn(statement, 'run');
    try {
      writer.writeBatch(batch);
      // BEGIN, the events', the next seq's, COMMIT (a statement a record type: 8)
      expect(run).toHaveBeenCalledTimes(4);
    } finally {
      run.mockRestore();
    }
    writer.close();
    const db = new Database(storePath(dir.path, 'count'), { readonly: true });
    const types = db.prepare('SELECT type FROM events ORDER BY seq').pluck().all();
    db.close();
    expect(types).toEqual(Array.from(batch.type));
  });

  function explainInsert(db: Database.Database): { opcode: string; p2: number }[] {
    const prepare = jest.spyOn(db, 'prepare');
    new EventInsert(db);
    const sql = prepare.mock.calls[0]![0];
    prepare.mockRestore();
    const params = Object.fromEntries(
      [...sql.matchAll(/@(\w+)/g)].map(([, name]) => [
        name!,
        name === 'base' || name === 'seq' ? 0 : Buffer.alloc(0),
      ]),
    );
    return db.prepare(`EXPLAIN ${sql}`).all(params) as { opcode: string; p2: number }[];
  }

  it('seeks in no table of its own per row to tell which columns a record type fills', () => {
    const writer = StoreWriter.open(dir.path, 'plan');
    const opcodes = explainInsert(writer.db).map((o) => o.opcode);
    writer.close();
    // `type IN (1, 5, 6, 7)` built an ephemeral index once and sought in it for every row, once a column
    expect(opcodes.filter((o) => o === 'OpenEphemeral' || o === 'NotFound')).toEqual([]);
    // every row is still written: the table and its four indexes
    expect(opcodes.filter((o) => o === 'IdxInsert')).toHaveLength(5);
  });

  it("reads a row's type once, kreplay_batch giving the NULLs of the columns other types fill", () => {
    const writer = StoreWriter.open(dir.path, 'type-once');
    const program = explainInsert(writer.db);
    const typeColumn = writer.db
      .prepare("SELECT cid FROM pragma_table_xinfo('kreplay_batch') WHERE name = 'type'")
      .pluck()
      .get() as number;
    writer.close();
    // `CASE type WHEN 1 THEN handle …` read it once for each of the ten such columns, beside `type` itself
    expect(program.filter((o) => o.opcode === 'VColumn' && o.p2 === typeColumn)).toHaveLength(1);
    // nor does the statement compare it: one Ne a type a column before
    expect(program.filter((o) => o.opcode === 'Ne' || o.opcode === 'Eq')).toEqual([]);
  });

  it('numbers each transaction of a batch split under a small cap on from the last', () => {
    const writer = StoreWriter.open(dir.path, 'split');
    const batch = mixedBatch();
    const insert = new EventInsert(writer.db);
    let seq = 1;
    for (const [start, end] of [
      [0, 333],
      [333, 334],
      [334, ROWS],
    ] as [number, number][]) {
      seq = insert.run(batch, seq, start, end);
    }
    expect(seq).toBe(ROWS + 1);
    writer.close();
    const { rows } = storedRows(storePath(dir.path, 'split'));
    expect(rows).toEqual(
      expectedRows(batch, [
        [0, 333],
        [333, 334],
        [334, ROWS],
      ]),
    );
  });

  it('says what is wrong when a column does not match the rows', () => {
    const db = new Database(':memory:');
    EventInsert.prepareConnection(db);
    const blob = (bytes: number) => Buffer.alloc(bytes);
    const args = (dur: number, picks = Buffer.alloc(0)) => [
      blob(2),
      blob(16),
      blob(dur),
      ...Array(11)
        .fill(null)
        .map((_, i) => blob(i < 4 ? 16 : 8)),
      blob(16),
      picks,
    ];
    const count = (...values: Buffer[]) =>
      db
        .prepare(`SELECT count(*) FROM kreplay_batch(${'?, '.repeat(15)}?)`)
        .pluck()
        .get(...values);
    expect(() => count(...args(8))).toThrow(/kreplay_batch: dur holds 8 bytes, expected 16 for 2 rows/);
    expect(count(...args(16))).toBe(2);
    expect(() => db.prepare("SELECT * FROM kreplay_batch(x'00')").all()).toThrow(
      /kreplay_batch takes 16 arguments/,
    );
    // a pick is a column's index and 8 bytes of types
    expect(() => count(...args(16, Buffer.alloc(10)))).toThrow(/kreplay_batch: picks hold 10 bytes/);
    expect(() => count(...args(16, Buffer.from([14, 0, 0, 0, 0, 0, 0, 0, 0])))).toThrow(
      /kreplay_batch: pick 0 names column 14 of 14/,
    );
    // a pick the argument does not give is an error, never a column of NULLs
    expect(() =>
      db.prepare(`SELECT pick1 FROM kreplay_batch(${'?, '.repeat(15)}?)`).all(...args(16, Buffer.alloc(9))),
    ).toThrow(/kreplay_batch: a pick the picks argument does not give/);
    db.close();
  });
});
