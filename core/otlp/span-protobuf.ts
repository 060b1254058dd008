/**
 * The protobuf ExportTraceServiceRequest of kernel spans. The agent's live
 * export writes its event spans natively (native/sqlite/kreplay_otlp.c, byte
 * for byte what this writer makes of the same events:
 * test/integration/otlp-native-spans.test.ts); this writer owns the request's
 * framing around them (`layout`: ResourceSpans and ScopeSpans, resources and
 * scope, kreplay_otlp_request fills in the native spans) and writes the spans
 * made in TypeScript (trace-cap summaries, the rare row the native encoder
 * leaves). The OpenTelemetry project's serializer
 * (@opentelemetry/otlp-transformer, which writes the JSON) takes about 4 µs a
 * span (bench/otlp.ts): this writer knows the one shape kreplay's spans have
 * (no events, links or trace state; attributes of strings, integers and
 * booleans), keeps each attribute key's and resource's bytes once, and writes
 * a span in one pass into a scratch buffer. test/unit/otlp-span.test.ts
 * decodes what both serializers write with the OpenTelemetry project's
 * generated code and finds the same request.
 *
 * Wire format (opentelemetry/proto/trace/v1/trace.proto): ResourceSpans{1
 * resource, 2 scope_spans}, ScopeSpans{1 scope, 2 spans}, Span{1 trace_id, 2
 * span_id, 4 parent_span_id, 5 name, 6 kind, 7 start, 8 end (fixed64), 9
 * attributes, 15 status, 16 flags (fixed32)}, KeyValue{1 key, 2 value},
 * AnyValue{1 string, 2 bool, 3 int (int64 varint), 4 double}, Status{2
 * message, 3 code}.
 */
import type { Attributes, AttributeValue } from '@opentelemetry/api';
import type { Resource } from '@opentelemetry/resources';
import { INSTRUMENTATION_SCOPE, type KernelSpan } from './event-span';

const LEN = 2;
/** hex digit -> value, by char code */
const HEX = new Uint8Array(128);
for (let i = 0; i < 16; i++) HEX['0123456789abcdef'.charCodeAt(i)] = i;
for (let i = 10; i < 16; i++) HEX['ABCDEF'.charCodeAt(i - 10)] = i;
const tag = (field: number, wire: number) => (field << 3) | wire;
/** OTLP's span flags: the W3C flags, and the parent's remoteness known (a traceparent's parent is remote) */
const HAS_IS_REMOTE = 0x100;
/** resources (service, node) whose buffers are kept between requests at most */
const MAX_KEPT_RESOURCES = 64;
const IS_REMOTE = 0x200;

/** A growable byte buffer with protobuf's primitives. */
class Writer {
  buf: Buffer;
  pos = 0;

  constructor(size = 1024) {
    this.buf = Buffer.allocUnsafe(size);
  }

  ensure(n: number): void {
    if (this.pos + n <= this.buf.length) return;
    const bigger = Buffer.allocUnsafe(Math.max(this.buf.length * 2, this.pos + n));
    this.buf.copy(bigger, 0, 0, this.pos);
    this.buf = bigger;
  }

  byte(b: number): void {
    this.buf[this.pos++] = b;
  }

  /** A non-negative integer below 2^53. */
  varint(n: number): void {
    while (n >= 0x80) {
      this.buf[this.pos++] = (n % 0x80) | 0x80;
      n = Math.floor(n / 0x80);
    }
    this.buf[this.pos++] = n;
  }

  /** An int64 (negative ones take ten bytes, two's complement). */
  int64(n: number): void {
    if (n >= 0) return this.varint(n);
    let v = BigInt.asUintN(64, BigInt(n));
    while (v >= 0x80n) {
      this.buf[this.pos++] = Number(v & 0x7fn) | 0x80;
      v >>= 7n;
    }
    this.buf[this.pos++] = Number(v);
  }

  fixed32(n: number): void {
    this.buf.writeUInt32LE(n >>> 0, this.pos);
    this.pos += 4;
  }

  fixed64(ns: bigint): void {
    this.buf.writeBigUInt64LE(ns, this.pos);
    this.pos += 8;
  }

  bytes(b: Uint8Array): void {
    // a short copy by hand: set() costs more than a key's few bytes
    if (b.length < 32) for (let i = 0; i < b.length; i++) this.buf[this.pos++] = b[i]!;
    else {
      this.buf.set(b, this.pos);
      this.pos += b.length;
    }
  }

  /** `hex` (lowercase, as ids are) as bytes, with its field tag and length. */
  hexField(field: number, hex: string): void {
    const buf = this.buf;
    buf[this.pos++] = tag(field, LEN);
    buf[this.pos++] = hex.length / 2;
    for (let i = 0; i < hex.length; i += 2)
      buf[this.pos++] = (HEX[hex.charCodeAt(i)]! << 4) | HEX[hex.charCodeAt(i + 1)]!;
  }

