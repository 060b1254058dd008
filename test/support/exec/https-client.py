"""An ordinary HTTPS client: urllib over Python's ssl (OpenSSL 3), verifying the server against CAFILE.

  https-client.py PORT TIMEOUT_S CAFILE
      GET https://127.0.0.1:PORT/ with a socket timeout; prints "got <status> in <s> s" and exits 0, or
      "timed out" and exits 4
"""
import socket
import ssl
import sys
import time
import urllib.error
import urllib.request

port, timeout, cafile = int(sys.argv[1]), float(sys.argv[2]), sys.argv[3]
context = ssl.create_default_context(cafile=cafile)
start = time.monotonic()
try:
    with urllib.request.urlopen(f"https://127.0.0.1:{port}/", timeout=timeout, context=context) as answer:
        answer.read()
        print(f"got {answer.status} in {time.monotonic() - start:.3f} s", flush=True)
except (socket.timeout, TimeoutError, urllib.error.URLError) as err:
    if isinstance(err, urllib.error.URLError) and not isinstance(err.reason, (socket.timeout, TimeoutError)):
        raise
    print(f"timed out after {time.monotonic() - start:.3f} s", flush=True)
    sys.exit(4)
