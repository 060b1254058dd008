/**
 * The contexts' lookup key: a 32-bit hash of a transaction or trace id, stored beside the id
 * (contexts.transaction_key, trace_key) and indexed in its place. An id is ~36 random characters,
 * its index entry ~45 bytes; a key's entry is ~12, so a batch of new contexts rewrites about a third
 * as many index pages at each commit (issue 46). A key only narrows: every lookup also compares the
 * full id on the row, so two ids on one key cost a row read more, never a wrong row.
 *
 * MurmurHash3 (x86, 32 bits) over the id's UTF-8 bytes, as a signed integer (SQLite stores it in 4
 * bytes), seeded with the store's own random seed (core/store/context-key-seed.ts): ids are chosen by
 * clients (x-request-id, traceparent), and with a public seed anyone could make thousands share one
 * key and slow every lookup of it. The agent's extension computes the same in C
 * (native/sqlite/kreplay_contexts.c, contextKey); test/unit/context-key.test.ts holds both to a fixed
 * list of ids.
 */

const C1 = 0xcc9e2d51;
const C2 = 0x1b873593;

const rotl = (x: number, r: number): number => (x << r) | (x >>> (32 - r));

/** The key of an id's UTF-8 bytes (as a bound string is stored) under a store's seed (an unsigned 32-bit integer). */
export function contextKeyOfBytes(bytes: Uint8Array, seed: number): number {
  const n = bytes.length;
  const blocks = n & ~3;
  let h = seed | 0;
  for (let i = 0; i < blocks; i += 4) {
    let k = bytes[i]! | (bytes[i + 1]! << 8) | (bytes[i + 2]! << 16) | (bytes[i + 3]! << 24);
    k = Math.imul(rotl(Math.imul(k, C1), 15), C2);
    h = Math.imul(rotl(h ^ k, 13), 5) + 0xe6546b64;
  }
  const tail = n & 3;
  if (tail > 0) {
    let k = bytes[blocks]!;
    if (tail > 1) k |= bytes[blocks + 1]! << 8;
    if (tail > 2) k |= bytes[blocks + 2]! << 16;
    h ^= Math.imul(rotl(Math.imul(k, C1), 15), C2);
  }
  h ^= n;
  h = Math.imul(h ^ (h >>> 16), 0x85ebca6b);
  h = Math.imul(h ^ (h >>> 13), 0xc2b2ae35);
  return (h ^ (h >>> 16)) | 0;
}

/** The key of a transaction or trace id in the store whose seed is `seed`. */
export function contextKey(id: string, seed: number): number {
  return contextKeyOfBytes(Buffer.from(id, 'utf8'), seed);
}