  /** Text of fewer than 128 chars as its length and bytes if it is all ASCII (names, paths, ids: nearly all); false, and nothing meant, if not. */
  ascii(text: string): boolean {
    const n = text.length;
    if (n >= 128) return false;
    this.ensure(n + 1);
    const buf = this.buf;
    const start = this.pos;
    buf[start] = n;
    for (let i = 0; i < n; i++) {
      const c = text.charCodeAt(i);
      if (c >= 0x80) return false;
      buf[start + 1 + i] = c;
    }
    this.pos = start + 1 + n;
    return true;
  }

  /** `text` as UTF-8 after its length: short ASCII copied here (a call into the runtime cost more), the rest encoded. */
  string(text: string): void {
    if (this.ascii(text)) return;
    const length = Buffer.byteLength(text);
    this.ensure(length + 5);
    this.varint(length);
    this.pos += this.buf.write(text, this.pos, 'utf8');
  }

  stringField(field: number, text: string): void {
    this.ensure(1);
    this.byte(tag(field, LEN));
    this.string(text);
  }

  /** Tag and length of a message of `length` bytes. */
  lengthOf(field: number, length: number): void {
    this.byte(tag(field, LEN));
    this.varint(length);
  }
}

const varintBytes = (n: number) =>
  n < 0x80 ? 1 : n < 0x4000 ? 2 : n < 0x200000 ? 3 : n < 0x10000000 ? 4 : 5;

/** A message `body` (bytes) wrapped as field `field`. */
function wrapped(field: number, body: Uint8Array): Buffer {
  const out = new Writer();
  out.ensure(body.length + 6);
  out.lengthOf(field, body.length);
  out.bytes(body);
  return Buffer.from(out.buf.subarray(0, out.pos));
}

/** Encodes the attributes of spans and resources, each key's bytes made once. */
class AttributeWriter {
  private readonly keys = new Map<string, Buffer>();

  private key(name: string): Buffer {
    let bytes = this.keys.get(name);
    if (!bytes) {
      const w = new Writer();
      w.stringField(1, name);
      bytes = Buffer.from(w.buf.subarray(0, w.pos));
      this.keys.set(name, bytes);
    }
    return bytes;
  }

  /**
   * Each attribute as a KeyValue{1 key, 2 AnyValue} of field `field` into `w`:
   * strings, integers (int64), other numbers (double) and booleans.
   */
  write(w: Writer, field: number, attributes: Attributes): void {
    for (const name in attributes) {
      const value: AttributeValue | undefined = attributes[name];
      if (value === undefined || value === null || typeof value === 'object') continue;
      const key = this.key(name);
      if (typeof value === 'string') {
        // the lengths go before the text: taken as ASCII's, written again if it is not
        const start = w.pos;
        if (value.length < 100) {
          const any = 2 + value.length;
          w.ensure(key.length + any + 8);
          w.lengthOf(field, key.length + 2 + any);
          w.bytes(key);
          w.lengthOf(2, any);
          w.byte(tag(1, LEN));
          if (w.ascii(value)) continue;
          w.pos = start;
        }
        const length = Buffer.byteLength(value);
        const any = 1 + varintBytes(length) + length;
        w.ensure(key.length + any + 16);
        w.lengthOf(field, key.length + 1 + varintBytes(any) + any);
        w.bytes(key);
        w.lengthOf(2, any);
        w.byte(tag(1, LEN));
        w.varint(length);
        w.pos += w.buf.write(value, w.pos, 'utf8');
      } else if (typeof value === 'boolean') {
        w.ensure(key.length + 16);
        w.lengthOf(field, key.length + 4);
        w.bytes(key);
        w.lengthOf(2, 2);
        w.byte(tag(2, 0));
        w.byte(value ? 1 : 0);
      } else if (typeof value !== 'number') continue;
      else if (Number.isSafeInteger(value)) {
        const size = value < 0 ? 10 : varintBytes(value);
        w.ensure(key.length + size + 16);
        w.lengthOf(field, key.length + 3 + size);
        w.bytes(key);
        w.lengthOf(2, 1 + size);
        w.byte(tag(3, 0));
        w.int64(value);
      } else {
        w.ensure(key.length + 24);
        w.lengthOf(field, key.length + 11);
        w.bytes(key);
        w.lengthOf(2, 9);
        w.byte(tag(4, 1));
        w.buf.writeDoubleLE(value, w.pos);
        w.pos += 8;
      }
    }
  }
}

/**
 * A service's spans that kreplay_otlp_spans (native/sqlite/kreplay_otlp.c) wrote as ScopeSpans
 * field 2 and keeps for the open request: `length` bytes that the request is framed around.
 */
export interface NativeSpans {
  resource: Resource;
  service: number;
  length: number;
}

/** A request's bytes: written here, or a service's spans kept natively (kreplay_otlp_request puts them in). */
export type RequestChunk = Uint8Array | { service: number; length: number };

/** A resource's spans in the request being written: those kept natively, and a writer for the rest. */
interface ResourceBody {
  native: { service: number; length: number }[];
  nativeBytes: number;
  writer: Writer;
}

