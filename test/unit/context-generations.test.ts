import Database from 'better-sqlite3';
import { randomBytes } from 'node:crypto';
import { EventBatch } from '../../agent/ingest/event-batch';
import type { ContextEntry, NewNames } from '../../agent/ingest/dictionary';
import { StoreWriter, storePath } from '../../agent/store/store-writer';
import {
  CONTEXT_GENERATION_BITS,
  CONTEXT_GENERATIONS_SCHEMA_VERSION,
  MIGRATIONS,
  SCHEMA_VERSION,
  openWriteStore,
} from '../../core/store/schema';
import { contextIdsSql } from '../../daemon/store/query-sql';
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

/** Every (transaction, trace) filter of the spread, answered by contextIdsSql and by a scan of the table. */
function expectLookupsMatchScan(db: Database.Database, generations: boolean): void {
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
    const sql = contextIdsSql(transactionId !== null, traceId !== null, generations);
    const params = { ...(transactionId && { transactionId }), ...(traceId && { traceId }) };
    const scan = db
      .prepare(
        'SELECT id FROM contexts NOT INDEXED WHERE (@transactionId IS NULL OR transaction_id = @transactionId) ' +
          'AND (@traceId IS NULL OR trace_id = @traceId) ORDER BY id',
      )
      .pluck()
      .all({ transactionId, traceId });
    expect(db.prepare(sql).pluck().all(params)).toEqual(scan);
  }
}

describe('contexts indexed by generation', () => {
  it('a lookup by transaction, trace or both finds exactly what a scan finds, across generations and gaps', () => {
    const writer = StoreWriter.open(dir.path, 'n');
    try {
      writer.writeBatch(NO_EVENTS, names(spread()));
      expectLookupsMatchScan(writer.db, true);
      expect(
        writer.db
          .prepare(contextIdsSql(true, false, true))
          .pluck()
          .all({ transactionId: 'tx-odd' }),
      ).toEqual([GENERATION - 1, 2 * GENERATION + 5, 5 * GENERATION + 1]);
      writer.db.exec('DELETE FROM contexts');
      expect(
        writer.db
          .prepare(contextIdsSql(true, false, true))
          .pluck()
          .all({ transactionId: 'tx-odd' }),
      ).toEqual([]);
    } finally {
      writer.close();
    }
  });

  it('seeks each generation in the lookup index, never scans contexts', () => {
    const writer = StoreWriter.open(dir.path, 'n');
    try {
      for (const [transaction, trace, index, column] of [
        [true, false, 'contexts_by_transaction', 'transaction_id'],
        [false, true, 'contexts_by_trace', 'trace_id'],
      ] as const) {
        const plan = (
          writer.db
            .prepare(`EXPLAIN QUERY PLAN ${contextIdsSql(transaction, trace, true)}`)
            .all({ transactionId: 't', traceId: 'r' }) as { detail: string }[]
        ).map((r) => r.detail);
        expect(plan).toContain(`SEARCH contexts USING COVERING INDEX ${index} (<expr>=? AND ${column}=?)`);
        expect(plan.join()).not.toMatch(/SCAN contexts/);
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
    expectLookupsMatchScan(old, false);
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
      for (const { sql } of indexes) expect(sql).toContain(`(id >> ${CONTEXT_GENERATION_BITS}, `);
      expectLookupsMatchScan(db, true);
    } finally {
      db.close();
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
