import { incidentCauses, type CauseFields } from '../../core/incident/incident-causes';

const ms = (n: number) => BigInt(Math.round(n * 1_000_000));
const call = (type: string, atMs: number, durMs: number, extra: Partial<CauseFields> = {}): CauseFields => ({
  event_type: type,
  timestamp_ns: ms(1000 + atMs),
  duration_ns: ms(durMs),
  ...extra,
});

describe('the incident cause rule', () => {
  test("a Redis response wait is the cause, not the client's read that waited on the service", () => {
    const events = [
      call('sys_write', 0, 0.02), // curl sends the request
      call('sys_read', 0.5, 0.01), // the service reads the head
      call('sys_write', 1, 0.01), // GET to redis
      call('sys_read', 1501, 0.01, { response_ns: ms(1500) }), // redis answers 1.5 s later
      call('sys_write', 1502, 0.3), // sqlite commit
      call('sys_fsync', 1503, 2), // a short fsync
      call('sys_write', 1506, 0.02), // the reply
      call('sys_read', 1506.1, 0.01, { response_ns: ms(1506) }), // curl's wait on the service
    ];
    expect(incidentCauses(events)).toEqual([{ index: 3, cause: 'response', wait_ns: ms(1500), errno: null }]);
  });

  test('a long call by its duration; a refused connect whatever its time; EAGAIN and short calls never', () => {
    const events = [
      call('sys_connect', 0, 0.1, { ret: -111 }),
      call('sys_read', 1, 0.01, { ret: -11 }),
      call('sys_fsync', 2, 80),
      call('sys_write', 90, 0.5),
    ];
    expect(incidentCauses(events)).toEqual([
      { index: 2, cause: 'duration', wait_ns: ms(80), errno: null },
      { index: 0, cause: 'error', wait_ns: ms(0.1), errno: 'ECONNREFUSED' },
    ]);
  });

  test('a read with no send before it waited for input (idle), no cause', () => {
    expect(incidentCauses([call('sys_read', 0, 35), call('sys_write', 35, 0.1)])).toEqual([]);
  });

  test('waits under a tenth of the span, or under 1 ms, are not causes; an empty transaction has none', () => {
    const many = Array.from({ length: 20 }, (_, i) => call('sys_write', i * 10, 5));
    expect(incidentCauses(many)).toEqual([]);
    expect(incidentCauses([call('sys_write', 0, 0.5)])).toEqual([]);
    expect(incidentCauses([])).toEqual([]);
  });

  test('a wait starting with the one it waited on still encloses it; thousands of concurrent waits are all causes', () => {
    const sameStart = [
      call('sys_read', 1000, 0.01, { response_ns: ms(1000) }),
      call('sys_read', 500, 0.01, { response_ns: ms(500) }),
    ];
    expect(incidentCauses(sameStart).map((c) => c.index)).toEqual([1]);
    const threads = Array.from({ length: 5000 }, (_, i) =>
      call('sys_read', 500 + i * 0.001, 0.01, { response_ns: ms(500) }),
    );
    expect(incidentCauses(threads)).toHaveLength(5000);
  });

  test('two overlapping waits on different peers are both causes', () => {
    const events = [
      call('sys_read', 400, 0.01, { response_ns: ms(400) }),
      call('sys_read', 600, 0.01, { response_ns: ms(300) }),
    ];
    expect(incidentCauses(events).map((c) => c.index)).toEqual([0, 1]);
  });
});
