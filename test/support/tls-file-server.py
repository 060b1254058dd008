"""A thread-per-request HTTPS server (Python ssl) for the TLS ground-truth tests.

GET /anything writes two files in <dir> whose names are the request's
x-request-id (<id>.a, <id>.b): each write's target names the request that
caused it. Args: cert key dir [port [host]] (default: a free port on 127.0.0.1).
Prints its port when it listens.
"""
import os
import ssl
import sys
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

cert, key, out = sys.argv[1:4]
port = int(sys.argv[4]) if len(sys.argv) > 4 else 0
host = sys.argv[5] if len(sys.argv) > 5 else "127.0.0.1"


class Handler(BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"

    def do_GET(self):
        rid = self.headers.get("x-request-id", "none")
        for ext in ("a", "b"):
            fd = os.open(os.path.join(out, rid + "." + ext), os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o644)
            os.write(fd, rid.encode() + b"\n")
            os.close(fd)
        body = b"ok\n"
        self.send_response(200)
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)

    def log_message(self, *args):
        pass


# 64 clients connect at once: the default backlog of 5 drops their SYNs, retried seconds later
ThreadingHTTPServer.request_queue_size = 128
server = ThreadingHTTPServer((host, port), Handler)
context = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
context.load_cert_chain(cert, key)
server.socket = context.wrap_socket(server.socket, server_side=True)
print(server.server_address[1], flush=True)
server.serve_forever()
