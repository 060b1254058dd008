/**
 * Each store's seed for its contexts' keys (core/store/context-key-seed.ts): made at random with
 * the store, kept in it, and the one every writer and reader of the store's keys uses; a store
 * made before seeds reads as seed 0, as its rows were keyed.
 */
import Database from 'better-sqlite3';
import { join } from 'node:path';
import { StoreWriter, storePath } from '../../agent/store/store-writer';
import { readIncidentFile } from '../../core/incident';
import { repoRoot } from '../../core/repo-root';
import { contextKey } from '../../core/store/context-key';
import { readContextKeySeed } from '../../core/store/context-key-seed';
import { CONTEXT_KEY_SEED_META, StoreError, openWriteStore } from '../../core/store/schema';
import { IncidentStoreBuilder } from '../../daemon/incidents/incident-store';
import { NodeStore } from '../../daemon/store/node-store';
import { useTempDir } from '../support/temp-dir';

const dir = useTempDir('kreplay-context-key-seed-');
const FIXTURE = join(repoRoot(), 'test', 'fixtures', 'incident-v1.kri');

type KeyRow = [string | null, number | null, string | null, number | null];
const KEYS_SQL = 'SELECT transaction_id, transaction_key, trace_id, trace_key FROM contexts ORDER BY id';

/** Each row's keys as contextKey computes them under `seed`. */
const keyedWith = (rows: KeyRow[], seed: number): KeyRow[] =>
  rows.map(([txn, , trace]) => [
    txn,
    txn === null ? null : contextKey(txn, seed),
    trace,
    trace === null ? null : contextKey(trace, seed),
  ]);

describe("a store's context key seed", () => {
  it('is made at random with each store and kept in it', () => {
    const seeds = ['a', 'b', 'c'].map((node) => {
      const writer = StoreWriter.open(dir.path, node);
      try {
        return readContextKeySeed(writer.db);
      } finally {
        writer.close();
      }
    });
    expect(new Set(seeds).size).toBe(3);
    for (const seed of seeds) expect(Number.isInteger(seed) && seed >= 0 && seed <= 0xffffffff).toBe(true);
    // opened again, the same
    const { db } = openWriteStore(storePath(dir.path, 'a'), 'a');
    try {
      expect(readContextKeySeed(db)).toBe(seeds[0]);
      expect(db.prepare('SELECT value FROM meta WHERE key = ?').pluck().get(CONTEXT_KEY_SEED_META)).toBe(
        String(seeds[0]),
      );
    } finally {
      db.close();
    }
  });

  it('reads as 0 where a store has none (keyed before seeds), and refuses one it cannot read', () => {
    const { db } = openWriteStore(storePath(dir.path, 'odd'), 'odd');
    try {
      db.prepare('DELETE FROM meta WHERE key = ?').run(CONTEXT_KEY_SEED_META);
      expect(readContextKeySeed(db)).toBe(0);
      const setSeed = db.prepare('INSERT OR REPLACE INTO meta (key, value) VALUES (?, ?)');
      for (const value of ['4294967295', '0']) {
        setSeed.run(CONTEXT_KEY_SEED_META, value);
        expect(readContextKeySeed(db)).toBe(Number(value));
      }
      for (const value of ['4294967296', '-1', '1.5', '', ' 1', '0x10', '99999999999']) {
        setSeed.run(CONTEXT_KEY_SEED_META, value);
        let error: unknown;
        try {
          readContextKeySeed(db);
        } catch (err) {
          error = err;
        }
        expect(error).toBeInstanceOf(StoreError);
        expect((error as StoreError).code).toBe('E_STORE_CORRUPT');
      }
    } finally {
      db.close();
    }
  });

  it("keys an incident file's store with its own seed, and its lookups find its contexts", async () => {
    const incident = await readIncidentFile(FIXTURE);
    const path = join(dir.path, 'incident.db');
    const builder = new IncidentStoreBuilder(path, 'a1b2c3d4e5f6', 'node-a', 'fixture');
    for (const event of incident.events) builder.add(event);
    builder.finish();

    const db = new Database(path, { readonly: true });
    const seed = readContextKeySeed(db);
    const rows = db.prepare(KEYS_SQL).raw().all() as KeyRow[];
    const ids = db
      .prepare('SELECT id FROM contexts WHERE transaction_id = ? ORDER BY id')
      .pluck()
      .all('fixture-txn') as number[];
    db.close();
    expect(seed).not.toBe(0);
    expect(rows.length).toBeGreaterThan(0);
    expect(rows).toEqual(keyedWith(rows, seed));
    expect(rows).not.toEqual(keyedWith(rows, 0));
    expect(ids.length).toBeGreaterThan(0);

    const store = NodeStore.open(path);
    try {
      expect(store.reads({ transactionId: 'fixture-txn' }).map((r) => r.params.key)).toEqual(ids.map(BigInt));
      expect(store.reads({ transactionId: 'fixture-txn-not' })).toEqual([]);
    } finally {
      store.close();
    }
  });
});
