"""Django's ASGI application in one module, for uvicorn (`django_asgi:application`): a sync view
(Django runs it on asgiref's thread) that sleeps 0-20 ms, writes <id>.before, calls the upstream
and writes <id>.after under KR_OUT, named by the request's x-request-id; the upstream's port is
KR_UPSTREAM."""
import os
import random
import time
import urllib.request

from django.conf import settings
from django.http import HttpResponse
from django.urls import path

DIR, UPSTREAM = os.environ["KR_OUT"], int(os.environ["KR_UPSTREAM"])
settings.configure(DEBUG=False, ROOT_URLCONF=__name__, ALLOWED_HOSTS=["*"], SECRET_KEY="test", MIDDLEWARE=[])


def write(path_, text):
    with open(path_, "w") as f:
        f.write(text)


def handle(request):
    rid = request.headers["x-request-id"]
    time.sleep(random.random() * 0.02)
    write(os.path.join(DIR, f"{rid}.before"), "before the upstream call\n")
    with urllib.request.urlopen(f"http://127.0.0.1:{UPSTREAM}/") as answer:
        answer.read()
    write(os.path.join(DIR, f"{rid}.after"), "after it\n")
    return HttpResponse("ok")


urlpatterns = [path("", handle)]

from django.core.asgi import get_asgi_application  # noqa: E402 (after the settings)

application = get_asgi_application()
