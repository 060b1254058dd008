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
