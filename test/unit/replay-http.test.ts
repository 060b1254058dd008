import { silentLogger } from '../../core/log/logger';
import { createApp } from '../../daemon/app';
import { listen, type RunningServer } from '../../daemon/server';
import { NodeStores } from '../../daemon/store/node-stores';
import { fakeEvent } from '../support/fake-transaction-reader';
import { useReplayFixtures } from '../support/replay-fixture';

const replayFixture = useReplayFixtures('kreplay-replay-http-');
const T0 = 1_795_345_678_123_456_789n;
const EVENTS = [0n, 1_000n, 9_000n].map((o, i) => fakeEvent('tx', T0 + o, i));

interface Reply {
  status: number;
  headers: Headers;
  body: Record<string, unknown>;
}

describe('/api/replay/sessions over HTTP', () => {
  let server: RunningServer;
  let stores: NodeStores;

  beforeEach(async () => {
    const fx = replayFixture(EVENTS);
    stores = new NodeStores(fx.dataDir, silentLogger);
    server = await listen(createApp({ log: silentLogger, stores, replay: fx.sessions }), '127.0.0.1', 0);
  });
  afterEach(async () => {
    await server.close();
    stores.close();
  });

  async function call(
    method: string,
    path: string,
    body?: string,
    type = 'application/json',
  ): Promise<Reply> {
    const res = await fetch(`${server.url}/api/replay/sessions${path}`, {
      method,
      body,
      headers: body === undefined ? {} : { 'content-type': type },
    });
    const text = await res.text();
    return { status: res.status, headers: res.headers, body: text ? JSON.parse(text) : {} };
  }

  const create = async (body: object = { transaction_id: 'tx' }) => {
    const reply = await call('POST', '', JSON.stringify(body));
    expect(reply.status).toBe(201);
    return reply.body.id as string;
  };

  function expectProblem(reply: Reply, status: number, param?: string): void {
    expect(reply.status).toBe(status);
    expect(reply.headers.get('content-type')).toMatch(/^application\/problem\+json/);
    expect(reply.body).toMatchObject({ status, title: expect.any(String), detail: expect.any(String) });
    if (!param) return;
    const errors = reply.body.errors as { param: string }[];
    expect(errors.length).toBeGreaterThan(0);
    expect(new Set(errors.map((e) => e.param))).toEqual(new Set([param]));
  }

  it('creates a session: 201, Location, the record with defaults', async () => {
    const reply = await call('POST', '', '{"transaction_id":"tx"}');
    expect(reply.status).toBe(201);
    expect(reply.headers.get('location')).toBe(`/api/replay/sessions/${reply.body.id}`);
    expect(reply.body).toEqual({
      id: expect.stringMatching(/^[0-9a-f-]{36}$/),
      transaction_id: 'tx',
      speed_factor: 1,
      extra_latency_ns: 0,
      driving: null,
      state: 'ready',
      position_ns: 0,
      duration_ns: 9000,
      events_total: 3,
      events_emitted: 0,
      created_at: expect.stringMatching(/^\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d\.\d{3}Z$/),
      updated_at: reply.body.created_at,
      timing: { lateness_p50_ns: null, lateness_p99_ns: null, lateness_max_ns: null, behind_ns: 0 },
    });
    const again = await call('GET', `/${reply.body.id}`);
    expect(again.body).toEqual(reply.body);
    expect((await call('GET', '')).body).toEqual({ sessions: [reply.body] });
  });

  it('takes every setting at the edges of its range', async () => {
    const id = await create({ transaction_id: 'tx', speed_factor: 0.001, extra_latency_ns: 60_000_000_000 });
    expect((await call('GET', `/${id}`)).body).toMatchObject({ speed_factor: 0.001, extra_latency_ns: 6e10 });
    await create({ transaction_id: 'tx', speed_factor: 1000, extra_latency_ns: 0 });
  });

  it('records the process a session drives', async () => {
    const driving = { command: 'make test', pid: process.pid };
    const id = await create({ transaction_id: 'tx', driving });
    expect((await call('GET', `/${id}`)).body).toMatchObject({ driving });
  });

  it.each([
    ['an empty command', { command: '', pid: 1 }],
    ['pid 0', { command: 'x', pid: 0 }],
    ['a fractional pid', { command: 'x', pid: 1.5 }],
  ])('refuses a driving object with %s', async (_name, driving) => {
    const reply = await call('POST', '', JSON.stringify({ transaction_id: 'tx', driving }));
    expectProblem(reply, 400, 'driving');
  });

  it('answers 404 for a transaction without events', async () => {
    expectProblem(await call('POST', '', '{"transaction_id":"nope"}'), 404);
  });

  it.each([
    ['not JSON', '{"transaction_id":', 'application/json', 'body'],
    ['a NaN token', '{"transaction_id":"tx","speed_factor":NaN}', 'application/json', 'body'],
    ['a JSON string', '"tx"', 'application/json', 'body'],
    ['an array', '[{"transaction_id":"tx"}]', 'application/json', 'body'],
    ['text/plain', '{"transaction_id":"tx"}', 'text/plain', 'body'],
    ['no transaction_id', '{}', 'application/json', 'transaction_id'],
    ['an empty transaction_id', '{"transaction_id":""}', 'application/json', 'transaction_id'],
    ['a numeric transaction_id', '{"transaction_id":5}', 'application/json', 'transaction_id'],
    ['a null transaction_id', '{"transaction_id":null}', 'application/json', 'transaction_id'],
    ['speed as a string', '{"transaction_id":"tx","speed_factor":"2"}', 'application/json', 'speed_factor'],
    ['speed 0', '{"transaction_id":"tx","speed_factor":0}', 'application/json', 'speed_factor'],
    ['negative speed', '{"transaction_id":"tx","speed_factor":-1}', 'application/json', 'speed_factor'],
    ['speed above 1000', '{"transaction_id":"tx","speed_factor":1000.5}', 'application/json', 'speed_factor'],
    ['an infinite speed', '{"transaction_id":"tx","speed_factor":1e400}', 'application/json', 'speed_factor'],
    [
      'fractional latency',
      '{"transaction_id":"tx","extra_latency_ns":1.5}',
      'application/json',
      'extra_latency_ns',
    ],
    [
      'negative latency',
      '{"transaction_id":"tx","extra_latency_ns":-1}',
      'application/json',
      'extra_latency_ns',
    ],
    [
      'latency above 60 s',
      '{"transaction_id":"tx","extra_latency_ns":60000000001}',
      'application/json',
      'extra_latency_ns',
    ],
    [
      'a huge latency',
      '{"transaction_id":"tx","extra_latency_ns":123456789012345678901234567890}',
      'application/json',
      'extra_latency_ns',
    ],
    [
      'latency as a string',
      '{"transaction_id":"tx","extra_latency_ns":"5"}',
      'application/json',
      'extra_latency_ns',
    ],
    ['an unknown field', '{"transaction_id":"tx","speed":2}', 'application/json', 'speed'],
  ])('refuses a create body with %s: 400 naming %s', async (_what, body, type, param) => {
    expectProblem(await call('POST', '', body, type), 400, param!);
    expect((await call('GET', '')).body).toEqual({ sessions: [] });
  });

  it.each([
    ['{"x":1}', 'application/json', 'x'],
    ['[]', 'application/json', 'body'],
    ['null', 'application/json', 'body'],
    ['go', 'text/plain', 'body'],
  ])('refuses a play body %s: 400 naming %s', async (body, type, param) => {
    const id = await create();
    expectProblem(await call('POST', `/${id}/play`, body, type), 400, param);
    expect((await call('GET', `/${id}`)).body.state).toBe('ready');
  });

  it('takes play, pause and stop with no body or {}', async () => {
    const id = await create();
    expect((await call('POST', `/${id}/play`)).body.state).toBe('playing');
    expect((await call('POST', `/${id}/pause`, '{}')).body.state).toBe('paused');
    expect((await call('POST', `/${id}/stop`, '')).body.state).toBe('stopped');
    const again = await call('POST', `/${id}/stop`);
    expect(again.status).toBe(200);
    expect(again.body.state).toBe('stopped');
  });

  it.each([
    ['{}', 'position_ns'],
    ['{"position_ns":-1}', 'position_ns'],
    ['{"position_ns":1.5}', 'position_ns'],
    ['{"position_ns":"5"}', 'position_ns'],
    ['{"position_ns":1e300}', 'position_ns'],
    ['{"position_ns":9001}', 'position_ns'],
    ['{"position_ns":5,"state":"playing"}', 'state'],
  ])('refuses the seek body %s: 400 naming %s', async (body, param) => {
    const id = await create();
    expectProblem(await call('POST', `/${id}/seek`, body), 400, param);
  });

  it('seeks with a position in 0..duration_ns', async () => {
    const id = await create();
    const reply = await call('POST', `/${id}/seek`, '{"position_ns":9000}');
    expect(reply.status).toBe(200);
    expect(reply.body).toMatchObject({ state: 'paused', position_ns: 9000, events_emitted: 2 });
  });

  it('answers 409 naming the state for a control the state does not allow', async () => {
    const id = await create();
    const reply = await call('POST', `/${id}/pause`);
    expectProblem(reply, 409);
    expect(reply.body.detail).toMatch(/is ready/);
  });

  it('answers 404 for unknown sessions and controls', async () => {
    expectProblem(await call('GET', '/nope'), 404);
    expectProblem(await call('POST', '/nope/play'), 404);
    expectProblem(await call('DELETE', '/nope'), 404);
    expectProblem(await call('GET', '/nope/events'), 404);
    const id = await create();
    expectProblem(await call('POST', `/${id}/rewind`), 404);
  });

  it('tells an unknown session from an unknown route by the problem type and code', async () => {
    const kind = (reply: Reply) => [reply.body.type, reply.body.code];
    const base = 'https://kreplay.dev/problems/';
    expect(kind(await call('GET', '/nope'))).toEqual([`${base}session-not-found`, 'E_SESSION_NOT_FOUND']);
    const id = await create();
    expect(kind(await call('POST', `/${id}/rewind`))).toEqual([
      `${base}route-not-found`,
      'E_ROUTE_NOT_FOUND',
    ]);
    expect(kind(await call('POST', '', '{"transaction_id":"nope"}'))).toEqual([
      `${base}transaction-not-found`,
      'E_TRANSACTION_NOT_FOUND',
    ]);
    expect(kind(await call('POST', `/${id}/pause`))).toEqual([`${base}invalid-state`, 'E_INVALID_STATE']);
  });

  it('deletes a session: 204, then it is gone', async () => {
    const id = await create();
    await call('POST', `/${id}/play`);
    const reply = await fetch(`${server.url}/api/replay/sessions/${id}`, { method: 'DELETE' });
    expect(reply.status).toBe(204);
    expectProblem(await call('GET', `/${id}`), 404);
  });

  it('refuses a malformed Last-Event-ID', async () => {
    const id = await create();
    const res = await fetch(`${server.url}/api/replay/sessions/${id}/events`, {
      headers: { 'last-event-id': 'abc' },
    });
    expect(res.status).toBe(400);
    expect(await res.json()).toMatchObject({ errors: [{ param: 'Last-Event-ID' }] });
  });
});
