import { mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { OtlpSettingError, parseOtlpHeaders, resolveOtlpTarget } from '../../agent/otlp/otlp-target';
import { MAX_RETRY_AFTER_MS, retryAfterMs } from '../../agent/otlp/otlp-sender';

describe('resolveOtlpTarget', () => {
  it('exports nowhere unless a flag, the config or the environment names an endpoint', () => {
    expect(resolveOtlpTarget({}, {}, {})).toBeUndefined();
    expect(resolveOtlpTarget({}, {}, { OTEL_EXPORTER_OTLP_ENDPOINT: '  ' })).toBeUndefined();
  });

  it('appends /v1/traces to a base endpoint, and uses the _TRACES_ endpoint as it is', () => {
    const url = (flags: object, config: object, env: Record<string, string>) =>
      resolveOtlpTarget(flags, config, env)?.url;
    expect(url({ endpoint: 'http://collector:4318' }, {}, {})).toBe('http://collector:4318/v1/traces');
    expect(url({ endpoint: 'https://gw.example/otlp/' }, {}, {})).toBe('https://gw.example/otlp/v1/traces');
    expect(url({}, { endpoint: 'http://c:4318' }, {})).toBe('http://c:4318/v1/traces');
    expect(url({}, {}, { OTEL_EXPORTER_OTLP_ENDPOINT: 'http://env:4318' })).toBe('http://env:4318/v1/traces');
    expect(
      url(
        {},
        {},
        {
          OTEL_EXPORTER_OTLP_ENDPOINT: 'http://env:4318',
          OTEL_EXPORTER_OTLP_TRACES_ENDPOINT: 'http://traces:9999/custom/path',
        },
      ),
    ).toBe('http://traces:9999/custom/path');
    // the flag wins over the config, the config over the environment
    expect(
      url(
        { endpoint: 'http://flag:1' },
        { endpoint: 'http://config:2' },
        { OTEL_EXPORTER_OTLP_ENDPOINT: 'http://env:3' },
      ),
    ).toBe('http://flag:1/v1/traces');
    expect(
      url({}, { endpoint: 'http://config:2' }, { OTEL_EXPORTER_OTLP_TRACES_ENDPOINT: 'http://env:3' }),
    ).toBe('http://config:2/v1/traces');
  });

  it('takes protocol, headers, timeout and compression from the environment, _TRACES_ first', () => {
    const target = resolveOtlpTarget(
      { endpoint: 'http://c:4318' },
      { headers: { 'x-team': 'sre' } },
      {
        OTEL_EXPORTER_OTLP_PROTOCOL: 'http/protobuf',
        OTEL_EXPORTER_OTLP_TRACES_PROTOCOL: 'http/json',
        OTEL_EXPORTER_OTLP_HEADERS: 'Authorization=Bearer%20t0k3n, x-tenant = a=b ',
        OTEL_EXPORTER_OTLP_TRACES_TIMEOUT: '2500',
        OTEL_EXPORTER_OTLP_COMPRESSION: 'none',
      },
    )!;
    expect(target).toMatchObject({
      protocol: 'http/json',
      headers: { authorization: 'Bearer t0k3n', 'x-tenant': 'a=b', 'x-team': 'sre' },
      timeoutMs: 2500,
      gzip: false,
      sampling: 'sampled',
      endpointFrom: '--otlp',
    });
    expect(
      resolveOtlpTarget(
        { endpoint: 'http://c:4318', protocol: 'http/protobuf' },
        {},
        {
          OTEL_EXPORTER_OTLP_PROTOCOL: 'http/json',
        },
      )!.protocol,
    ).toBe('http/protobuf');
  });

  it('reads the CA certificate file, for https only', () => {
    const dir = mkdtempSync(join(tmpdir(), 'kreplay-otlp-ca-'));
    try {
      const ca = join(dir, 'ca.pem');
      writeFileSync(ca, '-----BEGIN CERTIFICATE-----\n');
      const env = { OTEL_EXPORTER_OTLP_CERTIFICATE: ca };
      expect(resolveOtlpTarget({ endpoint: 'https://c:4318' }, {}, env)!.ca).toBe(
        '-----BEGIN CERTIFICATE-----\n',
      );
      expect(() => resolveOtlpTarget({ endpoint: 'http://c:4318' }, {}, env)).toThrow(/not https/);
      expect(() =>
        resolveOtlpTarget({ endpoint: 'https://c', certificate: join(dir, 'none.pem') }, {}, {}),
      ).toThrow(/--otlp-certificate .*none\.pem/);
    } finally {
      rmSync(dir, { recursive: true, force: true });
    }
  });

  it.each([
    [{ endpoint: 'collector:4318' }, {}, /--otlp "collector:4318" must be an http/],
    [{ endpoint: 'not a url' }, {}, /--otlp "not a url" is not a URL/],
    [{}, { OTEL_EXPORTER_OTLP_ENDPOINT: 'ftp://x' }, /OTEL_EXPORTER_OTLP_ENDPOINT "ftp:\/\/x"/],
    [
      { endpoint: 'http://c' },
      { OTEL_EXPORTER_OTLP_PROTOCOL: 'grpc' },
      /"grpc" is not a protocol kreplay exports with/,
    ],
    [
      { endpoint: 'http://c' },
      { OTEL_EXPORTER_OTLP_TRACES_HEADERS: 'novalue' },
      /TRACES_HEADERS: "novalue" is not key=value/,
    ],
    [{ endpoint: 'http://c' }, { OTEL_EXPORTER_OTLP_TIMEOUT: '10s' }, /OTEL_EXPORTER_OTLP_TIMEOUT "10s"/],
    [{ endpoint: 'http://c' }, { OTEL_EXPORTER_OTLP_COMPRESSION: 'zstd' }, /must be gzip or none/],
  ])('names the setting at fault: %j %j', (flags, env, message) => {
    expect(() => resolveOtlpTarget(flags, {}, env as Record<string, string>)).toThrow(OtlpSettingError);
    expect(() => resolveOtlpTarget(flags, {}, env as Record<string, string>)).toThrow(message);
  });

  it('parses headers as the specification writes them', () => {
    expect(parseOtlpHeaders('a=1,,b=%E2%9C%93', 'X')).toEqual({ a: '1', b: '✓' });
    expect(() => parseOtlpHeaders('a=%zz', 'X')).toThrow(/not percent-encoded/);
  });
});

describe('retryAfterMs', () => {
  it('reads seconds and HTTP dates, bounded, and nothing else', () => {
    const now = Date.parse('Wed, 21 Oct 2026 07:28:00 GMT');
    expect(retryAfterMs('3', now)).toBe(3000);
    expect(retryAfterMs('Wed, 21 Oct 2026 07:28:07 GMT', now)).toBe(7000);
    expect(retryAfterMs('Wed, 21 Oct 2026 07:27:00 GMT', now)).toBe(0);
    expect(retryAfterMs('999999', now)).toBe(MAX_RETRY_AFTER_MS);
    expect(retryAfterMs(undefined, now)).toBeNull();
    expect(retryAfterMs('soon', now)).toBeNull();
  });
});
