# The server-cost benchmark's aiohttp server (bench/server-cost.ts): each request appends a line to
# one file and is answered, over keep-alive connections.
# Usage: python3 append-aiohttp.py FILE (prints its port).
import asyncio
import os
import socket
import sys

from aiohttp import web

fd = os.open(sys.argv[1], os.O_WRONLY | os.O_APPEND | os.O_CREAT, 0o644)


async def handle(_request):
    os.write(fd, b"a request\n")
    return web.Response(text="ok\n")


async def main():
    sock = socket.socket()
    sock.bind(("127.0.0.1", 0))
    app = web.Application()
    app.router.add_get("/", handle)
    runner = web.AppRunner(app, access_log=None)
    await runner.setup()
    await web.SockSite(runner, sock).start()
    print(sock.getsockname()[1], flush=True)
    await asyncio.Event().wait()


asyncio.run(main())
