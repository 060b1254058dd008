import { parse } from 'node:querystring';
import { encodeCursor, filterHash } from '../../daemon/events/events-cursor';
import { eventsQuerySchema, toFilter, type EventsQuery } from '../../daemon/events/events-query';
import { ProblemError } from '../../daemon/http/problem';
import { parseQuery } from '../../daemon/http/query-params';
import { BAD_EVENT_QUERIES } from '../support/bad-event-queries';

/* Express's "simple" query parser is node:querystring. */
const query = (text: string): EventsQuery => parseQuery(eventsQuerySchema, parse(text));

function problemOf(text: string): ProblemError {
  try {
    query(text);
  } catch (err) {
    if (err instanceof ProblemError) return err;
    throw err;
  }
  throw new Error(`expected ${text} to be rejected`);
}

const EVENT_ID = 'a1b2c3d4e5f6' + '18e9a1b2c3d4e5f6' + '000000000007';

describe('GET /api/events query', () => {
  it('takes every parameter as optional', () => {
    expect(query('')).toEqual({});
  });

  it('parses each parameter', () => {
    const q = query(
      'transaction_id=t-1&trace_id=tr:9&service=api%20gw&node=n1&event_type=block_io,sys_write' +
        '&from=2026-11-22T09:30:00.123456789Z&to=1795339900000000000&min_duration_ms=0.25&limit=10000' +
        '&order=desc&int64=string',
    );
    expect(q).toEqual({
      transaction_id: 't-1',
      trace_id: 'tr:9',
      service: 'api gw',
      node: 'n1',
      event_type: ['block_io', 'sys_write'],
      from: 1795339800123456789n,
      to: 1795339900000000000n,
      min_duration_ms: 250_000n,
      limit: 10000,
      order: 'desc',
      int64: 'string',
    });
    expect(toFilter(q)).toEqual({
      transactionId: 't-1',
      traceId: 'tr:9',
      service: 'api gw',
      node: 'n1',
      types: ['block_io', 'sys_write'],
      fromNs: 1795339800123456789n,
      toNs: 1795339900000000000n,
      minDurationNs: 250_000n,
    });
  });

  it('takes a cursor made for the same filters and order', () => {
    const filter = toFilter(query('service=api&from=5'));
    const cursor = encodeCursor({
      order: 'desc',
      after: { ts: 0x18e9a1b2c3d4e5f6n, eventId: EVENT_ID },
      filterHash: filterHash(filter),
    });
    const q = query(`service=api&from=5&cursor=${cursor}`);
    expect(q.cursor).toEqual({
      order: 'desc',
      after: { ts: 0x18e9a1b2c3d4e5f6n, eventId: EVENT_ID },
      filterHash: filterHash(filter),
    });
    expect(query(`service=api&from=5&order=desc&cursor=${cursor}`).cursor?.order).toBe('desc');
  });

  it.each(BAD_EVENT_QUERIES)('%s is a 400 naming %s', (text, param, message) => {
    const problem = problemOf(text);
    expect(problem.status).toBe(400);
    expect(problem.errors).toEqual([{ param, message: expect.stringMatching(message) }]);
    expect(problem.toProblem()).toMatchObject({ status: 400, title: 'Bad Request' });
  });

  it('names every bad parameter at once', () => {
    const problem = problemOf('limit=0&order=sideways&x=1&y=2');
    expect(problem.errors!.map((e) => e.param).sort()).toEqual(['limit', 'order', 'x', 'y']);
  });

  it('rejects a cursor reused with other filters or another order', () => {
    const cursor = encodeCursor({
      order: 'asc',
      after: { ts: 0x18e9a1b2c3d4e5f6n, eventId: EVENT_ID },
      filterHash: filterHash(toFilter(query('service=api'))),
    });
    expect(problemOf(`service=web&cursor=${cursor}`).errors).toEqual([
      { param: 'cursor', message: expect.stringMatching(/other filters/) },
    ]);
    expect(problemOf(`service=api&order=desc&cursor=${cursor}`).errors).toEqual([
      { param: 'cursor', message: expect.stringMatching(/order=asc/) },
    ]);
    expect(query(`service=api&limit=5&cursor=${cursor}`).cursor?.order).toBe('asc');
  });
});
