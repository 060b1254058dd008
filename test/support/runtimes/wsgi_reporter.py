"""wsgi_bare.py's application, in a worker that also reports on its own (`wsgi_reporter:app`): a
thread it starts at import, as a metrics pusher does, calls the upstream REPORTS times, 20 ms apart,
each call with a traceparent of its own (as an instrumented client sends on every call), and after
each answer writes <dir>/report-<trace id>. The directory and the upstream's port come from KR_OUT and
KR_UPSTREAM."""
import os
import threading
import time
import urllib.request

from wsgi_bare import DIR, UPSTREAM, app, write  # noqa: F401

REPORTS = 20


def report():
    for k in range(REPORTS):
        trace = f"{os.getpid():016x}{k:016x}"
        call = urllib.request.Request(
            f"http://127.0.0.1:{UPSTREAM}/", headers={"traceparent": f"00-{trace}-{'1' * 16}-01"}
        )
        with urllib.request.urlopen(call) as answer:
            answer.read()
        write(os.path.join(DIR, f"report-{trace}"), "reported\n")
        time.sleep(0.02)


threading.Thread(target=report, daemon=True).start()
