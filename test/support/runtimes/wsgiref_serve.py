"""wsgiref's simple_server serving wsgi_bare.py's application on 127.0.0.1:<argv[1]>, a thread per
connection (socketserver.ThreadingMixIn), as one would run it to take concurrent requests."""
import socketserver
import sys
from wsgiref.simple_server import WSGIRequestHandler, WSGIServer, make_server

from wsgi_bare import app


class ThreadingWSGIServer(socketserver.ThreadingMixIn, WSGIServer):
    daemon_threads = True
    # 256 connections at once: the default backlog (5) would have the kernel drop their SYNs
    request_queue_size = 512


class QuietHandler(WSGIRequestHandler):
    def log_message(self, *args):
        pass


make_server("127.0.0.1", int(sys.argv[1]), app, ThreadingWSGIServer, QuietHandler).serve_forever()
