import { createServer, type ServerResponse, type Server } from 'node:http';
import type { AddressInfo } from 'node:net';
import { openEventStream, SseByteParser } from '../../cli/sse-client';
import { waitFor } from '../support/wait';

/** An event stream whose chunks the test writes; `/ping` answers at once (a round trip through the client's loop). */
async function streamServer(): Promise<{
  url: string;
  stream: Promise<ServerResponse>;
  close(): Promise<void>;
}> {
  let take: (res: ServerResponse) => void = () => undefined;
  const stream = new Promise<ServerResponse>((resolve) => (take = resolve));
  const server: Server = createServer((req, res) => {
    if (req.url === '/ping') return void res.end('pong');
    res.writeHead(200, { 'content-type': 'text/event-stream' });
    res.flushHeaders();
    take(res);
  });
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  const url = `http://127.0.0.1:${(server.address() as AddressInfo).port}`;
  return {
    url,
    stream,
    close: () => {
      server.closeAllConnections();
      return new Promise((resolve) => server.close(() => resolve()));
    },
  };
}

const written = (res: ServerResponse, text: string) =>
  new Promise<void>((resolve) => res.write(text, () => resolve()));

describe('EventStream.listen', () => {
  it('hands each chunk over as read, holds the socket while a batch is not done, ends with the stream', async () => {
    const server = await streamServer();
    try {
      const events = await openEventStream(`${server.url}/events`);
      const res = await server.stream;
      const log: string[] = [];
      let release: () => void = () => undefined;
      const parser = new SseByteParser();
      const listening = events.listen((chunk) => {
        const batch = parser.push(chunk);
        log.push(batch.map((m) => `${m.event}:${m.id}:${m.data.toString()}`).join(' '));
        if (log.length === 1) return new Promise<void>((resolve) => (release = resolve));
      });
      await written(res, 'id: 0\nevent: replay\ndata: a\n\nid: 1\nevent: replay\nda');
      await waitFor(() => log.length === 1);
      // the next chunk reaches the client while the first batch is not done: it waits for it
      await written(res, 'ta: b\n\nid: 2\nevent: replay\ndata: c\n\n');
      await (await fetch(`${server.url}/ping`)).text();
      log.push('released');
      release();
      await waitFor(() => log.length === 3);
      res.end();
      await listening;
      expect(log).toEqual(['replay:0:a', 'released', 'replay:1:b replay:2:c']);
    } finally {
      await server.close();
    }
  });

  it('resolves when closed while listening, and rejects with what a batch throws', async () => {
    const server = await streamServer();
    try {
      const closed = await openEventStream(`${server.url}/events`);
      const first = await server.stream;
      const listening = closed.listen(() => closed.close());
      await written(first, 'event: state\ndata: {}\n\n');
      await expect(listening).resolves.toBeUndefined();

      const second = await streamServer();
      try {
        const failing = await openEventStream(`${second.url}/events`);
        const res = await second.stream;
        const rejected = expect(
          failing.listen(() => {
            throw new Error('stopped');
          }),
        ).rejects.toThrow('stopped');
        await written(res, 'event: state\ndata: {}\n\n');
        await rejected;
      } finally {
        await second.close();
      }
    } finally {
      await server.close();
    }
  });
});
