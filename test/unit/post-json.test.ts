/**
 * `postJson`, the request `kreplay replay` creates, plays and stops its
 * session with (over node:http, so that taking a play's answer costs the
 * stream's reader little): the JSON body and answer, the daemon's problem as
 * the error, the token sent.
 */
import { once } from 'node:events';
import {
  createServer,
  type IncomingHttpHeaders,
  type IncomingMessage,
  type Server,
  type ServerResponse,
} from 'node:http';
import type { AddressInfo } from 'node:net';
import { postJson } from '../../cli/daemon-request';

describe('postJson', () => {
  let server: Server;
  let url: string;
  const seen: { method?: string; headers: IncomingHttpHeaders; body: string }[] = [];

  beforeAll(async () => {
    server = createServer((req, res) => {
      let body = '';
      req.setEncoding('utf8').on('data', (chunk: string) => (body += chunk));
      req.on('end', () => answer(req, res, body));
    });
    const answer = (req: IncomingMessage, res: ServerResponse, body: string) => {
      seen.push({ method: req.method, headers: req.headers, body });
      if (req.url === '/play' || req.url === '/sessions') {
        res.setHeader('content-type', 'application/json');
        res.end(JSON.stringify({ id: 's1', state: 'playing', events_total: 3 }));
        return;
      }
      res.statusCode = 409;
      res.setHeader('content-type', 'application/problem+json');
      res.end(JSON.stringify({ title: 'Conflict', detail: 'session s1 is finished' }));
    };
    server.listen(0, '127.0.0.1');
    await once(server, 'listening');
    url = `http://127.0.0.1:${(server.address() as AddressInfo).port}`;
  });
  afterAll(() => server.close());
  afterEach(() => delete process.env.KREPLAY_TOKEN);

  it('posts and parses the JSON answer, with the token of KREPLAY_TOKEN', async () => {
    process.env.KREPLAY_TOKEN = 'secret';
    await expect(postJson(`${url}/play`)).resolves.toEqual({ id: 's1', state: 'playing', events_total: 3 });
    expect(seen.at(-1)).toMatchObject({ method: 'POST', headers: { authorization: 'Bearer secret' } });
  });

  it('sends a body as JSON (the session a replay creates)', async () => {
    const body = { transaction_id: 't1', speed_factor: 2, extra_latency_ns: 0 };
    await expect(postJson(`${url}/sessions`, body)).resolves.toMatchObject({ id: 's1' });
    expect(seen.at(-1)).toMatchObject({ method: 'POST', headers: { 'content-type': 'application/json' } });
    expect(JSON.parse(seen.at(-1)!.body)).toEqual(body);
    // a body-less POST says no content type
    await postJson(`${url}/play`);
    expect(seen.at(-1)).toMatchObject({ body: '' });
    expect(seen.at(-1)!.headers['content-type']).toBeUndefined();
  });

  it("rejects with the daemon's problem for an answer other than 2xx", async () => {
    await expect(postJson(`${url}/stop`)).rejects.toThrow(
      'server answered 409 Conflict: session s1 is finished',
    );
    expect(seen.at(-1)!.headers.authorization).toBeUndefined();
  });

  it('says the daemon cannot be reached when nothing listens', async () => {
    const closed = createServer();
    closed.listen(0, '127.0.0.1');
    await once(closed, 'listening');
    const { port } = closed.address() as AddressInfo;
    closed.close();
    await once(closed, 'close');
    await expect(postJson(`http://127.0.0.1:${port}/play`)).rejects.toThrow(
      `cannot reach http://127.0.0.1:${port}`,
    );
  });
});
