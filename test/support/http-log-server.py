"""A thread-per-request HTTP/1.1 server for attribution tests.

GET /<size> appends one log line of exactly <size> bytes holding the
request's x-request-id, then answers with a body of <size> + 1000 bytes.
Prints its port when it listens.
"""
import os
import sys
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

log = os.open(sys.argv[1], os.O_WRONLY | os.O_APPEND | os.O_CREAT, 0o644)


class Handler(BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"

    def do_GET(self):
        size = int(self.path.rsplit("/", 1)[1])
        rid = self.headers.get("x-request-id", "-").encode()
        os.write(log, (rid + b" ").ljust(size - 1, b".") + b"\n")
        body = b"y" * (size + 1000)
        self.send_response(200)
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)

    def log_message(self, *args):
        pass


server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
print(server.server_address[1], flush=True)
server.serve_forever()
