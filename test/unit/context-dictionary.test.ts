import { ContextDictionary } from '../../agent/ingest/dictionary';

const trace = (n: number): string => n.toString(16).padStart(32, '0');

describe('ContextDictionary', () => {
  it('holds at most its capacity, keeps the ids of contexts in use, and gives a forgotten one a fresh id', () => {
    const dictionary = new ContextDictionary([], 1, 8);
    const kept = dictionary.id('txn-kept', trace(0));
    const first = dictionary.id('txn-1', trace(1));
    for (let n = 2; n < 100; n++) {
      dictionary.id(`txn-${n}`, trace(n));
      // used all along: never forgotten
      expect(dictionary.id('txn-kept', trace(0))).toBe(kept);
      expect(dictionary.size).toBeLessThanOrEqual(8);
    }
    const again = dictionary.id('txn-1', trace(1));
    expect(again).not.toBe(first);
    // the recent ones keep their ids; every new id was handed to the store once
    expect(dictionary.id('txn-99', trace(99))).toBe(dictionary.id('txn-99', trace(99)));
    const pending = dictionary.takePending();
    expect(new Set(pending.map(([id]) => id)).size).toBe(pending.length);
    expect(pending.filter(([, txn]) => txn === 'txn-1').map(([id]) => id)).toEqual([first, again]);
  });

  it('forgets the contexts the store removed, from either generation', () => {
    const dictionary = new ContextDictionary([], 1, 4);
    const a = dictionary.id('a', trace(1));
    dictionary.id('b', trace(2));
    dictionary.id('c', trace(3)); // a and b now in the old generation
    dictionary.forget([
      [a, 'a', trace(1), null, null],
      [999, 'c', trace(3), null, null], // another id: kept
    ]);
    expect(dictionary.id('a', trace(1))).not.toBe(a);
    expect(dictionary.size).toBe(3);
  });
});

describe('ContextDictionary against a model of its rule', () => {
  /* the rule, spelled plainly: two generations of keys in Maps, the young one turned over at half the capacity */
  class Model {
    private young = new Map<string, number>();
    private old = new Map<string, number>();
    private next = 1;
    constructor(private readonly capacity: number) {}
    id(...tuple: [string | null, string | null, string | null, number | null]): number {
      if (tuple[0] === null && tuple[1] === null) return 0;
      const key = JSON.stringify(tuple);
      let id = this.young.get(key);
      if (id !== undefined) return id;
      id = this.old.get(key) ?? this.next++;
      this.old.delete(key);
      if (this.young.size >= this.capacity / 2) [this.old, this.young] = [this.young, new Map()];
      this.young.set(key, id);
      return id;
    }
    get size(): number {
      return this.young.size + this.old.size;
    }
  }

  it('gives the ids the rule gives, on tuples that differ in one field or where its fields split', () => {
    for (const capacity of [4, 64, 1024]) {
      const dictionary = new ContextDictionary([], 1, capacity);
      const model = new Model(capacity);
      let seed = capacity;
      const random = (n: number) => (seed = (Math.imul(seed, 1103515245) + 12345) >>> 0) % n;
      // few values, so that tuples repeat, share fields, and ("ab", "c") meets ("a", "bc")
      const texts = [null, '', 'a', 'ab', 'b', 'bc', 'c', trace(1), trace(2), 'ÿ\u00a0é'];
      const got: number[] = [];
      const want: number[] = [];
      for (let n = 0; n < 8000; n++) {
        const tuple = [
          texts[random(10)]!,
          texts[random(10)]!,
          texts[random(5)]!,
          random(3) === 0 ? null : random(3),
        ] as const;
        // every other tuple as the decoder gives it: a resolution, no span or flags left undefined
        const [transactionId, traceId, span, flags] = tuple;
        const id =
          n % 2 === 0
            ? dictionary.id(...tuple)
            : dictionary.idOf({
                transactionId,
                traceId,
                ...(span === null ? {} : { parentSpanId: span }),
                ...(flags === null ? {} : { traceFlags: flags }),
              });
        got.push(id, dictionary.size);
        want.push(model.id(...tuple), model.size);
      }
      expect(got).toEqual(want);
      const pending = dictionary.takePending();
      expect(pending.map(([id]) => id)).toEqual(pending.map((_, i) => i + 1));
      // the store is handed each new context's fields, absent ones as null
      expect(pending.every((entry) => entry.length === 5 && !entry.includes(undefined as never))).toBe(true);
    }
  });

  it('loads the rows a store holds, the last of a repeated tuple winning, and counts past them', () => {
    const dictionary = new ContextDictionary(
      [
        [3, 'a', trace(1), null, null],
        [5, 'b', trace(2), 'span', 1],
        [7, 'a', trace(1), null, null],
      ],
      1,
      8,
    );
    expect(dictionary.id('a', trace(1))).toBe(7);
    expect(dictionary.id('b', trace(2), 'span', 1)).toBe(5);
    expect(dictionary.id('b', trace(2), 'span', 0)).toBe(8);
    expect(dictionary.size).toBe(3);
  });
});
