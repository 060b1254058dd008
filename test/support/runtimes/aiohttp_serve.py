"""Serves an aiohttp app the ordinary way (AppRunner, TCPSite) on a free loopback port, which it
prints, until killed. Imported by the aiohttp test servers beside it."""
import asyncio

from aiohttp import web


async def serve(app):
    runner = web.AppRunner(app, access_log=None)
    await runner.setup()
    site = web.TCPSite(runner, "127.0.0.1", 0)
    await site.start()
    print(site._server.sockets[0].getsockname()[1], flush=True)
    await asyncio.Event().wait()