export class SpanProtobufWriter {
  private readonly attributes = new AttributeWriter();
  /** each resource's spans of the request being written; kept between requests with their buffers */
  private readonly bodies = new Map<Resource, ResourceBody>();
  /** ResourceSpans' resource field and ScopeSpans' scope field, per resource */
  private readonly heads = new WeakMap<Resource, Buffer>();
  private scope: Buffer | null = null;

  private resourceHead(resource: Resource): Buffer {
    let head = this.heads.get(resource);
    if (!head) {
      const w = new Writer();
      this.attributes.write(w, 1, resource.attributes);
      head = wrapped(1, w.buf.subarray(0, w.pos));
      this.heads.set(resource, head);
    }
    return head;
  }

  private scopeHead(): Buffer {
    if (!this.scope) {
      const w = new Writer();
      w.stringField(1, INSTRUMENTATION_SCOPE.name);
      w.stringField(2, INSTRUMENTATION_SCOPE.version);
      this.scope = wrapped(1, w.buf.subarray(0, w.pos));
    }
    return this.scope;
  }

  private bodyOf(resource: Resource): ResourceBody {
    let body = this.bodies.get(resource);
    if (!body) {
      body = { native: [], nativeBytes: 0, writer: new Writer() };
      this.bodies.set(resource, body);
    }
    return body;
  }

  /**
   * One Span as field 2 of ScopeSpans into `w`: its length is not known before it is written,
   * so two bytes are kept for it and the span moved when it needs one or three.
   */
  private writeSpan(w: Writer, span: KernelSpan): void {
    w.ensure(160 + span.name.length * 3);
    w.byte(tag(2, LEN));
    const at = w.pos;
    w.pos += 2;
    const context = span.spanContext();
    w.hexField(1, context.traceId);
    w.hexField(2, context.spanId);
    const parent = span.parentSpanContext;
    if (parent) w.hexField(4, parent.spanId);
    w.stringField(5, span.name);
    w.ensure(40);
    w.byte(tag(6, 0));
    w.varint(span.kind + 1);
    w.byte(tag(7, 1));
    w.fixed64(span.startNs);
    w.byte(tag(8, 1));
    w.fixed64(span.endNs);
    this.attributes.write(w, 9, span.attributes);
    const message = span.status.message;
    const messageBytes = message ? Buffer.byteLength(message) : 0;
    const statusLength = (message ? 1 + varintBytes(messageBytes) + messageBytes : 0) + 2;
    w.ensure(statusLength + 16);
    w.lengthOf(15, statusLength);
    if (message) w.stringField(2, message);
    w.byte(tag(3, 0));
    w.byte(span.status.code);
    // field 16, fixed32: the tag takes two bytes
    w.byte(0x85);
    w.byte(0x01);
    w.fixed32((context.traceFlags & 0xff) | HAS_IS_REMOTE | (parent?.isRemote ? IS_REMOTE : 0));
    const length = w.pos - at - 2;
    const size = varintBytes(length);
    if (size !== 2) {
      w.ensure(1);
      w.buf.copyWithin(at + size, at + 2, w.pos);
      w.pos += size - 2;
    }
    const end = w.pos;
    w.pos = at;
    w.varint(length);
    w.pos = end;
  }

  /** The request holding `spans`, one ResourceSpans per resource. */
  encode(spans: readonly KernelSpan[]): Buffer {
    return Buffer.concat(this.layout(spans, []) as Uint8Array[]);
  }

  /**
   * The request holding `spans` and the spans kept natively, as chunks: one ResourceSpans per
   * resource (in the order resources were first seen), each resource's native spans before its
   * `spans`. The chunks written here are valid until the next call.
   */
  layout(spans: readonly KernelSpan[], native: readonly NativeSpans[]): RequestChunk[] {
    for (const body of this.bodies.values()) {
      body.writer.pos = 0;
      body.native.length = 0;
      body.nativeBytes = 0;
    }
    for (const { resource, service, length } of native) {
      const body = this.bodyOf(resource);
      body.native.push({ service, length });
      body.nativeBytes += length;
    }
    for (const span of spans) this.writeSpan(this.bodyOf(span.resource).writer, span);
    const chunks: RequestChunk[] = [];
    for (const [resource, body] of this.bodies) {
      const written = body.nativeBytes + body.writer.pos;
      if (written === 0) continue;
      const head = this.resourceHead(resource);
      const scope = this.scopeHead();
      const scopeSpans = scope.length + written;
      const frame = new Writer(16);
      frame.lengthOf(1, head.length + 1 + varintBytes(scopeSpans) + scopeSpans);
      const scopeFrame = new Writer(8);
      scopeFrame.lengthOf(2, scopeSpans);
      chunks.push(frame.buf.subarray(0, frame.pos), head, scopeFrame.buf.subarray(0, scopeFrame.pos), scope);
      chunks.push(...body.native, body.writer.buf.subarray(0, body.writer.pos));
    }
    // the writers are kept for the next request
    if (this.bodies.size > MAX_KEPT_RESOURCES) this.bodies.clear();
    return chunks;
  }
}
