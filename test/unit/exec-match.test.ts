/**
 * Which recorded call a build's call takes (native/exec/exec_match.cc), driven through the addon's
 * execMatch without a build, a kernel or root: the supervisor runs the same code on each call.
 */
import { buildPlan, type RecordedCall } from '../../cli/exec/exec-plan';
import { portKey } from '../../cli/exec/target-keys';
import { nativeAddon, type NativeExecCall, type NativeExecTarget } from '../../core/native/addon';
import { Schedule } from '../../core/replay/schedule';

const { execMatch } = nativeAddon();
const ns = (...values: bigint[]) => BigInt64Array.from(values);
const write = (target: string, bytes?: number, socket = false): NativeExecCall => ({
  call: 'write',
  target,
  socket,
  ...(bytes === undefined ? {} : { bytes }),
});
/** [target, held, releaseNs, errno, from, to] per call */
const decisions = (
  pace: 'duration' | 'timeline',
  targets: NativeExecTarget[],
  calls: NativeExecCall[],
): [number, boolean, bigint, number, number, number][] =>
  execMatch({ pace, targets }, calls).map((m) => [m.target, m.held, m.releaseNs, m.errno, m.from, m.to]);

describe('matching by calls', () => {
  it('gives the k-th call the k-th hold and errno, and lets the calls past the recorded ones through', () => {
    const target: NativeExecTarget = {
      call: 'fsync',
      keys: ['/data/wal'],
      holdsNs: ns(5_000n, 7_000n),
      errnos: Int32Array.from([0, 5]),
    };
    const fsync: NativeExecCall = { call: 'fsync', target: '/data/wal' };
    expect(decisions('duration', [target], [fsync, fsync, fsync])).toEqual([
      [0, true, 5_000n, 0, 0, 0],
      [0, true, 7_000n, 5, 0, 0],
      [0, false, 0n, 0, 0, 0],
    ]);
  });

  it('counts each target on its own, and a call kind the plan lacks matches nothing', () => {
    const targets: NativeExecTarget[] = [
      { call: 'write', keys: ['/a'], holdsNs: ns(1n) },
      { call: 'write', keys: ['/b'], holdsNs: ns(2n, 3n) },
    ];
    expect(
      decisions('duration', targets, [
        write('/b'),
        write('/a'),
        write('/b'),
        { call: 'fsync', target: '/a' },
      ]),
    ).toEqual([
      [1, true, 2n, 0, 0, 0],
      [0, true, 1n, 0, 0, 0],
      [1, true, 3n, 0, 0, 0],
      [-1, false, 0n, 0, 0, 0],
    ]);
  });
});

describe('matching a stream by bytes', () => {
  const stream: NativeExecTarget = {
    call: 'write',
    keys: ['pipe'],
    holdsNs: ns(100n, 300n),
    bytesEnd: ns(10n, 20n),
    spansNs: ns(50n, 100n),
  };

  it('holds bytes [a, b) for the time the incident took to write them; unsized calls and calls past the end pass', () => {
    expect(
      decisions(
        'duration',
        [stream],
        [write('pipe', 15), write('pipe'), write('pipe', 10), write('pipe', 1)],
      ),
    ).toEqual([
      [0, true, 250n, 0, 0, 15],
      [0, false, 0n, 0, 0, 0],
      [0, true, 150n, 0, 15, 20],
      [0, false, 0n, 0, 0, 0],
    ]);
  });

  it('on the timeline, releases byte b when the recorded call holding it had written its share', () => {
    // byte 5 is half of call 0 (released at 100, span 50); byte 20 ends call 1 (released at 300)
    expect(decisions('timeline', [stream], [write('pipe', 5), write('pipe', 15)])).toEqual([
      [0, true, 75n, 0, 0, 5],
      [0, true, 300n, 0, 5, 20],
    ]);
  });

  it('refuses byte ends that do not increase, or that differ in count from the holds', () => {
    expect(() => decisions('duration', [{ ...stream, bytesEnd: ns(10n, 10n) }], [])).toThrow(
      expect.objectContaining({ code: 'E_EXEC_PLAN', message: expect.stringMatching(/must increase/) }),
    );
    expect(() => decisions('duration', [{ ...stream, bytesEnd: ns(10n) }], [])).toThrow(/differ in count/);
    expect(() => decisions('timeline', [{ ...stream, spansNs: ns(1n) }], [])).toThrow(/differ in count/);
  });
});

