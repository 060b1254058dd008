import { decodeCursor, encodeCursor, filterHash, type CursorState } from '../../daemon/events/events-cursor';
import { formatEventId } from '../../core/model';
import { InvalidValue } from '../../daemon/http/query-values';

const state: CursorState = {
  order: 'asc',
  after: { ts: 1795339800123456789n, eventId: formatEventId('a1b2c3d4e5f6', 1795339800123456789n, 255) },
  filterHash: filterHash({ service: 'api', fromNs: 5n }),
};

describe('events cursor', () => {
  it('round-trips position, order and filter hash as base64url', () => {
    const text = encodeCursor(state);
    expect(text).toMatch(/^[A-Za-z0-9_-]+$/);
    expect(decodeCursor(text)).toEqual(state);
    expect(decodeCursor(encodeCursor({ ...state, order: 'desc' })).order).toBe('desc');
  });

  it('rejects every single-character edit, truncation and extension', () => {
    const text = encodeCursor(state);
    const alphabet = 'ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789-_';
    for (let i = 0; i < text.length; i++) {
      const swapped = alphabet[(alphabet.indexOf(text[i]!) + 17) % 64]!;
      const edited = text.slice(0, i) + swapped + text.slice(i + 1);
      expect(() => decodeCursor(edited)).toThrow(InvalidValue);
    }
    for (const bad of [
      text.slice(0, -1),
      text + 'A',
      text + '=',
      '',
      '====',
      `${text.slice(0, 10)}.${text.slice(11)}`,
    ])
      expect(() => decodeCursor(bad)).toThrow(/malformed/);
  });

  it('hashes filters canonically: type order and repeats do not matter, every field does', () => {
    expect(filterHash({ types: ['block_io', 'sys_write'] })).toBe(
      filterHash({ types: ['sys_write', 'block_io'] }),
    );
    expect(filterHash({ types: ['sys_write', 'sys_write'] })).toBe(filterHash({ types: ['sys_write'] }));
    const variants = [
      {},
      { transactionId: 'a' },
      { traceId: 'a' },
      { service: 'a' },
      { node: 'a' },
      { types: ['sys_write' as const] },
      { fromNs: 1n },
      { toNs: 1n },
      { minDurationNs: 1n },
    ];
    expect(new Set(variants.map(filterHash)).size).toBe(variants.length);
  });
});
