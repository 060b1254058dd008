/**
 * The Python hook on Django's ASGI application (test/support/runtimes/django_asgi.py: a sync view,
 * which Django runs on asgiref's thread) under uvicorn, started the ordinary way with Debian's
 * packages. The ASGI call is a unit opened from its request's head, and the view's thread runs in
 * it (a ThreadPoolExecutor work item). Every request's writes are its own at 1, 8, 64 and 256
 * concurrent, keep-alive and not.
 */
import { uvicorn } from '../../bench/python-server-commands';
import { PythonServers } from '../support/python-servers';

const servers = new PythonServers();

beforeAll(() => servers.start('django'), 60_000);
afterAll(() => servers.stop());

it('uvicorn + Django ASGI: every request its own writes', async () => {
  const server = await servers.serve('django', uvicorn('django_asgi:application'));
  await servers.warm(server, '/', 2);
  expect(await servers.everyLevel(server, 'django', { files: 2 })).toEqual([]);
  server.child.kill();
}, 300_000);
