/** Structured logs: one JSON line per request with its route, status, duration and request id; levels; formats. */
import { spawn } from 'node:child_process';
import { createLogger } from '../../core/log/logger';
import { createDaemon, type Daemon } from '../../daemon/create-daemon';
import { KREPLAY_BIN } from '../support/agent-process';
import { writeStore } from '../support/event-store';
import { useTempDir } from '../support/temp-dir';

const dir = useTempDir('kreplay-logs-');
const T0 = 1_795_345_678_000_000_000n;

describe('daemon logs', () => {
  let daemon: Daemon | undefined;
  afterEach(async () => {
    await daemon?.close();
    daemon = undefined;
  });

  async function start(level: 'info' | 'warn' = 'info') {
    writeStore(dir.path, 'n1', [{ ts: T0, txn: 'tx1' }]);
    const lines: Record<string, unknown>[] = [];
    const log = createLogger({
      format: 'json',
      level,
      component: 'daemon',
      write: (line) => lines.push(JSON.parse(line) as Record<string, unknown>),
    });
    daemon = await createDaemon({ dataDir: dir.path, log });
    return { url: daemon.url, requests: () => lines.filter((l) => l.msg === 'request') };
  }

  it('logs each request once as JSON: method, route template, status, duration and request id', async () => {
    const { url, requests } = await start();
    const given = await fetch(`${url}/api/events?transaction_id=tx1`, {
      headers: { 'x-request-id': 'abc-123' },
    });
    expect(given.headers.get('x-request-id')).toBe('abc-123');
    const page = (await given.json()) as { events: { event_id: string }[] };
    const made = await fetch(`${url}/api/events/${page.events[0]!.event_id}`);
    const madeId = made.headers.get('x-request-id')!;
    expect(madeId).toMatch(/^[0-9a-f-]{36}$/);
    // an id that is not a sane token is replaced, not echoed
    const odd = await fetch(`${url}/no/such/route`, { headers: { 'x-request-id': 'a b"c' } });
    expect(odd.status).toBe(404);
    expect(odd.headers.get('x-request-id')).toMatch(/^[0-9a-f-]{36}$/);
    await new Promise((resolve) => setTimeout(resolve, 50));
    const logged = requests();
    expect(logged).toHaveLength(3);
    expect(logged[0]).toMatchObject({
      level: 'info',
      component: 'daemon/http',
      method: 'GET',
      route: '/api/events',
      path: '/api/events',
      status: 200,
      request_id: 'abc-123',
      client: '127.0.0.1',
    });
    expect(logged[1]).toMatchObject({ route: '/api/events/:event_id', status: 200, request_id: madeId });
    expect(logged[2]).toMatchObject({ route: null, path: '/no/such/route', status: 404 });
    for (const line of logged) {
      expect(typeof line.duration_ms).toBe('number');
      expect(line.duration_ms).toBeGreaterThan(0);
      expect(typeof line.time).toBe('string');
    }
  });

  it('logs nothing below --log-level', async () => {
    const { url, requests } = await start('warn');
    await fetch(`${url}/api/events`);
    await new Promise((resolve) => setTimeout(resolve, 50));
    expect(requests()).toEqual([]);
  });

  it.each([
    ['json', /^\{"level":"info","time":"[^"]+","component":"daemon(\/\w+)*",/],
    ['text', /^\d{4}-\d\d-\d\dT[\d:.]+Z INFO {2}\[daemon(\/\w+)*\] /],
  ])('kreplay daemon --log-format %s writes %s lines', async (format, pattern) => {
    writeStore(dir.path, 'n1', [{ ts: T0, txn: 'tx1' }]);
    const child = spawn(
      process.execPath,
      [KREPLAY_BIN, 'daemon', '--data-dir', dir.path, '--port', '0', '--log-format', format],
      { stdio: ['ignore', 'ignore', 'pipe'] },
    );
    let err = '';
    await new Promise<void>((resolve) =>
      child.stderr!.on('data', (chunk: Buffer) => {
        err += chunk.toString();
        if (err.includes('listening')) resolve();
      }),
    );
    child.kill('SIGTERM');
    await new Promise((resolve) => child.once('exit', resolve));
    const lines = err.trim().split('\n');
    expect(lines.length).toBeGreaterThan(1);
    for (const line of lines) expect(line).toMatch(pattern);
  });
});
