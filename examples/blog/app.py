"""The blog as a WSGI app (gunicorn) and an ASGI app (uvicorn), both behind the cache.

Configured by the environment: ``BLOG_DB`` (SQLite file), ``BLOG_CACHE`` (cache name),
``BLOG_CACHE_DIR`` (segment directory, default /dev/shm), ``BLOG_ADMIN_TOKEN``,
``BLOG_HOSTS`` (comma-separated allowed hosts, default localhost,127.0.0.1).

    gunicorn -w 4 examples.blog.app:wsgi_app
    uvicorn --workers 4 examples.blog.app:asgi_app
"""

from __future__ import annotations

import os
from collections.abc import Callable, Iterable
from typing import Any
from urllib.parse import parse_qsl

from ziggurat import Cache
from ziggurat.http import CacheMiddleware, WSGICacheMiddleware

from examples.blog.site import Blog, Request, Response
from examples.blog.store import Store

MAX_FORM = 64 * 1024


def make_blog() -> tuple[Blog, Cache]:
    cache = Cache(
        os.environ.get("BLOG_CACHE", "blog"),
        size="128MiB",
        directory=os.environ.get("BLOG_CACHE_DIR", "/dev/shm"),
    )
    store = Store(os.environ.get("BLOG_DB", "blog.sqlite3"))
    return Blog(store, cache, os.environ.get("BLOG_ADMIN_TOKEN", "change-me-please")), cache


def _options() -> dict[str, Any]:
    hosts = os.environ.get("BLOG_HOSTS", "localhost,127.0.0.1")
    return {"allowed_hosts": [h.strip() for h in hosts.split(",") if h.strip()]}


def _reason(status: int) -> str:
    from http import HTTPStatus

    return f"{status} {HTTPStatus(status).phrase}"


def make_wsgi(blog: Blog) -> Callable[..., Iterable[bytes]]:
    def app(environ: dict[str, Any], start_response: Callable[..., Any]) -> Iterable[bytes]:
        form: dict[str, str] = {}
        if environ.get("REQUEST_METHOD") == "POST":
            n = int(environ.get("CONTENT_LENGTH") or 0)
            raw = environ["wsgi.input"].read(min(n, MAX_FORM)) if n > 0 else b""
            form = dict(parse_qsl(raw.decode("utf-8", "replace")))
        headers = {
            k[5:].replace("_", "-").lower(): v for k, v in environ.items() if k.startswith("HTTP_")
        }
        req = Request(
            environ.get("REQUEST_METHOD", "GET"), environ.get("PATH_INFO", "/"), {}, form, headers
        )
        resp: Response = blog.handle(req)
        start_response(
            _reason(resp.status), [*resp.headers, ("Content-Length", str(len(resp.body)))]
        )
        return [b"" if req.method == "HEAD" else resp.body]

    return app


def make_asgi(blog: Blog) -> Callable[..., Any]:
    import asyncio

    async def app(
        scope: dict[str, Any], receive: Callable[..., Any], send: Callable[..., Any]
    ) -> None:
        if scope["type"] == "lifespan":
            while True:
                msg = await receive()
                if msg["type"] == "lifespan.startup":
                    await send({"type": "lifespan.startup.complete"})
                elif msg["type"] == "lifespan.shutdown":
                    await send({"type": "lifespan.shutdown.complete"})
                    return
        if scope["type"] != "http":
            return
        body = b""
        if scope["method"] == "POST":
            more = True
            while more and len(body) <= MAX_FORM:
                msg = await receive()
                body += msg.get("body", b"")
                more = msg.get("more_body", False)
        form = dict(parse_qsl(body[:MAX_FORM].decode("utf-8", "replace")))
        headers = {k.decode("latin-1"): v.decode("latin-1") for k, v in scope["headers"]}
        req = Request(scope["method"], scope["path"], {}, form, headers)
        # SQLite and the templates are blocking: they run in the default thread pool.
        resp: Response = await asyncio.get_running_loop().run_in_executor(None, blog.handle, req)
        hdrs = [(k.lower().encode(), v.encode()) for k, v in resp.headers]
        hdrs.append((b"content-length", str(len(resp.body)).encode()))
        await send({"type": "http.response.start", "status": resp.status, "headers": hdrs})
        await send(
            {"type": "http.response.body", "body": b"" if req.method == "HEAD" else resp.body}
        )

    return app


wsgi_app: Any = None
asgi_app: Any = None
if os.environ.get("BLOG_DB"):
    _blog, _cache = make_blog()
    wsgi_app = WSGICacheMiddleware(make_wsgi(_blog), _cache, **_options())
    asgi_app = CacheMiddleware(make_asgi(_blog), _cache, **_options())
