import {
  InvalidValue,
  formatTimeNs,
  parseDurationMsNs,
  parseEventTypes,
  parseIntegerIn,
  parseTimeNs,
} from '../../daemon/http/query-values';

describe('parseTimeNs', () => {
  it.each([
    ['1795345678123456789', 1795345678123456789n],
    ['0', 0n],
    ['9223372036854775807', 9223372036854775807n],
    ['1970-01-01T00:00:00Z', 0n],
    ['2026-11-22T09:30:00.123456789Z', 1795339800123456789n],
    ['2026-11-22t09:30:00.123456789z', 1795339800123456789n],
    ['2026-11-22T09:30:00.1Z', 1795339800100000000n],
    ['2026-11-22T11:30:00.123456789+02:00', 1795339800123456789n],
    ['2026-11-22T11:30:00.123456789 02:00', 1795339800123456789n], // "+" unencoded in a query string
    ['2026-11-22T04:00:00.000000001-05:30', 1795339800000000001n],
    ['2024-02-29T00:00:00Z', 1709164800000000000n],
    ['2000-03-01T00:00:00Z', 951868800000000000n],
    ['2262-04-11T23:47:16.854775807Z', 9223372036854775807n],
  ])('%s -> %s ns exactly', (text, ns) => {
    expect(parseTimeNs(text)).toBe(ns);
  });

  it('agrees with Date.parse to the millisecond over many dates', () => {
    for (let ms = 0; ms < 9e12; ms += 86_399_999_937) {
      const iso = new Date(ms).toISOString();
      expect(parseTimeNs(iso)).toBe(BigInt(ms) * 1_000_000n);
    }
  });

  it.each([
    ['', /RFC 3339/],
    ['-1', /RFC 3339/],
    ['1.5', /RFC 3339/],
    ['9223372036854775808', /out of range/],
    ['12345678901234567890', /out of range/],
    ['2026-11-22T09:30:00.1234567891Z', /9 fractional digits/],
    ['2026-11-22T09:30:00', /RFC 3339/],
    ['2026-11-22 09:30:00Z', /RFC 3339/],
    ['2026-13-01T00:00:00Z', /not a valid date/],
    ['2025-02-29T00:00:00Z', /not a valid date/],
    ['2026-04-31T00:00:00Z', /not a valid date/],
    ['2026-11-22T24:00:00Z', /not a valid date/],
    ['2026-11-22T09:60:00Z', /not a valid date/],
    ['2026-11-22T09:30:60Z', /not a valid date/],
    ['2026-11-22T09:30:00+24:00', /not a valid date/],
    ['1969-12-31T23:59:59.999999999Z', /out of range/],
    ['2262-04-11T23:47:16.854775808Z', /out of range/],
    ['２０２６-11-22T09:30:00Z', /RFC 3339/],
  ])('rejects %j', (text, message) => {
    expect(() => parseTimeNs(text)).toThrow(InvalidValue);
    expect(() => parseTimeNs(text)).toThrow(message);
  });

  it('formatTimeNs is its inverse with all 9 digits', () => {
    for (const ns of [0n, 1795339800123456789n, 1795339800000000001n, 9223372036854775807n]) {
      const text = formatTimeNs(ns);
      expect(text).toMatch(/^\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d\.\d{9}Z$/);
      expect(parseTimeNs(text)).toBe(ns);
    }
  });
});

describe('parseDurationMsNs', () => {
  it.each([
    ['0', 0n],
    ['0.25', 250_000n],
    ['1', 1_000_000n],
    ['0.000001', 1n],
    ['12.5', 12_500_000n],
    ['000.100000', 100_000n],
    ['9223372036854.775807', 9223372036854775807n],
  ])('%s ms -> %s ns exactly', (text, ns) => {
    expect(parseDurationMsNs(text)).toBe(ns);
  });

  it.each([
    ['0.0000001', /6 fractional digits/],
    ['-1', /decimal milliseconds/],
    ['1e3', /decimal milliseconds/],
    ['.5', /decimal milliseconds/],
    ['1.', /decimal milliseconds/],
    ['', /decimal milliseconds/],
    ['9223372036854.775808', /out of range/],
  ])('rejects %j', (text, message) => {
    expect(() => parseDurationMsNs(text)).toThrow(message);
  });
});

describe('parseEventTypes', () => {
  it('reads one type or a list, without repeats', () => {
    expect(parseEventTypes('sys_write')).toEqual(['sys_write']);
    expect(parseEventTypes('sys_write,block_io,sys_write')).toEqual(['sys_write', 'block_io']);
    expect(parseEventTypes('sys_read,sys_fsync,sys_connect')).toEqual([
      'sys_read',
      'sys_fsync',
      'sys_connect',
    ]);
  });

  it.each(['', 'sys_open', 'sys_write,', 'sys_write, block_io', 'SYS_WRITE'])('rejects %j', (text) => {
    expect(() => parseEventTypes(text)).toThrow(/sys_write, block_io, sys_read, sys_fsync or sys_connect/);
  });
});

describe('parseIntegerIn', () => {
  const limit = parseIntegerIn(1, 10000);
  it('accepts digits in range only', () => {
    expect(limit('1')).toBe(1);
    expect(limit('10000')).toBe(10000);
    for (const bad of ['0', '10001', '-1', '1.0', '1e3', '', ' 5', '9'.repeat(400)])
      expect(() => limit(bad)).toThrow(/integer 1\.\.10000/);
  });
});
