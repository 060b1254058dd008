"""wsgiref's simple_server serving wsgi_bare.py's application on 127.0.0.1:<argv[1]>, a thread per
connection (socketserver.ThreadingMixIn), as one would run it to take concurrent requests; with
`gevent` after the port, gevent's monkey-patching first makes those threads greenlets on one thread."""
import sys

if sys.argv[2:] == ["gevent"]:
    from gevent import monkey

    monkey.patch_all()

import socketserver  # noqa: E402
from wsgiref.simple_server import WSGIRequestHandler, WSGIServer, make_server  # noqa: E402

from wsgi_bare import app  # noqa: E402


class ThreadingWSGIServer(socketserver.ThreadingMixIn, WSGIServer):
    daemon_threads = True
    # 256 connections at once: the default backlog (5) would have the kernel drop their SYNs
    request_queue_size = 512


class QuietHandler(WSGIRequestHandler):
    def log_message(self, *args):
        pass


make_server("127.0.0.1", int(sys.argv[1]), app, ThreadingWSGIServer, QuietHandler).serve_forever()
