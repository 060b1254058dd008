/**
 * The Python hook on the WSGI servers people deploy, started the ordinary way with Debian's
 * packages and a Flask application (test/support/runtimes/wsgi_app.py): gunicorn's sync, gthread
 * and gevent workers and uWSGI's threads (its uwsgi-core embeds libpython3.11: found by it). Each
 * call of the application is a unit opened from its request's head; a thread (a greenlet under
 * gevent) the request starts carries it. A bare WSGI function (test/support/runtimes/wsgi_bare.py, no
 * framework) under gunicorn and wsgiref's threading simple_server (gevent-patched too): the server's
 * request is the unit.
 * Every request's writes are its own at 1, 8, 64 and 256 concurrent, keep-alive and not.
 */
import { gunicorn, gunicornServing, uwsgi, UWSGI_THREADS, wsgiref } from '../../bench/python-server-commands';
import { PythonServers } from '../support/python-servers';

const servers = new PythonServers();
const FILES = 3;

beforeAll(() => servers.start('wsgi'), 60_000);
// the agent flushes its store before it exits
afterAll(() => servers.stop(), 30_000);

describe('the Python hook on WSGI servers (real kernel)', () => {
  it.each([
    ['gunicorn sync', gunicorn('sync'), Infinity],
    ['gunicorn gthread', gunicorn('gthread', '--threads', '4'), Infinity],
    ['gunicorn gevent', gunicorn('gevent'), Infinity],
    // a thread serves one connection until the client closes it: as many kept alive at once
    ['uWSGI threads', uwsgi, UWSGI_THREADS],
  ])(
    '%s + Flask: every request its own writes',
    async (name, command, keepAliveUpTo) => {
      const label = name.replace(/\W+/g, '-');
      const server = await servers.serve(label, command);
      await servers.warm(server, '/', FILES);
      expect(await servers.everyLevel(server, label, { files: FILES, keepAliveUpTo })).toEqual([]);
      server.child.kill();
    },
    300_000,
  );

  it.each([
    ['gunicorn gthread', gunicornServing('wsgi_bare:app', 'gthread', '--threads', '4')],
    // a thread per connection reads its own request's head: the kernel alone follows it; greenlets
    // on one thread it cannot
    ['wsgiref threading', wsgiref()],
    ['wsgiref threading under gevent', wsgiref('gevent')],
  ])(
    '%s + a bare WSGI function: every request its own writes',
    async (name, command) => {
      const label = `${name.replace(/\W+/g, '-')}-bare`;
      const server = await servers.serve(label, command);
      await servers.warm(server, '/', FILES);
      expect(await servers.everyLevel(server, label, { files: FILES })).toEqual([]);
      server.child.kill();
    },
    300_000,
  );
});
