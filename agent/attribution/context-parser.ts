/**
 * Parses what a thread wrote to set its context: a `KREPLAY-CTX` marker or
 * an HTTP/1.x head with a W3C `traceparent`. Pure functions over the bytes
 * the kernel copied; the kernel does no validation.
 */
export const MARKER_PREFIX = 'KREPLAY-CTX';
/** What a transaction or trace id in a marker may hold; `kreplay run` checks its flags against it too. */
export const CONTEXT_VALUE = /^[A-Za-z0-9._:/@-]{1,128}$/;
export const CONTEXT_VALUE_RULE = '1..128 characters of [A-Za-z0-9._:/@-]';
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

const TRACEPARENT = /^([0-9a-f]{2})-([0-9a-f]{32})-([0-9a-f]{16})-([0-9a-f]{2})$/;
const START_LINE = /^(?:[A-Z]+ \S+ HTTP\/1\.[01]|HTTP\/1\.[01] \d{3}(?: .*)?)$/;

/** Whether String.prototype.trim removes the UTF-16 code unit `c` (ECMAScript WhiteSpace and LineTerminator). */
function trimmed(c: number): boolean {
  if (c <= 0x20) return c === 0x20 || (c >= 0x09 && c <= 0x0d);
  if (c < 0xa0) return false;
  return (
    c === 0xa0 ||
    c === 0x1680 ||
    (c >= 0x2000 && c <= 0x200a) ||
    c === 0x2028 ||
    c === 0x2029 ||
    c === 0x202f ||
    c === 0x205f ||
    c === 0x3000 ||
    c === 0xfeff
  );
}

/**
 * Whether data[from, to), trimmed, is `name` (lower-case ASCII) in any case. No code unit outside
 * ASCII lower-cases to one of these names' letters, so this is `slice().trim().toLowerCase() === name`.
 */
function isHeaderName(data: string, from: number, to: number, name: string): boolean {
  while (from < to && trimmed(data.charCodeAt(from))) from++;
  while (to > from && trimmed(data.charCodeAt(to - 1))) to--;
  if (to - from !== name.length) return false;
  for (let i = 0; i < name.length; i++) {
    const c = data.charCodeAt(from + i);
    if ((c >= 0x41 && c <= 0x5a ? c + 0x20 : c) !== name.charCodeAt(i)) return false;
  }
  return true;
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
 */
export function parseHttpHead(data: string): TraceContext | null {
  let end = data.indexOf('\r\n\r\n');
  if (end === -1) end = data.length;
  let newline = data.indexOf('\n');
  if (newline === -1 || newline > end) newline = end;
  const first = data.slice(0, newline < end && data.charCodeAt(newline - 1) === 0x0d ? newline - 1 : newline);
  if (!START_LINE.test(first)) return null;
  let traceparent: string | null = null;
  let requestId: string | null = null;
  for (let from = newline + 1; from <= end && (traceparent === null || requestId === null);) {
    let next = data.indexOf('\n', from);
    if (next === -1 || next > end) next = end;
    // a line ends before its newline's \r; the head's last line (no newline) keeps a \r it ends with
    const to = next < end && next > from && data.charCodeAt(next - 1) === 0x0d ? next - 1 : next;
    const colon = data.indexOf(':', from);
    if (colon > from && colon < to) {
      if (traceparent === null && isHeaderName(data, from, colon, 'traceparent'))
        traceparent = data.slice(colon + 1, to).trim();
      else if (requestId === null && isHeaderName(data, from, colon, 'x-request-id'))
        requestId = data.slice(colon + 1, to).trim();
    }
    from = next + 1;
  }
  const transactionId = requestId !== null && CONTEXT_VALUE.test(requestId) ? requestId : null;
  const m = traceparent === null ? null : TRACEPARENT.exec(traceparent);
  const [, version, traceId, spanId, flags] = m ?? [];
  // W3C: version ff and all-zero ids are invalid; version 00 has exactly these four fields.
  if (!m || version === 'ff' || /^0+$/.test(traceId!) || /^0+$/.test(spanId!))
    return transactionId === null ? null : { traceId: null, transactionId };
  return {
    traceId: traceId!,
    transactionId: transactionId ?? traceId!,
    parentSpanId: spanId!,
    traceFlags: parseInt(flags!, 16),
  };
}

/**
 * Whether a request head read is followed, in the same read, by bytes that are not its body: a
 * pipelined request. Its connection then serves two requests at once, so the kernel's context
 * (the first head's) cannot name the one each later call is for. The body is framed by
 * content-length; a chunked body is not followed to its end (unknown, taken as a body).
 */
export function followedByAnotherRequest(data: string): boolean {
  const end = data.indexOf('\r\n\r\n');
  // nothing after the head: no body, nor another request (whatever its content-length says)
  if (end === -1 || data.length <= end + 4) return false;
  const head = data.slice(0, end).toLowerCase();
  if (/\r\ntransfer-encoding:/.test(head)) return false;
  const length = /\r\ncontent-length:[ \t]*(\d+)/.exec(head);
  return data.length > end + 4 + (length ? Number(length[1]) : 0);
}
