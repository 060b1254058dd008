import { buildPlan, type RecordedCall } from '../../cli/exec/exec-plan';
import { checkMaps, collectMaps, mapTarget, portKey, type TargetMap } from '../../cli/exec/target-keys';
import { Schedule } from '../../core/replay/schedule';

const write = (ts: bigint, dur: bigint, target: string, kind = 'file'): RecordedCall => ({
  event_type: 'sys_write',
  timestamp_ns: ts,
  duration_ns: dur,
  target,
  target_kind: kind,
});
const block = (ts: bigint): RecordedCall => ({ event_type: 'block_io', timestamp_ns: ts, duration_ns: 7n });

describe('target names for the test build', () => {
  it('rewrites path prefixes at component boundaries only', () => {
    const maps = collectMaps('/var/lib/app=/tmp/app');
    expect(mapTarget('/var/lib/app/wal.log', 'file', maps)).toBe('/tmp/app/wal.log');
    expect(mapTarget('/var/lib/app', 'file', maps)).toBe('/tmp/app');
    expect(mapTarget('/var/lib/apple/x', 'file', maps)).toBe('/var/lib/apple/x');
    expect(mapTarget('unix /var/lib/app/s.sock', 'socket', maps)).toBe('unix /tmp/app/s.sock');
  });

  it('rewrites socket addresses, whole or by host, the first map that applies winning', () => {
    let maps = collectMaps('10.0.0.5:5432=127.0.0.1:15432');
    maps = collectMaps('10.0.0.5=127.0.0.2', maps);
    expect(mapTarget('tcp 10.0.0.5:5432', 'socket', maps)).toBe('tcp 127.0.0.1:15432');
    expect(mapTarget('tcp 10.0.0.5:6379', 'socket', maps)).toBe('tcp 127.0.0.2:6379');
    expect(mapTarget('udp [::1]:53', 'socket', collectMaps('[::1]=[::2]'))).toBe('udp [::2]:53');
    expect(mapTarget('tcp 10.0.0.6:5432', 'socket', maps)).toBe('tcp 10.0.0.6:5432');
  });

  it('maps a connection the service accepted by its listening address, and keys it apart from calls out', () => {
    const maps = collectMaps('tcp 10.0.0.5:8080=tcp 127.0.0.1:18080');
    expect(mapTarget('tcp accepted 10.0.0.5:8080', 'socket', maps)).toBe('tcp accepted 127.0.0.1:18080');
    expect(mapTarget('tcp accepted 10.0.0.5:8080', 'socket', collectMaps('10.0.0.5=127.0.0.1'))).toBe(
      'tcp accepted 127.0.0.1:8080',
    );
    expect(portKey('tcp accepted 10.0.0.5:8080')).toBe('tcp accepted *:8080');
    expect(portKey('tcp 10.0.0.5:8080')).toBe('tcp *:8080');
  });

  it("takes the form the report's hint gives (`tcp ADDR=tcp ADDR`), and refuses a change of protocol", () => {
    const maps = collectMaps('tcp 127.0.0.1:6379=tcp 127.0.0.1:16379');
    expect(mapTarget('tcp 127.0.0.1:6379', 'socket', maps)).toBe('tcp 127.0.0.1:16379');
    expect(mapTarget('udp 127.0.0.1:6379', 'socket', maps)).toBe('udp 127.0.0.1:6379');
    expect(mapTarget('unix /run/a.sock', 'socket', collectMaps('unix /run=/tmp/run'))).toBe(
      'unix /tmp/run/a.sock',
    );
    expect(mapTarget('/run/a.log', 'file', collectMaps('unix /run=/tmp/run'))).toBe('/run/a.log');
    expect(() => collectMaps('tcp 10.0.0.5:53=udp 127.0.0.1:53')).toThrow(/cannot change the protocol/);
  });

  it('checks maps against the recorded targets: one that matches nothing, twice, or in conflict is refused', () => {
    const recorded = new Map([
      ['tcp 127.0.0.1:6379', 'socket'],
      ['tcp 10.0.0.7:5432', 'socket'],
      ['/var/lib/app/db.sqlite', 'file'],
    ]);
    const maps = (...rules: string[]) => rules.reduce((all, r) => collectMaps(r, all), [] as TargetMap[]);
    expect(() =>
      checkMaps(maps('tcp 127.0.0.1:6379=tcp 127.0.0.1:16379', '/var/lib/app=/tmp/app'), recorded),
    ).not.toThrow();
    expect(() => checkMaps(maps('127.0.0.1:6380=127.0.0.1:16379'), recorded)).toThrow(
      "--map 127.0.0.1:6380=127.0.0.1:16379 matches no recorded target; the incident's targets nearest it: tcp 127.0.0.1:6379,",
    );
    expect(() => checkMaps(maps('/var/lib/ap=/tmp/app'), recorded)).toThrow(
      /--map \/var\/lib\/ap=\/tmp\/app matches no recorded target; the incident's targets nearest it: \/var\/lib\/app\/db\.sqlite/,
    );
    expect(() => checkMaps(maps('10.0.0.7=127.0.0.1', '10.0.0.7=127.0.0.1'), recorded)).toThrow(
      '--map 10.0.0.7=127.0.0.1 is given twice',
    );
    expect(() => checkMaps(maps('10.0.0.7=127.0.0.1', '10.0.0.7=127.0.0.2'), recorded)).toThrow(
      '--map 10.0.0.7=127.0.0.2 conflicts with --map 10.0.0.7=127.0.0.1',
    );
    expect(() => checkMaps(maps('10.0.0.7=127.0.0.1', '10.0.0.7:5432=127.0.0.2:5432'), recorded)).toThrow(
      /--map 10\.0\.0\.7:5432=127\.0\.0\.2:5432 conflicts with the rules before it/,
    );
  });

  it('refuses a map without both sides', () => {
    for (const bad of ['/a', '=/b', '/a=']) expect(() => collectMaps(bad)).toThrow(/FROM=TO/);
  });

  it('keys sockets by peer port, not unix sockets or files', () => {
    expect(portKey('tcp 10.0.0.5:5432')).toBe('tcp *:5432');
    expect(portKey('tcp [::1]:8080')).toBe('tcp *:8080');
    expect(portKey('unix /run/a:b.sock')).toBeNull();
    expect(portKey('pipe')).toBeNull();
  });
});

