/**
 * The Python hook on the WSGI servers people deploy, started the ordinary way with Debian's
 * packages and a Flask application (test/support/runtimes/wsgi_app.py): gunicorn's sync, gthread
 * and gevent workers and uWSGI's threads. Each call of the application is a unit opened from its
 * request's head; a thread (a greenlet under gevent) the request starts carries it. Every request's
 * writes are its own at 1, 8, 64 and 256 concurrent, keep-alive and not.
 */
import { PythonServers } from '../support/python-servers';

const servers = new PythonServers();
const FILES = 3;

beforeAll(() => servers.start('wsgi'), 60_000);
afterAll(() => servers.stop());

// Debian's python3-gunicorn has no gunicorn command (the gunicorn package adds it): python3 -m
const gunicorn = (worker: string, ...more: string[]) => [
  '-m',
  'gunicorn',
  '-b',
  '127.0.0.1:{port}',
  '-w',
  '2',
  '-k',
  worker,
  ...more,
  'wsgi_app:app',
];

describe('the Python hook on WSGI servers (real kernel)', () => {
  it.each([
    ['gunicorn sync', '/usr/bin/python3', gunicorn('sync'), Infinity],
    ['gunicorn gthread', '/usr/bin/python3', gunicorn('gthread', '--threads', '4'), Infinity],
    ['gunicorn gevent', '/usr/bin/python3', gunicorn('gevent'), Infinity],
    [
      'uWSGI threads',
      '/usr/bin/uwsgi',
      // --http11-socket: --http-socket hangs up on a client that asks for keep-alive
      [
        '--http11-socket',
        '127.0.0.1:{port}',
        '--listen',
        '512',
        '--plugin',
        'python3',
        '--threads',
        '8',
        '--module',
        'wsgi_app:app',
        '--disable-logging',
      ],
      // a thread serves one connection until it closes: 8 kept-alive connections at once
      8,
    ],
  ])(
    '%s + Flask: every request its own writes',
    async (name, command, args, keepAliveUpTo) => {
      const server = await servers.serve(name.replace(/\W+/g, '-'), command, args);
      await servers.warm(server, '/', FILES);
      expect(
        await servers.everyLevel(server, name.replace(/\W+/g, '-'), { files: FILES, keepAliveUpTo }),
      ).toEqual([]);
      server.child.kill();
    },
    300_000,
  );
});
