import Database from 'better-sqlite3';
import { randomBytes } from 'node:crypto';
import { EventBatch } from '../../agent/ingest/event-batch';
import type { ContextEntry, NewNames } from '../../agent/ingest/dictionary';
import { StoreWriter, storePath } from '../../agent/store/store-writer';
import { contextKey } from '../../core/store/context-key';
import { readContextKeySeed } from '../../core/store/context-key-seed';
import {
  CONTEXT_GENERATION_BITS,
  CONTEXT_KEY_SEED_META,
  CONTEXT_GENERATIONS_SCHEMA_VERSION,
  CONTEXT_KEYS_SCHEMA_VERSION,
  MIGRATIONS,
  SCHEMA_VERSION,
  openWriteStore,
} from '../../core/store/schema';
import {
  contextIdsParams,
  contextIdsSql,
  contextLookupOf,
  type ContextLookup,
} from '../../daemon/store/query-sql';
import { NodeStore } from '../../daemon/store/node-store';
import { useTempDir } from '../support/temp-dir';

const dir = useTempDir('kreplay-context-generations-');
const GENERATION = 2 ** CONTEXT_GENERATION_BITS;
const NO_EVENTS = new EventBatch(1);
const hex = (bytes: number) => randomBytes(bytes).toString('hex');

function names(contexts: ContextEntry[]): NewNames {
  return { services: [], comms: [], contexts, targets: [], containers: [] };
}

/* Ids in the first, a middle and the last generation and at their edges, some sharing a transaction or trace. */
const SPREAD_IDS = [
  3,
  GENERATION - 1,
  GENERATION,
  2 * GENERATION + 5,
  5 * GENERATION - 1,
  5 * GENERATION + 1,
];
function spread(): ContextEntry[] {
  return SPREAD_IDS.map((id, i) => [id, i % 2 ? 'tx-odd' : `tx-${i}`, i < 3 ? 'tr-a' : 'tr-b', null, null]);
}

/** The ids of the contexts a lookup finds, as the daemon runs it, in id order (it promises none). */
function lookUp(
  db: Database.Database,
  lookup: ContextLookup,
  transactionId: string | null,
  traceId: string | null,
): unknown[] {
  const sql = contextIdsSql(transactionId !== null, traceId !== null, lookup);
  const params = contextIdsParams(
    { transactionId: transactionId ?? undefined, traceId: traceId ?? undefined },
    lookup,
    lookup === 'keys' ? readContextKeySeed(db) : 0,
  );
  return (db.prepare(sql).pluck().all(params) as number[]).sort((a, b) => a - b);
}

/** Every (transaction, trace) filter of the spread, answered by contextIdsSql and by a scan of the table. */
function expectLookupsMatchScan(db: Database.Database, lookup: ContextLookup): unknown[][] {
  const found: unknown[][] = [];
  const filters: [string | null, string | null][] = [
    ['tx-odd', null],
    ['tx-0', null],
    ['tx-4', null],
    [null, 'tr-a'],
    [null, 'tr-b'],
    ['tx-odd', 'tr-b'],
    ['tx-none', null],
    [null, 'tr-none'],
  ];
  for (const [transactionId, traceId] of filters) {
    const scan = db
      .prepare(
        'SELECT id FROM contexts NOT INDEXED WHERE (@transactionId IS NULL OR transaction_id = @transactionId) ' +
          'AND (@traceId IS NULL OR trace_id = @traceId) ORDER BY id',
      )
      .pluck()
      .all({ transactionId, traceId });
    const ids = lookUp(db, lookup, transactionId, traceId);
    expect(ids).toEqual(scan);
    found.push(ids);
  }
  return found;
}

