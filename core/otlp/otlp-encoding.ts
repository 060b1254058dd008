/**
 * ExportTraceServiceRequest bytes of kernel spans. OTLP/JSON (http/json, and
 * the files `kreplay export --format otlp` writes) is the OpenTelemetry
 * project's own serializer (@opentelemetry/otlp-transformer): hex ids,
 * nanoseconds as decimal strings. Protobuf is kreplay's writer for its one
 * span shape (span-protobuf.ts), checked against the project's serializer in
 * test/unit/otlp-span.test.ts; the agent's http/protobuf export writes its
 * event spans natively (agent/otlp/otlp-native-spans.ts) and frames them with
 * that writer.
 */
import { JsonTraceSerializer } from '@opentelemetry/otlp-transformer';
import type { KernelSpan } from './event-span';
import type { OtlpProtocol } from './otlp-protocols';
import { SpanProtobufWriter } from './span-protobuf';

/** The OTLP/JSON request holding `spans` (KernelSpan has the shape of the serializer's ReadableSpan). */
export function encodeSpansJson(spans: KernelSpan[]): Uint8Array {
  return JsonTraceSerializer.serializeRequest(spans) ?? new Uint8Array(0);
}

/** Requests of one protocol; holds what the protobuf writer keeps between requests (keys, resources). */
export class SpanEncoder {
  private readonly protobuf = new SpanProtobufWriter();

  constructor(readonly protocol: OtlpProtocol) {}

  encode(spans: KernelSpan[]): Uint8Array {
    return this.protocol === 'http/json' ? encodeSpansJson(spans) : this.protobuf.encode(spans);
  }
}
