import { createServer, type IncomingHttpHeaders, type Server, type ServerResponse } from 'node:http';
import type { AddressInfo, Socket } from 'node:net';
import { openReplayStream, requestHead } from '../../cli/replay-stream';
import { HttpError } from '../../cli/sse-client';
import { waitFor } from '../support/wait';

/** A server whose one stream the test writes (`answer` decides its head), the request's headers kept. */
async function streamServer(answer: (res: ServerResponse) => void = (res) => res.flushHeaders()) {
  let take: (res: ServerResponse) => void = () => undefined;
  const stream = new Promise<ServerResponse>((resolve) => (take = resolve));
  const seen: IncomingHttpHeaders[] = [];
  const server: Server = createServer((req, res) => {
    // a round trip through the client's loop
    if (req.url === '/ping') return void res.end('pong');
    seen.push(req.headers);
    answer(res);
    take(res);
  });
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  return {
    url: `http://127.0.0.1:${(server.address() as AddressInfo).port}`,
    stream,
    seen,
    close: () => {
      server.closeAllConnections();
      return new Promise<void>((resolve) => server.close(() => resolve()));
    },
  };
}

/** The daemon's answer: an event stream framed by the connection's end (daemon/replay/stream/sse-watcher.ts). */
function daemonHead(res: ServerResponse): void {
  res.statusCode = 200;
  res.setHeader('content-type', 'text/event-stream');
  res.setHeader('connection', 'close');
  res.removeHeader('transfer-encoding');
  res.flushHeaders();
}

const written = (res: ServerResponse, text: string) =>
  new Promise<void>((resolve) => res.write(text, () => resolve()));

describe('openReplayStream', () => {
  afterEach(() => delete process.env.KREPLAY_TOKEN);

  it('asks with the token, the last id and Connection: close; reads the daemon’s stream to its end', async () => {
    process.env.KREPLAY_TOKEN = 'secret';
    const server = await streamServer(daemonHead);
    try {
      const stream = await openReplayStream(`${server.url}/api/replay/sessions/s1/events?x=1`, '41');
      expect(server.seen[0]).toMatchObject({
        authorization: 'Bearer secret',
        'last-event-id': '41',
        accept: 'text/event-stream',
        connection: 'close',
      });
      const res = await server.stream;
      const got: string[] = [];
      const listening = stream.listen((chunk) => void got.push(chunk.toString()));
      await written(res, 'id: 42\nevent: replay\ndata: {}\n\n');
      await waitFor(() => got.length === 1);
      res.end('id: 43\nevent: replay\ndata: {}\n\n');
      await listening;
      expect(got.join('')).toBe('id: 42\nevent: replay\ndata: {}\n\nid: 43\nevent: replay\ndata: {}\n\n');
    } finally {
      await server.close();
    }
  });

  it('holds the socket while a batch is not done: the next bytes reach it after', async () => {
    const server = await streamServer(daemonHead);
    try {
      const stream = await openReplayStream(`${server.url}/events`);
      const res = await server.stream;
      const log: string[] = [];
      let release: () => void = () => undefined;
      const listening = stream.listen((chunk) => {
        log.push(chunk.toString());
        if (log.length === 1) return new Promise<void>((resolve) => (release = resolve));
      });
      await written(res, 'id: 0\n\n');
      await waitFor(() => log.length === 1);
      await written(res, 'id: 1\n\n');
      // the socket is held, so nothing more is read
      await (await fetch(`${server.url}/ping`)).text();
      log.push('released');
      release();
      await waitFor(() => log.length === 3);
      res.end();
      await listening;
      expect(log).toEqual(['id: 0\n\n', 'released', 'id: 1\n\n']);
    } finally {
      await server.close();
    }
  });

  it('reads a chunked stream (node:http’s own framing) and ends with its last chunk', async () => {
    const server = await streamServer((res) => {
      res.writeHead(200, { 'content-type': 'text/event-stream' });
      res.flushHeaders();
    });
    try {
      const stream = await openReplayStream(`${server.url}/events`);
      const res = await server.stream;
      const got: Buffer[] = [];
      const listening = stream.listen((chunk) => void got.push(Buffer.from(chunk)));
      const frames = Array.from({ length: 200 }, (_, i) => `id: ${i}\nevent: replay\ndata: {"é":${i}}\n\n`);
      for (const frame of frames) await written(res, frame);
      res.end();
      await listening;
      expect(Buffer.concat(got).toString()).toBe(frames.join(''));
    } finally {
      await server.close();
    }
  });

  it('rejects with an HttpError holding the body of any other answer', async () => {
    const problem = JSON.stringify({ title: 'Not Found', detail: 'no session s9' });
    for (const send of [
      (res: ServerResponse) =>
        res.writeHead(404, { 'content-type': 'application/problem+json' }).end(problem),
      (res: ServerResponse) => {
        res.writeHead(404, { 'content-type': 'application/problem+json' });
        res.write(problem.slice(0, 10));
        res.end(problem.slice(10));
      },
    ]) {
      const server = await streamServer(send);
      try {
        const err = (await openReplayStream(`${server.url}/events`).catch((e: unknown) => e)) as HttpError;
        expect(err).toBeInstanceOf(HttpError);
        expect([err.status, err.body]).toEqual([404, problem]);
      } finally {
        await server.close();
      }
    }
  });

  it('rejects a dropped connection and a refused one with their codes (retried)', async () => {
    const server = await streamServer((res) => {
      res.writeHead(200, { 'content-type': 'text/event-stream' });
      res.flushHeaders();
    });
    const stream = await openReplayStream(`${server.url}/events`);
    const res = await server.stream;
    const listening = stream.listen(() => undefined);
    await written(res, 'id: 0\n\n');
    (res.socket as Socket).destroy();
    await expect(listening).rejects.toMatchObject({ code: expect.stringMatching(/^ECONNRESET$/) });
    await server.close();
    await expect(openReplayStream(`${server.url}/events`)).rejects.toMatchObject({ code: 'ECONNREFUSED' });
  });

  it('writes a request head of the URL’s host, path and query, and refuses a header value with a line break', () => {
    expect(requestHead(new URL('http://[::1]:8080/a/b?c=d'), undefined)).toBe(
      'GET /a/b?c=d HTTP/1.1\r\nhost: [::1]:8080\r\naccept: text/event-stream\r\nconnection: close\r\n\r\n',
    );
    process.env.KREPLAY_TOKEN = 'a\r\nX-Injected: 1';
    expect(() => requestHead(new URL('http://h/'), undefined)).toThrow(
      /authorization header would hold a line break/,
    );
  });
});
