"""A realistic aiohttp handler for attribution accuracy: asyncio.sleep 0-20 ms, an upstream GET,
a file written on the loop and one through run_in_executor, named by the request's x-request-id.
Usage: aiohttp-server.py DIR UPSTREAM_PORT (prints its port)."""
import asyncio
import os
import random
import sys

from aiohttp import ClientSession, web
from aiohttp_serve import serve

DIR, UPSTREAM = sys.argv[1], int(sys.argv[2])


def write(path, text):
    with open(path, "w") as f:
        f.write(text)


async def handle(request):
    rid = request.headers["x-request-id"]
    await asyncio.sleep(random.random() * 0.02)
    async with request.app["session"].get(f"http://127.0.0.1:{UPSTREAM}/") as answer:
        await answer.read()
    write(os.path.join(DIR, f"{rid}.loop"), "written on the loop\n")
    await asyncio.get_running_loop().run_in_executor(None, write, os.path.join(DIR, f"{rid}.pool"), "by a pool thread\n")
    return web.Response(text="ok")


async def main():
    app = web.Application()
    app.router.add_get("/", handle)
    app["session"] = ClientSession()
    await serve(app)


asyncio.run(main())
