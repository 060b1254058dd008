/**
 * HPACK header-block decoding (RFC 7541): the static table, one
 * connection's dynamic table, integers, literals, Huffman strings. One
 * decoder per connection direction; blocks must be fed in the order they
 * were sent, all of them: a decoder that misses one cannot know its table.
 */
import { HpackError } from './hpack-error';
import { decodeHuffman } from './huffman';

export type HeaderField = [name: string, value: string];

/* prettier-ignore */
const STATIC: HeaderField[] = [
  [':authority', ''], [':method', 'GET'], [':method', 'POST'], [':path', '/'], [':path', '/index.html'],
  [':scheme', 'http'], [':scheme', 'https'], [':status', '200'], [':status', '204'], [':status', '206'],
  [':status', '304'], [':status', '400'], [':status', '404'], [':status', '500'], ['accept-charset', ''],
  ['accept-encoding', 'gzip, deflate'], ['accept-language', ''], ['accept-ranges', ''], ['accept', ''],
  ['access-control-allow-origin', ''], ['age', ''], ['allow', ''], ['authorization', ''], ['cache-control', ''],
  ['content-disposition', ''], ['content-encoding', ''], ['content-language', ''], ['content-length', ''],
  ['content-location', ''], ['content-range', ''], ['content-type', ''], ['cookie', ''], ['date', ''], ['etag', ''],
  ['expect', ''], ['expires', ''], ['from', ''], ['host', ''], ['if-match', ''], ['if-modified-since', ''],
  ['if-none-match', ''], ['if-range', ''], ['if-unmodified-since', ''], ['last-modified', ''], ['link', ''],
  ['location', ''], ['max-forwards', ''], ['proxy-authenticate', ''], ['proxy-authorization', ''], ['range', ''],
  ['referer', ''], ['refresh', ''], ['retry-after', ''], ['server', ''], ['set-cookie', ''],
  ['strict-transport-security', ''], ['transfer-encoding', ''], ['user-agent', ''], ['vary', ''], ['via', ''],
  ['www-authenticate', ''],
];

/** RFC 7541 4.1: an entry's size is its name and value octets plus 32. */
const entrySize = ([name, value]: HeaderField) => Buffer.byteLength(name) + Buffer.byteLength(value) + 32;

/** SETTINGS_HEADER_TABLE_SIZE's default, and the most a peer may announce before SETTINGS says otherwise. */
export const DEFAULT_TABLE_SIZE = 4096;

export class HpackDecoder {
  /** newest first: index 62 is dynamic[0] */
  private readonly dynamic: HeaderField[] = [];
  private size = 0;
  private maxSize: number;

  /** limit: the SETTINGS_HEADER_TABLE_SIZE the decoding side announced */
  constructor(private readonly limit = DEFAULT_TABLE_SIZE) {
    this.maxSize = limit;
  }

  /** The header list of one complete block (HEADERS plus its CONTINUATIONs); throws HpackError. */
  decode(block: Uint8Array): HeaderField[] {
    const out: HeaderField[] = [];
    const r = { pos: 0 };
    while (r.pos < block.length) {
      const b = block[r.pos]!;
      if (b & 0x80) {
        out.push(this.field(integer(block, r, 7)));
      } else if (b & 0x40) {
        const field = this.literal(block, r, 6);
        this.insert(field);
        out.push(field);
      } else if (b & 0x20) {
        if (out.length) throw new HpackError('a table size update follows a header field');
        const size = integer(block, r, 5);
        if (size > this.limit) throw new HpackError(`a table size update to ${size} exceeds ${this.limit}`);
        this.maxSize = size;
        this.evict(0);
      } else {
        // without indexing (0000) or never indexed (0001): the table is unchanged
        out.push(this.literal(block, r, 4));
      }
    }
    return out;
  }

  /** Entries in the dynamic table, newest first (for tests and diagnostics). */
  entries(): readonly HeaderField[] {
    return this.dynamic;
  }

  private field(index: number): HeaderField {
    if (index === 0) throw new HpackError('header index 0');
    if (index <= STATIC.length) return STATIC[index - 1]!;
    const entry = this.dynamic[index - STATIC.length - 1];
    if (!entry)
      throw new HpackError(`header index ${index} is past the dynamic table (${this.dynamic.length})`);
    return entry;
  }

  private literal(block: Uint8Array, r: { pos: number }, prefix: number): HeaderField {
    const index = integer(block, r, prefix);
    const name = index === 0 ? string(block, r) : this.field(index)[0];
    return [name, string(block, r)];
  }

  private insert(field: HeaderField): void {
    const size = entrySize(field);
    this.evict(size);
    // RFC 7541 4.4: an entry larger than the table empties it and is not added
    if (size > this.maxSize) return;
    this.dynamic.unshift(field);
    this.size += size;
  }

  /** Evicts the oldest entries until `room` more octets fit. */
  private evict(room: number): void {
    while (this.dynamic.length && this.size + room > this.maxSize)
      this.size -= entrySize(this.dynamic.pop()!);
  }
}

/** RFC 7541 5.1: an integer with an N-bit prefix. */
function integer(block: Uint8Array, r: { pos: number }, prefix: number): number {
  if (r.pos >= block.length) throw new HpackError('a header block ends inside an integer');
  const max = (1 << prefix) - 1;
  let value = block[r.pos++]! & max;
  if (value < max) return value;
  for (let shift = 0; ; shift += 7) {
    if (r.pos >= block.length) throw new HpackError('a header block ends inside an integer');
    if (shift > 28) throw new HpackError('an integer is too large');
    const b = block[r.pos++]!;
    value += (b & 0x7f) * 2 ** shift;
    if (!(b & 0x80)) return value;
  }
}

/** RFC 7541 5.2: a string literal, Huffman-coded or raw. */
function string(block: Uint8Array, r: { pos: number }): string {
  if (r.pos >= block.length) throw new HpackError('a header block ends before a string');
  const huffman = (block[r.pos]! & 0x80) !== 0;
  const len = integer(block, r, 7);
  if (r.pos + len > block.length) throw new HpackError('a string runs past the header block');
  const raw = block.subarray(r.pos, r.pos + len);
  r.pos += len;
  return (huffman ? decodeHuffman(raw) : Buffer.from(raw)).toString('latin1');
}
