"""A raw TCP server for attribution tests: a thread per connection that,
after every recv(), appends a log line of 8000 + n bytes (n counts the
reads of all connections) and answers "ok", so a client that waits for
the answer knows which line its bytes caused. Prints its port.
"""
import os
import socket
import sys
import threading

log = os.open(sys.argv[1], os.O_WRONLY | os.O_APPEND | os.O_CREAT, 0o644)
lock = threading.Lock()
count = 0


def serve(conn):
    global count
    while True:
        data = conn.recv(65536)
        if not data:
            break
        with lock:
            count += 1
            size = 8000 + count
        os.write(log, b"." * size)
        conn.sendall(b"ok")
    conn.close()


listener = socket.socket()
listener.bind(("127.0.0.1", 0))
listener.listen(16)
print(listener.getsockname()[1], flush=True)
while True:
    conn, _ = listener.accept()
    threading.Thread(target=serve, args=(conn,), daemon=True).start()
