"""A thread-per-connection server whose handlers share one pool of keep-alive connections to an
upstream (a LifoQueue, as urllib3's pool is): each request makes two calls through it, then writes
<dir>/<id>.thread, named by its x-request-id. Usage: threading-shared-pool-server.py DIR PORT."""
import http.client
import os
import queue
import sys
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

DIR, UPSTREAM = sys.argv[1], int(sys.argv[2])
pool = queue.LifoQueue()
for _ in range(4):
    pool.put(http.client.HTTPConnection("127.0.0.1", UPSTREAM))


def call(rid):
    conn = pool.get()
    try:
        conn.request("GET", "/")
        conn.getresponse().read()
    finally:
        pool.put(conn)


class Handler(BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"
    disable_nagle_algorithm = True

    def do_GET(self):
        rid = self.headers["x-request-id"]
        call(rid)
        call(rid)
        with open(os.path.join(DIR, f"{rid}.thread"), "w") as f:
            f.write("after two calls through the shared pool\n")
        self.send_response(200)
        self.send_header("Content-Length", "2")
        self.end_headers()
        self.wfile.write(b"ok")

    def log_message(self, *args):
        pass


# 64 clients connect at once: the default backlog of 5 drops their SYNs, retried seconds later
ThreadingHTTPServer.request_queue_size = 128
server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
print(server.server_address[1], flush=True)
server.serve_forever()
