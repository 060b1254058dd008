"""aiohttp work a request leaves behind (attribution-lifetime.test.ts): GET / writes ID.handler, and
starts a task that writes ID.during before the reply, then waits for the next GET /flush, then writes
ID.task on the loop and ID.pool through run_in_executor: after its request ended.
Usage: aiohttp-lifetime-server.py DIR (prints its port)."""
import asyncio
import os
import sys

from aiohttp import web
from aiohttp_serve import serve

DIR = sys.argv[1]
# what /flush sets: the tasks of the requests answered since the last one
flush = [None]
left = set()


def write(name):
    with open(os.path.join(DIR, name), "w") as f:
        f.write(name + "\n")


async def behind(rid, written, flushed):
    write(f"{rid}.during")
    written.set_result(None)
    await flushed.wait()
    write(f"{rid}.task")
    await asyncio.get_running_loop().run_in_executor(None, write, f"{rid}.pool")


async def handle(request):
    rid = request.headers["x-request-id"]
    write(f"{rid}.handler")
    written = asyncio.get_running_loop().create_future()
    task = asyncio.ensure_future(behind(rid, written, flush[0]))
    left.add(task)
    task.add_done_callback(left.discard)
    await written
    return web.Response(text="ok")


async def flushed(request):
    flush[0].set()
    flush[0] = asyncio.Event()
    return web.Response(text="flushed")


async def main():
    flush[0] = asyncio.Event()
    app = web.Application()
    app.router.add_get("/", handle)
    app.router.add_get("/flush", flushed)
    await serve(app)


asyncio.run(main())
