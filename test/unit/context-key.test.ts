/**
 * The contexts' lookup key (core/store/context-key.ts): the hash the daemon computes for a lookup
 * must be the one the agent's extension stored (native/sqlite/kreplay_contexts.c), byte for byte
 * of every id and under every seed; two ids on one key must never answer for each other; and ids
 * made to share a key under one seed need not share it under a store's own.
 */
import type { ContextEntry } from '../../agent/ingest/dictionary';
import Database from 'better-sqlite3';
import { packContexts } from '../../agent/store/context-insert';
import { storePath, StoreWriter } from '../../agent/store/store-writer';
import { contextKey } from '../../core/store/context-key';
import { readContextKeySeed } from '../../core/store/context-key-seed';
import { CONTEXT_KEY_SEED_META } from '../../core/store/schema';
import type { EventFilter } from '../../daemon/store/event-filter';
import { NodeStore } from '../../daemon/store/node-store';
import { writeStore } from '../support/event-store';
import { useTempDir } from '../support/temp-dir';

const dir = useTempDir('kreplay-context-key-');
const BASE = 1795345678123456789n;

/* Every tail length (0 to 3 bytes past the last whole block), ASCII and 2- to 4-byte UTF-8, latin1 from a head. */
const IDS = [
  '',
  'a',
  'ab',
  'abc',
  'abcd',
  'abcde',
  'req-1',
  '4bf92f3577b34da6a3ce929d0e0e4736',
  'bench-0af7651916cd43dd',
  '0af7651916cd43dd8448eb211c80319c-00f067aa0ba902b7',
  'caf\u00e9\u00a0\u00ff\u0085',
  '\u20ac\u4e2d-\u{1f600}',
  '\u{1f600}',
  '\u00e9',
  'x'.repeat(255),
];

/* Two ids on one key under seed 0 (found by trying req-0, req-1, …: a 32-bit key has collisions past ~77k ids). */
const COLLIDING = ['req-91295', 'req-115530'] as const;

/* Seeds of every shape: none, the lowest bit, the reference vectors' seed (past 2^31), all bits. */
const SEEDS = [0, 1, 0x9747b28c, 0xffffffff];

type KeyRow = [string | null, number | null, string | null, number | null];