describe('buildPlan', () => {
  const events = [
    write(1000n, 100n, '/var/lib/app/wal.log'),
    block(1500n),
    write(2000n, 300n, 'pipe', 'pipe'),
    write(3000n, 200n, '/var/lib/app/wal.log'),
    write(4000n, 50n, 'tcp 10.0.0.5:5432', 'socket'),
    { ...write(5000n, 1n, 'x'), target: null },
  ];

  it('groups calls by mapped target in recorded order; duration pace holds D/speed + extra', () => {
    const plan = buildPlan(events, {
      maps: collectMaps('/var/lib/app=/tmp/app'),
      schedule: new Schedule(2, 10n),
      pace: 'duration',
    });
    expect(plan.map((t) => [t.target, t.recorded, t.kind, t.keys])).toEqual([
      ['/tmp/app/wal.log', '/var/lib/app/wal.log', 'file', ['/tmp/app/wal.log']],
      ['pipe', 'pipe', 'pipe', ['pipe']],
      ['tcp 10.0.0.5:5432', 'tcp 10.0.0.5:5432', 'socket', ['tcp 10.0.0.5:5432', 'tcp *:5432']],
    ]);
    expect(plan[0]!.recordedNs).toEqual([100n, 200n]);
    expect([...plan[0]!.holdsNs]).toEqual([60n, 110n]);
    expect([...plan[2]!.holdsNs]).toEqual([35n]);
  });

  it('timeline pace releases at each event replayed end: offset/speed + index × extra + replayed duration', () => {
    const plan = buildPlan(events, { maps: [], schedule: new Schedule(1, 1000n), pace: 'timeline' });
    // wal.log: event 0 at offset 0 (+100); event 3 at offset 2000 + 3 × 1000 extra (+200 + 1000)
    expect([...plan[0]!.holdsNs]).toEqual([0n + 100n + 1000n, 2000n + 3000n + 200n + 1000n]);
    // the pipe write is event 2, after a block_io event that counts on the timeline
    expect([...plan[1]!.holdsNs]).toEqual([1000n + 2000n + 300n + 1000n]);
  });

  it('gives two recorded targets that map onto one the same group, in recorded order, named by the first', () => {
    const plan = buildPlan(
      [
        write(1000n, 10n, '/var/lib/a/x.log'),
        write(2000n, 20n, '/var/lib/b/x.log'),
        write(3000n, 30n, '/var/lib/a/x.log'),
        { ...write(4000n, 40n, '/var/lib/b/x.log'), event_type: 'sys_fsync' },
      ],
      {
        maps: collectMaps('/var/lib/b=/var/lib/a'),
        schedule: new Schedule(1, 0n),
        pace: 'duration',
      },
    );
    expect(plan.map((t) => [t.call, t.target, t.recorded, t.recordedNs])).toEqual([
      ['write', '/var/lib/a/x.log', '/var/lib/a/x.log', [10n, 20n, 30n]],
      ['fsync', '/var/lib/a/x.log', '/var/lib/b/x.log', [40n]],
    ]);
  });

  it('is empty for an incident without targeted writes', () => {
    expect(buildPlan([block(1n)], { maps: [], schedule: new Schedule(1, 0n), pace: 'duration' })).toEqual([]);
  });
});

