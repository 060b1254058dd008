/**
 * The context an HTTP/2 or gRPC request carries in its headers, by the same
 * rules as an HTTP/1.x head (context-parser.ts owns them): a valid W3C
 * `traceparent`, else gRPC's binary `grpc-trace-bin`; `x-request-id` as the
 * transaction when valid, else the trace id.
 */
import { parseHttpHead, type TraceContext } from '../../attribution/context-parser';
import type { HeaderField } from './hpack';

/**
 * grpc-trace-bin (OpenCensus binary format, base64 in metadata): version 0,
 * then field 0 = 16-byte trace id, field 1 = 8-byte span id, field 2 = 1-byte options.
 * As a traceparent, or null when malformed.
 */
export function grpcTraceBinToTraceparent(value: string): string | null {
  const b = Buffer.from(value, 'base64');
  if (b.length < 29 || b[0] !== 0 || b[1] !== 0 || b[18] !== 1) return null;
  const options = b.length >= 29 && b[27] === 2 ? b[28]! : 0;
  const hex = (from: number, to: number) => b.subarray(from, to).toString('hex');
  return `00-${hex(2, 18)}-${hex(19, 27)}-${options.toString(16).padStart(2, '0')}`;
}

/** The request's context, or null when its headers carry no valid trace. */
export function streamContext(headers: readonly HeaderField[]): TraceContext | null {
  const get = (name: string) => headers.find(([n]) => n === name)?.[1];
  const traceparent = get('traceparent') ?? maybe(get('grpc-trace-bin'));
  if (traceparent === undefined) return null;
  const requestId = get('x-request-id');
  // the HTTP/1.x rules applied to an equivalent head; a CR or LF in a value cannot start another line
  const clean = (v: string) => v.replace(/[\r\n]/g, ' ');
  const head =
    'GET / HTTP/1.1\r\n' +
    `traceparent: ${clean(traceparent)}\r\n` +
    (requestId === undefined ? '' : `x-request-id: ${clean(requestId)}\r\n`) +
    '\r\n';
  return parseHttpHead(head);
}

function maybe(bin: string | undefined): string | undefined {
  return bin === undefined ? undefined : (grpcTraceBinToTraceparent(bin) ?? undefined);
}
