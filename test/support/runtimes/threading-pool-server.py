"""A thread-per-connection server that hands part of each request to a thread pool: the handler
writes <dir>/<id>.thread itself and <dir>/<id>.pool through executor.submit, named by the request's
x-request-id. Usage: threading-pool-server.py DIR (prints its port)."""
import os
import sys
from concurrent.futures import ThreadPoolExecutor
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

DIR = sys.argv[1]
pool = ThreadPoolExecutor(max_workers=4)


def write(path, text):
    with open(path, "w") as f:
        f.write(text)


class Handler(BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"
    # the head and the body go in two writes: without this, each answer waits for a delayed ACK
    disable_nagle_algorithm = True

    def do_GET(self):
        rid = self.headers["x-request-id"]
        write(os.path.join(DIR, f"{rid}.thread"), "by the request's thread\n")
        pool.submit(write, os.path.join(DIR, f"{rid}.pool"), "by a pool thread\n").result()
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