describe('buildPlan: calls beyond writes, byte streams, errors', () => {
  const call = (
    type: string,
    ts: bigint,
    dur: bigint,
    target: string,
    kind: string,
    fields: Partial<RecordedCall> = {},
  ): RecordedCall => ({
    event_type: type,
    timestamp_ns: ts,
    duration_ns: dur,
    target,
    target_kind: kind,
    ...fields,
  });
  const duration = { maps: [], schedule: new Schedule(1, 0n), pace: 'duration' as const };

  it('plans a row per (call kind, target): a file written and fsynced is two, a connect to the peer sent to another', () => {
    const plan = buildPlan(
      [
        call('sys_write', 1n, 10n, '/db/wal', 'file', { syscall: 'pwrite64', bytes: 4096 }),
        call('sys_fsync', 2n, 900n, '/db/wal', 'file', { syscall: 'fdatasync' }),
        call('sys_connect', 3n, 1500n, 'tcp 10.0.0.5:5432', 'socket', { syscall: 'connect' }),
        call('sys_write', 4n, 20n, 'tcp 10.0.0.5:5432', 'socket', { syscall: 'sendto', bytes: 100 }),
        call('sys_read', 5n, 30n, 'tcp 10.0.0.5:5432', 'socket', { syscall: 'recvfrom', bytes: 100 }),
      ],
      duration,
    );
    expect(plan.map((t) => [t.call, t.target, t.match, [...t.holdsNs]])).toEqual([
      // a file written at offsets is no stream
      ['write', '/db/wal', 'calls', [10n]],
      ['fsync', '/db/wal', 'calls', [900n]],
      ['connect', 'tcp 10.0.0.5:5432', 'calls', [1500n]],
      ['write', 'tcp 10.0.0.5:5432', 'bytes', [20n]],
      // the read after the send: the upstream answered 11 ns after the send ended
      ['response', 'tcp 10.0.0.5:5432', 'calls', [11n]],
    ]);
    expect(plan[2]!.keys).toEqual(['tcp 10.0.0.5:5432', 'tcp *:5432']);
  });

  it('matches a stream by bytes: byte ends accumulate over the calls with bytes; --match calls keeps calls', () => {
    const events = [
      call('sys_write', 1n, 10n, 'pipe', 'pipe', { syscall: 'write', bytes: 100 }),
      call('sys_write', 2n, 5n, 'pipe', 'pipe', { syscall: 'write', bytes: 0 }),
      call('sys_write', 3n, 30n, 'pipe', 'pipe', { syscall: 'writev', bytes: 300 }),
    ];
    const [bytes] = buildPlan(events, duration);
    expect(bytes).toMatchObject({ match: 'bytes', recordedBytes: 400, recordedNs: [10n, 5n, 30n] });
    expect([...bytes!.bytesEnd!]).toEqual([100n, 400n]);
    expect([...bytes!.holdsNs]).toEqual([10n, 30n]);
    expect(bytes!.spansNs).toBeUndefined();
    const [calls] = buildPlan(events, { ...duration, match: 'calls' });
    expect(calls!.match).toBe('calls');
    expect(calls!.bytesEnd).toBeUndefined();
    expect([...calls!.holdsNs]).toEqual([10n, 5n, 30n]);
  });

  it('timeline pace: a stream holds each call its release offset and its replayed duration to interpolate with', () => {
    const [plan] = buildPlan(
      [
        call('sys_write', 1000n, 10n, 'pipe', 'pipe', { bytes: 10 }),
        call('sys_write', 2000n, 20n, 'pipe', 'pipe', { bytes: 10 }),
      ],
      { maps: [], schedule: new Schedule(2, 0n), pace: 'timeline' },
    );
    expect([...plan!.holdsNs]).toEqual([5n, 500n + 10n]);
    expect([...plan!.spansNs!]).toEqual([5n, 10n]);
  });

  it('--replay-errors: per recorded call its errno; a stream with a failed write is matched per call', () => {
    const events = [
      call('sys_fsync', 1n, 10n, '/db/wal', 'file', { ret: 0 }),
      call('sys_fsync', 2n, 20n, '/db/wal', 'file', { ret: -5 }),
      call('sys_write', 3n, 1n, 'tcp 1.2.3.4:80', 'socket', { bytes: 10, ret: 10 }),
      call('sys_write', 4n, 2n, 'tcp 1.2.3.4:80', 'socket', { bytes: 0, ret: -104 }),
    ];
    const plain = buildPlan(events, duration);
    expect(plain.map((t) => [t.match, t.errnos, t.recordedErrors])).toEqual([
      ['calls', undefined, 1],
      ['bytes', undefined, 1],
    ]);
    const failing = buildPlan(events, { ...duration, replayErrors: true });
    expect(failing.map((t) => [t.match, t.errnos && [...t.errnos]])).toEqual([
      ['calls', [0, 5]],
      ['calls', [0, 104]],
    ]);
  });
});

