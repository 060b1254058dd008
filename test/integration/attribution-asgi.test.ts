/**
 * The Python hook on an ASGI server started the ordinary way with Debian's packages: uvicorn with
 * FastAPI (test/support/runtimes/asgi_app.py: `async def`, plain `def` on anyio's worker threads, a
 * BackgroundTasks write); Django's ASGI application is attribution-django-asgi.test.ts's. Each call with an http scope is a unit opened from its request's head; work the request
 * hands to a worker thread runs in it. Every request's writes are its own at 1, 8, 64 and 256
 * concurrent, keep-alive and not.
 */
import { uvicorn } from '../../bench/python-server-commands';
import { PythonServers } from '../support/python-servers';

const servers = new PythonServers();

beforeAll(() => servers.start('asgi'), 60_000);
afterAll(() => servers.stop());

describe('the Python hook on ASGI servers (real kernel)', () => {
  it('uvicorn + FastAPI: async def, plain def (anyio threads) and BackgroundTasks, every request its own writes', async () => {
    const server = await servers.serve('fastapi', uvicorn('asgi_app:app'));
    await servers.warm(server, '/', 2);
    const missed: string[] = [];
    for (const [name, path] of [
      ['async', '/'],
      ['sync', '/sync'],
      ['background', '/later'],
    ] as const)
      missed.push(
        ...(await servers.everyLevel(server, `fastapi-${name}`, { path, files: 2 })).map(
          (m) => `${path} ${m}`,
        ),
      );
    expect(missed).toEqual([]);
    server.child.kill();
  }, 400_000);
});
