import { eventToJson, type ApiEvent, type BlockIoEvent, type SysWriteEvent } from '../../core/model';

const write: SysWriteEvent = {
  event_id: 'aaaaaaaaaaaa18e4f0a1b2c3d4e5000000000007',
  event_type: 'sys_write',
  timestamp_ns: 1_795_345_678_123_456_789n,
  duration_ns: 9_223_372_036_854_775_807n,
  service_name: 'checkout',
  transaction_id: 'tx-1',
  trace_id: null,
  node: 'n1',
  pid: 4242,
  tid: 4243,
  comm: 'worker',
  bytes: 512,
  syscall: 'pwritev2',
  fd: -1,
  ret: -28,
  target_kind: 'socket',
  target: 'tcp [::1]:8080',
  request_key: 4_294_967_295,
};

const {
  syscall: _syscall,
  fd: _fd,
  ret: _ret,
  target_kind: _kind,
  target: _target,
  request_key: _request,
  ...common
} = write;
const block: BlockIoEvent = {
  ...common,
  event_type: 'block_io',
  device: '7:3',
  sector: 123456789,
  op: 'write',
  error: -5,
};

/** The event with its bigints as decimal strings: what a parse with exact integers would give. */
function exact(event: ApiEvent): Record<string, unknown> {
  return Object.fromEntries(
    Object.entries(event).map(([k, v]) => [k, typeof v === 'bigint' ? v.toString() : v]),
  );
}

/** JSON.parse keeping every integer literal of 16+ digits as its text. */
function parseExact(text: string): Record<string, unknown> {
  return JSON.parse(text.replace(/:(-?\d{16,})([,}])/g, ':"$1"$2')) as Record<string, unknown>;
}

describe('eventToJson', () => {
  it.each([
    ['sys_write', write],
    ['block_io', block],
  ])('writes every field of a %s, 19-digit integers exactly', (_type, event) => {
    const text = eventToJson(event);
    expect(text).toContain('"timestamp_ns":1795345678123456789,');
    expect(text).toContain('"duration_ns":9223372036854775807,');
    expect(parseExact(text)).toEqual(exact(event));
  });

  it('writes the 64-bit integers as strings for JavaScript clients', () => {
    const parsed = JSON.parse(eventToJson(write, true)) as Record<string, unknown>;
    expect(parsed.timestamp_ns).toBe('1795345678123456789');
    expect(parsed.duration_ns).toBe('9223372036854775807');
    expect(parsed.pid).toBe(4242);
  });

  it.each([
    ['a quote', 'say "hi"'],
    ['a backslash', 'C:\\tmp'],
    ['control characters', 'tab\there\nnewline\u0001'],
    ['non-ASCII', 'café ☕ 服务'],
    ['line separators', 'a\u2028b\u2029c'],
    ['a lone surrogate', 'x\ud800y'],
    ['an empty string', ''],
  ])('escapes strings with %s into valid JSON that reads back the same', (_what, text) => {
    const event = { ...write, comm: text, service_name: text, transaction_id: text, target: text };
    const parsed = parseExact(eventToJson(event));
    expect(parsed.comm).toBe(JSON.parse(JSON.stringify(text)));
    expect(parsed.service_name).toBe(parsed.comm);
    expect(parsed.transaction_id).toBe(parsed.comm);
    expect(parsed.target).toBe(parsed.comm);
  });

  it('appends extra fields after the event, bigints exact', () => {
    const text = eventToJson(write, false, {
      replay_offset_ns: 12_345_678_901_234_567_890n,
      emitted_late_ns: null,
    });
    expect(text.endsWith(',"replay_offset_ns":12345678901234567890,"emitted_late_ns":null}')).toBe(true);
  });
});
