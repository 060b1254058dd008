/**
 * A batch's new contexts go in with one INSERT ... SELECT from kreplay_contexts
 * (native/sqlite/kreplay_contexts.c): every value must come out of the store as the row-by-row
 * insert stored it (text as text, NULL as NULL, multi-byte characters whole), and the writer must
 * run one statement for them however many there are (issue 46: one a context cost as much as the
 * row's B-trees).
 */
import Database from 'better-sqlite3';
import type { ContextEntry } from '../../agent/ingest/dictionary';
import { EventBatch } from '../../agent/ingest/event-batch';
import { ContextInsert, packContexts } from '../../agent/store/context-insert';
import { StoreWriter, storePath } from '../../agent/store/store-writer';
import { contextKey } from '../../core/store/context-key';
import { readContextKeySeed } from '../../core/store/context-key-seed';
import { useTempDir } from '../support/temp-dir';

const dir = useTempDir();
const COLUMNS = 'id, transaction_id, trace_id, parent_span_id, trace_flags';
const TYPED = COLUMNS.split(', ')
  .map((c) => `${c}, typeof(${c})`)
  .join(', ');

/* Every shape an entry takes: nulls in each place, empty strings, latin1 bytes read from a head, 2- to 4-byte UTF-8. */
function entries(): ContextEntry[] {
  const out: ContextEntry[] = [
    [1, 'req-1', null, null, null],
    [2, null, '4bf92f3577b34da6a3ce929d0e0e4736', '00f067aa0ba902b7', 1],
    [3, 'bench-0af7651916cd43dd', '0af7651916cd43dd8448eb211c80319c', 'b7ad6b7169203331', 0],
    [4, '', '', '', 255],
    [5, 'caf\u00e9\u00a0\u00ff\u0085', null, null, null],
    [6, '\u20ac\u4e2d-\u{1f600}', 'trace', null, 3],
    [7, null, null, 'span-only', null],
    [2 ** 40, 'a big id', null, null, null],
  ];
  for (let i = 0; i < 500; i++)
    out.push([100 + i, `bench-${i.toString(16)}`, i.toString(16).padStart(32, '0'), null, i % 2]);
  return out;
}

function typedRows(db: Database.Database, table: string): unknown[][] {
  return db.prepare(`SELECT ${TYPED} FROM ${table} ORDER BY id`).raw().all() as unknown[][];
}

describe('ContextInsert (kreplay_contexts)', () => {
  it('stores every entry as one statement run each did, types and bytes alike', () => {
    const writer = StoreWriter.open(dir.path, 'exact');
    const db = writer.db;
    // the contexts table's own column types, so that the values take its affinities
    db.exec(`CREATE TEMP TABLE by_row AS SELECT ${COLUMNS} FROM contexts WHERE 0`);
    const byRow = db.prepare(`INSERT INTO temp.by_row (${COLUMNS}) VALUES (?, ?, ?, ?, ?)`);
    for (const entry of entries()) byRow.run(...entry);
    db.transaction(() => new ContextInsert(db).run(entries()))();
    const stored = typedRows(db, 'contexts');
    expect(stored).toHaveLength(entries().length);
    expect(stored).toEqual(typedRows(db, 'temp.by_row'));
    writer.close();
  });

  it('runs one statement for a batch of 2,000 new contexts', () => {
    const writer = StoreWriter.open(dir.path, 'count');
    const contexts: ContextEntry[] = [];
    for (let i = 1; i <= 2000; i++)
      contexts.push([i, `bench-${i}`, i.toString(16).padStart(32, '0'), null, 1]);
    const statement = Object.getPrototypeOf(writer.db.prepare('SELECT 1')) as { run: () => unknown };
    const run = jest.spyOn(statement, 'run');
    try {
      writer.writeBatch(new EventBatch(1), {
        services: [],
        comms: [],
        contexts,
        targets: [],
        containers: [],
      });
      // BEGIN, the contexts', the next context id's, the next seq's, COMMIT (a statement a context: 2,004)
      expect(run).toHaveBeenCalledTimes(5);
    } finally {
      run.mockRestore();
    }
    writer.close();
    const db = new Database(storePath(dir.path, 'count'), { readonly: true });
    expect(db.prepare('SELECT count(*), min(id), max(id) FROM contexts').raw().get()).toEqual([
      2000, 1, 2000,
    ]);
    db.close();
  });

  it('refuses blobs that do not match, naming the argument', () => {
    const writer = StoreWriter.open(dir.path, 'bad');
    const insert = writer.db.prepare(`SELECT count(*) FROM kreplay_contexts(?, ?, ?, ?, 0)`).pluck();
    const packed = packContexts(entries().slice(0, 3));
    expect(() => insert.get(packed.ids, packed.flags.subarray(4), packed.lengths, packed.text)).toThrow(
      'kreplay_contexts: flags holds 8 bytes, expected 12 for 3 contexts',
    );
    expect(() => insert.get(packed.ids.subarray(1), packed.flags, packed.lengths, packed.text)).toThrow(
      'kreplay_contexts: ids holds 23 bytes, not a whole number of doubles',
    );
    expect(() => insert.get(packed.ids, packed.flags, packed.lengths, packed.text.subarray(1))).toThrow(
      /kreplay_contexts: text holds \d+ bytes, the lengths say \d+/,
    );
    expect(insert.get(packed.ids, packed.flags, packed.lengths, packed.text)).toBe(3);
    writer.close();
  });

  it('stores empty ids as empty, keyed, in a batch with no other text', () => {
    const writer = StoreWriter.open(dir.path, 'empty');
    try {
      writer.writeBatch(new EventBatch(1), {
        services: [],
        comms: [],
        contexts: [[1, '', '', null, null]],
        targets: [],
        containers: [],
      });
      const seed = readContextKeySeed(writer.db);
      expect(
        writer.db
          .prepare('SELECT transaction_id, trace_id, transaction_key, trace_key FROM contexts')
          .raw()
          .all(),
      ).toEqual([['', '', contextKey('', seed), contextKey('', seed)]]);
    } finally {
      writer.close();
    }
  });

  it('refuses an entry it cannot store exactly', () => {
    expect(() => packContexts([[1, 'a', null, null, 256]])).toThrow(
      'context 1: trace flags 256 are not a byte',
    );
    expect(() => packContexts([[0.5, 'a', null, null, null]])).toThrow(
      'context id 0.5 is not a positive integer',
    );
  });
});
