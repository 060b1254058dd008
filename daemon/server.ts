/** Listens, and drains on SIGTERM/SIGINT: stop accepting, finish requests, close resources. */
import type { Server } from 'node:http';
import type { AddressInfo } from 'node:net';
import type { Express } from 'express';
import type { Logger } from '../core/log/logger';

export interface RunningServer {
  server: Server;
  url: string;
  close(): Promise<void>;
}

export function listen(app: Express, host: string, port: number): Promise<RunningServer> {
  return new Promise((resolve, reject) => {
    const server = app.listen(port, host);
    server.once('error', reject);
    server.once('listening', () => {
      const address = server.address() as AddressInfo;
      const shownHost = address.family === 'IPv6' ? `[${address.address}]` : address.address;
      resolve({
        server,
        url: `http://${shownHost}:${address.port}`,
        close: () =>
          new Promise<void>((done) => {
            server.close(() => done());
            server.closeIdleConnections();
          }),
      });
    });
  });
}

/**
 * Resolves with the signal once SIGINT or SIGTERM arrives. Later signals
 * are ignored while draining: Ctrl-C under `kreplay up` reaches a child
 * both from the terminal and from its parent, and must not cut the drain.
 */
export function untilSignal(log: Logger): Promise<NodeJS.Signals> {
  return new Promise((resolve) => {
    let draining = false;
    const on = (signal: NodeJS.Signals) => {
      if (draining) {
        log.info('already draining', { signal });
        return;
      }
      draining = true;
      log.info('draining', { signal });
      resolve(signal);
    };
    process.on('SIGINT', on);
    process.on('SIGTERM', on);
  });
}
