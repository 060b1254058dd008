/**
 * Where and how the agent exports spans, from its flags, its config file and
 * the OpenTelemetry exporter's standard environment variables, in that order
 * of precedence. As the OTLP specification says: a base endpoint
 * (`--otlp`, `otlp.endpoint`, OTEL_EXPORTER_OTLP_ENDPOINT) gets `/v1/traces`
 * appended, OTEL_EXPORTER_OTLP_TRACES_ENDPOINT is used as it is, and each
 * `_TRACES_` variable wins over its general form. Headers (tokens) come
 * from the config file or the environment, never from a flag (a command line
 * is visible to every user).
 */
import { readFileSync } from 'node:fs';
import { KreplayError } from '../../core/errors';
import { OTLP_PROTOCOLS, type OtlpProtocol } from '../../core/otlp/otlp-protocols';

export const OTLP_SAMPLING = ['sampled', 'all'] as const;
export type OtlpSampling = (typeof OTLP_SAMPLING)[number];

/** Spans of one trace exported one by one; the rest of the trace's events go into a summary span. */
export const DEFAULT_MAX_SPANS_PER_TRACE = 1000;
/** Spans waiting to be sent at most; beyond, spans are dropped and counted. */
export const DEFAULT_QUEUE_SPANS = 65536;
/** OTEL_EXPORTER_OTLP_TIMEOUT's default, ms. */
export const DEFAULT_TIMEOUT_MS = 10_000;

export interface OtlpTarget {
  /** the traces URL requests go to */
  url: string;
  /** which setting gave the endpoint, for the log */
  endpointFrom: string;
  protocol: OtlpProtocol;
  headers: Record<string, string>;
  /** PEM of the CA that signs the receiver's certificate (https) */
  ca?: string;
  timeoutMs: number;
  gzip: boolean;
  sampling: OtlpSampling;
  maxSpansPerTrace: number;
  queueSpans: number;
}

/** The agent's flags and config file's `otlp` section, as far as they were given. */
export interface OtlpSettings {
  endpoint?: string;
  protocol?: OtlpProtocol;
  headers?: Record<string, string>;
  certificate?: string;
  sampling?: OtlpSampling;
  maxSpansPerTrace?: number;
  queueSpans?: number;
}

export class OtlpSettingError extends KreplayError {
  constructor(message: string) {
    super('E_OTLP_SETTING', message);
  }
}

type Env = Record<string, string | undefined>;

/** The `_TRACES_` form of a variable, else its general form: [value, name] of the one set. */
function fromEnv(env: Env, name: string): [string, string] | undefined {
  for (const key of [`OTEL_EXPORTER_OTLP_TRACES_${name}`, `OTEL_EXPORTER_OTLP_${name}`]) {
    const value = env[key]?.trim();
    if (value) return [value, key];
  }
  return undefined;
}

function checkedUrl(text: string, from: string): URL {
  let url: URL;
  try {
    url = new URL(text);
  } catch {
    throw new OtlpSettingError(`${from} "${text}" is not a URL (http://HOST:PORT or https://HOST:PORT)`);
  }
  if (url.protocol !== 'http:' && url.protocol !== 'https:')
    throw new OtlpSettingError(`${from} "${text}" must be an http:// or https:// URL`);
  return url;
}

/** The base endpoint with the signal's path appended, as the OTLP exporter specification does. */
export function tracesUrl(base: string, from: string): string {
  const url = checkedUrl(base, from);
  url.pathname = `${url.pathname.replace(/\/+$/, '')}/v1/traces`;
  return url.toString();
}

