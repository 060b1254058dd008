import fc from 'fast-check';
import { writeStore } from '../support/event-store';
import { get, startEventsServer, type EventsServer } from '../support/events-http';
import { useTempDir } from '../support/temp-dir';

const dir = useTempDir('kreplay-events-fuzz-');
const BASE = 1795345678123456789n;

const PARAMS = [
  'transaction_id',
  'trace_id',
  'service',
  'node',
  'event_type',
  'from',
  'to',
  'min_duration_ms',
  'limit',
  'cursor',
  'order',
  'int64',
];

const key = fc.oneof(
  fc.constantFrom(...PARAMS),
  fc.string(),
  fc.string({ unit: 'grapheme' }),
  fc.constant('__proto__'),
);
const value = fc.oneof(
  fc.string(),
  fc.string({ unit: 'grapheme', maxLength: 300 }),
  fc.bigInt({ min: -(10n ** 30n), max: 10n ** 30n }).map(String),
  fc.double().map(String),
  fc.constantFrom(
    'sys_write,block_io',
    'asc',
    'desc',
    'string',
    '0.25',
    '2026-11-22T09:30:00.123456789Z',
    '',
  ),
  fc.date({ noInvalidDate: true }).map((d) => d.toISOString()),
  fc.constantFrom('%', '%zz', '%E0%A4%A', '+', '&&', '=', '[]', 'a[b]=c'),
);
/* Mostly encoded pairs, sometimes raw text as a client might send it. */
const pair = fc.oneof(
  fc.tuple(key, value).map(([k, v]) => `${encodeURIComponent(k)}=${encodeURIComponent(v)}`),
  fc.tuple(key, value).map(([k, v]) => `${k}=${v}`.replace(/[#\s]/g, '')),
);

describe('GET /api/events under random query strings', () => {
  let server: EventsServer;
  beforeEach(async () => {
    writeStore(
      dir.path,
      'n',
      Array.from({ length: 50 }, (_, i) => ({ ts: BASE + BigInt(i), txn: `t${i % 3}`, trace: 'tr' })),
    );
    server = await startEventsServer(dir.path);
  });
  afterEach(() => server.close());

  it('never answers 5xx, and every 4xx is a problem naming a parameter', async () => {
    await fc.assert(
      fc.asyncProperty(fc.array(pair, { maxLength: 6 }), fc.boolean(), async (pairs, byId) => {
        const path = byId ? `/api/events/${encodeURIComponent(pairs[0] ?? 'x')}` : '/api/events';
        const url = `${server.url}${path}?${pairs.join('&')}`;
        let reply;
        try {
          reply = await get(url);
        } catch {
          return; // fetch itself refuses some URLs; nothing reached the daemon
        }
        expect(reply.status).toBeLessThan(500);
        const body = JSON.parse(reply.text);
        if (reply.status >= 400) {
          expect(reply.contentType).toMatch(/^application\/problem\+json/);
          expect(body.status).toBe(reply.status);
          if (reply.status === 400) expect(body.errors[0].param).toEqual(expect.any(String));
        }
      }),
      { numRuns: 400 },
    );
  });
});
