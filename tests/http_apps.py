"""The apps the HTTP cache tests run under real servers: one Starlette app (ASGI) and one
Flask app (WSGI) with the same endpoints, each wrapped in the cache middleware.

Both are configured by the environment the test server is started with:
``ZIG_HTTP_CACHE`` (cache name), ``ZIG_HTTP_DIR`` (segment directory), ``ZIG_HTTP_COUNTS``
(a directory where every app call appends one byte to a file named after the endpoint, so
the tests can count the calls that reached the app from every worker), ``ZIG_HTTP_OPTS``
(the middleware's options as JSON).

Endpoints, steered by query parameters:

- ``/e/<name>``: ``s`` status, ``h`` a header line ``Name: Value`` (repeatable), ``b`` body,
  ``sleep`` seconds before answering, ``etag`` an ETag answered with 304 when the request's
  If-None-Match names it, ``reflect`` a request header whose value goes into the body.
  The default body names the path, the query and the call number. While the file
  ``<counts>/barrier-<name>`` holds N, a call waits until N calls of ``name`` arrived
  (answering 500 after 10 s); while ``<counts>/fail-<name>`` exists, the endpoint raises
  (content "raise"), answers late (content "sleep N": after N seconds) or answers the
  status it holds; while ``<counts>/spec-<name>`` exists,
  it answers the status and headers written there.
- ``/sync/<name>`` (ASGI only): a sync view, in Starlette's thread pool; ``h`` header lines,
  and ``<counts>/fail-<name>`` holding "sleep N" makes it answer after N seconds.
- ``/stream/<name>``: ``n`` chunks of ``size`` bytes; before the last one it waits until the
  file ``<counts>/<gate>`` exists (the tests open the gate after the first chunk arrived);
  ``break`` is the index of a chunk that raises instead.
- ``/boom/<name>``: raises, or answers ``s`` when given.
- ``/admin/tag/<tag>`` and ``/admin/url?u=``: invalidate a tag, purge a URL (as a view would).
"""

from __future__ import annotations

import asyncio
import json
import os
import time
from typing import Any

from ziggurat import Cache
from ziggurat.http import CacheMiddleware, WSGICacheMiddleware, purge

COUNTS = os.environ.get("ZIG_HTTP_COUNTS", "/tmp")
OPTS: dict[str, Any] = json.loads(os.environ.get("ZIG_HTTP_OPTS", "{}"))


def open_cache() -> Cache:
    """The cache every worker opens by name."""
    return Cache(
        os.environ.get("ZIG_HTTP_CACHE", "zig-http-test"),
        size="32MiB",
        directory=os.environ.get("ZIG_HTTP_DIR", "/dev/shm"),
        loader_timeout=20,
    )


def bump(name: str) -> int:
    """Counts one app call for ``name`` (every worker appends to the same file)."""
    path = os.path.join(COUNTS, "count-" + name.replace("/", "_"))
    fd = os.open(path, os.O_WRONLY | os.O_APPEND | os.O_CREAT, 0o600)
    try:
        os.write(fd, b"x")
    finally:
        os.close(fd)
    return os.path.getsize(path)


def bump_count(name: str) -> int:
    """How many app calls ``name`` has had."""
    try:
        return os.path.getsize(os.path.join(COUNTS, "count-" + name.replace("/", "_")))
    except FileNotFoundError:
        return 0


def barrier(name: str) -> int:
    """While the file ``<counts>/barrier-<name>`` holds N, a call of ``name`` waits until N
    calls have arrived (so N - k calls must be in the app together)."""
    try:
        with open(os.path.join(COUNTS, "barrier-" + name.replace("/", "_"))) as f:
            return int(f.read().strip() or 0)
    except FileNotFoundError:
        return 0


def failing(name: str) -> str:
    """What the endpoint does while the tests make it fail: "raise" or a status."""
    try:
        with open(os.path.join(COUNTS, "fail-" + name.replace("/", "_"))) as f:
            return f.read().strip()
    except FileNotFoundError:
        return ""


