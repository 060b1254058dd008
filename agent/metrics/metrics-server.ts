/** `kreplay agent --metrics-listen`: GET /metrics in the Prometheus text format, nothing else. */
import { createServer, type Server } from 'node:http';
import type { AddressInfo } from 'node:net';
import { KreplayError } from '../../core/errors';
import type { Logger } from '../../core/log/logger';
import type { AgentMetrics } from './agent-metrics';

export interface ListenAddress {
  host: string;
  port: number;
}

export interface MetricsServer {
  url: string;
  close(): Promise<void>;
}

export class MetricsListenError extends KreplayError {
  constructor(address: ListenAddress, cause: Error) {
    super('E_METRICS_LISTEN', `--metrics-listen ${address.host}:${address.port}: ${cause.message}`);
  }
}

function urlHost(host: string): string {
  return host.includes(':') ? `[${host}]` : host;
}

export async function startMetricsServer(
  metrics: AgentMetrics,
  address: ListenAddress,
  log: Logger,
): Promise<MetricsServer> {
  const server: Server = createServer((req, res) => {
    const path = (req.url ?? '/').split('?')[0];
    if (path !== '/metrics' || (req.method !== 'GET' && req.method !== 'HEAD')) {
      res.writeHead(404, { 'content-type': 'text/plain' }).end('only GET /metrics is served here\n');
      return;
    }
    metrics.scrape().then(
      (text) => res.writeHead(200, { 'content-type': metrics.contentType }).end(text),
      (err: unknown) => {
        log.error('metrics scrape failed', { error: String(err) });
        res.writeHead(500, { 'content-type': 'text/plain' }).end('scrape failed\n');
      },
    );
  });
  await new Promise<void>((resolve, reject) => {
    server.once('error', (err) => reject(new MetricsListenError(address, err)));
    server.listen(address.port, address.host, () => resolve());
  });
  const { port } = server.address() as AddressInfo;
  const url = `http://${urlHost(address.host)}:${port}/metrics`;
  log.info('serving metrics', { url });
  return {
    url,
    close: () => new Promise((resolve) => server.close(() => resolve())),
  };
}
