/**
 * Reading text/event-stream: the fields the replay stream uses (event, id,
 * data) and comments. Over node:http rather than fetch, so that closing a
 * stream closes its connection at once.
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

function parseBlock(block: string): SseMessage | null {
  const message: SseMessage = { event: 'message', data: '' };
  const data: string[] = [];
  for (const line of block.split('\n')) {
    if (line === '' || line.startsWith(':')) continue;
    const colon = line.indexOf(':');
    const field = colon === -1 ? line : line.slice(0, colon);
    const value = colon === -1 ? '' : line.slice(colon + (line[colon + 1] === ' ' ? 2 : 1));
    if (field === 'event') message.event = value;
    else if (field === 'id') message.id = value;
    else if (field === 'data') data.push(value);
  }
  if (data.length === 0) return null;
  message.data = data.join('\n');
  return message;
}

export class SseParser {
  private rest = '';

  /** The messages that `text` completes. */
  push(text: string): SseMessage[] {
    const blocks = (this.rest + text).split('\n\n');
    this.rest = blocks.pop()!;
    return blocks.flatMap((block) => parseBlock(block) ?? []);
  }
}

/**
 * The messages of an event-stream response body, as they arrive: all those
 * a chunk completes at once, so that a dense stream costs its reader one
 * turn per chunk, not one per message.
 */
export async function* sseBatches(body: AsyncIterable<Uint8Array>): AsyncGenerator<SseMessage[]> {
  const parser = new SseParser();
  const decoder = new TextDecoder();
  for await (const chunk of body) {
    const messages = parser.push(decoder.decode(chunk, { stream: true }));
    if (messages.length > 0) yield messages;
  }
}

/** The messages of an event-stream response body, one at a time. */
export async function* sseMessages(body: AsyncIterable<Uint8Array>): AsyncGenerator<SseMessage> {
  for await (const batch of sseBatches(body)) yield* batch;
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
  /** one message at a time, or (read one or the other) each chunk's messages at once */
  messages: AsyncGenerator<SseMessage>;
  batches: AsyncGenerator<SseMessage[]>;
  close(): void;
}

export function openEventStream(url: string, lastEventId?: string): Promise<EventStream> {
  const headers: Record<string, string> = { accept: 'text/event-stream', ...authHeaders() };
  if (lastEventId !== undefined) headers['last-event-id'] = lastEventId;
  return new Promise((resolve, reject) => {
    const request = (url.startsWith('https:') ? getTls : get)(url, { headers }, (res: IncomingMessage) => {
      if (res.statusCode === 200) {
        resolve({ messages: sseMessages(res), batches: sseBatches(res), close: () => request.destroy() });
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
