/**
 * Reading text/event-stream: the fields the replay stream uses (event, id,
 * data) and comments. Over node:http rather than fetch, so that closing a
 * stream closes its connection at once. `kreplay replay`'s own stream is
 * read from its socket instead (cli/replay-stream.ts).
 */
import { KreplayError } from '../core/errors';
import { get, type IncomingMessage } from 'node:http';
import { get as getTls } from 'node:https';
import { authHeaders } from './daemon-request';

export interface SseMessage {
  event: string;
  id?: string;
  data: string;
}

/** A message with its data left as bytes (cli/replay-lines.ts copies a replay's out without decoding them). */
export interface SseRawMessage {
  event: string;
  id?: string;
  data: Buffer;
}

export const NEWLINE = 10;
const COLON = 58;
const SPACE = 32;
const NEWLINE_BYTES = Buffer.from('\n');
/** the end of a block (a message): an empty line */
export const BLOCK_END = Buffer.from('\n\n');

/** Whether the field name at [start, colon) of `bytes` is `name` (ASCII). */
function isField(bytes: Buffer, start: number, colon: number, name: string): boolean {
  if (colon - start !== name.length) return false;
  for (let i = 0; i < name.length; i++) if (bytes[start + i] !== name.charCodeAt(i)) return false;
  return true;
}

/** The event names the replay stream sends: taken as they are, not decoded, once per message. */
const EVENT_NAMES = ['replay', 'state', 'message'];

/** The event name at [from, to) of `bytes`. */
function eventName(bytes: Buffer, from: number, to: number): string {
  for (const name of EVENT_NAMES) if (isField(bytes, from, to, name)) return name;
  return bytes.toString('utf8', from, to);
}

/** The message of the block at [start, end) of `bytes` (null: none, as for a comment). */
export function parseBlock(bytes: Buffer, start: number, end: number): SseRawMessage | null {
  let event = 'message';
  let id: string | undefined;
  let data: Buffer | null = null;
  for (let line = start; line < end;) {
    let eol = bytes.indexOf(NEWLINE, line);
    if (eol === -1 || eol > end) eol = end;
    if (eol > line && bytes[line] !== COLON) {
      let colon = bytes.indexOf(COLON, line);
      if (colon === -1 || colon > eol) colon = eol;
      let from = colon < eol ? colon + 1 : eol;
      if (from < eol && bytes[from] === SPACE) from++;
      if (isField(bytes, line, colon, 'data')) {
        const value = bytes.subarray(from, eol);
        data = data === null ? value : Buffer.concat([data, NEWLINE_BYTES, value]);
      } else if (isField(bytes, line, colon, 'event')) event = eventName(bytes, from, eol);
      else if (isField(bytes, line, colon, 'id')) id = bytes.toString('utf8', from, eol);
    }
    line = eol + 1;
  }
  if (data === null) return null;
  return id === undefined ? { event, data } : { event, id, data };
}

/**
 * A block begun in an earlier read (`rest`, never holding a block's end)
 * and what `bytes` brings of it: the whole block, its two newlines last, and
 * where the next block starts in `bytes`; or, when `bytes` does not end it
 * either, the two joined (`block` null). Joined with its end alone, not with
 * the whole read: a reader behind a dense stream gets reads of 64 KiB, and
 * copying each one again (into memory newly allocated, so faulted in) cost
 * more than parsing it.
 */
export function completeBlock(
  rest: Buffer,
  bytes: Buffer,
): { block: Buffer; start: number } | { block: null; rest: Buffer } {
  // the first block end in rest + bytes is either across the two (rest ends with a newline, bytes
  // start with one) or the first in bytes
  const across = rest[rest.length - 1] === NEWLINE && bytes[0] === NEWLINE;
  const end = across ? 0 : bytes.indexOf(BLOCK_END);
  if (end === -1) return { block: null, rest: Buffer.concat([rest, bytes]) };
  const start = across ? 1 : end + 2;
  return { block: Buffer.concat([rest, bytes.subarray(0, start)]), start };
}

