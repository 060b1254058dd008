import { writeStore } from '../support/event-store';
import { fetchAllPages, startEventsServer, type EventsServer } from '../support/events-http';
import { runKreplay } from '../support/kreplay-cli';
import { useTempDir } from '../support/temp-dir';

const dir = useTempDir('kreplay-events-cli-');
const BASE = 1795345678123456789n;
const kreplay = (...args: string[]) => runKreplay(args);

describe('kreplay events', () => {
  let server: EventsServer;
  beforeEach(async () => {
    writeStore(
      dir.path,
      'n1',
      Array.from({ length: 25 }, (_, i) => ({
        ts: BASE + BigInt(i),
        txn: i % 2 ? 'tx-odd' : null,
        trace: i % 2 ? 'tr' : null,
        type: i % 5 === 0 ? ('block_io' as const) : ('sys_write' as const),
        dur: 250_000 + i,
        bytes: i,
        target:
          i % 3 ? (['file', `/srv/log/${i % 2}.log`] as const) : (['socket', 'tcp 10.0.0.5:5432'] as const),
      })),
    );
    server = await startEventsServer(dir.path);
  });
  afterEach(() => server.close());

  it('prints NDJSON with exact integers, following cursors to the end', async () => {
    const out = await kreplay(
      'events',
      '--server',
      server.url,
      '--txn',
      'tx-odd',
      '--json',
      '--page-size',
      '4',
    );
    expect(out.status).toBe(0);
    const lines = out.stdout.trim().split('\n');
    expect(lines).toHaveLength(12);
    expect(lines[0]).toContain(`"timestamp_ns":${BASE + 1n},"duration_ns":250001,`);
    const expected = await fetchAllPages(server.url, 'transaction_id=tx-odd');
    expect(lines.map((l) => JSON.parse(l).event_id)).toEqual(expected.map((e) => e.event_id));
  });

  it('prints a table by default, with every filter flag passed on', async () => {
    const out = await kreplay(
      'events',
      '--server',
      `${server.url}/`,
      '--trace',
      'tr',
      '--service',
      'svc',
      '--node',
      'n1',
      '--type',
      'sys_write,block_io',
      '--from',
      '2026-11-22T09:30:00Z',
      '--to',
      String(BASE + 20n),
      '--min-ms',
      '0.250005',
    );
    expect(out.status).toBe(0);
    const [header, ...rows] = out.stdout.trim().split('\n');
    expect(header).toMatch(/^TIME \(UTC\)\s+NODE\s+TYPE\s+DURATION/);
    expect(rows).toHaveLength(8); // odd i in 5..19
    expect(rows[0]).toMatch(
      /^2026-11-22T\d\d:\d\d:\d\d\.\d{9}Z n1 +block_io +0\.250005 ms +svc +tx-odd +tr /,
    );
    expect(out.stderr).toContain('8 events');
  });

  it("filters by target and target kind, and shows each write's target", async () => {
    const out = await kreplay(
      'events',
      '--server',
      server.url,
      '--target',
      '/srv/log/*',
      '--target-kind',
      'file',
    );
    expect(out.status).toBe(0);
    const rows = out.stdout.trim().split('\n').slice(1);
    // sys_write (i % 5 != 0) to a file (i % 3 != 0)
    expect(rows).toHaveLength(13);
    for (const row of rows) expect(row).toMatch(/ -> \/srv\/log\/[01]\.log$/);
  });

  it.each([
    [['--type', 'sys_open'], /--type.*sys_write, block_io, sys_read, sys_fsync or sys_connect/],
    [['--from', 'noon'], /--from.*RFC 3339/],
    [['--to', '2026-02-30T00:00:00Z'], /--to.*not a valid date/],
    [['--min-ms', '0.0000001'], /--min-ms.*6 fractional digits/],
    [['--txn', ''], /--txn.*empty/],
    [['--target-kind', 'disk'], /--target-kind.*file, socket/],
    [['--page-size', '0'], /--page-size.*1\.\.10000/],
    [['--server', 'localhost:7070'], /--server.*URL/],
    [['--bogus'], /--bogus/],
  ])('exits 2 naming the flag for %j', async (args, message) => {
    const out = await kreplay('events', ...args);
    expect(out.status).toBe(2);
    expect(out.stderr).toMatch(message);
  });

  it('prints a problem answer clearly and exits 1', async () => {
    const out = await kreplay('events', '--server', `${server.url}/not-the-api`);
    expect(out.status).toBe(1);
    expect(out.stderr).toMatch(/server answered 404 Not Found: no route for GET \/not-the-api\/api\/events/);
  });

  it('exits 1 when the daemon cannot be reached', async () => {
    const out = await kreplay('events', '--server', 'http://127.0.0.1:9');
    expect(out.status).toBe(1);
    expect(out.stderr).toMatch(/cannot reach http:\/\/127\.0\.0\.1:9/);
  });
});
