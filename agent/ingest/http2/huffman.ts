/**
 * HPACK's Huffman code (RFC 7541 Appendix B). The code is canonical, so
 * the bit lengths of the 256 octets and EOS define it: codes are handed out
 * in order of length, then symbol.
 */
import { HpackError } from './hpack-error';

/* prettier-ignore */
const LENGTHS = [
  13, 23, 28, 28, 28, 28, 28, 28, 28, 24, 30, 28, 28, 30, 28, 28, 28, 28, 28, 28, 28, 28, 30, 28, 28, 28, 28, 28, 28, 28, 28, 28,
  6, 10, 10, 12, 13, 6, 8, 11, 10, 10, 8, 11, 8, 6, 6, 6, 5, 5, 5, 6, 6, 6, 6, 6, 6, 6, 7, 8, 15, 6, 12, 10,
  13, 6, 7, 7, 7, 7, 7, 7, 7, 7, 7, 7, 7, 7, 7, 7, 7, 7, 7, 7, 7, 7, 7, 7, 8, 7, 8, 13, 19, 13, 14, 6,
  15, 5, 6, 5, 6, 5, 6, 6, 6, 5, 7, 7, 6, 6, 6, 5, 6, 7, 6, 5, 5, 6, 7, 7, 7, 7, 7, 15, 11, 14, 13, 28,
  20, 22, 20, 20, 22, 22, 22, 23, 22, 23, 23, 23, 23, 23, 24, 23, 24, 24, 22, 23, 24, 23, 23, 23, 23, 21, 22, 23, 22, 23, 23, 24,
  22, 21, 20, 22, 22, 23, 23, 21, 23, 22, 22, 24, 21, 22, 23, 23, 21, 21, 22, 21, 23, 22, 23, 23, 20, 22, 22, 22, 23, 22, 22, 23,
  26, 26, 20, 19, 22, 23, 22, 25, 26, 26, 26, 27, 27, 26, 24, 25, 19, 21, 26, 27, 27, 26, 27, 24, 21, 21, 26, 26, 28, 27, 27, 27,
  20, 24, 20, 21, 22, 21, 21, 23, 22, 22, 25, 25, 24, 24, 26, 23, 26, 27, 26, 26, 27, 27, 27, 27, 27, 28, 27, 27, 27, 27, 27, 26,
  30, // EOS
];
const EOS = 256;

/** Symbols by (length, code): the decoding table of a canonical code. */
function buildCodes(): Map<number, number>[] {
  const byLength: Map<number, number>[] = Array.from({ length: 31 }, () => new Map());
  const order = LENGTHS.map((len, sym) => ({ len, sym })).sort((a, b) => a.len - b.len || a.sym - b.sym);
  let code = 0;
  let prev = order[0]!.len;
  for (const { len, sym } of order) {
    code <<= len - prev;
    prev = len;
    byLength[len]!.set(code, sym);
    code++;
  }
  return byLength;
}

const CODES = buildCodes();

/** The code of a symbol, for tests and encoders: [code, bit length]. */
export function huffmanCode(sym: number): [number, number] {
  const len = LENGTHS[sym]!;
  for (const [code, s] of CODES[len]!) if (s === sym) return [code, len];
  throw new RangeError(`no Huffman code for ${sym}`);
}

/**
 * Decodes a Huffman-coded string literal. Padding must be the most
 * significant bits of EOS and shorter than 8 bits; EOS itself is an error.
 */
export function decodeHuffman(bytes: Uint8Array): Buffer {
  const out: number[] = [];
  let code = 0;
  let len = 0;
  for (const byte of bytes) {
    for (let bit = 7; bit >= 0; bit--) {
      code = (code << 1) | ((byte >> bit) & 1);
      len++;
      const sym = len >= 5 ? CODES[len]!.get(code) : undefined;
      if (sym === undefined) {
        if (len > 30) throw new HpackError('a Huffman code is longer than 30 bits');
        continue;
      }
      if (sym === EOS) throw new HpackError('a Huffman string holds EOS');
      out.push(sym);
      code = 0;
      len = 0;
    }
  }
  if (len > 7 || code !== (1 << len) - 1) throw new HpackError('a Huffman string has invalid padding');
  return Buffer.from(out);
}