describe('the match key', () => {
  it('matches a socket by its exact name first, then by its port key; files and unix sockets never by port', () => {
    const targets: NativeExecTarget[] = [
      { call: 'write', keys: ['tcp 10.0.0.5:5432', 'tcp *:5432'], holdsNs: ns(1n, 1n) },
      { call: 'write', keys: ['tcp 127.0.0.1:5432'], holdsNs: ns(2n) },
      { call: 'write', keys: ['tcp accepted 10.0.0.5:8080', 'tcp accepted *:8080'], holdsNs: ns(3n) },
    ];
    expect(
      decisions('duration', targets, [
        write('tcp 127.0.0.1:5432', undefined, true),
        write('tcp 10.0.0.9:5432', undefined, true),
        write('tcp 10.0.0.9:5432', undefined, false),
        write('tcp accepted 127.0.0.1:8080', undefined, true),
        write('tcp 127.0.0.1:8080', undefined, true),
      ]).map(([target]) => target),
    ).toEqual([1, 0, -1, 2, -1]);
    expect(nativeAddon().portKey('unix /run/a:b.sock')).toBeNull();
    expect(nativeAddon().portKey('tcp [::1]:8080')).toBe('tcp *:8080');
  });

  it("has one owner: the plan's keys are built by the supervisor's own PortKey, through the addon", () => {
    const addonPortKey = jest.spyOn(nativeAddon(), 'portKey');
    try {
      expect(portKey('tcp 10.0.0.5:5432')).toBe('tcp *:5432');
      expect(addonPortKey).toHaveBeenCalledWith('tcp 10.0.0.5:5432');
    } finally {
      addonPortKey.mockRestore();
    }
    // a plan built from a recording on one host takes the build's call to the same port on another
    const recorded: RecordedCall = {
      event_type: 'sys_write',
      timestamp_ns: 1n,
      duration_ns: 9_000n,
      target: 'tcp 10.0.0.5:5432',
      target_kind: 'socket',
    };
    const plan = buildPlan([recorded], {
      maps: [],
      schedule: new Schedule(1, 0n),
      pace: 'duration',
      match: 'calls',
    });
    expect(decisions('duration', plan, [write('tcp 127.0.0.1:5432', 8, true)])).toEqual([
      [0, true, 9_000n, 0, 0, 0],
    ]);
  });
});

describe('responses matched to the request they answer (the relay, native/exec/exec_relay.cc PickExchange)', () => {
  const { execExchanges, requestKey } = nativeAddon();
  const redis = (...args: string[]) =>
    requestKey(Buffer.from(`*${args.length}\r\n${args.map((a) => `$${a.length}\r\n${a}\r\n`).join('')}`));

  it('gives a request the first unused exchange of its key, equal requests in order; one the incident never made passes', () => {
    const get = redis('GET', 'cart:1');
    // the literal value is no part of the key: GET cart:2 is the same request
    expect(redis('GET', 'cart:2')).toBe(get);
    expect(execExchanges([get, get], [redis('PING'), get, redis('GET', 'cart:2'), get])).toEqual([
      null,
      0,
      1,
      null,
    ]);
  });

  it('matches exchanges recorded without a key by order, after those of the same key', () => {
    const [get, set] = [redis('GET', 'a'), redis('SET', 'a', '1')];
    expect(execExchanges([0, 0], [redis('PING'), get, get])).toEqual([0, 1, null]);
    expect(execExchanges([set, 0], [get, set])).toEqual([1, 0]);
  });
});
