import type { ApiEvent } from '../../core/model';
import { formatTimeNs } from '../../daemon/http/query-values';
import type { EventFilter } from '../../daemon/store/event-filter';
import { BAD_EVENT_QUERIES } from '../support/bad-event-queries';
import { byPosition, matchesFilter } from '../support/event-match';
import { writeStore, type TestEvent } from '../support/event-store';
import {
  get,
  readEvents,
  startEventsServer,
  useEventsBackends,
  type EventsServer,
} from '../support/events-http';
import { useTempDir } from '../support/temp-dir';

const dir = useTempDir('kreplay-events-api-');
const BASE = 1795345678123456789n;
const at = (i: number) => BASE + BigInt(i * 1000);

/* The same timestamps on both nodes, so ties across nodes are everywhere. */
function dataset(node: number): TestEvent[] {
  return Array.from({ length: 80 }, (_, i) => {
    const context =
      i % 10 < 3 ? {} : i % 10 === 3 ? { trace: 'tr-only' } : { txn: `tx${i % 5}`, trace: `tr${i % 2}` };
    return {
      ts: at(i),
      type: i % 4 === 0 ? 'block_io' : 'sys_write',
      dur: [1000, 250_000, 249_999, 100_000, 5_000_000][i % 5],
      service: ['api', 'db', 'web'][i % 3],
      bytes: node * 1000 + i,
      ...context,
    };
  });
}

/* The same tests against the node files and against those files shipped to ClickHouse. */
const BACKENDS = useEventsBackends();

