/**
 * The contexts' lookup key (core/store/context-key.ts): the hash the daemon computes for a lookup
 * must be the one the agent's extension stored (native/sqlite/kreplay_contexts.c), byte for byte
 * of every id; and two ids on one key must never answer for each other.
 */
import type { ContextEntry } from '../../agent/ingest/dictionary';
import { packContexts } from '../../agent/store/context-insert';
import { StoreWriter } from '../../agent/store/store-writer';
import { contextKey } from '../../core/store/context-key';
import type { EventFilter } from '../../daemon/store/event-filter';
import { NodeStore } from '../../daemon/store/node-store';
import { storePath } from '../../agent/store/store-writer';
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

/* Two ids on one key (found by trying req-0, req-1, …: a 32-bit key has collisions past ~77k ids). */
const COLLIDING = ['req-91295', 'req-115530'] as const;

describe('context keys', () => {
  it("are MurmurHash3's (x86, 32 bits, seed 0), as signed integers", () => {
    // the published vectors
    expect(contextKey('')).toBe(0);
    expect(contextKey('test')).toBe(0xba6bd213 | 0);
    expect(contextKey('The quick brown fox jumps over the lazy dog')).toBe(0x2e4ff723);
  });

  it("the agent's extension stores the keys the daemon computes, for every id shape", () => {
    const writer = StoreWriter.open(dir.path, 'keys');
    try {
      const entries: ContextEntry[] = IDS.map((id, i) => [i + 1, id, IDS[IDS.length - 1 - i]!, null, null]);
      entries.push([IDS.length + 1, null, null, 'span', 1]);
      const p = packContexts(entries);
      const rows = writer.db
        .prepare(
          'SELECT transaction_id, transaction_key, trace_id, trace_key FROM kreplay_contexts(?, ?, ?, ?)',
        )
        .raw()
        .all(p.ids, p.flags, p.lengths, p.text) as [
        string | null,
        number | null,
        string | null,
        number | null,
      ][];
      expect(rows).toEqual([
        ...IDS.map((id, i) => {
          const trace = IDS[IDS.length - 1 - i]!;
          return [id, contextKey(id), trace, contextKey(trace)];
        }),
        [null, null, null, null],
      ]);
      // and distinct ids mostly distinct keys: the function is not constant
      expect(new Set(IDS.map(contextKey)).size).toBe(IDS.length);
    } finally {
      writer.close();
    }
  });

  it('two ids on one key: each lookup finds its own rows only, by transaction and by trace', () => {
    const [a, b] = COLLIDING;
    expect(a).not.toBe(b);
    expect(contextKey(a)).toBe(contextKey(b));
    writeStore(dir.path, 'collide', [
      { ts: BASE, txn: a, trace: b },
      { ts: BASE + 1n, txn: b, trace: a },
      { ts: BASE + 2n, txn: b, trace: b },
      { ts: BASE + 3n, txn: 'other', trace: a },
    ]);
    const store = NodeStore.open(storePath(dir.path, 'collide'));
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
