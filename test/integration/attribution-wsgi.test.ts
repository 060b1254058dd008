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
    ['gunicorn sync', '/usr/bin/python3', gunicorn('sync')],
    ['gunicorn gthread', '/usr/bin/python3', gunicorn('gthread', '--threads', '4')],
    ['gunicorn gevent', '/usr/bin/python3', gunicorn('gevent')],
    [
      'uWSGI threads',
      '/usr/bin/uwsgi',
      ['--http-socket', '127.0.0.1:{port}', '--plugin', 'python3', '--threads', '4', '--module', 'wsgi_app:app', '--disable-logging'],
    ],
  ])('%s + Flask: every request its own writes', async (name, command, args) => {
    const server = await servers.serve(name.replace(/\W+/g, '-'), command, args);
    await servers.warm(server, '/', FILES);
    expect(await servers.everyLevel(server, name.replace(/\W+/g, '-'), { files: FILES })).toEqual([]);
    server.child.kill();
  });
});
