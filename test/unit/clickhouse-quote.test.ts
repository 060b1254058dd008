/**
 * Every value reaches ClickHouse SQL through quoteString. Its literal is
 * decoded here the way ClickHouse's lexer reads a quoted string: the first
 * unescaped quote ends it. No input may end it early, put a non-ASCII or
 * control byte in the statement, or decode to anything but its own bytes.
 */
import fc from 'fast-check';
import { quoteInt, quoteString } from '../../core/clickhouse/quote';

/** Lexes one literal at the start of `sql`; returns its bytes and where it ended. */
function lexLiteral(sql: string): { bytes: Buffer; end: number } {
  expect(sql[0]).toBe("'");
  const out: number[] = [];
  for (let i = 1; i < sql.length; i++) {
    const c = sql[i]!;
    if (c === "'") return { bytes: Buffer.from(out), end: i + 1 };
    if (c === '\\') {
      const next = sql[i + 1]!;
      if (next === 'x') {
        out.push(parseInt(sql.slice(i + 2, i + 4), 16));
        i += 3;
      } else {
        out.push(next.charCodeAt(0));
        i += 1;
      }
      continue;
    }
    out.push(c.charCodeAt(0));
  }
  throw new Error('literal not closed');
}

function expectExact(input: Uint8Array): void {
  const literal = quoteString(input);
  expect(literal).toMatch(/^[\x20-\x7e]*$/);
  const statement = `SELECT ${literal} AS v FORMAT TSV`;
  const { bytes, end } = lexLiteral(statement.slice('SELECT '.length));
  expect(statement.slice('SELECT '.length + end)).toBe(' AS v FORMAT TSV');
  expect(bytes.equals(Buffer.from(input))).toBe(true);
}

describe('quoteString', () => {
  it('keeps any byte string inside its literal, exactly', () => {
    fc.assert(
      fc.property(fc.uint8Array({ maxLength: 512 }), (bytes) => expectExact(bytes)),
      { numRuns: 2000 },
    );
  });

  it('keeps any JS string (lone surrogates included) inside its literal as its UTF-8', () => {
    fc.assert(
      fc.property(fc.string({ unit: 'binary', maxLength: 256 }), (text) =>
        expectExact(Buffer.from(text, 'utf8')),
      ),
      { numRuns: 500 },
    );
  });

  it('resists strings built from the characters that end or escape a literal', () => {
    const hostile = fc.constantFrom(
      "'",
      '\\',
      '\0',
      '"',
      '`',
      '\n',
      '\r',
      ';',
      '--',
      '/*',
      '\xff',
      '\ud800',
      "\\'",
    );
    fc.assert(
      fc.property(fc.array(hostile, { maxLength: 64 }), (parts) =>
        expectExact(Buffer.from(parts.join(''), 'utf8')),
      ),
      { numRuns: 500 },
    );
  });

  it('handles invalid UTF-8 and a 1 MB value', () => {
    expectExact(Buffer.from([0xc3, 0x28, 0xa0, 0xa1, 0xe2, 0x28, 0xa1, 0xf0, 0x28, 0x8c, 0x28, 0x00]));
    const huge = Buffer.alloc(1 << 20, "'\\\0x");
    expectExact(huge);
  });

  it('passes printable ASCII through unchanged', () => {
    expect(quoteString('tx-1 abc')).toBe("'tx-1 abc'");
    expect(quoteString("it's")).toBe("'it\\x27s'");
  });
});

describe('quoteInt', () => {
  it('writes bigints and safe integers, refuses anything else', () => {
    expect(quoteInt(18446744073709551615n)).toBe('18446744073709551615');
    expect(quoteInt(-5)).toBe('-5');
    expect(() => quoteInt(1.5)).toThrow(RangeError);
    expect(() => quoteInt(Number.NaN)).toThrow(RangeError);
    expect(() => quoteInt(2 ** 60)).toThrow(RangeError);
  });
});
