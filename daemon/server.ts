/** Listens; close() stops accepting and lets the requests under way finish. */
import { createServer as createHttpServer, type Server } from 'node:http';
import { createServer as createHttpsServer } from 'node:https';
import { readFileSync } from 'node:fs';
import type { AddressInfo, Socket } from 'node:net';
import type { Express } from 'express';
import { ProblemError } from './http/problem';

/**
 * What Node's HTTP parser refuses before any route sees it (a head over 16 KiB, bad framing) is
 * answered as every other error is, with problem+json, not Node's bare status line.
 */
function answerClientError(err: NodeJS.ErrnoException, socket: Socket): void {
  if (!socket.writable) return void socket.destroy();
  const problem =
    err.code === 'HPE_HEADER_OVERFLOW'
      ? new ProblemError('headers-too-large', 'the request head is over 16 KiB')
      : new ProblemError(
          'malformed-request',
          `the request is not valid HTTP/1.1 (${err.code ?? err.message})`,
        );
  const answer = problem.toProblem();
  const body = JSON.stringify(answer);
  socket.end(
    `HTTP/1.1 ${problem.status} ${answer.title}\r\nContent-Type: application/problem+json\r\n` +
      `Content-Length: ${Buffer.byteLength(body)}\r\nConnection: close\r\n\r\n${body}`,
  );
}

export interface RunningServer {
  server: Server;
  url: string;
  close(): Promise<void>;
}

/** PEM files of the certificate chain and its key, for HTTPS. */
export interface TlsFiles {
  cert: string;
  key: string;
}

export function listen(app: Express, host: string, port: number, tls?: TlsFiles): Promise<RunningServer> {
  return new Promise((resolve, reject) => {
    const server = tls
      ? createHttpsServer({ cert: readFileSync(tls.cert), key: readFileSync(tls.key) }, app)
      : createHttpServer(app);
    server.on('clientError', answerClientError);
    server.listen(port, host);
    server.once('error', reject);
    server.once('listening', () => {
      const address = server.address() as AddressInfo;
      const shownHost = address.family === 'IPv6' ? `[${address.address}]` : address.address;
      resolve({
        server,
        url: `${tls ? 'https' : 'http'}://${shownHost}:${address.port}`,
        close: () =>
          new Promise<void>((done) => {
            server.close(() => done());
            server.closeIdleConnections();
          }),
      });
    });
  });
}
