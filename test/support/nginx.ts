/** A real nginx (apt) under a test's own prefix: its configuration, and the wait until it listens. */
import { spawn } from 'node:child_process';
import { existsSync, mkdirSync, readFileSync, writeFileSync } from 'node:fs';
import { connect } from 'node:net';
import { join } from 'node:path';
import { freePort } from '../../bench/python-server-commands';
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

export interface Nginx {
  port: number;
  /** its one worker's pid */
  worker: number;
  /** stops the master, which stops the worker, and waits until the worker is gone */
  stop(): Promise<void>;
}

/**
 * A real nginx under `prefix`, one worker on a free port of 127.0.0.1, its server block's lines
 * `server` (by default: every request answered "ok\n").
 */
export async function startNginx(
  prefix: string,
  server = 'location / { return 200 "ok\n"; }',
): Promise<Nginx> {
  const port = await freePort();
  const conf = writeNginxConf(prefix, {
    workerConnections: 64,
    accessLog: false,
    http: `  server { listen 127.0.0.1:${port}; ${server} }`,
  });
  const nginx = spawn('/usr/sbin/nginx', ['-p', prefix, '-c', conf, '-g', 'daemon off;'], {
    stdio: 'ignore',
  });
  let worker = 0;
  const stop = async (): Promise<void> => {
    // its master stops the worker (a killed master would leave it running)
    const exited = new Promise((r) => nginx.once('exit', r));
    nginx.kill('SIGTERM');
    await exited;
    if (worker)
      await waitFor(() => !existsSync(join('/proc', String(worker))), { what: 'nginx worker gone' });
  };
  try {
    const children = join('/proc', String(nginx.pid!), 'task', String(nginx.pid!), 'children');
    await waitFor(() => (worker = Number(readFileSync(children, 'utf8').trim().split(' ')[0])) > 0, {
      what: 'nginx worker',
    });
    await nginxListening(port);
  } catch (e) {
    await stop();
    throw e;
  }
  return { port, worker, stop };
}
