/**
 * Parses what a thread wrote to set its context: a `KREPLAY-CTX` marker or
 * an HTTP/1.x head with a W3C `traceparent`. Pure functions over the bytes
 * the kernel copied; the kernel does no validation.
 */
export const MARKER_PREFIX = 'KREPLAY-CTX';
const CONTEXT_VALUE_CHARACTER = '[A-Za-z0-9._:/@-]';
const CONTEXT_VALUE_MAX = 128;
/** What a transaction or trace id in a marker may hold; `kreplay run` checks its flags against it too. */
export const CONTEXT_VALUE = new RegExp(`^${CONTEXT_VALUE_CHARACTER}{1,${CONTEXT_VALUE_MAX}}$`);
export const CONTEXT_VALUE_RULE = `1..${CONTEXT_VALUE_MAX} characters of ${CONTEXT_VALUE_CHARACTER}`;
/* CONTEXT_VALUE's characters, by latin1 byte: a head's x-request-id is checked in place, its string made only when valid */
const CONTEXT_VALUE_BYTES = Uint8Array.from({ length: 256 }, (_, c) =>
  new RegExp(CONTEXT_VALUE_CHARACTER).test(String.fromCharCode(c)) ? 1 : 0,
);
const MARKER_KEYS = { txn: 'transactionId', trace: 'traceId' } as const;

export interface TraceContext {
  transactionId: string | null;
  traceId: string | null;
  /** a W3C traceparent's parent-id: the span the kernel's events of this context are children of */
  parentSpanId?: string;
  /** a W3C traceparent's trace-flags byte (bit 0: sampled) */
  traceFlags?: number;
}

export type MarkerParse =
  { kind: 'set'; context: TraceContext } | { kind: 'clear' } | { kind: 'malformed'; reason: string };

/** `KREPLAY-CTX [txn=V] [trace=V]` on the first line of the write. */
export function parseMarker(data: string): MarkerParse {
  const newline = data.indexOf('\n');
  const line = (newline === -1 ? data : data.slice(0, newline)).replace(/\r$/, '');
  if (!line.startsWith(MARKER_PREFIX))
    return { kind: 'malformed', reason: 'does not start with KREPLAY-CTX' };
  const rest = line.slice(MARKER_PREFIX.length);
  if (rest !== '' && !/^[ \t]/.test(rest))
    return { kind: 'malformed', reason: 'KREPLAY-CTX must be followed by a space' };
  const fields = rest.split(/[ \t]+/).filter((f) => f !== '');
  if (fields.length === 0) return { kind: 'clear' };
  const context: TraceContext = { transactionId: null, traceId: null };
  for (const field of fields) {
    const eq = field.indexOf('=');
    const key = eq === -1 ? field : field.slice(0, eq);
    const target = MARKER_KEYS[key as keyof typeof MARKER_KEYS];
    if (!target)
      return { kind: 'malformed', reason: `unknown field "${key.slice(0, 32)}" (use txn= and trace=)` };
    if (context[target] !== null) return { kind: 'malformed', reason: `field ${key} given twice` };
    const value = eq === -1 ? '' : field.slice(eq + 1);
    if (!CONTEXT_VALUE.test(value)) {
      return { kind: 'malformed', reason: `${key} value must be ${CONTEXT_VALUE_RULE}` };
    }
    context[target] = value;
  }
  return { kind: 'set', context };
}

const CR = 0x0d;
const LF = 0x0a;
const COLON = 0x3a;
const DASH = 0x2d;
const SPACE = 0x20;
const HTTP_1 = 'HTTP/1.';

/*
 * A context record's bytes, read in place: the kernel's copy of a head, latin1 (one byte is one
 * UTF-16 code unit, what the record's string once was). Only the values kept become strings, each
 * its own: a slice of the whole head would keep the head alive as long as the context (issue 46).
 */

function indexOfByte(b: Uint8Array, byte: number, from: number, to: number): number {
  for (let i = from; i < to; i++) if (b[i] === byte) return i;
  return -1;
}

/** Where a head's blank line (its `\r\n\r\n`) starts, -1 when the bytes hold none. */
export function headEnd(b: Uint8Array): number {
  for (let i = 0; i + 3 < b.length;) {
    const c = b[i + 3];
    // every byte of the four is a CR or LF: a match starts past i + 3 unless this one is
    if (c !== CR && c !== LF) i += 4;
    else if (b[i] === CR && b[i + 1] === LF && b[i + 2] === CR && c === LF) return i;
    else i++;
  }
  return -1;
}

