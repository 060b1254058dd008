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

/**
 * The context an HTTP/1.x head carries: trace_id from a valid traceparent,
 * transaction_id from x-request-id (when a valid value) else the trace id,
 * and the traceparent's parent-id and flags (what an OTLP export needs); a
 * head with an x-request-id and no valid traceparent is that transaction,
 * without a trace. Null when it is not a head or carries neither.
 */
export function parseHttpHead(data: string): TraceContext | null {
  const end = data.indexOf('\r\n\r\n');
  const lines = (end === -1 ? data : data.slice(0, end)).split(/\r?\n/);
  if (!START_LINE.test(lines[0] ?? '')) return null;
  let traceparent: string | null = null;
  let requestId: string | null = null;
  for (let i = 1; i < lines.length; i++) {
    const colon = lines[i]!.indexOf(':');
    if (colon <= 0) continue;
    const name = lines[i]!.slice(0, colon).trim().toLowerCase();
    const value = lines[i]!.slice(colon + 1).trim();
    if (name === 'traceparent' && traceparent === null) traceparent = value;
    else if (name === 'x-request-id' && requestId === null) requestId = value;
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
  if (end === -1) return false;
  const head = data.slice(0, end).toLowerCase();
  if (/\r\ntransfer-encoding:/.test(head)) return false;
  const length = /\r\ncontent-length:[ \t]*(\d+)/.exec(head);
  return data.length > end + 4 + (length ? Number(length[1]) : 0);
}
