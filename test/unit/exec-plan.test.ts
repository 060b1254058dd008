import { buildPlan, type RecordedCall } from '../../cli/exec/exec-plan';
import { collectMaps, mapTarget, portKey } from '../../cli/exec/target-keys';
import { Schedule } from '../../daemon/replay/sessions/schedule';

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

  it('is empty for an incident without targeted writes', () => {
    expect(buildPlan([block(1n)], { maps: [], schedule: new Schedule(1, 0n), pace: 'duration' })).toEqual([]);
  });
});
