/**
 * The Python servers people deploy, started the ordinary way from Debian's packages in
 * test/support/runtimes (its wsgi_app.py, asgi_app.py, django_asgi.py), as the accuracy tests
 * (test/integration/attribution-wsgi.test.ts, attribution-asgi.test.ts) and the python-servers
 * bench run them; and what both need to watch them: a free port, whether it accepts, a server's
 * processes.
 */
import fs from 'node:fs';
import { createServer } from 'node:http';
import { connect, type AddressInfo } from 'node:net';
import path from 'node:path';

/** The checkout's root: this module runs from bench/ (the tests) and from dist/bench/ (the bench). */
const ROOT = path.join(__dirname, path.basename(path.dirname(__dirname)) === 'dist' ? '../..' : '..');
export const PYTHON_APPS = path.join(ROOT, 'test', 'support', 'runtimes');

/** A command's arguments: `{port}` stands for the port it serves on. */
export interface ServerCommand {
  command: string;
  args: string[];
}

/**
 * gunicorn serving `app` (module:callable). Debian's python3-gunicorn has no gunicorn command (the
 * gunicorn package adds it): python3 -m.
 */
export const gunicornServing = (app: string, worker: string, ...more: string[]): ServerCommand => ({
  command: '/usr/bin/python3',
  args: ['-m', 'gunicorn', '-b', '127.0.0.1:{port}', '-w', '2', '-k', worker, ...more, app],
});

/** gunicorn serving the Flask application (wsgi_app.py). */
export const gunicorn = (worker: string, ...more: string[]): ServerCommand =>
  gunicornServing('wsgi_app:app', worker, ...more);

/**
 * wsgiref's simple_server, a thread per connection, serving the bare WSGI function (wsgi_bare.py);
 * `gevent`: monkey-patched first, its threads greenlets on one thread.
 */
export const wsgiref = (...more: 'gevent'[]): ServerCommand => ({
  command: '/usr/bin/python3',
  args: ['wsgiref_serve.py', '{port}', ...more],
});

/** uWSGI's threads, over --http11-socket: --http-socket hangs up on a client that asks for keep-alive. */
export const UWSGI_THREADS = 8;
export const uwsgi: ServerCommand = {
  command: '/usr/bin/uwsgi',
  args: [
    ...['--http11-socket', '127.0.0.1:{port}', '--listen', '512', '--plugin', 'python3'],
    ...['--threads', String(UWSGI_THREADS), '--module', 'wsgi_app:app', '--disable-logging'],
  ],
};

export const uvicorn = (app: string): ServerCommand => ({
  command: '/usr/bin/python3',
  args: ['-m', 'uvicorn', '--host', '127.0.0.1', '--port', '{port}', '--no-access-log', app],
});

/** The command's arguments for `port`. */
export const argsFor = (server: ServerCommand, port: number): string[] =>
  server.args.map((a) => a.replace('{port}', String(port)));

/** The processes under `pid` (itself included), from /proc's children lists. */
export function processTree(pid: number): number[] {
  const found = [pid];
  for (let i = 0; i < found.length; i++) {
    try {
      for (const task of fs.readdirSync(`/proc/${found[i]}/task`))
        for (const child of fs.readFileSync(`/proc/${found[i]}/task/${task}/children`, 'utf8').split(' '))
          if (child.trim()) found.push(Number(child));
    } catch {
      // gone
    }
  }
  return found;
}

export function accepts(port: number): Promise<boolean> {
  return new Promise((resolve) => {
    const socket = connect(port, '127.0.0.1')
      .once('connect', () => {
        socket.destroy();
        resolve(true);
      })
      .once('error', () => resolve(false));
  });
}

export async function freePort(): Promise<number> {
  const server = createServer();
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  const { port } = server.address() as AddressInfo;
  await new Promise((resolve) => server.close(resolve));
  return port;
}
