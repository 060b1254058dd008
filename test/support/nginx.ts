/** A real nginx (apt) under a test's own prefix: its configuration, and the wait until it listens. */
import { mkdirSync, writeFileSync } from 'node:fs';
import { connect } from 'node:net';
import { join } from 'node:path';
import { waitFor } from './wait';

export interface NginxConf {
  workerConnections: number;
  /** `off`, or a log under the prefix */
  accessLog: boolean;
  /** the `http` block's own lines: upstreams and servers */
  http: string;
}

/**
 * Writes PREFIX/nginx.conf: one worker, its pid, logs and temp paths under the prefix (nothing of
 * the machine's nginx is touched), and `conf.http` inside the http block. Returns the file's path.
 */
export function writeNginxConf(prefix: string, conf: NginxConf): string {
  mkdirSync(join(prefix, 'logs'), { recursive: true });
  const path = join(prefix, 'nginx.conf');
  writeFileSync(
    path,
    `worker_processes 1;
pid ${prefix}/nginx.pid;
error_log ${prefix}/logs/error.log;
events { worker_connections ${conf.workerConnections}; }
http {
  access_log ${conf.accessLog ? `${prefix}/logs/access.log` : 'off'};
  client_body_temp_path ${prefix}/body; proxy_temp_path ${prefix}/proxy;
  fastcgi_temp_path ${prefix}/fastcgi; uwsgi_temp_path ${prefix}/uwsgi; scgi_temp_path ${prefix}/scgi;
${conf.http}
}
`,
  );
  return path;
}

/** Resolves once 127.0.0.1:`port` accepts a connection. */
export function nginxListening(port: number): Promise<boolean> {
  return waitFor(
    () =>
      new Promise<boolean>((resolve) => {
        const s = connect(port, '127.0.0.1', () => resolve(s.destroy() !== undefined)).once('error', () =>
          resolve(false),
        );
      }),
    { what: 'nginx listening' },
  );
}
