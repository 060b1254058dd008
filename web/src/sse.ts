/**
 * A server-sent event stream read with fetch rather than EventSource, which
 * cannot send the bearer token. Like EventSource it reconnects after the
 * stream ends with Last-Event-ID (the session then sends the replay events
 * after it again), until closed: at once after a stream that brought events
 * (the daemon cut a client that fell behind), after RETRY_MS otherwise; a
 * refused request (a session gone, a bad token) ends it for good and is
 * reported.
 */
import { followResuming } from '../../core/stream-resume';
import { authHeaders } from './auth';

export interface SseMessage {
  event: string;
  data: string;
  /** the id of this message or, as in EventSource, of the last message that had one */
  lastId: string | null;
}

const RETRY_MS = 1000;

export function followSse(
  url: string,
  onMessage: (m: SseMessage) => void,
  onError: (message: string) => void,
): { close(): void } {
  const abort = new AbortController();
  let lastId: string | null = null;
  const dispatch = (block: string) => {
    let event = 'message';
    const data: string[] = [];
    for (const line of block.split('\n')) {
      if (line === '' || line.startsWith(':')) continue;
      const colon = line.indexOf(':');
      const field = colon < 0 ? line : line.slice(0, colon);
      const value = colon < 0 ? '' : line.slice(colon + 1).replace(/^ /, '');
      if (field === 'event') event = value;
      else if (field === 'data') data.push(value);
      else if (field === 'id') lastId = value;
    }
    if (data.length) onMessage({ event, data: data.join('\n'), lastId });
  };
  const connect = async () => {
    const headers: Record<string, string> = { accept: 'text/event-stream', ...authHeaders() };
    if (lastId !== null) headers['last-event-id'] = lastId;
    const res = await fetch(url, { headers, signal: abort.signal });
    if (!res.ok || !res.body) {
      const text = await res.text();
      let detail = text.slice(0, 300);
      try {
        detail = (JSON.parse(text) as { detail?: string }).detail ?? detail;
      } catch {
        // not problem+json
      }
      throw new Error(`stream ${res.status}: ${detail}`);
    }
    const reader = res.body.pipeThrough(new TextDecoderStream()).getReader();
    let buffer = '';
    for (;;) {
      const { value, done } = await reader.read();
      if (done) return;
      buffer += value.replace(/\r\n?/g, '\n');
      let end;
      while ((end = buffer.indexOf('\n\n')) >= 0) {
        dispatch(buffer.slice(0, end));
        buffer = buffer.slice(end + 2);
      }
    }
  };
  // a refused request ends it for good (reported); a stream that ends or drops is followed again
  const refusal = (err: unknown) => (err as Error).message.startsWith('stream ');
  void followResuming(
    async () => {
      await connect();
      return abort.signal.aborted;
    },
    { attempts: Infinity, waitMs: RETRY_MS },
    {
      lastSeen: () => lastId ?? undefined,
      retriable: (err) => !abort.signal.aborted && !refusal(err),
      giveUp: () => new Error('unreachable: no bound on attempts'),
    },
  ).catch((err: unknown) => {
    if (!abort.signal.aborted) onError((err as Error).message);
  });
  return { close: () => abort.abort() };
}
