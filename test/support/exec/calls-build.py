"""A test build for `kreplay replay --exec`: fsyncs, sends and connects, each
timed by the build itself (monotonic ns) and reported on stdout as
`<what> <ns>` lines, with the messages a real program logs on its slow or
failed paths.

  calls-build.py fsync PATH COUNT SLOW_MS    append a line then fdatasync, COUNT times
  calls-build.py send PORT TOTAL CHUNK       connect to 127.0.0.1:PORT, sendall TOTAL bytes in CHUNK pieces
  calls-build.py connect PORT TIMEOUT_S MODE connect to 127.0.0.1:PORT within TIMEOUT_S: MODE blocking
                                             (a blocking connect cut by SIGALRM) or poll (socket timeout)
  calls-build.py backlog                     a listener on 127.0.0.1 (its port on stdout) whose accept queue is
                                             full, as a server's that stopped accepting: a client's first SYN
                                             and its retransmission 1 s later are dropped; 1.2 s after the
                                             first it accepts, so the client connects with its next
                                             retransmission (3 s after its first SYN)
  calls-build.py request PORT TIMEOUT_S      an HTTP/1.0 GET to 127.0.0.1:PORT with a socket timeout
                                             (create_connection(timeout=...), then recv; 0: blocking)
"""
import errno
import os
import signal
import socket
import sys
import time


def fsync(path, count, slow_ms):
    fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_APPEND, 0o644)
    for i in range(int(count)):
        os.write(fd, b"entry %d\n" % i)
        start = time.monotonic_ns()
        try:
            os.fdatasync(fd)
        except OSError as err:
            print("fdatasync failed: %s" % errno.errorcode.get(err.errno, err.errno), flush=True)
            return 3
        took = time.monotonic_ns() - start
        print("fdatasync %d" % took, flush=True)
        if took > int(slow_ms) * 1_000_000:
            print("slow fdatasync: %.3f s" % (took / 1e9), flush=True)
    return 0


def send(port, total, chunk):
    sock = socket.create_connection(("127.0.0.1", int(port)))
    data = b"x" * int(total)
    step = int(chunk)
    start = time.monotonic_ns()
    for at in range(0, len(data), step):
        sock.sendall(data[at : at + step])
    print("sent %d" % (time.monotonic_ns() - start), flush=True)
    sock.close()
    return 0


class Expired(Exception):
    pass


def connect(port, timeout_s, mode):
    start = time.monotonic_ns()
    try:
        if mode == "blocking":
            def expire(_sig, _frame):
                raise Expired()

            signal.signal(signal.SIGALRM, expire)
            sock = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
            signal.setitimer(signal.ITIMER_REAL, float(timeout_s))
            sock.connect(("127.0.0.1", int(port)))
            signal.setitimer(signal.ITIMER_REAL, 0)
        else:
            sock = socket.create_connection(("127.0.0.1", int(port)), timeout=float(timeout_s))
    except (Expired, socket.timeout):
        print("timeout %d" % (time.monotonic_ns() - start), flush=True)
        return 4
    except ConnectionRefusedError:
        print("refused %d" % (time.monotonic_ns() - start), flush=True)
        return 5
    print("connected %d" % (time.monotonic_ns() - start), flush=True)
    sock.close()
    return 0


def request(port, timeout_s):
    start = time.monotonic_ns()
    try:
        # timeout 0: a blocking socket, no timeout
        sock = socket.create_connection(("127.0.0.1", int(port)), timeout=float(timeout_s) or None)
        # stamped before the send: kreplay's hold starts when the request's bytes reach it, which is
        # during the send, so a stamp after it may fall behind by the time this process waits for a core
        sent = time.monotonic_ns()
        sock.sendall(b"GET / HTTP/1.0\r\nHost: upstream\r\n\r\n")
        answer = sock.recv(4096)
    except socket.timeout:
        print("timeout %d" % (time.monotonic_ns() - start), flush=True)
        return 4
    print("response %d" % (time.monotonic_ns() - sent), flush=True)
    print("status %s" % answer.split(b"\r\n", 1)[0].decode(), flush=True)
    sock.close()
    return 0


def syn_sent_to(port):
    """Whether a socket of this host is in SYN_SENT towards 127.0.0.1:port (/proc/net/tcp)."""
    with open("/proc/net/tcp") as table:
        for line in table.readlines()[1:]:
            fields = line.split()
            if fields[3] == "02" and fields[2] == "0100007F:%04X" % port:
                return True
    return False


def backlog():
    listener = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
    listener.bind(("127.0.0.1", 0))
    listener.listen(0)
    port = listener.getsockname()[1]
    # one connection nobody accepts fills a queue of 0 (the kernel allows one more than the backlog)
    filler = socket.create_connection(("127.0.0.1", port))
    print(port, flush=True)
    while not syn_sent_to(port):
        time.sleep(0.005)
    time.sleep(1.2)
    filler.close()
    while True:
        conn, _ = listener.accept()
        conn.close()


if __name__ == "__main__":
    modes = {"fsync": fsync, "send": send, "connect": connect, "request": request, "backlog": backlog}
    sys.exit(modes[sys.argv[1]](*sys.argv[2:]))
