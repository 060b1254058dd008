"""A Flask application for the WSGI servers (gunicorn, uWSGI), started the ordinary way with
`wsgi_app:app`: each request sleeps 0-20 ms, writes <dir>/<id>.before, calls the upstream, starts a
thread that writes <dir>/<id>.thread, and writes <dir>/<id>.after, named by its x-request-id. The
directory and the upstream's port come from KR_OUT and KR_UPSTREAM."""
import os
import random
import threading
import time
import urllib.request

from flask import Flask, request

DIR, UPSTREAM = os.environ["KR_OUT"], int(os.environ["KR_UPSTREAM"])
app = Flask(__name__)


def write(path, text):
    with open(path, "w") as f:
        f.write(text)


@app.route("/")
def handle():
    rid = request.headers["x-request-id"]
    time.sleep(random.random() * 0.02)
    write(os.path.join(DIR, f"{rid}.before"), "before the upstream call\n")
    with urllib.request.urlopen(f"http://127.0.0.1:{UPSTREAM}/") as answer:
        answer.read()
    thread = threading.Thread(target=write, args=(os.path.join(DIR, f"{rid}.thread"), "by a thread it started\n"))
    thread.start()
    thread.join()
    write(os.path.join(DIR, f"{rid}.after"), "after it\n")
    return "ok"