/** OTEL_EXPORTER_OTLP_HEADERS: `key=value,key2=value2`, values percent-encoded (W3C baggage form). */
export function parseOtlpHeaders(text: string, from: string): Record<string, string> {
  const headers: Record<string, string> = {};
  for (const item of text.split(',')) {
    if (item.trim() === '') continue;
    const eq = item.indexOf('=');
    const key = eq === -1 ? '' : item.slice(0, eq).trim();
    if (!/^[!#$%&'*+.^_`|~0-9A-Za-z-]+$/.test(key))
      throw new OtlpSettingError(`${from}: "${item.trim().slice(0, 40)}" is not key=value`);
    let value: string;
    try {
      value = decodeURIComponent(item.slice(eq + 1).trim());
    } catch {
      throw new OtlpSettingError(`${from}: the value of ${key} is not percent-encoded text`);
    }
    headers[key.toLowerCase()] = value;
  }
  return headers;
}

function protocolOf(text: string, from: string): OtlpProtocol {
  if ((OTLP_PROTOCOLS as readonly string[]).includes(text)) return text as OtlpProtocol;
  throw new OtlpSettingError(
    `${from} "${text}" is not a protocol kreplay exports with (${OTLP_PROTOCOLS.join(', ')})`,
  );
}

function readCertificate(path: string, from: string): string {
  try {
    return readFileSync(path, 'utf8');
  } catch (err) {
    throw new OtlpSettingError(`${from} ${path}: ${(err as Error).message}`);
  }
}

/**
 * The export's target, or undefined when no flag, config entry or
 * environment variable names an endpoint. Throws OtlpSettingError naming the
 * setting that is wrong.
 */
export function resolveOtlpTarget(
  flags: OtlpSettings,
  config: OtlpSettings,
  env: Env,
): OtlpTarget | undefined {
  let url: string;
  let endpointFrom: string;
  const base = flags.endpoint ?? config.endpoint;
  const tracesEndpoint = env.OTEL_EXPORTER_OTLP_TRACES_ENDPOINT?.trim();
  const generalEndpoint = env.OTEL_EXPORTER_OTLP_ENDPOINT?.trim();
  if (base !== undefined) {
    endpointFrom = flags.endpoint !== undefined ? '--otlp' : 'otlp.endpoint';
    url = tracesUrl(base, endpointFrom);
  } else if (tracesEndpoint) {
    endpointFrom = 'OTEL_EXPORTER_OTLP_TRACES_ENDPOINT';
    url = checkedUrl(tracesEndpoint, endpointFrom).toString();
  } else if (generalEndpoint) {
    endpointFrom = 'OTEL_EXPORTER_OTLP_ENDPOINT';
    url = tracesUrl(generalEndpoint, endpointFrom);
  } else return undefined;

  const envProtocol = fromEnv(env, 'PROTOCOL');
  const protocol =
    flags.protocol ?? config.protocol ?? (envProtocol ? protocolOf(...envProtocol) : 'http/protobuf');
  const envHeaders = fromEnv(env, 'HEADERS');
  const headers = { ...(envHeaders ? parseOtlpHeaders(...envHeaders) : {}), ...config.headers };
  const certificate = flags.certificate ?? config.certificate;
  const envCertificate = fromEnv(env, 'CERTIFICATE');
  const ca =
    certificate !== undefined
      ? readCertificate(
          certificate,
          flags.certificate !== undefined ? '--otlp-certificate' : 'otlp.certificate',
        )
      : envCertificate
        ? readCertificate(envCertificate[0], envCertificate[1])
        : undefined;
  if (ca !== undefined && !url.startsWith('https:'))
    throw new OtlpSettingError(`a CA certificate is given but the endpoint ${url} is not https://`);
  const envTimeout = fromEnv(env, 'TIMEOUT');
  let timeoutMs = DEFAULT_TIMEOUT_MS;
  if (envTimeout) {
    timeoutMs = Number(envTimeout[0]);
    if (!Number.isInteger(timeoutMs) || timeoutMs <= 0)
      throw new OtlpSettingError(
        `${envTimeout[1]} "${envTimeout[0]}" must be a positive number of milliseconds`,
      );
  }
  const envCompression = fromEnv(env, 'COMPRESSION');
  if (envCompression && envCompression[0] !== 'gzip' && envCompression[0] !== 'none')
    throw new OtlpSettingError(`${envCompression[1]} "${envCompression[0]}" must be gzip or none`);
  return {
    url,
    endpointFrom,
    protocol,
    headers,
    ...(ca !== undefined && { ca }),
    timeoutMs,
    gzip: envCompression?.[0] !== 'none',
    sampling: flags.sampling ?? config.sampling ?? 'sampled',
    maxSpansPerTrace: flags.maxSpansPerTrace ?? config.maxSpansPerTrace ?? DEFAULT_MAX_SPANS_PER_TRACE,
    queueSpans: flags.queueSpans ?? config.queueSpans ?? DEFAULT_QUEUE_SPANS,
  };
}
