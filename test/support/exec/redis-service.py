"""An ordinary service: http.server's ThreadingHTTPServer, Redis through python3-redis (apt), SQLite.

GET /checkout reads the cart from Redis (GET cart:42) in the thread serving the request, commits
an order to SQLite, and answers 200 (502 when Redis failed or timed out).

  redis-service.py serve REDIS_PORT DB PORT_FILE [--port N]
      production: serves on an ephemeral port (written to PORT_FILE) until killed
  redis-service.py once REDIS_PORT DB [--timeout S] [--skip-redis] [--call-from WHERE] [--probe|--probe-only] [--port N] [--linger S]
      a CI build: serves, requests /checkout of itself once, exits 0 on 200, else 1 (after serving S
      seconds more with --linger, as a deployed service goes on serving after a failed request); the Redis GET
      is made where WHERE says: "handler" (the request's thread, the default), "pool" (a
      ThreadPoolExecutor the handler hands it to), "fork" (a child process the handler forks),
      "asyncio" (redis.asyncio on an event loop the handler runs: a non-blocking socket polled with
      epoll), or "main" (the main thread, before serving: the request then reads what it got); --probe: a
      health probe (PING) on the same connection first, its time printed ("probe: 0.001 s");
      --probe-only: the PING instead of the GET
"""

import asyncio
import http.client
import os
import sqlite3
import sys
import threading
import time
from concurrent.futures import ThreadPoolExecutor
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

import redis
import redis.asyncio

MODE, REDIS_PORT, DB = sys.argv[1], int(sys.argv[2]), sys.argv[3]
TIMEOUT = float(sys.argv[sys.argv.index("--timeout") + 1]) if "--timeout" in sys.argv else 5.0
SKIP_REDIS = "--skip-redis" in sys.argv
CALL_FROM = sys.argv[sys.argv.index("--call-from") + 1] if "--call-from" in sys.argv else "handler"
PROBE = "--probe" in sys.argv
PROBE_ONLY = "--probe-only" in sys.argv
# the port it listens on, as a deployed service's is fixed (0: an ephemeral one)
PORT = int(sys.argv[sys.argv.index("--port") + 1]) if "--port" in sys.argv else 0
LINGER = float(sys.argv[sys.argv.index("--linger") + 1]) if "--linger" in sys.argv else 0.0
POOL = ThreadPoolExecutor(max_workers=2) if CALL_FROM == "pool" else None
MAIN_CART = None


def get_cart(client):
    """The cart, read where --call-from says; a Redis failure raises redis.RedisError."""
    if CALL_FROM == "pool":
        return POOL.submit(client.get, "cart:42").result()
    if CALL_FROM == "fork":
        read, write = os.pipe()
        child = os.fork()
        if child == 0:
            os.close(read)
            try:
                os.write(write, b"ok:" + (client.get("cart:42") or b""))
            except redis.RedisError:
                os.write(write, b"failed")
            os._exit(0)
        os.close(write)
        answer = os.read(read, 1 << 16)
        os.close(read)
        os.waitpid(child, 0)
        if not answer.startswith(b"ok:"):
            raise redis.TimeoutError("the forked child's GET failed")
        return answer[3:]
    if CALL_FROM == "asyncio":
        return asyncio.run(get_cart_async())
    if CALL_FROM == "main":
        if isinstance(MAIN_CART, Exception):
            raise MAIN_CART
        return MAIN_CART
    return client.get("cart:42")


async def get_cart_async():
    client = redis.asyncio.Redis(port=REDIS_PORT, socket_timeout=TIMEOUT)
    try:
        return await client.get("cart:42")
    finally:
        await client.close()


class Checkout(BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"

    def do_GET(self):
        status = 200
        try:
            client = self.server.redis()
            if PROBE or PROBE_ONLY:
                start = time.monotonic()
                client.ping()
                sys.stderr.write(f"probe: {time.monotonic() - start:.3f} s\n")
            cart = b"" if SKIP_REDIS or PROBE_ONLY else (get_cart(client) or b"")
            with sqlite3.connect(DB) as db:
                db.execute("CREATE TABLE IF NOT EXISTS orders (cart BLOB)")
                db.execute("INSERT INTO orders VALUES (?)", (cart,))
        except redis.RedisError as err:
            status = 502
            sys.stderr.write(f"redis failed: {type(err).__name__}\n")
        body = b"ok\n" if status == 200 else b"upstream\n"
        self.send_response(status)
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)

    def log_message(self, *args):
        pass


class Server(ThreadingHTTPServer):
    def redis(self):
        # one client per request thread, as a thread-per-request service makes them
        return redis.Redis(port=REDIS_PORT, socket_timeout=TIMEOUT)


server = Server(("127.0.0.1", PORT), Checkout)
port = server.server_address[1]
if MODE == "serve":
    with open(sys.argv[4], "w") as f:
        f.write(f"{port}\n")
    server.serve_forever()
else:
    if CALL_FROM == "main" and not SKIP_REDIS:
        try:
            MAIN_CART = server.redis().get("cart:42")
        except redis.RedisError as err:
            MAIN_CART = err
    threading.Thread(target=server.serve_forever, daemon=True).start()
    conn = http.client.HTTPConnection("127.0.0.1", port, timeout=30)
    conn.request("GET", "/checkout")
    answer = conn.getresponse()
    answer.read()
    print(f"checkout: {answer.status}", flush=True)
    time.sleep(LINGER)
    # no server.shutdown(): serve_forever sees it only at its next 0.5 s poll, which would add up to
    # half a second to the build's run, by where the request fell in that cycle (its serving thread
    # is a daemon: exiting ends it)
    sys.exit(0 if answer.status == 200 else 1)
