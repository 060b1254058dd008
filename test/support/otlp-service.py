"""A thread-per-request HTTP/1.1 service for the OTLP export test.

GET /work appends a line to DATA_FILE and fsyncs it, tries a connection to
CLOSED_PORT (refused), asks the Redis on REDIS_PORT for PING over TCP, and
answers with Redis's reply. Prints its port when it listens.
Usage: otlp-service.py DATA_FILE REDIS_PORT CLOSED_PORT
"""
import os
import socket
import sys
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

data_file, redis_port, closed_port = sys.argv[1], int(sys.argv[2]), int(sys.argv[3])


class Handler(BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"

    def do_GET(self):
        fd = os.open(data_file, os.O_WRONLY | os.O_APPEND | os.O_CREAT, 0o644)
        os.write(fd, b"x" * 99 + b"\n")
        os.fsync(fd)
        os.close(fd)
        refused = socket.socket()
        try:
            refused.connect(("127.0.0.1", closed_port))
        except ConnectionRefusedError:
            pass
        finally:
            refused.close()
        with socket.create_connection(("127.0.0.1", redis_port)) as redis:
            redis.sendall(b"PING\r\n")
            reply = redis.recv(64)
        self.send_response(200)
        self.send_header("Content-Length", str(len(reply)))
        self.end_headers()
        self.wfile.write(reply)

    def log_message(self, *args):
        pass


server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
print(server.server_address[1], flush=True)
server.serve_forever()
