"""An aiohttp server for the container tests: GET /<name> appends one line,
the request's x-request-id, to /out/<name>.log inside the container, then
answers "ok". Listens on the port given (argv[1])."""
import os
import sys

from aiohttp import web


async def handle(request):
    name = request.match_info["name"]
    rid = request.headers.get("x-request-id", "-")
    fd = os.open(f"/out/{name}.log", os.O_WRONLY | os.O_APPEND | os.O_CREAT, 0o644)
    try:
        os.write(fd, (rid + "\n").encode())
    finally:
        os.close(fd)
    return web.Response(text="ok")


app = web.Application()
app.add_routes([web.get("/{name}", handle)])
os.makedirs("/out", exist_ok=True)
web.run_app(app, host="0.0.0.0", port=int(sys.argv[1]), print=None, access_log=None)
