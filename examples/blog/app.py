"""The blog as a WSGI app (gunicorn) and an ASGI app (uvicorn), both behind the cache.

Configured by the environment: ``BLOG_DB`` (the database: an SQLite file path or
``sqlite:///path``, or a ``postgresql://`` URL; each worker process opens its own
connection), ``BLOG_CACHE`` (cache name),
``BLOG_CACHE_DIR`` (segment directory, default /dev/shm), ``BLOG_ADMIN_TOKEN``,
``BLOG_HOSTS`` (comma-separated allowed hosts, default localhost,127.0.0.1), and for the
demo's comparisons ``BLOG_PAGE_CACHE`` (``ziggurat``, the default; ``redis``: the page cache in
``redis_cache.py`` at ``BLOG_REDIS_URL``, WSGI only; ``none``) and ``BLOG_COUNT_FILE`` (a file
that grows by one byte for every request that reaches the blog itself, behind the cache).

Every response names the worker process that answered it in ``X-Served-By`` (its pid), added
outside the cache so that a hit names the worker that served it, not the one that stored it.

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
    return _blog_with(cache), cache


def _blog_with(purger: Any) -> Blog:
    store = Store(os.environ.get("BLOG_DB", "blog.sqlite3"))
    return Blog(store, purger, os.environ.get("BLOG_ADMIN_TOKEN", "change-me-please"))


class NoCache:
    """The purger of a blog served without a cache: nothing to purge.

    >>> NoCache().invalidate_tags("lists", "post:1")
    """

    def invalidate_tags(self, *groups: str) -> None:
        pass


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
        # The database driver and the templates are blocking: they run in the default thread
        # pool, whose threads share the worker's one connection.
        resp: Response = await asyncio.get_running_loop().run_in_executor(None, blog.handle, req)
        hdrs = [(k.lower().encode(), v.encode()) for k, v in resp.headers]
        hdrs.append((b"content-length", str(len(resp.body)).encode()))
        await send({"type": "http.response.start", "status": resp.status, "headers": hdrs})
        await send(
            {"type": "http.response.body", "body": b"" if req.method == "HEAD" else resp.body}
        )

    return app


def _counting_wsgi(
    app: Callable[..., Iterable[bytes]], path: str
) -> Callable[..., Iterable[bytes]]:
    # One byte appended per request: O_APPEND writes from every worker add up, and the file's
    # size is the count, read by the demo without asking the server.
    fd = os.open(path, os.O_WRONLY | os.O_APPEND | os.O_CREAT, 0o600)

    def counted(environ: dict[str, Any], start_response: Callable[..., Any]) -> Iterable[bytes]:
        os.write(fd, b".")
        return app(environ, start_response)

    return counted


def _counting_asgi(app: Callable[..., Any], path: str) -> Callable[..., Any]:
    fd = os.open(path, os.O_WRONLY | os.O_APPEND | os.O_CREAT, 0o600)

    async def counted(scope: dict[str, Any], receive: Any, send: Any) -> None:
        if scope["type"] == "http":
            os.write(fd, b".")
        await app(scope, receive, send)

    return counted


def served_by_wsgi(app: Callable[..., Iterable[bytes]]) -> Callable[..., Iterable[bytes]]:
    """Adds ``X-Served-By: <pid>`` to every response of ``app``.

    >>> app = served_by_wsgi(lambda env, sr: [sr("200 OK", [])] and [b"hi"])
    >>> seen = []
    >>> app({}, lambda status, headers, exc=None: seen.append(headers))
    [b'hi']
    >>> seen[0][0][0], seen[0][0][1] == str(os.getpid())
    ('X-Served-By', True)
    """
    pid = str(os.getpid())

    def wrapped(environ: dict[str, Any], start_response: Callable[..., Any]) -> Iterable[bytes]:
        def start(status: str, headers: list[tuple[str, str]], exc: Any = None) -> Any:
            return start_response(status, [*headers, ("X-Served-By", pid)], exc)

        return app(environ, start)

    return wrapped


def served_by_asgi(app: Callable[..., Any]) -> Callable[..., Any]:
    """Adds ``x-served-by: <pid>`` to every HTTP response of the ASGI ``app``."""

    async def wrapped(scope: dict[str, Any], receive: Any, send: Any) -> None:
        if scope["type"] != "http":
            await app(scope, receive, send)
            return
        pid = str(os.getpid()).encode()

        async def send_with_pid(msg: dict[str, Any]) -> None:
            if msg["type"] == "http.response.start":
                msg = {**msg, "headers": [*msg.get("headers", []), (b"x-served-by", pid)]}
            await send(msg)

        await app(scope, receive, send_with_pid)

    return wrapped


def _apps() -> tuple[Any, Any]:
    mode = os.environ.get("BLOG_PAGE_CACHE", "ziggurat")
    count = os.environ.get("BLOG_COUNT_FILE")
    if mode == "ziggurat":
        blog, cache = make_blog()
    elif mode == "redis":
        import redis

        from examples.blog.redis_cache import RedisPageCache

        pages = RedisPageCache(redis.Redis.from_url(os.environ["BLOG_REDIS_URL"]))
        blog = _blog_with(pages)
    elif mode == "none":
        blog = _blog_with(NoCache())
    else:
        raise SystemExit(f"BLOG_PAGE_CACHE: unknown mode {mode!r} (ziggurat, redis or none)")
    inner_wsgi, inner_asgi = make_wsgi(blog), make_asgi(blog)
    if count:
        inner_wsgi, inner_asgi = (
            _counting_wsgi(inner_wsgi, count),
            _counting_asgi(inner_asgi, count),
        )
    if mode == "ziggurat":
        wsgi: Any = WSGICacheMiddleware(inner_wsgi, cache, **_options())
        asgi: Any = CacheMiddleware(inner_asgi, cache, **_options())
    elif mode == "redis":
        wsgi, asgi = pages.wsgi(inner_wsgi), None
    else:
        wsgi, asgi = inner_wsgi, inner_asgi
    return served_by_wsgi(wsgi), (served_by_asgi(asgi) if asgi is not None else None)


wsgi_app: Any = None
asgi_app: Any = None
if os.environ.get("BLOG_DB"):
    wsgi_app, asgi_app = _apps()
