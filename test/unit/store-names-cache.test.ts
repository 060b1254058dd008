/**
 * The bounded cache of a store's growing dictionaries (contexts, targets,
 * containers: core/store/store-names.ts): what it keeps, that it keeps at
 * most its bound, and that a load past the bound walks nothing.
 */
import { BoundedCache } from '../../core/store/store-names';

function counted(max: number) {
  const loads: number[] = [];
  const cache = new BoundedCache(max, (id) => {
    loads.push(id);
    return id === 7 ? null : `value-${id}`;
  });
  return { cache, loads };
}

describe('BoundedCache', () => {
  it('loads each id once while it is kept, a null value too', () => {
    const { cache, loads } = counted(16);
    expect([cache.get(1), cache.get(7), cache.get(1), cache.get(7)]).toEqual([
      'value-1',
      null,
      'value-1',
      null,
    ]);
    expect(loads).toEqual([1, 7]);
  });

  it('keeps at most its bound, and keeps a value used again', () => {
    const max = 64;
    const { cache, loads } = counted(max);
    for (let id = 100; id < 100 + 10 * max; id++) {
      cache.get(id);
      // id 0, used again after every max/4 loads, is never loaded twice
      if (id % (max / 4) === 0) cache.get(0);
    }
    expect(loads.filter((id) => id === 0)).toHaveLength(1);
    loads.length = 0;
    // of all the ids loaded, those still kept are at most `max`
    for (let id = 100; id < 100 + 10 * max; id++) cache.get(id);
    expect(10 * max - loads.length).toBeLessThanOrEqual(max);
    // and the last max/2 loaded are all still there
    loads.length = 0;
    for (let id = 100 + 10 * max - max / 2; id < 100 + 10 * max; id++) cache.get(id);
    expect(loads).toEqual([]);
  });

  it('walks no Map at a load past its bound (a Map that drops its oldest steps over every entry it dropped before)', () => {
    const max = 1024;
    const { cache } = counted(max);
    for (let id = 0; id < max; id++) cache.get(id);
    const walks = ['keys', 'values', 'entries', 'forEach'].map((name) =>
      jest.spyOn(Map.prototype, name as 'keys'),
    );
    const iterate = jest.spyOn(Map.prototype, Symbol.iterator);
    try {
      for (let id = max; id < 4 * max; id++) cache.get(id);
      for (const walk of [...walks, iterate]) expect(walk).not.toHaveBeenCalled();
    } finally {
      for (const walk of [...walks, iterate]) walk.mockRestore();
    }
  });
});
