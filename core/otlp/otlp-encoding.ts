/**
 * ExportTraceServiceRequest bytes of a list of spans, by the OpenTelemetry
 * project's own serializers (@opentelemetry/otlp-transformer): its protobuf
 * encoder for http/protobuf, its OTLP/JSON (hex ids, nanoseconds as decimal
 * strings) for http/json and the files `kreplay export --format otlp` writes.
 */
import { JsonTraceSerializer, ProtobufTraceSerializer } from '@opentelemetry/otlp-transformer';
import type { KernelSpan } from './event-span';
import type { OtlpProtocol } from './otlp-protocols';

/** The request holding `spans` (KernelSpan has the shape of the serializers' ReadableSpan). */
export function encodeSpans(spans: KernelSpan[], protocol: OtlpProtocol): Uint8Array {
  const serializer = protocol === 'http/json' ? JsonTraceSerializer : ProtobufTraceSerializer;
  return serializer.serializeRequest(spans) ?? new Uint8Array(0);
}
