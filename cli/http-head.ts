/**
 * An HTTP/1.x response head read from a socket's bytes, and how its body is
 * framed (RFC 9112 §6.3), for a client that reads the socket itself
 * (cli/replay-stream.ts). Strict where a lax reading could print a wrong
 * byte: a head or a framing it cannot be sure of is an error naming it,
 * never a guess.
 */
import { KreplayError } from '../core/errors';

export interface ResponseHead {
  status: number;
  /** by lower-case name, each value as sent, in order */
  headers: Map<string, string[]>;
}

/** Body bytes up to the connection's end, or a length, or chunks (Transfer-Encoding: chunked). */
export type BodyFraming = { kind: 'close' } | { kind: 'length'; length: number } | { kind: 'chunked' };

/** A response kreplay does not read as HTTP (or not safely): never retried, it is an answer. */
export class HttpProtocolError extends KreplayError {
  constructor(detail: string) {
    super('E_HTTP_PROTOCOL', `the server's answer cannot be read: ${detail}`);
  }
}

/** larger than any head the daemon (or a proxy before it) sends */
export const MAX_HEAD_BYTES = 64 << 10;
const HEAD_END = Buffer.from('\r\n\r\n');
const STATUS_LINE = /^HTTP\/1\.[01] ([1-9]\d\d)(?: [^\r\n]*)?$/;
const TOKEN = /^[!#$%&'*+\-.^_`|~0-9A-Za-z]+$/;
// a value: visible characters, spaces and tabs, and obs-text (latin1 0x80-0xff)
const VALUE = /^[\t\x20-\x7e\x80-\xff]*$/;

function parseHead(text: string): ResponseHead {
  const lines = text.split('\r\n');
  const status = STATUS_LINE.exec(lines[0]!);
  if (!status)
    throw new HttpProtocolError(`not an HTTP/1.x status line: ${JSON.stringify(lines[0]!.slice(0, 80))}`);
  const headers = new Map<string, string[]>();
  for (const line of lines.slice(1)) {
    const colon = line.indexOf(':');
    const name = line.slice(0, Math.max(colon, 0));
    // a folded line (obsolete) or a name with a space before its colon is refused, as llhttp does
    if (colon <= 0 || !TOKEN.test(name))
      throw new HttpProtocolError(`a bad header line: ${JSON.stringify(line.slice(0, 80))}`);
    const value = line.slice(colon + 1).trim();
    if (!VALUE.test(value)) throw new HttpProtocolError(`header ${name} holds a control character`);
    const key = name.toLowerCase();
    const values = headers.get(key);
    if (values) values.push(value);
    else headers.set(key, [value]);
  }
  return { status: Number(status[1]), headers };
}

/**
 * Reads a response's head as its bytes come: the final head (interim 1xx
 * answers skipped, as node:http does) and the bytes after it.
 */
export class HeadReader {
  private held: Buffer | null = null;

  /** The head `bytes` completes and what follows it in them; null while it has not ended. */
  push(bytes: Buffer): { head: ResponseHead; rest: Buffer } | null {
    let all = this.held ? Buffer.concat([this.held, bytes]) : bytes;
    for (;;) {
      const end = all.indexOf(HEAD_END);
      if (end === -1) {
        if (all.length > MAX_HEAD_BYTES)
          throw new HttpProtocolError(`a head of over ${MAX_HEAD_BYTES} bytes`);
        // a copy: the socket's buffer is written over by its next read
        this.held = Buffer.from(all);
        return null;
      }
      if (end > MAX_HEAD_BYTES) throw new HttpProtocolError(`a head of over ${MAX_HEAD_BYTES} bytes`);
      const head = parseHead(all.toString('latin1', 0, end));
      all = all.subarray(end + HEAD_END.length);
      if (head.status === 101) throw new HttpProtocolError('the server switched protocols (101)');
      if (head.status >= 200) {
        this.held = null;
        return { head, rest: all };
      }
    }
  }
}

/** The comma-separated list of a header's values, lower-case (empty when absent). */
function listOf(head: ResponseHead, name: string): string[] {
  return (head.headers.get(name) ?? [])
    .flatMap((value) => value.split(','))
    .map((item) => item.trim().toLowerCase())
    .filter((item) => item !== '');
}

/**
 * How the body of a response to a GET is framed. Refused: a transfer coding
 * other than chunked alone, a Content-Length beside Transfer-Encoding (a
 * smuggling shape) or differing lengths, a content coding (kreplay asks for
 * none and would print compressed bytes).
 */
export function bodyFraming(head: ResponseHead): BodyFraming {
  if (head.status === 204 || head.status === 304) return { kind: 'length', length: 0 };
  const coding = listOf(head, 'content-encoding').filter((c) => c !== 'identity');
  if (coding.length > 0)
    throw new HttpProtocolError(`a body encoded ${coding.join(', ')}, which kreplay does not decode`);
  const transfer = head.headers.has('transfer-encoding') ? listOf(head, 'transfer-encoding') : null;
  const lengths = head.headers.has('content-length') ? listOf(head, 'content-length') : null;
  if (transfer && lengths) throw new HttpProtocolError('both Transfer-Encoding and Content-Length');
  if (transfer) {
    if (transfer.length !== 1 || transfer[0] !== 'chunked')
      throw new HttpProtocolError(
        `Transfer-Encoding ${transfer.join(', ')}, of which kreplay reads chunked alone`,
      );
    return { kind: 'chunked' };
  }
  if (lengths) {
    const length = Number(lengths[0]);
    if (!lengths.every((l) => /^\d{1,15}$/.test(l) && Number(l) === length))
      throw new HttpProtocolError(
        `Content-Length ${JSON.stringify(head.headers.get('content-length')!.join(', '))}`,
      );
    return { kind: 'length', length };
  }
  return { kind: 'close' };
}