describe('contexts indexed by generation', () => {
  it('a lookup by transaction, trace or both finds exactly what a scan finds, across generations and gaps', () => {
    const writer = StoreWriter.open(dir.path, 'n');
    try {
      writer.writeBatch(NO_EVENTS, names(spread()));
      expectLookupsMatchScan(writer.db, 'keys');
      expect(lookUp(writer.db, 'keys', 'tx-odd', null)).toEqual([
        GENERATION - 1,
        2 * GENERATION + 5,
        5 * GENERATION + 1,
      ]);
      writer.db.exec('DELETE FROM contexts');
      expect(lookUp(writer.db, 'keys', 'tx-odd', null)).toEqual([]);
    } finally {
      writer.close();
    }
  });

  it("seeks each generation in the lookup index by the id's key, never scans contexts nor sorts", () => {
    const writer = StoreWriter.open(dir.path, 'n');
    try {
      for (const [transaction, trace, index, column] of [
        [true, false, 'contexts_by_transaction', 'transaction_key'],
        [false, true, 'contexts_by_trace', 'trace_key'],
        [true, true, 'contexts_by_transaction', 'transaction_key'],
      ] as const) {
        const params = contextIdsParams(
          { transactionId: transaction ? 't' : undefined, traceId: trace ? 'r' : undefined },
          'keys',
          readContextKeySeed(writer.db),
        );
        const plan = (
          writer.db
            .prepare(`EXPLAIN QUERY PLAN ${contextIdsSql(transaction, trace, 'keys')}`)
            .all(params) as { detail: string }[]
        ).map((r) => r.detail);
        // not covering: each entry's row is read for its full id, which decides
        expect(plan).toContain(`SEARCH contexts USING INDEX ${index} (<expr>=? AND ${column}=?)`);
        expect(plan.join()).not.toMatch(/SCAN contexts/);
        // a sorter set up per lookup was most of its cost
        expect(plan.join()).not.toMatch(/TEMP B-TREE/);
      }
    } finally {
      writer.close();
    }
  });

  it('upgrades a store of the previous version: the indexes lead with the generation, its lookups unchanged', () => {
    const path = storePath(dir.path, 'old');
    const old = new Database(path);
    for (const migration of MIGRATIONS.slice(0, CONTEXT_GENERATIONS_SCHEMA_VERSION - 1)) old.exec(migration);
    old.exec(`INSERT INTO meta VALUES ('store_id', 'a1b2c3d4e5f6'), ('node', 'old'), ('next_seq', '1')`);
    const insert = old.prepare('INSERT INTO contexts (id, transaction_id, trace_id) VALUES (?, ?, ?)');
    for (const [id, txn, trace] of spread()) insert.run(id, txn, trace);
    old.pragma(`user_version = ${CONTEXT_GENERATIONS_SCHEMA_VERSION - 1}`);
    expectLookupsMatchScan(old, 'text');
    old.close();

    const { db } = openWriteStore(path, 'old');
    try {
      expect(db.pragma('user_version', { simple: true })).toBe(SCHEMA_VERSION);
      const indexes = db
        .prepare(
          `SELECT name, sql FROM sqlite_master WHERE type = 'index' AND tbl_name = 'contexts' ORDER BY name`,
        )
        .all() as { name: string; sql: string }[];
      expect(indexes.map((i) => i.name)).toEqual(['contexts_by_trace', 'contexts_by_transaction']);
      for (const { sql } of indexes)
        expect(sql).toMatch(new RegExp(`\\(id >> ${CONTEXT_GENERATION_BITS}, (transaction|trace)_key\\)`));
      expectLookupsMatchScan(db, 'keys');
    } finally {
      db.close();
    }
  });

  it("upgrades a store keyed by the ids' text: its rows intact and keyed, every lookup finding what it found before", () => {
    const path = storePath(dir.path, 'v10');
    const old = new Database(path);
    // the previous version's DDL, as a store of it was made
    for (const migration of MIGRATIONS.slice(0, CONTEXT_KEYS_SCHEMA_VERSION - 1)) old.exec(migration);
    old.exec(`INSERT INTO meta VALUES ('store_id', 'a1b2c3d4e5f6'), ('node', 'v10'), ('next_seq', '1')`);
    const insert = old.prepare(
      'INSERT INTO contexts (id, transaction_id, trace_id, parent_span_id, trace_flags) VALUES (?, ?, ?, ?, ?)',
    );
    const rows: ContextEntry[] = [
      ...spread(),
      [7 * GENERATION, 'caf\u00e9-\u{1f600}', null, null, null],
      [7 * GENERATION + 1, null, '4bf92f3577b34da6a3ce929d0e0e4736', '00f067aa0ba902b7', 1],
      [7 * GENERATION + 2, 'tx-odd', 'tr-a', 'b7ad6b7169203331', 0],
    ];
    for (const row of rows) insert.run(...row);
    old.pragma(`user_version = ${CONTEXT_KEYS_SCHEMA_VERSION - 1}`);
    expect(contextLookupOf(CONTEXT_KEYS_SCHEMA_VERSION - 1)).toBe('generations');
    const before = expectLookupsMatchScan(old, 'generations');
    const all = 'SELECT id, transaction_id, trace_id, parent_span_id, trace_flags FROM contexts ORDER BY id';
    const stored = old.prepare(all).raw().all();
    old.close();

    const { db } = openWriteStore(path, 'v10');
    try {
      expect(db.pragma('user_version', { simple: true })).toBe(SCHEMA_VERSION);
      expect(contextLookupOf(SCHEMA_VERSION)).toBe('keys');
      expect(db.prepare(all).raw().all()).toEqual(stored);
      const keyed = db
        .prepare('SELECT transaction_id, transaction_key, trace_id, trace_key FROM contexts')
        .raw()
        .all();
      // keyed with the seed the upgrade made and kept, not the public seed 0
      const seed = readContextKeySeed(db);
      expect(db.prepare('SELECT value FROM meta WHERE key = ?').pluck().get(CONTEXT_KEY_SEED_META)).toBe(
        String(seed),
      );
      expect(seed).not.toBe(0);
      const key = (id: unknown) => (typeof id === 'string' ? contextKey(id, seed) : null);
      expect((keyed[0] as unknown[])[1]).not.toBe(contextKey((keyed[0] as unknown[])[0] as string, 0));
      expect(keyed).toEqual(
        keyed.map((r) => [
          (r as unknown[])[0],
          key((r as unknown[])[0]),
          (r as unknown[])[2],
          key((r as unknown[])[2]),
        ]),
      );
      expect(expectLookupsMatchScan(db, 'keys')).toEqual(before);
      expect(lookUp(db, 'keys', 'caf\u00e9-\u{1f600}', null)).toEqual([7 * GENERATION]);
      expect(lookUp(db, 'keys', null, '4bf92f3577b34da6a3ce929d0e0e4736')).toEqual([7 * GENERATION + 1]);
      expect(lookUp(db, 'keys', 'tx-odd', 'tr-a')).toEqual([GENERATION - 1, 7 * GENERATION + 2]);
    } finally {
      db.close();
    }
  });

  it("a daemon that opened a store before the agent upgraded it looks up by the store's new seed", () => {
    const path = storePath(dir.path, 'v10-open');
    const old = new Database(path);
    for (const migration of MIGRATIONS.slice(0, CONTEXT_KEYS_SCHEMA_VERSION - 1)) old.exec(migration);
    old.exec(`INSERT INTO meta VALUES ('store_id', 'a1b2c3d4e5f6'), ('node', 'v10'), ('next_seq', '1')`);
    const insert = old.prepare('INSERT INTO contexts (id, transaction_id, trace_id) VALUES (?, ?, ?)');
    for (const [id, txn, trace] of spread()) insert.run(id, txn, trace);
    old.pragma(`user_version = ${CONTEXT_KEYS_SCHEMA_VERSION - 1}`);
    old.close();

    const store = NodeStore.open(path);
    try {
      // each read's key is one context id: which contexts a filter reached
      const found = () => [
        store.reads({ transactionId: 'tx-odd' }).map((r) => Number(r.params.key)),
        store.reads({ traceId: 'tr-b' }).map((r) => Number(r.params.key)),
      ];
      const before = found();
      expect(before).toEqual([
        [GENERATION - 1, 2 * GENERATION + 5, 5 * GENERATION + 1],
        [2 * GENERATION + 5, 5 * GENERATION - 1, 5 * GENERATION + 1],
      ]);
      // the agent upgrades the store and keeps it open, as it runs
      const { db } = openWriteStore(path, 'v10');
      try {
        expect(readContextKeySeed(db)).not.toBe(0);
        expect(found()).toEqual(before);
      } finally {
        db.close();
      }
    } finally {
      store.close();
    }
  });

  it('refuses a row whose id has no key: every lookup would miss it', () => {
    const writer = StoreWriter.open(dir.path, 'n');
    try {
      const insert = (sql: string) => () => writer.db.exec(sql);
      expect(insert(`INSERT INTO contexts (id, transaction_id) VALUES (1, 'tx')`)).toThrow(
        /CHECK constraint failed/,
      );
      expect(insert(`INSERT INTO contexts (id, trace_id) VALUES (2, 'tr')`)).toThrow(
        /CHECK constraint failed/,
      );
      expect(insert(`INSERT INTO contexts (id, trace_key) VALUES (3, 5)`)).toThrow(/CHECK constraint failed/);
      expect(writer.db.prepare('SELECT count(*) FROM contexts').pluck().get()).toBe(0);
    } finally {
      writer.close();
    }
  });

  it("a batch of new contexts writes about as many pages to a large store's WAL as to a small one's", () => {
    // random ids, as real trace ids are: indexed by id alone, each batch's rows land all over an
    // index as large as the store's contexts, and every page they touch is written again
    const writer = StoreWriter.open(dir.path, 'n', {
      checkpoint: { passiveBytes: 2 ** 40, restartBytes: 2 ** 40, restartWaitMs: 0 },
    });
    const perBatch = GENERATION / 4;
    const walGrowth: number[] = [];
    try {
      for (let b = 0; b < 40; b++) {
        const contexts: ContextEntry[] = [];
        for (let i = 1; i <= perBatch; i++)
          contexts.push([b * perBatch + i, `req-${hex(16)}`, hex(16), hex(8), 1]);
        const before = writer.checkpoints.walBytes();
        writer.writeBatch(NO_EVENTS, names(contexts));
        walGrowth.push(writer.checkpoints.walBytes() - before);
      }
    } finally {
      writer.close();
    }
    const sum = (from: number) => walGrowth.slice(from, from + 4).reduce((a, b) => a + b, 0);
    // one generation's batches while the store holds 1 generation, and while it holds 9
    expect(sum(36)).toBeLessThan(1.5 * sum(4));
  });
});
