"""A Flask application for the WSGI servers (gunicorn, uWSGI), started the ordinary way with
`wsgi_app:app`: each request does wsgi_bare.py's work (serve): it sleeps 0-20 ms, writes <dir>/<id>.before, calls the upstream, starts a
thread that writes <dir>/<id>.thread, and writes <dir>/<id>.after, named by its x-request-id. The
directory and the upstream's port come from KR_OUT and KR_UPSTREAM."""
from flask import Flask, request

from wsgi_bare import serve

app = Flask(__name__)


@app.route("/")
def handle():
    serve(request.headers["x-request-id"])
    return "ok"