def spec(name: str) -> dict[str, Any] | None:
    """A response the tests wrote for ``name``: {"status": int, "headers": [[k, v], ...]}
    (header values of any size or bytes, which a query string cannot carry)."""
    try:
        with open(os.path.join(COUNTS, "spec-" + name.replace("/", "_")), encoding="utf-8") as f:
            out: dict[str, Any] = json.load(f)
            return out
    except FileNotFoundError:
        return None


def _header_lines(values: list[str]) -> list[tuple[str, str]]:
    out = []
    for line in values:
        name, _, value = line.partition(":")
        out.append((name.strip(), value.strip()))
    return out


def _gate_open(gate: str) -> bool:
    return os.path.exists(os.path.join(COUNTS, gate))


# -- Starlette ------------------------------------------------------------------------------

from starlette.applications import Starlette  # noqa: E402
from starlette.requests import Request  # noqa: E402
from starlette.responses import Response, StreamingResponse  # noqa: E402
from starlette.routing import Route  # noqa: E402

# Opened only in the servers (pytest's doctest collection imports this module too).
cache: Any = open_cache() if os.environ.get("ZIG_HTTP_CACHE") else None


def _starlette_response(body: bytes, status: int, headers: list[tuple[str, str]]) -> Response:
    r = Response(body, status_code=status)
    for k, v in headers:
        r.raw_headers.append((k.lower().encode("latin-1"), v.encode("latin-1")))
    return r


async def s_scripted(request: Request) -> Response:
    name = request.path_params["name"]
    n = bump(name)
    q = request.query_params
    if q.get("sleep"):
        await asyncio.sleep(float(q["sleep"]))
    target = barrier(name)
    if target:
        deadline = time.monotonic() + 10
        while bump_count(name) < target:
            if time.monotonic() > deadline:
                return Response(b"barrier not reached", status_code=500)
            await asyncio.sleep(0.01)
    fail = failing(name)
    if fail.startswith("sleep "):
        await asyncio.sleep(float(fail[6:]))
        fail = ""
    if fail == "raise":
        raise RuntimeError("the app failed")
    if fail:
        return Response(b"failed", status_code=int(fail))
    headers = _header_lines(q.getlist("h"))
    sp = spec(name)
    if sp is not None:
        body = f"{name} #{n}".encode()
        return _starlette_response(body, sp["status"], [tuple(h) for h in sp["headers"]])
    etag = q.get("etag")
    if etag:
        headers.append(("ETag", etag))
        if request.headers.get("if-none-match") == etag:
            return _starlette_response(b"", 304, headers)
    body = q.get("b") or f"{request.url.path}?{request.url.query} #{n}"
    if q.get("reflect"):
        body += " reflect=" + request.headers.get(q["reflect"], "")
    return _starlette_response(body.encode(), int(q.get("s", "200")), headers)


async def s_stream(request: Request) -> Response:
    name = request.path_params["name"]
    bump(name)
    q = request.query_params
    n, size, gate = int(q.get("n", "3")), int(q.get("size", "10")), q.get("gate", "")

    breaks = int(q.get("break", "-1"))

    async def chunks() -> Any:
        for i in range(n):
            if i == breaks:
                raise RuntimeError("the body failed midway")
            if i == n - 1 and gate:
                while not _gate_open(gate):
                    await asyncio.sleep(0.01)
            yield bytes([97 + i % 26]) * size

    r = StreamingResponse(chunks(), media_type="application/octet-stream")
    for k, v in _header_lines(q.getlist("h")):
        r.raw_headers.append((k.lower().encode(), v.encode()))
    return r


async def s_boom(request: Request) -> Response:
    bump(request.path_params["name"])
    if request.query_params.get("s"):
        return Response(b"failed", status_code=int(request.query_params["s"]))
    raise RuntimeError("the app failed")


async def s_tag(request: Request) -> Response:
    cache.invalidate_tags(request.path_params["tag"])
    return Response(b"ok", headers={"cache-control": "no-store"})


async def s_url(request: Request) -> Response:
    found = purge(cache, request.query_params["u"])
    return Response(str(found).encode(), headers={"cache-control": "no-store"})


def s_sync(request: Request) -> Response:
    """A sync view: Starlette runs it in its thread pool, where a cancel cannot stop it."""
    name = request.path_params["name"]
    n = bump(name)
    fail = failing(name)
    if fail.startswith("sleep "):
        time.sleep(float(fail[6:]))
    headers = _header_lines(request.query_params.getlist("h"))
    return _starlette_response(f"{name} #{n}".encode(), 200, headers)