describe('context keys', () => {
  it("are MurmurHash3's (x86, 32 bits), seeded, as signed integers", () => {
    // the published vectors
    expect(contextKey('', 0)).toBe(0);
    expect(contextKey('test', 0)).toBe(0xba6bd213 | 0);
    expect(contextKey('The quick brown fox jumps over the lazy dog', 0)).toBe(0x2e4ff723);
    expect(contextKey('', 1)).toBe(0x514e28b7);
    expect(contextKey('', 0xffffffff)).toBe(0x81f16f39 | 0);
    expect(contextKey('aaaa', 0x9747b28c)).toBe(0x5a97808a);
    expect(contextKey('abc', 0x9747b28c)).toBe(0xc84a62dd | 0);
    expect(contextKey('Hello, world!', 0x9747b28c)).toBe(0x24884cba);
    expect(contextKey('The quick brown fox jumps over the lazy dog', 0x9747b28c)).toBe(0x2fa826cd);
  });

  it("the agent's extension stores the keys the daemon computes, for every id shape and seed", () => {
    const writer = StoreWriter.open(dir.path, 'keys');
    try {
      const entries: ContextEntry[] = IDS.map((id, i) => [i + 1, id, IDS[IDS.length - 1 - i]!, null, null]);
      entries.push([IDS.length + 1, null, null, 'span', 1]);
      const p = packContexts(entries);
      const keys = writer.db.prepare(
        'SELECT transaction_id, transaction_key, trace_id, trace_key FROM kreplay_contexts(?, ?, ?, ?, ?)',
      );
      for (const seed of [...SEEDS, readContextKeySeed(writer.db)]) {
        const rows = keys.raw().all(p.ids, p.flags, p.lengths, p.text, seed) as KeyRow[];
        expect(rows).toEqual([
          ...IDS.map((id, i) => {
            const trace = IDS[IDS.length - 1 - i]!;
            return [id, contextKey(id, seed), trace, contextKey(trace, seed)];
          }),
          [null, null, null, null],
        ]);
        // and distinct ids mostly distinct keys: the function is not constant
        expect(new Set(IDS.map((id) => contextKey(id, seed))).size).toBe(IDS.length);
      }
      // the seed changes every key
      for (const id of IDS) expect(contextKey(id, 1)).not.toBe(contextKey(id, 0));
      const notSeeds = [-1, 2 ** 32, 1.5, '1', null];
      for (const seed of notSeeds)
        expect(() => keys.raw().all(p.ids, p.flags, p.lengths, p.text, seed)).toThrow(
          'kreplay_contexts: the seed is not a 32-bit unsigned integer',
        );
    } finally {
      writer.close();
    }
  });

  it("the writer keys a batch's contexts with its store's seed", () => {
    writeStore(dir.path, 'seeded', [
      { ts: BASE, txn: COLLIDING[0], trace: IDS[7] },
      { ts: BASE + 1n, txn: COLLIDING[1], trace: IDS[11] },
    ]);
    const writer = StoreWriter.open(dir.path, 'seeded');
    try {
      const seed = readContextKeySeed(writer.db);
      expect(seed).not.toBe(0);
      const rows = writer.db
        .prepare('SELECT transaction_id, transaction_key, trace_id, trace_key FROM contexts ORDER BY id')
        .raw()
        .all() as KeyRow[];
      expect(rows).toEqual([
        [COLLIDING[0], contextKey(COLLIDING[0], seed), IDS[7], contextKey(IDS[7]!, seed)],
        [COLLIDING[1], contextKey(COLLIDING[1], seed), IDS[11], contextKey(IDS[11]!, seed)],
      ]);
      // made to share a key under the public seed 0, they do not under this store's
      expect(rows[0]![1]).not.toBe(rows[1]![1]);
    } finally {
      writer.close();
    }
  });

  it('ids made to share a key under seed 0 do not under another seed', () => {
    const [a, b] = COLLIDING;
    expect(contextKey(a, 0)).toBe(contextKey(b, 0));
    for (const seed of SEEDS.slice(1)) expect(contextKey(a, seed)).not.toBe(contextKey(b, seed));
  });

  it('two ids on one key: each lookup finds its own rows only, by transaction and by trace', () => {
    const [a, b] = COLLIDING;
    expect(a).not.toBe(b);
    // a store with seed 0 (a v11 store made before seeds), where the two share their key
    StoreWriter.open(dir.path, 'collide').close();
    const path = storePath(dir.path, 'collide');
    const db = new Database(path);
    expect(db.prepare('DELETE FROM meta WHERE key = ?').run(CONTEXT_KEY_SEED_META).changes).toBe(1);
    expect(readContextKeySeed(db)).toBe(0);
    db.close();
    writeStore(dir.path, 'collide', [
      { ts: BASE, txn: a, trace: b },
      { ts: BASE + 1n, txn: b, trace: a },
      { ts: BASE + 2n, txn: b, trace: b },
      { ts: BASE + 3n, txn: 'other', trace: a },
    ]);
    const check = new Database(path, { readonly: true });
    const keys = check
      .prepare('SELECT DISTINCT transaction_key FROM contexts WHERE transaction_id != ?')
      .pluck();
    expect(keys.all('other')).toEqual([contextKey(a, 0)]);
    check.close();
    const store = NodeStore.open(path);
    try {
      // each read's key is one context id: which contexts a filter reached
      const contexts = (filter: EventFilter) => store.reads(filter).map((r) => Number(r.params.key));
      expect(contexts({ transactionId: a })).toEqual([1]);
      expect(contexts({ transactionId: b })).toEqual([2, 3]);
      expect(contexts({ traceId: a })).toEqual([2, 4]);
      expect(contexts({ traceId: b })).toEqual([1, 3]);
      expect(contexts({ transactionId: b, traceId: b })).toEqual([3]);
      expect(contexts({ transactionId: a, traceId: a })).toEqual([]);
      expect(contexts({ transactionId: 'req-0' })).toEqual([]);
    } finally {
      store.close();
    }
  });
});
