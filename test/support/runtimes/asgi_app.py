"""A FastAPI application for uvicorn, started the ordinary way with `asgi_app:app`, named by each
request's x-request-id under KR_OUT; the upstream's port is KR_UPSTREAM.
  /       async def: sleeps 0-20 ms, writes <id>.before, calls the upstream, writes <id>.after
  /sync   plain def (anyio's worker threads): the same with time.sleep and urllib
  /later  async def that writes <id>.before and leaves <id>.after to a BackgroundTasks function"""
import asyncio
import os
import random
import time
import urllib.request

from fastapi import BackgroundTasks, FastAPI, Request
from fastapi.responses import PlainTextResponse

DIR, UPSTREAM = os.environ["KR_OUT"], int(os.environ["KR_UPSTREAM"])
app = FastAPI()


def write(path, text):
    with open(path, "w") as f:
        f.write(text)


async def upstream():
    reader, writer = await asyncio.open_connection("127.0.0.1", UPSTREAM)
    writer.write(b"GET / HTTP/1.1\r\nHost: upstream\r\nConnection: close\r\n\r\n")
    await reader.read()
    writer.close()
    await writer.wait_closed()


@app.get("/", response_class=PlainTextResponse)
async def handle(request: Request):
    rid = request.headers["x-request-id"]
    await asyncio.sleep(random.random() * 0.02)
    write(os.path.join(DIR, f"{rid}.before"), "before the upstream call\n")
    await upstream()
    write(os.path.join(DIR, f"{rid}.after"), "after it\n")
    return "ok"


@app.get("/sync", response_class=PlainTextResponse)
def handle_sync(request: Request):
    rid = request.headers["x-request-id"]
    time.sleep(random.random() * 0.02)
    write(os.path.join(DIR, f"{rid}.before"), "before the upstream call\n")
    with urllib.request.urlopen(f"http://127.0.0.1:{UPSTREAM}/") as answer:
        answer.read()
    write(os.path.join(DIR, f"{rid}.after"), "after it\n")
    return "ok"


@app.get("/later", response_class=PlainTextResponse)
async def handle_later(request: Request, tasks: BackgroundTasks):
    rid = request.headers["x-request-id"]
    await asyncio.sleep(random.random() * 0.02)
    write(os.path.join(DIR, f"{rid}.before"), "before the upstream call\n")
    await upstream()
    tasks.add_task(write, os.path.join(DIR, f"{rid}.after"), "by a background task\n")
    return "ok"
