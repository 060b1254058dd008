/**
 * `kreplay replay`'s event stream over a socket of its own, read by
 * ResponseStream rather than node:http: a plain connection's reads land in
 * one buffer, reused (net's `onread`: no Readable, no buffer per read); a
 * TLS one's come as its 'data'. Every other request of the CLI keeps
 * node:http (cli/daemon-request.ts, cli/sse-client.ts).
 */
import { connect, isIP, type Socket } from 'node:net';
import { connect as connectTls } from 'node:tls';
import { KreplayError } from '../core/errors';
import { connectionDropped, ResponseStream, type ChunkStream } from './response-stream';
import { eventStreamHeaders } from './sse-client';

/** a socket's read, as libuv's own buffer for node:http's reads */
export const READ_BYTES = 64 << 10;
/** what a header's value may not hold: a line's end would be a header (or a body) of its own */
const NOT_IN_A_VALUE = /[\r\n\0]/;

/** The GET of `url`'s event stream, its head as bytes; the connection closes with the stream. */
export function requestHead(url: URL, lastEventId: string | undefined): string {
  const headers = { host: url.host, ...eventStreamHeaders(lastEventId), connection: 'close' };
  let head = `GET ${url.pathname}${url.search} HTTP/1.1\r\n`;
  for (const [name, value] of Object.entries(headers)) {
    if (NOT_IN_A_VALUE.test(value))
      throw new KreplayError('E_HTTP_PROTOCOL', `the ${name} header would hold a line break or NUL`);
    head += `${name}: ${value}\r\n`;
  }
  return `${head}\r\n`;
}

/**
 * Opens the event stream at `url` (http or https), resuming after
 * `lastEventId`; resolves once a 200 answer's head is read. Rejects with an
 * HttpError (another answer, its body read), a network error (its `code`
 * set: retried), or an HttpProtocolError (an answer it cannot read safely).
 */
export function openReplayStream(url: string, lastEventId?: string): Promise<ChunkStream> {
  const target = new URL(url);
  const head = requestHead(target, lastEventId);
  const tls = target.protocol === 'https:';
  const host = target.hostname.replace(/^\[(.*)\]$/, '$1');
  const port = Number(target.port) || (tls ? 443 : 80);
  let socket: Socket;
  const stream = new ResponseStream({
    resume: () => socket.resume(),
    destroy: () => socket.destroy(),
  });
  if (tls) {
    socket = connectTls({ host, port, servername: isIP(host) ? undefined : host });
    socket.on('data', (bytes: Buffer) => {
      if (!stream.read(bytes)) socket.pause();
    });
  } else {
    const buffer = Buffer.allocUnsafe(READ_BYTES);
    socket = connect({
      host,
      port,
      onread: {
        buffer,
        callback: (bytes: number, into: Uint8Array) => stream.read((into as Buffer).subarray(0, bytes)),
      },
    });
  }
  socket.on('end', () => stream.end());
  socket.on('error', (err) => stream.fail(err));
  socket.on('close', () => stream.fail(connectionDropped('the connection closed')));
  socket.write(head);
  return stream.opened;
}
