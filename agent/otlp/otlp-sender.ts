/**
 * One OTLP/HTTP export request and what its answer means, as the OTLP
 * specification says: 2xx accepted (a partial success names the spans the
 * receiver rejected), 429, 502, 503 and 504 retried after the `Retry-After`
 * the receiver gave (seconds or an HTTP date) or the caller's backoff, a
 * connection that fails, drops or times out retried likewise, any other
 * answer rejected for good.
 */
import http from 'node:http';
import https from 'node:https';
import { ProtobufTraceSerializer } from '@opentelemetry/otlp-transformer';
import { CONTENT_TYPES } from '../../core/otlp/otlp-protocols';
import type { OtlpTarget } from './otlp-target';

export type SendOutcome =
  | { kind: 'accepted'; rejectedSpans: number; message: string | null }
  | { kind: 'retry'; afterMs: number | null; error: string }
  | { kind: 'rejected'; error: string };

const RETRYABLE = new Set([429, 502, 503, 504]);
/** A Retry-After past this is taken as this: the queue must not stand still for hours. */
export const MAX_RETRY_AFTER_MS = 300_000;
/** Bytes of an answer read at most (an error text, a partial success). */
const MAX_ANSWER_BYTES = 64 * 1024;

/** Retry-After: delta-seconds or an HTTP date (RFC 9110), as ms from `nowMs`; null when absent or unreadable. */
export function retryAfterMs(value: string | undefined, nowMs: number): number | null {
  if (value === undefined) return null;
  const text = value.trim();
  if (/^\d+$/.test(text)) return Math.min(Number(text) * 1000, MAX_RETRY_AFTER_MS);
  const at = Date.parse(text);
  if (Number.isNaN(at)) return null;
  return Math.min(Math.max(0, at - nowMs), MAX_RETRY_AFTER_MS);
}

function partialSuccess(body: Buffer, protobuf: boolean): { rejectedSpans: number; message: string | null } {
  if (body.length === 0) return { rejectedSpans: 0, message: null };
  try {
    const answer = protobuf
      ? ProtobufTraceSerializer.deserializeResponse(body)
      : (JSON.parse(body.toString('utf8')) as ReturnType<typeof ProtobufTraceSerializer.deserializeResponse>);
    const partial = answer.partialSuccess;
    return { rejectedSpans: Number(partial?.rejectedSpans ?? 0), message: partial?.errorMessage || null };
  } catch {
    // an answer that does not decode still accepted the request: nothing is known to be rejected
    return { rejectedSpans: 0, message: null };
  }
}

export class OtlpSender {
  private readonly agent: http.Agent;
  private readonly url: URL;
  private readonly headers: Record<string, string>;

  constructor(private readonly target: OtlpTarget) {
    this.url = new URL(target.url);
    const options = { keepAlive: true, maxSockets: 1 };
    this.agent =
      this.url.protocol === 'https:'
        ? new https.Agent({ ...options, ...(target.ca !== undefined && { ca: target.ca }) })
        : new http.Agent(options);
    this.headers = {
      ...target.headers,
      'content-type': CONTENT_TYPES[target.protocol],
      ...(target.gzip && { 'content-encoding': 'gzip' }),
    };
  }

  /** Posts one request body (already gzipped when the target says so). */
  send(body: Buffer): Promise<SendOutcome> {
    const request = this.url.protocol === 'https:' ? https.request : http.request;
    return new Promise((resolve) => {
      let settled = false;
      const settle = (outcome: SendOutcome) => {
        if (!settled) resolve(outcome);
        settled = true;
      };
      const req = request(
        this.url,
        {
          method: 'POST',
          agent: this.agent,
          headers: { ...this.headers, 'content-length': body.length },
          timeout: this.target.timeoutMs,
        },
        (res) => {
          const chunks: Buffer[] = [];
          let bytes = 0;
          res.on('data', (chunk: Buffer) => {
            bytes += chunk.length;
            if (bytes <= MAX_ANSWER_BYTES) chunks.push(chunk);
          });
          res.on('error', (err) => settle({ kind: 'retry', afterMs: null, error: err.message }));
          res.on('end', () => {
            const status = res.statusCode ?? 0;
            const answer = Buffer.concat(chunks);
            if (status >= 200 && status < 300) {
              const protobuf = !String(res.headers['content-type'] ?? '').includes('json');
              settle({ kind: 'accepted', ...partialSuccess(answer, protobuf) });
            } else if (RETRYABLE.has(status))
              settle({
                kind: 'retry',
                afterMs: retryAfterMs(res.headers['retry-after'], Date.now()),
                error: `HTTP ${status}`,
              });
            else
              settle({
                kind: 'rejected',
                error: `HTTP ${status}: ${answer.toString('utf8', 0, 200).trim()}`,
              });
          });
        },
      );
      req.on('timeout', () => req.destroy(new Error(`no answer within ${this.target.timeoutMs} ms`)));
      req.on('error', (err) => settle({ kind: 'retry', afterMs: null, error: err.message }));
      req.end(body);
    });
  }

  close(): void {
    this.agent.destroy();
  }
}