/**
 * Splits an event stream into messages as its bytes come, without decoding
 * the data (UTF-8 never holds a newline byte inside a character).
 */
export class SseByteParser {
  private rest: Buffer | null = null;

  /** The messages that `chunk` completes (a block begun in an earlier chunk: completeBlock). */
  push(chunk: Uint8Array): SseRawMessage[] {
    const bytes = Buffer.from(chunk.buffer, chunk.byteOffset, chunk.byteLength);
    const messages: SseRawMessage[] = [];
    let start = 0;
    if (this.rest) {
      const joined = completeBlock(this.rest, bytes);
      if (joined.block === null) {
        this.rest = joined.rest;
        return messages;
      }
      start = joined.start;
      const message = parseBlock(joined.block, 0, joined.block.length - 2);
      if (message) messages.push(message);
    }
    for (let end = bytes.indexOf(BLOCK_END, start); end !== -1; end = bytes.indexOf(BLOCK_END, start)) {
      const message = parseBlock(bytes, start, end);
      if (message) messages.push(message);
      start = end + 2;
    }
    this.rest = start < bytes.length ? bytes.subarray(start) : null;
    return messages;
  }
}

const decoded = ({ data, ...fields }: SseRawMessage): SseMessage => ({
  ...fields,
  data: data.toString('utf8'),
});

/** The same, for text. */
export class SseParser {
  private readonly bytes = new SseByteParser();

  /** The messages that `text` completes. */
  push(text: string): SseMessage[] {
    return this.bytes.push(Buffer.from(text, 'utf8')).map(decoded);
  }
}

/**
 * The messages of an event-stream response body, as they arrive: all those
 * a chunk completes at once, their data as bytes, so that a dense stream
 * costs its reader one turn per chunk and no decoding.
 */
export async function* sseBatches(body: AsyncIterable<Uint8Array>): AsyncGenerator<SseRawMessage[]> {
  const parser = new SseByteParser();
  for await (const chunk of body) {
    const messages = parser.push(chunk);
    if (messages.length > 0) yield messages;
  }
}

/** The messages of an event-stream response body, one at a time. */
export async function* sseMessages(body: AsyncIterable<Uint8Array>): AsyncGenerator<SseMessage> {
  for await (const batch of sseBatches(body)) for (const message of batch) yield decoded(message);
}

/** An answer other than 200, with its body (a problem document, usually). */
export class HttpError extends KreplayError {
  constructor(
    readonly status: number,
    readonly body: string,
  ) {
    super('E_HTTP', `server answered ${status}`);
  }
}

export interface EventStream {
  /** one message at a time */
  messages: AsyncGenerator<SseMessage>;
  close(): void;
}

/** An event stream's request headers: its type, the token, and where it resumes (also cli/replay-stream.ts). */
export function eventStreamHeaders(lastEventId: string | undefined): Record<string, string> {
  return {
    accept: 'text/event-stream',
    ...authHeaders(),
    ...(lastEventId === undefined ? {} : { 'last-event-id': lastEventId }),
  };
}

export function openEventStream(url: string, lastEventId?: string): Promise<EventStream> {
  const headers = eventStreamHeaders(lastEventId);
  return new Promise((resolve, reject) => {
    const request = (url.startsWith('https:') ? getTls : get)(url, { headers }, (res: IncomingMessage) => {
      if (res.statusCode === 200) {
        // closing destroys the request: its connection closes at once
        resolve({ messages: sseMessages(res), close: () => request.destroy() });
        return;
      }
      let body = '';
      res.setEncoding('utf8');
      res.on('data', (chunk: string) => (body += chunk));
      res.on('end', () => reject(new HttpError(res.statusCode ?? 0, body)));
    });
    request.on('error', reject);
  });
}
