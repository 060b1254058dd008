# The server-cost benchmark's Flask app, served by gunicorn's gthread worker (bench/server-cost.ts):
# each request appends a line to the file $APPEND_FILE names and is answered.
# Usage: gunicorn -k gthread --bind 127.0.0.1:PORT --chdir THIS_DIR append_flask:app
import os

from flask import Flask

fd = os.open(os.environ["APPEND_FILE"], os.O_WRONLY | os.O_APPEND | os.O_CREAT, 0o644)
app = Flask(__name__)


@app.get("/")
def index():
    os.write(fd, b"a request\n")
    return "ok\n"
