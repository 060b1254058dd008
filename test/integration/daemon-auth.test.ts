/** Who may do what over HTTP: tokens and scopes, loopback-only without tokens, Host checks, SIGHUP reload. */
import { spawn } from 'node:child_process';
import { once } from 'node:events';
import { request } from 'node:http';
import { get as getTls } from 'node:https';
import { readFileSync, rmSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { silentLogger } from '../../core/log/logger';
import { createDaemon, type Daemon } from '../../daemon/create-daemon';
import { writeStore } from '../support/event-store';
import { useTempDir } from '../support/temp-dir';
import { selfSignedCert } from '../../bench/tls-cert';

const READ = 'read-token-0123456789abcdef';
const CONTROL = 'control-token-0123456789abcdef';
const T0 = 1_795_345_678_000_000_000n;
const BIN = join(__dirname, '..', '..', 'bin', 'kreplay.js');

interface Reply {
  status: number;
  headers: Record<string, string | string[] | undefined>;
  body: Record<string, unknown>;
}

/** A raw request, so the test sets Host and Authorization exactly. */
function call(
  url: string,
  method: string,
  path: string,
  headers: Record<string, string> = {},
  body?: string,
) {
  return new Promise<Reply>((resolve, reject) => {
    const req = request(`${url}${path}`, { method, headers }, (res) => {
      let text = '';
      res.on('data', (chunk: Buffer) => (text += chunk.toString()));
      res.on('end', () => {
        let parsed: Record<string, unknown> = {};
        try {
          parsed = JSON.parse(text) as Record<string, unknown>;
        } catch {
          // SSE or empty
        }
        resolve({ status: res.statusCode!, headers: res.headers, body: parsed });
      });
    });
    req.on('error', reject);
    req.end(body);
  });
}

const bearer = (token: string) => ({ authorization: `Bearer ${token}` });

describe('daemon access control', () => {
  const dir = useTempDir('kreplay-auth-');
  let daemon: Daemon | undefined;
  let tokens: string;

  beforeEach(() => {
    writeStore(dir.path, 'n1', [{ ts: T0, txn: 'tx1', bytes: 3 }]);
    tokens = join(dir.path, 'tokens');
    writeFileSync(tokens, `${READ} read grafana\n${CONTROL} control ci\n`);
  });
  afterEach(async () => {
    await daemon?.close();
    daemon = undefined;
  });

  const start = async (extra: Partial<Parameters<typeof createDaemon>[0]> = {}) => {
    daemon = await createDaemon({ dataDir: dir.path, log: silentLogger, tokensFile: tokens, ...extra });
    return daemon.url;
  };

  const READ_ROUTES: [string, string][] = [
    ['GET', '/api/events'],
    ['GET', '/api/events/abc'],
    ['GET', '/api/replay/sessions'],
  ];

  it('answers 401 with a Bearer challenge to every route but health, without a token or with a wrong one', async () => {
    const url = await start();
    for (const [method, path] of [...READ_ROUTES, ['POST', '/api/replay/sessions'], ['GET', '/no/such']]) {
      for (const headers of [{}, bearer('not-a-known-token-at-all'), { authorization: `Basic ${READ}` }]) {
        const reply = await call(url, method!, path!, headers);
        expect([method, path, reply.status]).toEqual([method, path, 401]);
        expect(reply.headers['www-authenticate']).toMatch(/^Bearer realm="kreplay"/);
        expect(reply.body).toMatchObject({
          code: 'E_UNAUTHORIZED',
          type: expect.stringMatching(/unauthorized$/),
        });
      }
    }
    expect((await call(url, 'GET', '/healthz')).status).toBe(200);
  });

  it('counts sessions per token: one control token at its limit does not stop another', async () => {
    const OTHER = 'other-control-token-0123456789';
    writeFileSync(tokens, `${CONTROL} control ci\n${OTHER} control oncall\n`);
    // sessions earlier tests left would count against ci
    rmSync(join(dir.path, '.replay'), { recursive: true, force: true });
    const url = await start({ maxSessionsPerClient: 1 });
    const body = JSON.stringify({ transaction_id: 'tx1' });
    const post = (token: string) =>
      call(
        url,
        'POST',
        '/api/replay/sessions',
        { ...bearer(token), 'content-type': 'application/json' },
        body,
      );
    expect((await post(CONTROL)).status).toBe(201);
    const refused = await post(CONTROL);
    expect(refused.status).toBe(429);
    expect(refused.body.detail).toMatch(/^token ci has 1 sessions/);
    expect((await post(OTHER)).status).toBe(201);
  });

  it('lets a read token read and refuses it control with 403; a control token does both', async () => {
    const url = await start();
    for (const [method, path] of READ_ROUTES) {
      expect((await call(url, method, path, bearer(READ))).status).not.toBe(401);
      expect((await call(url, method, path, bearer(CONTROL))).status).not.toBe(401);
    }
    const body = JSON.stringify({ transaction_id: 'tx1' });
    const json = { 'content-type': 'application/json' };
    const refused = await call(url, 'POST', '/api/replay/sessions', { ...bearer(READ), ...json }, body);
    expect(refused.status).toBe(403);
    expect(refused.body).toMatchObject({ code: 'E_FORBIDDEN', detail: expect.stringContaining('grafana') });
    const created = await call(url, 'POST', '/api/replay/sessions', { ...bearer(CONTROL), ...json }, body);
    expect(created.status).toBe(201);
    const id = created.body.id as string;
    expect((await call(url, 'POST', `/api/replay/sessions/${id}/play`, bearer(READ))).status).toBe(403);
    expect((await call(url, 'DELETE', `/api/replay/sessions/${id}`, bearer(READ))).status).toBe(403);
    expect((await call(url, 'DELETE', `/api/replay/sessions/${id}`, bearer(CONTROL))).status).toBe(204);
  });

  it('refuses to listen beyond loopback without tokens, and says why', async () => {
    await expect(
      createDaemon({ dataDir: dir.path, log: silentLogger, host: '0.0.0.0' }),
    ).rejects.toMatchObject({
      code: 'E_UNSAFE_BIND',
      message: expect.stringContaining('--tokens'),
    });
  });

  it('without tokens serves only requests addressed to its own names (DNS rebinding)', async () => {
    const url = await start({ tokensFile: undefined, allowedHosts: ['kreplay.internal'] });
    const port = new URL(url).port;
    expect((await call(url, 'GET', '/api/events', { host: `127.0.0.1:${port}` })).status).toBe(200);
    expect((await call(url, 'GET', '/api/events', { host: `localhost:${port}` })).status).toBe(200);
    expect((await call(url, 'GET', '/api/events', { host: `KREPLAY.internal:${port}` })).status).toBe(200);
    const rebound = await call(url, 'GET', '/api/events', { host: `attacker.example:${port}` });
    expect(rebound.status).toBe(403);
    expect(rebound.body).toMatchObject({ code: 'E_HOST_NOT_ALLOWED' });
  });

  it('kreplay daemon reloads its tokens on SIGHUP', async () => {
    const child = spawn(
      process.execPath,
      [BIN, 'daemon', '--data-dir', dir.path, '--port', '0', '--tokens', tokens, '--log-format', 'text'],
      {
        stdio: ['ignore', 'ignore', 'pipe'],
      },
    );
    try {
      let log = '';
      child.stderr.on('data', (chunk: Buffer) => (log += chunk.toString()));
      const url = await new Promise<string>((resolve) => {
        child.stderr.on('data', () => {
          const found = /url=(http:\/\/\S+)/.exec(log);
          if (found) resolve(found[1]!);
        });
      });
      expect((await call(url, 'GET', '/api/events', bearer(READ))).status).toBe(200);
      const NEW = 'rotated-token-0123456789abcdef';
      writeFileSync(tokens, `${NEW} read grafana\n`);
      child.kill('SIGHUP');
      await new Promise<void>((resolve) => {
        const check = () => (/tokens reloaded/.test(log) ? resolve() : setTimeout(check, 20));
        check();
      });
      expect((await call(url, 'GET', '/api/events', bearer(READ))).status).toBe(401);
      expect((await call(url, 'GET', '/api/events', bearer(NEW))).status).toBe(200);
    } finally {
      child.kill('SIGTERM');
      await once(child, 'exit');
    }
  });

  it('serves HTTPS with --tls-cert/--tls-key', async () => {
    const { cert, key } = selfSignedCert(dir.path);
    const url = await start({ tls: { cert, key } });
    expect(url).toMatch(/^https:\/\//);
    const status = await new Promise<number>((resolve, reject) => {
      getTls(`${url}/api/events`, { headers: bearer(READ), ca: readFileSync(cert) }, (res) => {
        res.resume();
        resolve(res.statusCode!);
      }).on('error', reject);
    });
    expect(status).toBe(200);
  });
});