describe.each(BACKENDS)('GET /api/events from $kind', (backend) => {
  let server: EventsServer;
  let all: ApiEvent[];

  const list = async (query: string) => {
    const limit = query.includes('limit=') ? '' : 'limit=10000&';
    const reply = await get(`${server.url}/api/events?int64=string&${limit}${query}`);
    expect(reply.status).toBe(200);
    expect(reply.contentType).toMatch(/^application\/json/);
    return readEvents(reply.text);
  };

  beforeEach(async () => {
    writeStore(dir.path, 'alpha', dataset(0));
    writeStore(dir.path, 'beta', dataset(1));
    server = await startEventsServer(dir.path, backend);
    all = (await list('')).events;
  });
  afterEach(() => server.close());

  it('lists every event of every node in (timestamp_ns, event_id) order with all fields', () => {
    expect(all).toHaveLength(160);
    expect([...all].sort(byPosition)).toEqual(all);
    expect(new Set(all.map((e) => e.bytes))).toEqual(
      new Set([...dataset(0), ...dataset(1)].map((e) => e.bytes)),
    );
    const block = all.find((e) => e.node === 'beta' && e.bytes === 1040)!;
    expect(block).toEqual({
      event_id: expect.stringMatching(/^[0-9a-f]{40}$/),
      event_type: 'block_io',
      timestamp_ns: at(40),
      duration_ns: 1000n,
      service_name: 'db',
      transaction_id: null,
      trace_id: null,
      node: 'beta',
      pid: 100,
      tid: 100,
      comm: 'worker',
      bytes: 1040,
      device: '8:0',
      sector: 2048,
      op: 'write',
      error: 0,
    });
    expect(all.find((e) => e.bytes === 13)).toMatchObject({ transaction_id: null, trace_id: 'tr-only' });
    expect(all.find((e) => e.bytes === 17)).toMatchObject({
      event_type: 'sys_write',
      transaction_id: 'tx2',
      trace_id: 'tr1',
      syscall: 'write',
      fd: 3,
      ret: 17,
    });
  });

  it.each<[string, EventFilter]>([
    ['transaction_id=tx1', { transactionId: 'tx1' }],
    ['trace_id=tr0', { traceId: 'tr0' }],
    ['trace_id=tr-only', { traceId: 'tr-only' }],
    ['transaction_id=tx2&trace_id=tr0', { transactionId: 'tx2', traceId: 'tr0' }],
    ['transaction_id=tx2&trace_id=tr1', { transactionId: 'tx2', traceId: 'tr1' }],
    ['service=api', { service: 'api' }],
    ['node=beta', { node: 'beta' }],
    ['event_type=block_io', { types: ['block_io'] }],
    ['event_type=sys_write,block_io', { types: ['sys_write', 'block_io'] }],
    [`from=${at(10)}&to=${at(30)}`, { fromNs: at(10), toNs: at(30) }],
    ['min_duration_ms=0.25', { minDurationNs: 250_000n }],
    ['min_duration_ms=0.1&event_type=sys_write', { minDurationNs: 100_000n, types: ['sys_write'] }],
    ['min_duration_ms=5', { minDurationNs: 5_000_000n }],
    [
      `trace_id=tr1&service=db&node=alpha&event_type=sys_write&from=${at(5)}&min_duration_ms=0.1`,
      {
        traceId: 'tr1',
        service: 'db',
        node: 'alpha',
        types: ['sys_write'],
        fromNs: at(5),
        minDurationNs: 100_000n,
      },
    ],
    [
      `service=web&from=${formatTimeNs(at(20))}&to=${at(60)}&event_type=block_io`,
      { service: 'web', fromNs: at(20), toNs: at(60), types: ['block_io'] },
    ],
    ['service=nope', { service: 'nope' }],
    ['transaction_id=nope', { transactionId: 'nope' }],
    ['node=gamma', { node: 'gamma' }],
  ])('%s', async (query, filter) => {
    const expected = all.filter((e) => matchesFilter(e, filter));
    expect((await list(query)).events).toEqual(expected);
    expect((await list(`${query}&order=desc`)).events).toEqual([...expected].reverse());
  });

  it('answers no match with an empty list and no cursor', async () => {
    const reply = await get(`${server.url}/api/events?service=nope`);
    expect(reply.text).toBe('{"events":[],"next_cursor":null}');
  });

  it('includes from, excludes to, and compares min_duration_ms exactly in ns', async () => {
    const bytesOf = async (query: string) => (await list(`node=alpha&${query}`)).events.map((e) => e.bytes);
    expect(await bytesOf(`from=${at(78)}`)).toEqual([78, 79]);
    expect(await bytesOf(`from=${formatTimeNs(at(78))}`)).toEqual([78, 79]);
    expect(await bytesOf(`from=${at(78) - 1n}&to=${at(79)}`)).toEqual([78]);
    expect(await bytesOf(`to=${at(1)}`)).toEqual([0]);
    expect(await bytesOf(`to=${at(1) + 1n}`)).toEqual([0, 1]);
    const durations = async (ms: string) =>
      new Set((await list(`node=alpha&min_duration_ms=${ms}`)).events.map((e) => e.duration_ns));
    expect(await durations('0.25')).toEqual(new Set([250_000n, 5_000_000n]));
    expect(await durations('0.250001')).toEqual(new Set([5_000_000n]));
    expect(await durations('0.249999')).toEqual(new Set([249_999n, 250_000n, 5_000_000n]));
    expect(await durations('0.1')).toEqual(new Set([100_000n, 249_999n, 250_000n, 5_000_000n]));
    expect(await durations('0.099999')).toEqual(new Set([100_000n, 249_999n, 250_000n, 5_000_000n]));
    expect(await durations('0.000001')).toEqual(new Set([1000n, 100_000n, 249_999n, 250_000n, 5_000_000n]));
  });

  it("min_duration_ms finds a read by its response wait: the upstream's 1.5 s, not the read's 10 µs", async () => {
    writeStore(dir.path, 'gamma', [
      { ts: at(1), type: 'sys_write', dur: 10_000, txn: 'slow' },
      { ts: at(2), type: 'sys_read', dur: 10_000, response: 1_500_000_000, txn: 'slow' },
      { ts: at(3), type: 'sys_read', dur: 10_000, response: 900_000_000, txn: 'slow' },
      { ts: at(4), type: 'block_io', dur: 1_200_000_000, txn: 'slow' },
    ]);
    await server.close();
    server = await startEventsServer(dir.path, backend);
    for (const query of ['node=gamma&min_duration_ms=1000', 'transaction_id=slow&min_duration_ms=1000']) {
      const found = (await list(query)).events;
      expect(found.map((e) => [e.event_type, e.duration_ns])).toEqual([
        ['sys_read', 10_000n],
        ['block_io', 1_200_000_000n],
      ]);
      expect(found[0]).toMatchObject({ response_ns: '1500000000' });
    }
  });

  it('writes 19-digit timestamps and durations as exact JSON integers, or strings with int64=string', async () => {
    const numbers = await get(`${server.url}/api/events?node=alpha&limit=1`);
    expect(numbers.text).toContain(`"timestamp_ns":1795345678123456789,`);
    expect(numbers.text).toContain(`"duration_ns":1000,`);
    const strings = await get(`${server.url}/api/events?node=alpha&limit=1&int64=string`);
    expect(strings.text).toContain(`"timestamp_ns":"1795345678123456789",`);
    expect(strings.text).toContain(`"duration_ns":"1000",`);
    const last = await get(`${server.url}/api/events?node=alpha&limit=1&order=desc&min_duration_ms=5`);
    expect(last.text).toContain(`"timestamp_ns":${at(79)},"duration_ns":5000000,`);
  });

  it('pages with an opaque cursor that remembers order and filters', async () => {
    const first = await list('service=db&order=desc&limit=3');
    expect(first.next_cursor).toMatch(/^[A-Za-z0-9_-]+$/);
    const second = await list(`service=db&limit=3&cursor=${first.next_cursor}`);
    const expected = all.filter((e) => e.service_name === 'db').reverse();
    expect([...first.events, ...second.events]).toEqual(expected.slice(0, 6));
    const reused = await get(`${server.url}/api/events?service=api&cursor=${first.next_cursor}`);
    expect(reused.status).toBe(400);
    expect(JSON.parse(reused.text).errors).toEqual([
      { param: 'cursor', message: expect.stringMatching(/filters/) },
    ]);
  });

  describe('GET /api/events/{event_id}', () => {
    it('returns the event itself', async () => {
      const event = all[77]!;
      const reply = await get(`${server.url}/api/events/${event.event_id}`);
      expect(reply.status).toBe(200);
      expect(reply.text).toContain(`"timestamp_ns":${event.timestamp_ns},`);
      const strings = await get(`${server.url}/api/events/${event.event_id}?int64=string`);
      expect(readEvents(`{"events":[${strings.text}]}`).events[0]).toEqual(event);
    });

    it('is a 404 problem for an id it does not hold and a 400 for a malformed one', async () => {
      const missing = await get(`${server.url}/api/events/${'0'.repeat(40)}`);
      expect(missing.status).toBe(404);
      expect(missing.contentType).toMatch(/^application\/problem\+json/);
      expect(JSON.parse(missing.text)).toMatchObject({ status: 404, title: 'Not Found' });
      for (const bad of ['xyz', all[0]!.event_id.toUpperCase(), `${all[0]!.event_id}0`, '%E2%82%AC', '%zz']) {
        const reply = await get(`${server.url}/api/events/${bad}`);
        expect(reply.status).toBe(400);
        expect(JSON.parse(reply.text).errors).toEqual([{ param: 'event_id', message: expect.any(String) }]);
      }
      const unknown = await get(`${server.url}/api/events/${all[0]!.event_id}?limit=5`);
      expect(JSON.parse(unknown.text).errors).toEqual([{ param: 'limit', message: 'unknown parameter' }]);
    });
  });

  it.each(BAD_EVENT_QUERIES)('%s is a 400 problem naming %s', async (query, param, message) => {
    const reply = await get(`${server.url}/api/events?${query}`);
    expect(reply.status).toBe(400);
    expect(reply.contentType).toMatch(/^application\/problem\+json/);
    const problem = JSON.parse(reply.text);
    expect(problem).toEqual({
      type: 'https://kreplay.dev/problems/invalid-parameter',
      title: 'Bad Request',
      status: 400,
      code: 'E_INVALID_PARAMETER',
      detail: expect.stringContaining(param),
      errors: [{ param, message: expect.stringMatching(message) }],
    });
    expect(reply.text).not.toMatch(/\.ts:\d|\bat \w+ \(/);
  });
});