METHODS = ["GET", "HEAD", "POST", "PUT", "DELETE", "PATCH", "MKCOL"]
starlette_app = Starlette(
    routes=[
        Route("/e/{name:path}", s_scripted, methods=METHODS),
        Route("/stream/{name}", s_stream),
        Route("/sync/{name}", s_sync),
        Route("/boom/{name}", s_boom),
        Route("/admin/tag/{tag}", s_tag, methods=["POST"]),
        Route("/admin/url", s_url, methods=["POST"]),
    ]
)
asgi_app = CacheMiddleware(starlette_app, cache, **OPTS) if cache is not None else None


# -- Flask ----------------------------------------------------------------------------------

import flask  # noqa: E402

flask_app = flask.Flask(__name__)


def _flask_response(body: bytes, status: int, headers: list[tuple[str, str]]) -> flask.Response:
    r = flask.Response(body, status=status)
    for k, v in headers:
        r.headers.add(k, v)
    return r


@flask_app.route("/e/<path:name>", methods=METHODS)
def f_scripted(name: str) -> flask.Response:
    n = bump(name)
    q = flask.request.args
    if q.get("sleep"):
        time.sleep(float(q["sleep"]))
    target = barrier(name)
    if target:
        deadline = time.monotonic() + 10
        while bump_count(name) < target:
            if time.monotonic() > deadline:
                return flask.Response(b"barrier not reached", status=500)
            time.sleep(0.01)
    fail = failing(name)
    if fail.startswith("sleep "):
        time.sleep(float(fail[6:]))
        fail = ""
    if fail == "raise":
        raise RuntimeError("the app failed")
    if fail:
        return flask.Response(b"failed", status=int(fail))
    headers = _header_lines(q.getlist("h"))
    sp = spec(name)
    if sp is not None:
        body = f"{name} #{n}".encode()
        return _flask_response(body, sp["status"], [tuple(h) for h in sp["headers"]])
    etag = q.get("etag")
    if etag:
        headers.append(("ETag", etag))
        if flask.request.headers.get("If-None-Match") == etag:
            r = _flask_response(b"", 304, headers)
            return r
    qs = flask.request.query_string.decode("latin-1")
    body = q.get("b") or f"{flask.request.path}?{qs} #{n}"
    if q.get("reflect"):
        body += " reflect=" + flask.request.headers.get(q["reflect"], "")
    return _flask_response(body.encode(), int(q.get("s", "200")), headers)


@flask_app.route("/stream/<name>")
def f_stream(name: str) -> flask.Response:
    bump(name)
    q = flask.request.args
    n, size, gate = int(q.get("n", "3")), int(q.get("size", "10")), q.get("gate", "")

    breaks = int(q.get("break", "-1"))

    def chunks() -> Any:
        for i in range(n):
            if i == breaks:
                raise RuntimeError("the body failed midway")
            if i == n - 1 and gate:
                while not _gate_open(gate):
                    time.sleep(0.01)
            yield bytes([97 + i % 26]) * size

    r = flask.Response(chunks(), mimetype="application/octet-stream")
    for k, v in _header_lines(q.getlist("h")):
        r.headers.add(k, v)
    return r


@flask_app.route("/boom/<name>")
def f_boom(name: str) -> flask.Response:
    bump(name)
    if flask.request.args.get("s"):
        return flask.Response(b"failed", status=int(flask.request.args["s"]))
    raise RuntimeError("the app failed")


@flask_app.route("/admin/tag/<tag>", methods=["POST"])
def f_tag(tag: str) -> flask.Response:
    cache.invalidate_tags(tag)
    return flask.Response(b"ok", headers={"Cache-Control": "no-store"})


@flask_app.route("/admin/url", methods=["POST"])
def f_url() -> flask.Response:
    found = purge(cache, flask.request.args["u"])
    return flask.Response(str(found).encode(), headers={"Cache-Control": "no-store"})


wsgi_app = WSGICacheMiddleware(flask_app.wsgi_app, cache, **OPTS) if cache is not None else None