/** Whether String.prototype.trim removes the latin1 character `c` (ECMAScript WhiteSpace and LineTerminator). */
function trimmed(c: number): boolean {
  return c === 0x20 || (c >= 0x09 && c <= 0x0d) || c === 0xa0;
}

/* The first of b[from, to) that trim keeps (to when none). */
function trimStart(b: Uint8Array, from: number, to: number): number {
  while (from < to && trimmed(b[from]!)) from++;
  return from;
}

/* The end of b[from, to) once trim removed its trailing characters. */
function trimEnd(b: Uint8Array, from: number, to: number): number {
  while (to > from && trimmed(b[to - 1]!)) to--;
  return to;
}

/**
 * Whether b[from, to), trimmed, is `name` (lower-case ASCII) in any case. No latin1 character
 * outside ASCII lower-cases to one of these names' letters, so this is
 * `slice().trim().toLowerCase() === name`.
 */
function isHeaderName(b: Uint8Array, from: number, to: number, name: string): boolean {
  from = trimStart(b, from, to);
  to = trimEnd(b, from, to);
  if (to - from !== name.length) return false;
  for (let i = 0; i < name.length; i++) {
    const c = b[from + i]!;
    if ((c >= 0x41 && c <= 0x5a ? c + 0x20 : c) !== name.charCodeAt(i)) return false;
  }
  return true;
}

/** b[from, to) trimmed, as its own string when CONTEXT_VALUE holds it (latin1), else null. */
function contextValue(b: Buffer, from: number, to: number): string | null {
  from = trimStart(b, from, to);
  to = trimEnd(b, from, to);
  if (to === from || to - from > CONTEXT_VALUE_MAX) return null;
  for (let i = from; i < to; i++) if (CONTEXT_VALUE_BYTES[b[i]!] === 0) return null;
  return b.toString('latin1', from, to);
}

/* A lower-case hex digit's value by byte, -1 for any other byte: a table, read ~50 times a traceparent */
const HEX_DIGITS = Int8Array.from({ length: 256 }, (_, c) =>
  c >= 0x30 && c <= 0x39 ? c - 0x30 : c >= 0x61 && c <= 0x66 ? c - 0x57 : -1,
);

/* Whether b[from, to) is lower-case hex, and (nonZero) not all zeros. */
function isHex(b: Uint8Array, from: number, to: number, nonZero: boolean): boolean {
  let digits = 0;
  for (let i = from; i < to; i++) {
    const d = HEX_DIGITS[b[i]!]!;
    if (d === -1) return false;
    digits |= d;
  }
  return !nonZero || digits !== 0;
}

/* Whether b[from, from + text.length) is `text` (ASCII). */
export function bytesAre(b: Uint8Array, from: number, text: string): boolean {
  for (let i = 0; i < text.length; i++) if (b[from + i] !== text.charCodeAt(i)) return false;
  return true;
}

/* Whether b[at, at + 8) is `HTTP/1.0` or `HTTP/1.1`. */
function isHttp1(b: Uint8Array, at: number): boolean {
  return bytesAre(b, at, HTTP_1) && (b[at + 7] === 0x30 || b[at + 7] === 0x31);
}

const isDigit = (c: number | undefined): boolean => c !== undefined && c >= 0x30 && c <= 0x39;

/**
 * Whether b[0, to) is an HTTP/1.x start line: `METHOD TARGET HTTP/1.x` (METHOD upper-case letters,
 * TARGET no white space) or `HTTP/1.x NNN[ REASON]` (REASON no CR). Read in place: no string of the
 * line (two a request, on the agent's hot path).
 */
export function isStartLine(b: Uint8Array, to: number): boolean {
  if (isHttp1(b, 0)) {
    if (to < 12 || b[8] !== SPACE || !isDigit(b[9]) || !isDigit(b[10]) || !isDigit(b[11])) return false;
    if (to === 12) return true;
    return b[12] === SPACE && indexOfByte(b, CR, 13, to) === -1;
  }
  let method = 0;
  while (method < to && b[method]! >= 0x41 && b[method]! <= 0x5a) method++;
  // the target: one character at least, between the method's space and the version's
  const version = to - 9;
  if (method === 0 || version < method + 2 || b[method] !== SPACE || b[version] !== SPACE) return false;
  if (!isHttp1(b, version + 1)) return false;
  for (let i = method + 1; i < version; i++) if (trimmed(b[i]!)) return false;
  return true;
}

const TRACEPARENT_BYTES = 55;

