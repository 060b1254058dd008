"""An ordinary Python service on MariaDB: http.server's ThreadingHTTPServer and PyMySQL (apt
python3-pymysql), a connection per call, as a small service without a pool makes. GET /checkout, in
the thread serving it, counts the order (UPDATE), reads a report that takes as long as its SLEEP,
then the order's total (the text protocol: PyMySQL quotes the values itself), and answers the total
in JSON; each statement's time goes to a build's stderr ("report: 1.502 s"). Nothing here knows of kreplay.

  mysql-service.py serve DB_PORT PORT_FILE           production: SLEEP(1.5), serves until killed
  mysql-service.py once DB_PORT [--probe] [--warm-up] [--skip-slow]
      a CI build: SLEEP(0.001), serves, requests /checkout of itself once, exits 0 on 200, else 1;
      --probe: a health check (SELECT 1) on a connection of its own first; --warm-up: a connection
      opened and pinged at start, before serving; --skip-slow: no report
"""

import http.client
import json
import sys
import time
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

import pymysql

MODE, DB_PORT = sys.argv[1], int(sys.argv[2])
SLEEP = 1.5 if MODE == "serve" else 0.001


def connect():
    return pymysql.connect(host="127.0.0.1", port=DB_PORT, user="app", database="shop", autocommit=True)


def timed(cursor, name, sql, args=None):
    start = time.monotonic()
    cursor.execute(sql, args)
    rows = cursor.fetchall()
    # a build's only: production's stderr is nobody's (/dev/null), and a replay never holds the build's
    if MODE == "once":
        print(f"{name}: {time.monotonic() - start:.3f} s", file=sys.stderr, flush=True)
    return rows


def checkout():
    if "--probe" in sys.argv:
        probe = connect()
        with probe.cursor() as cursor:
            timed(cursor, "probe", "SELECT 1")
        probe.close()
    db = connect()
    try:
        with db.cursor() as cursor:
            timed(cursor, "update", "UPDATE orders SET n = n + 1 WHERE id = %s", (42,))
            if "--skip-slow" not in sys.argv:
                timed(cursor, "report", "SELECT SLEEP(%s) AS report", (SLEEP,))
            rows = timed(cursor, "total", "SELECT total FROM orders WHERE id = %s", (42,))
        return json.dumps({"total": str(rows[0][0])}) + "\n"
    finally:
        db.close()


class Handler(BaseHTTPRequestHandler):
    def do_GET(self):
        try:
            body, status = checkout().encode(), 200
        except pymysql.MySQLError as err:
            print(f"checkout failed: {err}", file=sys.stderr, flush=True)
            body, status = b"upstream\n", 502
        self.send_response(status)
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)

    def log_message(self, *args):
        pass


def main():
    if "--warm-up" in sys.argv:
        warm = connect()
        warm.ping()
        warm.close()
    server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
    port = server.server_address[1]
    if MODE == "serve":
        with open(sys.argv[3], "w") as out:
            out.write(f"{port}\n")
        server.serve_forever()
        return
    import threading

    threading.Thread(target=server.serve_forever, daemon=True).start()
    client = http.client.HTTPConnection("127.0.0.1", port, timeout=30)
    client.request("GET", "/checkout")
    status = client.getresponse().status
    print(f"checkout: {status}")
    sys.exit(0 if status == 200 else 1)


main()
