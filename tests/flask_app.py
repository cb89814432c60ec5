"""The Flask example of docs/integrations/flask.md (the block between the markers is the
page's, verbatim), plus what its tests need to see several workers: the serving process in
an ``X-Worker`` header, and ``?meet=<group>``, which holds a request until a second one of
the same group arrives, so two concurrent requests of a group are served by two different workers.

The settings come from ``FLASK_*`` environment variables in the tests
(``FLASK_CACHE_ZIGGURAT_NAME``, ``FLASK_CACHE_OPTIONS`` as JSON).
"""

# --- the documented example (docs/integrations/flask.md) -------------------------------
import os

from flask import Blueprint, Flask, request
from flask_caching import Cache

cache = Cache()
bp = Blueprint("example", __name__)


@bp.get("/report")
@cache.cached(timeout=60)
def report():
    # Rendered once per 60 s for the whole host, whichever worker gets the request.
    renders = cache.cache.inc("report-renders")  # the backend's inc: atomic for the host
    return {"renders": renders, "rendered_by": os.getpid()}


@bp.put("/motd")
def set_motd():
    cache.set("motd", request.get_data(as_text=True), timeout=0)
    return "", 204


@bp.get("/motd")
def motd():
    # Every worker sees the latest PUT at once, whichever worker took it.
    return cache.get("motd") or "(none)"


def create_app():
    app = Flask(__name__)
    app.config.update(
        CACHE_TYPE="ziggurat.contrib.flask.ZigguratCache",
        CACHE_ZIGGURAT_NAME="myapp",  # the ziggurat cache's name: its segments in /dev/shm
        CACHE_KEY_PREFIX="myapp_",
        CACHE_DEFAULT_TIMEOUT=300,  # 0: never expires
        CACHE_OPTIONS={"size": "64MiB", "l1_items": 10_000},  # ziggurat.Cache's options
    )
    app.config.from_prefixed_env()  # e.g. FLASK_CACHE_ZIGGURAT_NAME=other
    cache.init_app(app)
    app.register_blueprint(bp)
    return app


# --- end of the documented example -----------------------------------------------------

import time  # noqa: E402

from flask import Response  # noqa: E402


@bp.get("/renders")
def renders() -> dict[str, int]:
    return {"renders": cache.get("report-renders") or 0}


@bp.before_app_request
def meet() -> Response | None:
    group = request.args.get("meet")
    if not group:
        return None
    # A sync worker serves one request at a time: the second of the group cannot be served
    # by the worker holding the first. The deadline only stops a hang.
    cache.cache.inc(f"meet:{group}")
    deadline = time.monotonic() + 30
    while (cache.get(f"meet:{group}") or 0) < 2:
        if time.monotonic() > deadline:
            return Response("no second request met this one", status=503)
        time.sleep(0.005)
    return None


@bp.after_app_request
def worker_header(response: Response) -> Response:
    response.headers["X-Worker"] = str(os.getpid())
    return response