/**
 * Where a W3C traceparent starts in b[from, to) trimmed, -1 when there is none:
 * `VV-TRACE32-SPAN16-FF`, lower-case hex. Version ff and all-zero ids are invalid; version 00 has
 * exactly these four fields. Its ids become strings only once it is known valid.
 */
function traceparentAt(b: Uint8Array, from: number, to: number): number {
  from = trimStart(b, from, to);
  to = trimEnd(b, from, to);
  if (to - from !== TRACEPARENT_BYTES) return -1;
  const s = from;
  if (b[s + 2] !== DASH || b[s + 35] !== DASH || b[s + 52] !== DASH) return -1;
  if (!isHex(b, s, s + 2, false) || (b[s] === 0x66 && b[s + 1] === 0x66)) return -1;
  if (!isHex(b, s + 3, s + 35, true) || !isHex(b, s + 36, s + 52, true) || !isHex(b, s + 53, s + 55, false))
    return -1;
  return s;
}

/**
 * The context an HTTP/1.x head carries: trace_id from a valid traceparent,
 * transaction_id from x-request-id (when a valid value) else the trace id,
 * and the traceparent's parent-id and flags (what an OTLP export needs); a
 * head with an x-request-id and no valid traceparent is that transaction,
 * without a trace. Null when it is not a head or carries neither.
 *
 * The head is its lines up to the first blank one (`\n` or `\r\n` apart); a header line is a
 * name (trimmed, any case) before its first colon and a value (trimmed) after it, the first of
 * each name counting. Read in place, line by line: each context record is one, on the agent's hot path.
 * `blankLine` is headEnd(b), for a caller that has it.
 */
export function parseHttpHead(b: Buffer, blankLine = headEnd(b)): TraceContext | null {
  const end = blankLine === -1 ? b.length : blankLine;
  let newline = indexOfByte(b, LF, 0, end);
  if (newline === -1) newline = end;
  if (!isStartLine(b, newline < end && b[newline - 1] === CR ? newline - 1 : newline)) return null;
  let traceparentFrom = -1;
  let traceparentTo = -1;
  // the first x-request-id line's value, as offsets: its string is made once it is known valid
  let requestIdFrom = -1;
  let requestIdTo = -1;
  for (let from = newline + 1; from <= end && (traceparentFrom === -1 || requestIdFrom === -1);) {
    let next = indexOfByte(b, LF, from, end);
    if (next === -1) next = end;
    // a line ends before its newline's \r; the head's last line (no newline) keeps a \r it ends with
    const to = next < end && next > from && b[next - 1] === CR ? next - 1 : next;
    const colon = indexOfByte(b, COLON, from, to);
    if (colon > from) {
      if (traceparentFrom === -1 && isHeaderName(b, from, colon, 'traceparent')) {
        traceparentFrom = colon + 1;
        traceparentTo = to;
      } else if (requestIdFrom === -1 && isHeaderName(b, from, colon, 'x-request-id')) {
        requestIdFrom = colon + 1;
        requestIdTo = to;
      }
    }
    from = next + 1;
  }
  const transactionId = requestIdFrom === -1 ? null : contextValue(b, requestIdFrom, requestIdTo);
  const s = traceparentFrom === -1 ? -1 : traceparentAt(b, traceparentFrom, traceparentTo);
  if (s === -1) return transactionId === null ? null : { traceId: null, transactionId };
  const traceId = b.toString('latin1', s + 3, s + 35);
  return {
    traceId,
    transactionId: transactionId ?? traceId,
    parentSpanId: b.toString('latin1', s + 36, s + 52),
    traceFlags: HEX_DIGITS[b[s + 53]!]! * 16 + HEX_DIGITS[b[s + 54]!]!,
  };
}

/**
 * Whether a request head read is followed, in the same read, by bytes that are not its body: a
 * pipelined request. Its connection then serves two requests at once, so the kernel's context
 * (the first head's) cannot name the one each later call is for. The body is framed by
 * content-length; a chunked body is not followed to its end (unknown, taken as a body).
 */
export function followedByAnotherRequest(b: Buffer, end = headEnd(b)): boolean {
  // nothing after the head: no body, nor another request (whatever its content-length says)
  if (end === -1 || b.length <= end + 4) return false;
  const head = b.toString('latin1', 0, end).toLowerCase();
  if (/\r\ntransfer-encoding:/.test(head)) return false;
  const length = /\r\ncontent-length:[ \t]*(\d+)/.exec(head);
  return b.length > end + 4 + (length ? Number(length[1]) : 0);
}