describe('buildPlan: responses', () => {
  const ev = (type: string, ts: bigint, dur: bigint, fields: Partial<RecordedCall> = {}): RecordedCall => ({
    event_type: type,
    timestamp_ns: ts,
    duration_ns: dur,
    target: 'tcp 10.0.0.5:80',
    target_kind: 'socket',
    pid: 7,
    fd: 4,
    ...fields,
  });

  it("takes each exchange's response_ns, or derives it from the last send's end to the first read's end", () => {
    const plan = buildPlan(
      [
        ev('sys_write', 1000n, 10n, { bytes: 50 }),
        // as the daemon's exact JSON gives it: a string
        ev('sys_read', 1100n, 2900n, { bytes: 80, response_ns: '3000' }),
        // a second read of the same response is no exchange
        ev('sys_read', 4100n, 5n, { bytes: 80 }),
        // recorded without response_ns: send ends at 5010, read ends at 5500
        ev('sys_write', 5000n, 10n, { bytes: 50 }),
        ev('sys_read', 5020n, 480n, { bytes: 80 }),
        // another connection's read without a send before it
        ev('sys_read', 6000n, 9n, { bytes: 80, fd: 5 }),
      ],
      { maps: [], schedule: new Schedule(2, 7n), pace: 'timeline' },
    );
    const response = plan.find((t) => t.call === 'response')!;
    expect(response.keys).toEqual(['tcp 10.0.0.5:80', 'tcp *:80']);
    expect(response.recordedNs).toEqual([3000n, 490n]);
    // scaled by the speed, without the per-call extra latency, whatever the pace
    expect([...response.holdsNs]).toEqual([1500n, 245n]);
    expect(plan.map((t) => t.call)).toEqual(['write', 'response']);
  });

  it("gives each exchange the key of the request that started it; a read of the stream's end is none", () => {
    const plan = buildPlan(
      [
        ev('sys_write', 1000n, 10n, { bytes: 50, request_key: 11 }),
        ev('sys_read', 1100n, 20n, { bytes: 80, ret: 80, response_ns: '3000' }),
        ev('sys_write', 2000n, 10n, { bytes: 50, request_key: 22 }),
        // a send that continues the request carries no key of its own
        ev('sys_write', 2020n, 10n, { bytes: 50 }),
        ev('sys_read', 2100n, 20n, { bytes: 80, ret: 80, response_ns: '900' }),
        // a server's idle read that met the client's close: no response, whatever its response_ns says
        ev('sys_write', 3000n, 10n, { bytes: 50 }),
        ev('sys_read', 3100n, 60_000n, { bytes: 8192, ret: 0, response_ns: '60000' }),
        // recorded without keys: matched by order
        ev('sys_write', 4000n, 10n, { bytes: 50 }),
        ev('sys_read', 4100n, 20n, { bytes: 80, ret: 80, response_ns: '50' }),
      ],
      { maps: [], schedule: new Schedule(1, 0n), pace: 'duration' },
    );
    const response = plan.find((t) => t.call === 'response')!;
    expect(response.recordedNs).toEqual([3000n, 900n, 50n]);
    expect([...response.requestKeys!]).toEqual([11, 22, 0]);
  });

  it('a read that failed (EAGAIN before the poll, as Go and libuv read) is no exchange: the read after it is the response', () => {
    const plan = buildPlan(
      [
        ev('sys_write', 1000n, 10n, { bytes: 26, request_key: 7 }),
        ev('sys_read', 1020n, 14n, { bytes: 4096, ret: -11 }),
        ev('sys_read', 1_500_000_000n, 20n, { bytes: 4096, ret: 5, response_ns: '1499999000' }),
      ],
      { maps: [], schedule: new Schedule(1, 0n), pace: 'duration' },
    );
    const response = plan.find((t) => t.call === 'response')!;
    expect(response.recordedNs).toEqual([1_499_999_000n]);
    expect([...response.requestKeys!]).toEqual([7]);
  });
});
