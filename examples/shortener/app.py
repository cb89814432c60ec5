"""The URL shortener: a Starlette app meant to run as several worker processes.

Run it by hand (from the repository root) with any ASGI server, for example::

    SHORTENER_DATABASE_URL=sqlite:///links.sqlite3 \\
        uvicorn examples.shortener.app:app --workers 2 --port 8000

Endpoints:

* ``GET /{slug}``: 302 redirect to the link's target, 404 if there is no such link.
* ``POST /links`` with JSON ``{"target": ..., "slug": ...}`` (slug optional): creates a link.
* ``PUT /links/{slug}`` with JSON ``{"target": ...}``: changes a link's target.
* ``GET /_stats``: this worker's counters: requests, database queries, cache statistics.

Settings (environment variables):

* ``SHORTENER_DATABASE_URL``: ``sqlite:///path`` (default ``sqlite:///shortener.sqlite3``)
  or ``postgresql://...``.
* ``SHORTENER_CACHE``: ``none`` (every lookup queries the database), ``l2`` (the shared-memory
  tier only: ``l1_items=0``) or ``l1+l2`` (the default: per-process L1 over shared L2).
* ``SHORTENER_CACHE_NAME`` (default ``shortener``), ``SHORTENER_CACHE_SIZE`` (default
  ``64MiB``), ``SHORTENER_CACHE_TTL`` (seconds, default 300), ``SHORTENER_L1_ITEMS``
  (L1 bound in ``l1+l2`` mode; the Cache's own default if unset).
* ``SHORTENER_CACHE_DIR``: where the cache's segment files live (default ``/dev/shm``); two
  hosts on one machine are two directories.
* ``SHORTENER_REDIS_URL`` and ``SHORTENER_SECRET``: if set, the cache gets its cluster tier
  (L3): every host started with the same URL, secret and cache name shares it, and a link
  changed through one host is seen by every host within the invalidation lag.
* ``SHORTENER_DB_LATENCY_MS`` (default 0): each database query also waits this long, to let
  the embedded SQLite file stand in for a database across the network.
* ``SHORTENER_STATS_DIR``: if set, each worker also writes its ``/_stats`` document to
  ``{dir}/{pid}.json`` a few times a second, so a supervisor can read every worker's figures.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import os
import re
import secrets
import string
import time
from collections.abc import AsyncIterator
from typing import Any
from urllib.parse import urlsplit

from starlette.applications import Starlette
from starlette.requests import Request
from starlette.responses import JSONResponse, PlainTextResponse, RedirectResponse, Response
from starlette.routing import Route

from .db import Database, SlugTaken

MODES = ("none", "l2", "l1+l2")
SLUG_RE = re.compile(r"[A-Za-z0-9][A-Za-z0-9_-]{0,63}")
SLUG_ALPHABET = string.ascii_letters + string.digits
STATS_INTERVAL = 0.2


class Shortener:
    """The per-process state of one worker: its database connection, its cache, its counters."""

    def __init__(self) -> None:
        self.pid = os.getpid()
        self.mode = os.environ.get("SHORTENER_CACHE", "l1+l2").strip().lower()
        if self.mode not in MODES:
            raise ValueError(f"SHORTENER_CACHE must be one of {', '.join(MODES)}: {self.mode!r}")
        self.db = Database(
            os.environ.get("SHORTENER_DATABASE_URL", "sqlite:///shortener.sqlite3"),
            latency=float(os.environ.get("SHORTENER_DB_LATENCY_MS", "0")) / 1000,
        )
        self.cache = make_cache(self.mode)
        self.lookups = 0
        self.redirects = 0
        self.not_found = 0
        self.stats_dir = os.environ.get("SHORTENER_STATS_DIR") or None

    def lookup(self, slug: str) -> str | None:
        """The target of ``slug``: through the cache, or straight from the database."""
        self.lookups += 1
        if self.cache is None:
            return self.db.get_target(slug)
        # Read-through: on a miss in every tier the loader queries the database; a ``None``
        # (no such link) is cached too, as a miss, so unknown slugs do not hammer the database.
        target: str | None = self.cache.fetch(slug, lambda: self.db.get_target(slug))
        return target

    def publish(self, slug: str, target: str) -> None:
        """After a database write: make every worker on the host see ``target`` at once."""
        if self.cache is not None:
            self.cache.set(slug, target)

    def stats(self) -> dict[str, Any]:
        cache_stats = None
        if self.cache is not None:
            try:
                cache_stats = self.cache.stats()
            except Exception as exc:  # the figures must not take the worker down
                cache_stats = {"error": repr(exc)}
        return {
            "pid": self.pid,
            "time": time.time(),
            "mode": self.mode,
            "database": self.db.kind,
            "lookups": self.lookups,
            "redirects": self.redirects,
            "not_found": self.not_found,
            "db_reads": self.db.reads,
            "db_writes": self.db.writes,
            "db_queries": self.db.queries,
            "cache": cache_stats,
        }

    def write_stats(self) -> None:
        if self.stats_dir is None:
            return
        path = os.path.join(self.stats_dir, f"{self.pid}.json")
        tmp = f"{path}.tmp"
        with open(tmp, "w", encoding="utf-8") as f:
            json.dump(self.stats(), f, default=str)
        os.replace(tmp, path)  # readers never see a half-written file

    async def stats_loop(self) -> None:
        while True:
            self.write_stats()
            await asyncio.sleep(STATS_INTERVAL)

    def close(self) -> None:
        self.db.close()
        close = getattr(self.cache, "close", None)
        if close is not None:
            close()  # detach from the segment; the segment itself stays for the other workers


def make_cache(mode: str) -> Any:
    if mode == "none":
        return None
    from ziggurat import Cache

    name = os.environ.get("SHORTENER_CACHE_NAME", "shortener")
    kwargs: dict[str, Any] = {
        "size": os.environ.get("SHORTENER_CACHE_SIZE", "64MiB"),
        "ttl": float(os.environ.get("SHORTENER_CACHE_TTL", "300")),
    }
    if mode == "l2":
        kwargs["l1_items"] = 0  # no per-process tier: every get reads the shared segment
    elif os.environ.get("SHORTENER_L1_ITEMS"):
        kwargs["l1_items"] = int(os.environ["SHORTENER_L1_ITEMS"])
    if os.environ.get("SHORTENER_CACHE_DIR"):
        kwargs["directory"] = os.environ["SHORTENER_CACHE_DIR"]
    if os.environ.get("SHORTENER_REDIS_URL"):
        # Without a secret the Cache refuses the URL and says why: the worker does not start.
        kwargs["redis"] = os.environ["SHORTENER_REDIS_URL"]
        kwargs["secret"] = os.environ.get("SHORTENER_SECRET") or None
    return Cache(name, **kwargs)


def _shortener(request: Request) -> Shortener:
    state: Shortener = request.app.state.shortener
    return state


# The database calls below are short blocking calls made on the event loop (a primary-key
# lookup on an embedded or nearby database), as many production apps do; the cache calls are
# in-process. Neither needs a thread pool hop.


async def redirect(request: Request) -> Response:
    app = _shortener(request)
    slug = request.path_params["slug"]
    target = app.lookup(slug) if SLUG_RE.fullmatch(slug) else None
    headers = {"x-served-by": str(app.pid)}
    if target is None:
        app.not_found += 1
        return PlainTextResponse("no such link\n", status_code=404, headers=headers)
    app.redirects += 1
    return RedirectResponse(target, status_code=302, headers=headers)


async def create_link(request: Request) -> Response:
    app = _shortener(request)
    body = await _json_body(request)
    if isinstance(body, Response):
        return body
    target = _valid_target(body.get("target"))
    if target is None:
        return _error(400, "target must be an http:// or https:// URL")
    slug = body.get("slug")
    if slug is not None:
        if not isinstance(slug, str) or not SLUG_RE.fullmatch(slug):
            return _error(400, "slug must match [A-Za-z0-9][A-Za-z0-9_-]{0,63}")
        try:
            app.db.create(slug, target)
        except SlugTaken:
            return _error(409, f"slug {slug!r} is taken")
    else:
        for _ in range(8):
            slug = "".join(secrets.choice(SLUG_ALPHABET) for _ in range(7))
            try:
                app.db.create(slug, target)
                break
            except SlugTaken:
                continue
        else:
            return _error(503, "could not find a free slug")
    # The database is written first, then the cache: a reader that misses the cache after
    # this point loads the new row; one that hits it gets the value set here.
    app.publish(slug, target)
    return JSONResponse(
        {"slug": slug, "target": target, "url": f"{request.base_url}{slug}"},
        status_code=201,
        headers={"location": f"/{slug}", "x-served-by": str(app.pid)},
    )


async def update_link(request: Request) -> Response:
    app = _shortener(request)
    slug = request.path_params["slug"]
    body = await _json_body(request)
    if isinstance(body, Response):
        return body
    target = _valid_target(body.get("target"))
    if target is None:
        return _error(400, "target must be an http:// or https:// URL")
    if not SLUG_RE.fullmatch(slug) or not app.db.update(slug, target):
        return _error(404, "no such link")
    app.publish(slug, target)
    return JSONResponse({"slug": slug, "target": target}, headers={"x-served-by": str(app.pid)})


async def stats(request: Request) -> Response:
    return JSONResponse(_shortener(request).stats())


async def _json_body(request: Request) -> dict[str, Any] | Response:
    try:
        body = await request.json()
    except ValueError:
        return _error(400, "the body must be a JSON object")
    if not isinstance(body, dict):
        return _error(400, "the body must be a JSON object")
    return body


def _valid_target(target: object) -> str | None:
    if not isinstance(target, str) or len(target) > 2048:
        return None
    parts = urlsplit(target)
    if parts.scheme not in ("http", "https") or not parts.netloc:
        return None
    return target


def _error(status: int, message: str) -> Response:
    return JSONResponse({"error": message}, status_code=status)


@contextlib.asynccontextmanager
async def lifespan(app: Starlette) -> AsyncIterator[None]:
    shortener = Shortener()
    app.state.shortener = shortener
    task = asyncio.create_task(shortener.stats_loop()) if shortener.stats_dir else None
    try:
        yield
    finally:
        if task is not None:
            task.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await task
            shortener.write_stats()
        shortener.close()


app = Starlette(
    routes=[
        Route("/_stats", stats, methods=["GET"]),
        Route("/links", create_link, methods=["POST"]),
        Route("/links/{slug}", update_link, methods=["PUT"]),
        Route("/{slug}", redirect, methods=["GET"]),
    ],
    lifespan=lifespan,
)
