"""A daemon as they are written: once told to go (a line on stdin), it closes every descriptor but
stdio (os.closerange), opens its log, and serves aiohttp requests whose pool threads write the log.
GET /r/<id>: a line from a pool thread and one from the loop; an id starting with "boom" then raises
in a pool job, one starting with "raise" in the handler, which aiohttp logs with its traceback. GET /state: what the program can see of
itself (sys.meta_path, its descriptors, modules, threads). GET /quit: exits 0.
Usage: closerange-daemon.py DIR (prints its port)."""
import asyncio
import os
import sys
import threading
from concurrent.futures import ThreadPoolExecutor

from aiohttp import web

DIR = sys.argv[1]


def describe(fd):
    try:
        target = os.readlink("/proc/self/fd/%s" % fd)
    except OSError:
        return None
    # a socket's or pipe's inode differs from run to run, and so does the directory
    return target.split(":")[0] if ":" in target else os.path.relpath(target)


async def main(log):
    pool = ThreadPoolExecutor(max_workers=4)
    stop = asyncio.Event()

    def log_line(text):
        os.write(log, text.encode())

    def boom(rid):
        raise ValueError("boom in " + rid)

    async def request(req):
        rid = req.match_info["rid"]
        loop = asyncio.get_running_loop()
        await loop.run_in_executor(pool, log_line, "%s from a pool thread\n" % rid)
        log_line("%s from the loop\n" % rid)
        if rid.startswith("boom"):
            await loop.run_in_executor(pool, boom, rid)
        if rid.startswith("raise"):
            raise KeyError(rid)
        return web.Response(text=rid)

    async def state(_req):
        return web.json_response(
            {
                "meta_path": [f.__name__ if isinstance(f, type) else type(f).__name__ for f in sys.meta_path],
                "fds": {fd: describe(fd) for fd in sorted(os.listdir("/proc/self/fd"), key=int)},
                "modules": sorted(sys.modules),
                "threads": sorted(t.name for t in threading.enumerate() if not t.name.startswith("ThreadPool")),
            }
        )

    async def quit_(_req):
        stop.set()
        return web.Response(text="bye")

    app = web.Application()
    app.add_routes([web.get("/r/{rid}", request), web.get("/state", state), web.get("/quit", quit_)])
    runner = web.AppRunner(app)
    await runner.setup()
    site = web.TCPSite(runner, "127.0.0.1", 0)
    await site.start()
    print(site._server.sockets[0].getsockname()[1], flush=True)
    await stop.wait()
    await runner.cleanup()
    pool.shutdown()
    os.close(log)


sys.stdin.readline()
os.closerange(3, 1024)
# fd 3: where a hook that kept a descriptor open had it
asyncio.run(main(os.open(os.path.join(DIR, "daemon.log"), os.O_WRONLY | os.O_CREAT | os.O_APPEND, 0o644)))
