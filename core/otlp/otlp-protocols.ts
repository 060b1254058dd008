/** The OTLP/HTTP encodings kreplay speaks (OTEL_EXPORTER_OTLP_PROTOCOL's values but grpc), apart from the encoders: the CLI names them at every start. */
export const OTLP_PROTOCOLS = ['http/protobuf', 'http/json'] as const;
export type OtlpProtocol = (typeof OTLP_PROTOCOLS)[number];

export const CONTENT_TYPES: Record<OtlpProtocol, string> = {
  'http/protobuf': 'application/x-protobuf',
  'http/json': 'application/json',
};
