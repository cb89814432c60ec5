"""The page cache most apps use today, for comparison: pages in Redis (or Valkey), keyed by URL.

A WSGI middleware that keeps whole ``200`` responses to ``GET`` in Redis for their
``s-maxage`` (else ``max-age``) seconds, and a purge by group done with Redis sets: each stored
page's key is added to the set of every group named in its ``Cache-Tag`` header, and
``invalidate_tags`` deletes the keys in those sets. It is deliberately simple, as such caches
usually are: no request coalescing (concurrent misses all reach the app), no revalidation, and a
page rendered before a purge but stored after it stays stale until its TTL.

    >>> import redis  # doctest: +SKIP
    >>> cache = RedisPageCache(redis.Redis(unix_socket_path="/tmp/valkey.sock"))  # doctest: +SKIP
    >>> app = cache.wsgi(blog_wsgi_app)  # doctest: +SKIP
    >>> cache.invalidate_tags("lists", "post:3")  # doctest: +SKIP
"""

from __future__ import annotations

import json
import re
from collections.abc import Callable, Iterable
from typing import Any

PREFIX = "blogpage:"
_AGE = re.compile(r"(?:^|,)\s*(s-maxage|max-age)\s*=\s*(\d+)", re.I)


def ttl_of(cache_control: str) -> int:
    """Seconds a shared cache may keep the page (0: not at all).

    >>> ttl_of("public, max-age=0, s-maxage=3600")
    3600
    >>> ttl_of("no-store"), ttl_of("private, max-age=60"), ttl_of("max-age=60")
    (0, 0, 60)
    """
    low = cache_control.lower()
    if "no-store" in low or "private" in low or "no-cache" in low:
        return 0
    ages = dict((k.lower(), int(v)) for k, v in _AGE.findall(cache_control))
    return ages.get("s-maxage", ages.get("max-age", 0))


class RedisPageCache:
    """Pages in Redis keyed by host and URL, purged by group through Redis sets.

    ``invalidate_tags`` has the signature of ``ziggurat.Cache.invalidate_tags``, so the blog
    purges either cache with the same call.
    """

    def __init__(self, client: Any) -> None:
        self.r = client

    def invalidate_tags(self, *groups: str) -> None:
        """Deletes every page stored under any of ``groups``, and those groups' sets."""
        sets = [f"{PREFIX}tag:{g}" for g in groups]
        keys: set[bytes] = set()
        pipe = self.r.pipeline()
        for s in sets:
            pipe.smembers(s)
        for members in pipe.execute():
            keys |= set(members)
        self.r.delete(*sets, *keys)

    def wsgi(self, app: Callable[..., Iterable[bytes]]) -> Callable[..., Iterable[bytes]]:
        """Wraps a WSGI app: hits are answered from Redis, misses stored on the way out."""

        def cached(environ: dict[str, Any], start_response: Callable[..., Any]) -> Iterable[bytes]:
            method = environ.get("REQUEST_METHOD", "GET")
            if method not in ("GET", "HEAD"):
                return _passing(app, environ, start_response, "redis; fwd=method")
            host = environ.get("HTTP_HOST", "")
            query = environ.get("QUERY_STRING", "")
            key = f"{PREFIX}{host}{environ.get('PATH_INFO', '/')}" + (f"?{query}" if query else "")
            raw = self.r.get(key)
            if raw is not None:
                head, _, body = raw.partition(b"\n")
                status, headers = json.loads(head)
                start_response(status, [*map(tuple, headers), ("Cache-Status", "redis; hit")])
                return [b"" if method == "HEAD" else body]
            seen: dict[str, Any] = {}

            def remember(status: str, headers: list[tuple[str, str]], exc: Any = None) -> Any:
                seen["status"], seen["headers"] = status, headers
                return None

            body = b"".join(app(environ, remember))
            status, headers = seen["status"], list(seen["headers"])
            tags = [v for k, v in headers if k.lower() == "cache-tag"]
            headers = [(k, v) for k, v in headers if k.lower() != "cache-tag"]
            cc = ", ".join(v for k, v in headers if k.lower() == "cache-control")
            ttl = ttl_of(cc) if status.startswith("200") and method == "GET" else 0
            if ttl > 0:
                groups = [g.strip() for t in tags for g in t.split(",") if g.strip()]
                pipe = self.r.pipeline(transaction=False)
                pipe.set(key, json.dumps([status, headers]).encode() + b"\n" + body, ex=ttl)
                for g in groups:
                    pipe.sadd(f"{PREFIX}tag:{g}", key)
                    pipe.expire(f"{PREFIX}tag:{g}", ttl)
                pipe.execute()
            note = "stored" if ttl > 0 else "not stored"
            start_response(status, [*headers, ("Cache-Status", f"redis; fwd=miss; {note}")])
            return [b"" if method == "HEAD" else body]

        return cached


def _passing(
    app: Callable[..., Iterable[bytes]],
    environ: dict[str, Any],
    start_response: Callable[..., Any],
    status_note: str,
) -> Iterable[bytes]:
    def add(status: str, headers: list[tuple[str, str]], exc: Any = None) -> Any:
        kept = [(k, v) for k, v in headers if k.lower() != "cache-tag"]
        return start_response(status, [*kept, ("Cache-Status", status_note)], exc)

    return app(environ, add)
