/** Listens; close() stops accepting and lets the requests under way finish. */
import { createServer as createHttpServer, type Server } from 'node:http';
import { createServer as createHttpsServer } from 'node:https';
import { readFileSync } from 'node:fs';
import type { AddressInfo } from 'node:net';
import type { Express } from 'express';

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
