"""Work a thread-per-request server's request starts, in Python's usual shapes (ThreadingHTTPServer,
HTTP/1.1 keep-alive, optionally over TLS):
  - /child: the handler starts a thread that writes <x-request-id>.child and joins it before the reply;
  - /consumer: a consumer thread the first request starts, fed one job per request over a queue,
    writes <x-request-id>.consumer; the handler waits for it;
  - /pool: a multiprocessing.Pool the first request creates; each request's work is done by one of
    its processes, which writes <x-request-id>.pool;
  - /handoff-first: starts a worker fed over a queue.Queue, hands it a job (it writes
    <x-request-id>.worker), and is not answered before /release; /handoff hands it a job meanwhile.
  - /exec-go: starts the Go program $GO_CHILD (go-child-writer.go) in place of the last one it
    started, and has it write <x-request-id>.gochild; /go-write has the last one write that file.
The handler writes <x-request-id>.handler after each. /hooked answers whether the Python hook wraps
queue.Queue (the test waits for the hook to run).

Usage: threading-lifetime-server.py DIR [CERT KEY] (prints its port).
"""
import multiprocessing
import os
import queue
import ssl
import subprocess
import sys
import threading
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

DIR = sys.argv[1]


def write(name):
    with open(os.path.join(DIR, name), "w") as f:
        f.write(name + "\n")


jobs = queue.Queue()
lazy = threading.Lock()
started = {}


def consume():
    while True:
        rid, done = jobs.get()
        write(rid + ".consumer")
        done.set()


handoffs = queue.Queue()
released = threading.Event()


def work():
    while True:
        rid, done = handoffs.get()
        write(rid + ".worker")
        done.set()


def hand_off(rid):
    once("worker", lambda: threading.Thread(target=work, daemon=True).start())
    done = threading.Event()
    handoffs.put((rid, done))
    done.wait()


go_child = None


def go_write(rid):
    go_child.stdin.write(rid + ".gochild\n")
    go_child.stdin.flush()
    go_child.stdout.readline()


def once(name, make):
    with lazy:
        if name not in started:
            started[name] = make()
        return started[name]


def start_consumer():
    thread = threading.Thread(target=consume, daemon=True)
    thread.start()
    return thread


class Handler(BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"

    def do_GET(self):
        rid = self.headers.get("x-request-id", "none")
        if self.path == "/hooked":
            return self.answer(b"ye" if getattr(queue.Queue._put, "_kreplay_wraps", None) else b"no")
        if self.path == "/release":
            released.set()
            return self.answer(b"ok")
        if self.path == "/child":
            child = threading.Thread(target=write, args=(rid + ".child",))
            child.start()
            child.join()
        elif self.path == "/consumer":
            once("consumer", start_consumer)
            done = threading.Event()
            jobs.put((rid, done))
            done.wait()
        elif self.path.startswith("/handoff"):
            hand_off(rid)
            if self.path == "/handoff-first":
                released.wait()
        elif self.path == "/exec-go":
            global go_child
            if go_child:
                go_child.kill()
                go_child.wait()
            go_child = subprocess.Popen(
                [os.environ["GO_CHILD"], DIR], stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True
            )
            go_write(rid)
        elif self.path == "/go-write":
            go_write(rid)
        elif self.path == "/pool":
            pool = once("pool", lambda: multiprocessing.get_context("fork").Pool(2))
            pool.apply(write, (rid + ".pool",))
        write(rid + ".handler")
        self.answer(b"ok")

    def answer(self, body):
        self.wfile.write(b"HTTP/1.1 200 OK\r\nContent-Length: %d\r\n\r\n%s" % (len(body), body))

    def log_message(self, *args):
        pass


class Server(ThreadingHTTPServer):
    daemon_threads = True
    # 64 clients at once, whose TLS handshakes the accepting thread makes one after another
    request_queue_size = 128


server = Server(("127.0.0.1", 0), Handler)
if len(sys.argv) > 3:
    context = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
    context.load_cert_chain(sys.argv[2], sys.argv[3])
    server.socket = context.wrap_socket(server.socket, server_side=True)
print(server.server_address[1], flush=True)
server.serve_forever()
