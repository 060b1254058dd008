/**
 * The one way a value reaches ClickHouse SQL. Server-side parameters came
 * after 18.16 (its HTTP interface rejects param_* as an unknown setting), so
 * values are written as literals, and only through these functions.
 *
 * A string literal is built from the value's bytes: every byte outside
 * printable ASCII, and the quote and backslash, becomes a \xHH escape, so the
 * literal is plain ASCII with no quote before its closing one, whatever the
 * input holds (NUL, invalid UTF-8, lone surrogates written as bytes, megabytes).
 */

const HEX = Array.from({ length: 256 }, (_, b) => '\\x' + b.toString(16).padStart(2, '0'));

/** A ClickHouse string literal holding exactly `value`'s bytes (a string is taken as UTF-8). */
export function quoteString(value: string | Uint8Array): string {
  const bytes = typeof value === 'string' ? Buffer.from(value, 'utf8') : value;
  const parts: string[] = ["'"];
  let run = 0;
  let runStart = 0;
  const flush = (end: number): void => {
    if (run) parts.push(Buffer.from(bytes.subarray(runStart, end)).toString('latin1'));
    run = 0;
  };
  for (let i = 0; i < bytes.length; i++) {
    const b = bytes[i]!;
    if (b >= 0x20 && b < 0x7f && b !== 0x27 && b !== 0x5c) {
      if (!run) runStart = i;
      run++;
    } else {
      flush(i);
      parts.push(HEX[b]!);
    }
  }
  flush(bytes.length);
  parts.push("'");
  return parts.join('');
}

/** An integer literal; throws on anything that is not a safe integer or a bigint. */
export function quoteInt(value: bigint | number): string {
  if (typeof value === 'bigint') return value.toString();
  if (!Number.isSafeInteger(value)) throw new RangeError(`not an integer: ${value}`);
  return String(value);
}
