/**
 * Decodes OTLP trace requests with the OpenTelemetry project's generated
 * protobuf code (pbjs static code of opentelemetry-proto, shipped in
 * @opentelemetry/otlp-transformer 0.215, installed as `otlp-proto-generated`),
 * not with the serializer kreplay exports through (its newer release writes
 * protobuf by hand): a test that decodes what kreplay sent checks the wire
 * format against the .proto, not against itself.
 */
import { gunzipSync } from 'node:zlib';

interface Message {
  [key: string]: unknown;
}
interface MessageType {
  decode(bytes: Uint8Array): Message;
  encode(message: Message): { finish(): Uint8Array };
  fromObject(object: Record<string, unknown>): Message;
  toObject(message: Message, options: Record<string, unknown>): Record<string, unknown>;
}

/* eslint-disable-next-line @typescript-eslint/no-require-imports -- generated CommonJS code without types we use */
const root = require('otlp-proto-generated/build/src/generated/root') as {
  opentelemetry: { proto: { collector: { trace: { v1: { ExportTraceServiceRequest: MessageType } } } } };
};
const Request = root.opentelemetry.proto.collector.trace.v1.ExportTraceServiceRequest;

export type AttributeValue = string | number | boolean;

/** A decoded span, ids in hex and times as exact bigints. */
export interface DecodedSpan {
  traceId: string;
  spanId: string;
  parentSpanId: string;
  name: string;
  kind: number;
  startNs: bigint;
  endNs: bigint;
  flags: number;
  attributes: Record<string, AttributeValue>;
  status: { code: number; message: string };
  resource: Record<string, AttributeValue>;
  scope: { name: string; version: string };
}

interface KeyValue {
  key: string;
  value: { stringValue?: string; intValue?: string; boolValue?: boolean; doubleValue?: number };
}

function attributesOf(list: KeyValue[] | undefined): Record<string, AttributeValue> {
  const out: Record<string, AttributeValue> = {};
  for (const { key, value } of list ?? []) {
    if (value.stringValue !== undefined) out[key] = value.stringValue;
    else if (value.intValue !== undefined) out[key] = Number(value.intValue);
    else if (value.boolValue !== undefined) out[key] = value.boolValue;
    else if (value.doubleValue !== undefined) out[key] = value.doubleValue;
  }
  return out;
}

const OBJECT_OPTIONS = { longs: String, bytes: String, enums: Number, defaults: true, arrays: true };

interface RawSpan {
  traceId: string;
  spanId: string;
  parentSpanId: string;
  name: string;
  kind: number;
  startTimeUnixNano: string;
  endTimeUnixNano: string;
  flags: number;
  attributes: KeyValue[];
  status: { code: number; message: string } | null;
}
interface RawRequest {
  resourceSpans: {
    resource: { attributes: KeyValue[] } | null;
    scopeSpans: { scope: { name: string; version: string } | null; spans: RawSpan[] }[];
  }[];
}

const hexOfBase64 = (b64: string) => Buffer.from(b64, 'base64').toString('hex');

/** The spans of a request body (gunzipped first when gzip says so). */
export function decodeTraceRequest(body: Uint8Array, gzip = false): DecodedSpan[] {
  const message = Request.decode(gzip ? gunzipSync(body) : body);
  const request = Request.toObject(message, OBJECT_OPTIONS) as unknown as RawRequest;
  const spans: DecodedSpan[] = [];
  for (const rs of request.resourceSpans) {
    const resource = attributesOf(rs.resource?.attributes);
    for (const ss of rs.scopeSpans)
      for (const s of ss.spans)
        spans.push({
          traceId: hexOfBase64(s.traceId),
          spanId: hexOfBase64(s.spanId),
          parentSpanId: hexOfBase64(s.parentSpanId),
          name: s.name,
          kind: s.kind,
          startNs: BigInt(s.startTimeUnixNano),
          endNs: BigInt(s.endTimeUnixNano),
          flags: s.flags,
          attributes: attributesOf(s.attributes),
          status: { code: s.status?.code ?? 0, message: s.status?.message ?? '' },
          resource,
          scope: { name: ss.scope?.name ?? '', version: ss.scope?.version ?? '' },
        });
  }
  return spans;
}

const ID_FIELDS = new Set(['traceId', 'spanId', 'parentSpanId']);

/* OTLP/JSON writes ids as hex, where protobuf's JSON mapping has base64: the one difference the spec makes. */
function hexIdsToBase64(value: unknown): unknown {
  if (Array.isArray(value)) return value.map(hexIdsToBase64);
  if (value === null || typeof value !== 'object') return value;
  return Object.fromEntries(
    Object.entries(value).map(([k, v]) => [
      k,
      ID_FIELDS.has(k) && typeof v === 'string'
        ? Buffer.from(v, 'hex').toString('base64')
        : hexIdsToBase64(v),
    ]),
  );
}

/**
 * An OTLP/JSON document through the same generated code: made into the
 * message (protobuf's JSON mapping, ids as the spec's hex), encoded and
 * decoded back.
 */
export function decodeTraceJson(text: string): DecodedSpan[] {
  const object = hexIdsToBase64(JSON.parse(text)) as Record<string, unknown>;
  return decodeTraceRequest(Request.encode(Request.fromObject(object)).finish());
}
