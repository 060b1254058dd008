"""A bare WSGI application, a plain function and no framework, for gunicorn (`wsgi_bare:app`) and
wsgiref (wsgiref_serve.py): the shape of wsgi_app.py's Flask view. Each request sleeps 0-20 ms,
writes <dir>/<id>.before, calls the upstream, starts a thread that writes <dir>/<id>.thread, and
writes <dir>/<id>.after, named by its x-request-id. The directory and the upstream's port come from
KR_OUT and KR_UPSTREAM."""
import os
import random
import threading
import time
import urllib.request

DIR, UPSTREAM = os.environ["KR_OUT"], int(os.environ["KR_UPSTREAM"])


def write(path, text):
    with open(path, "w") as f:
        f.write(text)


def serve(rid):
    """Request rid's work, the bare function's and wsgi_app.py's Flask view's."""
    time.sleep(random.random() * 0.02)
    write(os.path.join(DIR, f"{rid}.before"), "before the upstream call\n")
    with urllib.request.urlopen(f"http://127.0.0.1:{UPSTREAM}/") as answer:
        answer.read()
    thread = threading.Thread(target=write, args=(os.path.join(DIR, f"{rid}.thread"), "by a thread it started\n"))
    thread.start()
    thread.join()
    write(os.path.join(DIR, f"{rid}.after"), "after it\n")


def app(environ, start_response):
    serve(environ["HTTP_X_REQUEST_ID"])
    start_response("200 OK", [("Content-Type", "text/plain"), ("Content-Length", "2")])
    return [b"ok"]
