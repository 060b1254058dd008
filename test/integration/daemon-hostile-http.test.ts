/**
 * Hostile HTTP on the real daemon: a head over 16 KiB gets problem+json 431 (not Node's bare line),
 * an absolute-form target is refused, and a bodyless cross-origin POST (what a page elsewhere can
 * send without asking first) is refused by its Origin, while the daemon's own origin is not.
 */
import { connect } from 'node:net';
import { join } from 'node:path';
import { startDaemonProcess, type DaemonProcess } from '../../bench/daemon-process';
import { writeStore } from '../support/event-store';
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';

const dir = { path: '' };
let daemon: DaemonProcess;
let port: number;

beforeAll(async () => {
  dir.path = mkdtempSync(join(tmpdir(), 'kreplay-hostile-http-'));
  writeStore(dir.path, 'n1', [{ ts: 1_795_345_678_123_456_789n, txn: 'tx1' }]);
  daemon = await startDaemonProcess(['--data-dir', dir.path], join(dir.path, 'daemon.log'));
  port = Number(new URL(daemon.url).port);
});
afterAll(async () => {
  await daemon?.stop();
  rmSync(dir.path, { recursive: true, force: true });
});

/** Sends `head` (and `body`) on a raw connection; the status line, headers and body it answered. */
function raw(head: string, body = ''): Promise<{ status: number; headers: string; body: string }> {
  return new Promise((resolve, reject) => {
    const socket = connect(port, '127.0.0.1');
    let text = '';
    socket.on('data', (chunk: Buffer) => (text += chunk.toString()));
    socket.on('error', reject);
    socket.on('close', () => {
      const [headers = '', ...rest] = text.split('\r\n\r\n');
      resolve({
        status: Number(/^HTTP\/1\.1 (\d+)/.exec(headers)?.[1]),
        headers,
        body: rest.join('\r\n\r\n'),
      });
    });
    // the server closes once it has answered (Connection: close); a half-close first could cut a slow answer
    socket.write(head + body);
  });
}

describe('hostile HTTP (real daemon)', () => {
  it('answers a request head over 16 KiB with problem+json 431', async () => {
    const reply = await raw(
      `GET /api/events HTTP/1.1\r\nHost: 127.0.0.1\r\nX-Big: ${'a'.repeat(20_000)}\r\n\r\n`,
    );
    expect(reply.status).toBe(431);
    expect(reply.headers).toMatch(/content-type: application\/problem\+json/i);
    expect(JSON.parse(reply.body)).toMatchObject({ status: 431, code: 'E_HEADERS_TOO_LARGE' });
  });

  it('refuses an absolute-form request target, whatever its Host says', async () => {
    const reply = await raw(
      'GET http://evil.example/api/events HTTP/1.1\r\nHost: 127.0.0.1\r\nConnection: close\r\n\r\n',
    );
    expect(reply.status).toBe(400);
    expect(JSON.parse(reply.body)).toMatchObject({
      code: 'E_MALFORMED_REQUEST',
      detail: expect.stringContaining('not a path'),
    });
  });

  it("refuses a bodyless cross-origin POST by its Origin, and takes the daemon's own origin", async () => {
    const created = await fetch(`${daemon.url}/api/replay/sessions`, {
      method: 'POST',
      headers: { 'content-type': 'application/json' },
      body: JSON.stringify({ transaction_id: 'tx1' }),
    });
    const id = ((await created.json()) as { id: string }).id;
    const play = (origin: string) =>
      raw(
        `POST /api/replay/sessions/${id}/play HTTP/1.1\r\nHost: 127.0.0.1:${port}\r\nOrigin: ${origin}\r\nContent-Length: 0\r\nConnection: close\r\n\r\n`,
      );
    for (const origin of ['http://evil.example', 'null', `http://127.0.0.1:${port + 1}`]) {
      const refused = await play(origin);
      expect(refused.status).toBe(403);
      expect(JSON.parse(refused.body)).toMatchObject({ code: 'E_ORIGIN_NOT_ALLOWED' });
    }
    expect(
      (await fetch(`${daemon.url}/api/replay/sessions/${id}`).then((r) => r.json())) as object,
    ).toMatchObject({ state: 'ready' });
    const own = await play(`http://127.0.0.1:${port}`);
    expect(own.status).toBe(200);
  });
});
