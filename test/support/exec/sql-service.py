"""An ordinary Python service on a SQL database: http.server's ThreadingHTTPServer and, a connection
per call as a small service without a pool makes, PyMySQL (apt python3-pymysql) on MariaDB or
psycopg2 (apt python3-psycopg2) on PostgreSQL. GET /checkout, in the thread serving it, counts the
order (UPDATE), reads a report that takes as long as its sleep (SLEEP, pg_sleep), then the order's
total (the text protocol: both drivers quote the values in themselves), and answers the total in
JSON; each statement's time goes to a build's stderr ("report: 1.502 s"). Nothing here knows of
kreplay.

  sql-service.py mysql|pg serve DB_PORT PORT_FILE      production: a 1.5 s sleep, serves until killed
  sql-service.py mysql|pg once DB_PORT [--probe] [--warm-up] [--skip-slow]
      a CI build: a 0 s sleep, serves, requests /checkout of itself once, exits 0 on 200, else 1;
      --probe: a health check (SELECT 1) on a connection of its own first; --warm-up: a connection
      opened and pinged at start, before serving; --skip-slow: no report
"""

import http.client
import json
import sys
import threading
import time
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

DRIVER, MODE, DB_PORT = sys.argv[1], sys.argv[2], int(sys.argv[3])
SLEEP = 1.5 if MODE == "serve" else 0
if DRIVER == "mysql":
    import pymysql as driver

    SLEEP_SQL = "SELECT SLEEP(%s) AS report"
else:
    import psycopg2 as driver

    SLEEP_SQL = "SELECT pg_sleep(%s)"


def connect():
    if DRIVER == "mysql":
        return driver.connect(host="127.0.0.1", port=DB_PORT, user="app", database="shop", autocommit=True)
    connection = driver.connect(host="127.0.0.1", port=DB_PORT, user="postgres", dbname="postgres")
    connection.autocommit = True
    return connection


def timed(cursor, name, sql, args=None):
    start = time.monotonic()
    cursor.execute(sql, args)
    rows = cursor.fetchall() if cursor.description else []
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
                timed(cursor, "report", SLEEP_SQL, (SLEEP,))
            rows = timed(cursor, "total", "SELECT total FROM orders WHERE id = %s", (42,))
        return json.dumps({"total": str(rows[0][0])}) + "\n"
    finally:
        db.close()


class Handler(BaseHTTPRequestHandler):
    def do_GET(self):
        try:
            body, status = checkout().encode(), 200
        except driver.Error as err:
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
        warm.cursor().execute("SELECT 1")
        warm.close()
    server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
    port = server.server_address[1]
    if MODE == "serve":
        with open(sys.argv[4], "w") as out:
            out.write(f"{port}\n")
        server.serve_forever()
        return
    threading.Thread(target=server.serve_forever, daemon=True).start()
    client = http.client.HTTPConnection("127.0.0.1", port, timeout=30)
    client.request("GET", "/checkout")
    status = client.getresponse().status
    print(f"checkout: {status}")
    sys.exit(0 if status == 200 else 1)


main()
