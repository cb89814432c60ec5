"""``CacheMiddleware``: the HTTP response cache for ASGI apps (Starlette, FastAPI, Django).

A thin adapter over the shared ``Engine``. On a fill the app runs in its own task and its
messages pass through a small queue: the middleware decides on the response head, and
either buffers the body to store it or relays the messages as they come, so the fill's
lease is given back (and the waiters released) as soon as the response turns out not
storable, while its body still streams.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Awaitable, Callable, MutableMapping
from typing import Any
from urllib.parse import quote

from ziggurat.http import abandoned
from ziggurat.http.engine import (
    ERROR,
    MARKER_TTL,
    Engine,
    Fill,
    Hdrs,
    Hit,
    Pass,
    Reply,
    for_app,
    now,
)
from ziggurat.http.options import Options

__all__ = ["CacheMiddleware"]

log = logging.getLogger("ziggurat.http")

Scope = MutableMapping[str, Any]
Message = MutableMapping[str, Any]
Receive = Callable[[], Awaitable[Message]]
Send = Callable[[Message], Awaitable[None]]
ASGIApp = Callable[[Scope, Receive, Send], Awaitable[None]]

_DONE: Message = {"type": "ziggurat.done"}
_PLAIN_MAX = 512


class _Failed:
    def __init__(self, error: BaseException) -> None:
        self.error = error


class _Feed:
    """The messages of a forwarded app on their way to the middleware, and whether the
    middleware still reads them. An app may raise after its last message (Starlette sends
    its 500 page, then raises for the server to log; a background task fails): once nobody
    reads, the error is logged here, as the server would have logged it."""

    def __init__(self) -> None:
        self.queue: asyncio.Queue[Any] = asyncio.Queue(maxsize=16)
        self.reading = True

    async def fail(self, error: BaseException) -> None:
        if self.reading:
            await self.queue.put(_Failed(error))
        else:
            _report(error)

    def close(self) -> None:
        """The middleware reads no more; an error already queued is logged."""
        self.reading = False
        while not self.queue.empty():
            m = self.queue.get_nowait()
            if isinstance(m, _Failed):
                _report(m.error)


def _report(error: BaseException) -> None:
    log.error(
        "ziggurat.http: exception in the ASGI app after its response was complete",
        exc_info=(type(error), error, error.__traceback__),
    )


def _headers(raw: Any) -> Hdrs:
    return [(bytes(k).lower(), bytes(v)) for k, v in raw]


async def _send_reply(r: Reply, send: Send) -> None:
    await send({"type": "http.response.start", "status": r.status, "headers": r.headers})
    await send({"type": "http.response.body", "body": r.body, "more_body": False})


class _Stream:
    """A forwarded response: its start message, the body messages already read, then the
    rest as the app produces it."""

    def __init__(
        self,
        start: Message,
        prefix: list[Message],
        feed: _Feed,
        task: asyncio.Future[None],
        error: BaseException | None = None,
        tee: tuple[Fill, int] | None = None,
    ) -> None:
        self.start, self.prefix, self.feed, self.task, self.error = (
            start,
            prefix,
            feed,
            task,
            error,
        )
        self.finished = False
        self.tee = tee

    async def relay(self, send: Send) -> None:
        # After a normal end the app's task is left to finish on its own: it may still run
        # work after its last message (Starlette's background tasks).
        try:
            await send(self.start)
            for m in self.prefix:
                await send(m)
            if self.error is not None:
                raise self.error
            kept: list[bytes] | None = [] if self.tee is not None else None
            size = 0
            while True:
                m = await self.feed.queue.get()
                if m is _DONE:
                    self.finished = True
                    return
                if isinstance(m, _Failed):
                    self.finished = True
                    raise m.error
                last = m.get("type") == "http.response.body" and not m.get("more_body", False)
                if kept is not None and self.tee is not None:
                    if m.get("type") != "http.response.body":
                        kept = None
                    else:
                        chunk = bytes(m.get("body", b""))
                        size += len(chunk)
                        if size <= self.tee[1]:
                            kept.append(chunk)
                        else:
                            kept = None
                    if last and kept is not None:
                        # Stored before the client sees the end, so its next request hits.
                        self.tee[0].store_streamed(b"".join(kept), now())
                await send(m)
                if last:
                    self.finished = True
                    return
        finally:
            self.cancel()

    async def drain(self) -> None:
        try:
            while True:
                m = await self.feed.queue.get()
                if m is _DONE:
                    self.finished = True
                    return
                if isinstance(m, _Failed):
                    self.finished = True
                    _report(m.error)
                    return
                if m.get("type") == "http.response.body" and not m.get("more_body", False):
                    self.finished = True
                    return
        finally:
            self.cancel()

    def cancel(self) -> None:
        """Stops the app's task unless its response was complete; reads no more of it."""
        if not self.finished and not self.task.done():
            self.task.cancel()
        self.feed.close()


class _State:
    ran = False
    outcome: Reply | _Stream | None = None
    error: Exception | None = None


class CacheMiddleware:
    """Caches an ASGI app's responses in a ``ziggurat.Cache`` shared by every worker.

    Options (defaults and units in docs/http.md): ``allowed_hosts``, ``max_body``,
    ``request_directives``, ``tag_header``, ``cache_status``, ``default_ttl``,
    ``heuristic``, ``store_set_cookie``, ``store_auth_must_revalidate``,
    ``bypass_headers``, ``bypass_cookies``, ``key_headers``, ``hit_for_miss``,
    ``revalidate_keep``, ``purge_token``, ``purge_clients``, ``targeted_fields``,
    ``targeted_forward``, ``stale_if_error``, ``app_timeout``.

    >>> from ziggurat import Cache
    >>> async def app(scope, receive, send):
    ...     await send({"type": "http.response.start", "status": 200,
    ...                 "headers": [(b"cache-control", b"max-age=60"), (b"cache-tag", b"home")]})
    ...     await send({"type": "http.response.body", "body": b"hello"})
    >>> cache = Cache("doc-asgi-mw", size="8MiB")
    >>> wrapped = CacheMiddleware(app, cache, allowed_hosts=["example.com"], max_body=65536)
    >>> cache.unlink()
    """

    def __init__(self, app: ASGIApp, cache: Any, **options: Any) -> None:
        if not callable(app):
            raise TypeError("CacheMiddleware(): app must be an ASGI callable")
        for m in ("get", "set", "delete", "afetch", "invalidate_tags"):
            if not callable(getattr(cache, m, None)):
                raise TypeError(f"CacheMiddleware(): cache must be a ziggurat.Cache, got {cache!r}")
        self.app = app
        self.cache = cache
        self.options = Options.build("CacheMiddleware", **options)
        self.engine = Engine(cache, self.options)
        self._scan = self.engine.heavy_headers | {b"host"}
        # Header names seen that are neither in _scan nor hold "_" (bounded: clients choose
        # names; past the bound, other names take the two checks).
        self._plain: set[bytes] = set()
        self._fresh = self.engine.fresh
        self._refreshing: set[bytes] = set()
        self._tasks: set[asyncio.Future[Any]] = set()

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope.get("type") != "http":
            mine = for_app(scope.get("headers") or ())
            if mine is not None:  # a WebSocket handshake
                scope = {**scope, "headers": mine}
            await self.app(scope, receive, send)
            return
        method = scope.get("method", "GET")
        # ASGI servers give lower-case names as bytes; the list is used as it is.
        headers: Hdrs = scope.get("headers") or []
        h = None
        if method == "GET" or method == "HEAD":
            # The plain hit, in one pass over the headers: a Host and none of the headers
            # that need the full rules, nor a name with "_" (95), which they bypass. A name
            # found to be neither is remembered, so most headers cost one set lookup. A
            # scope this cannot read goes to the full rules, which answer any input.
            try:
                plain = self._plain
                scan = self._scan
                host = None
                for k, v in headers:
                    if k in plain:
                        continue
                    if k in scan:
                        if k == b"host" and host is None:
                            host = v
                            continue
                        host = None
                        break
                    if 95 in k:
                        host = None
                        break
                    if len(plain) < _PLAIN_MAX:
                        plain.add(k)
                raw = scope.get("raw_path")
                if host is not None and type(raw) is bytes:
                    qs = scope.get("query_string")
                    target = raw + b"?" + qs if qs else raw
                    h = self._fresh(scope.get("scheme", "http"), host, target, headers, now())
            except Exception:
                h = None
        if h is None:
            h = await self._full(scope, receive, send, method, headers)
            if h is None:
                return
        await send({"type": "http.response.start", "status": h.status, "headers": h.headers.copy()})
        body = h.body if method == "GET" else b""
        await send({"type": "http.response.body", "body": body, "more_body": False})

    async def _full(
        self, scope: Scope, receive: Receive, send: Send, method: str, headers: Hdrs
    ) -> Hit | None:
        """A request that is not a plain hit: the full rules. Returns the ``Hit`` to send
        when they find one, else None once the response is sent."""
        scheme = scope.get("scheme", "http")
        host = None
        for k, v in headers:
            if k == b"host":
                host = v
                break
        if host is None and scope.get("server"):
            h, p = scope["server"][0], scope["server"][1]
            host = f"{h}:{p}".encode("latin-1", "replace") if p else str(h).encode()
        raw = scope.get("raw_path")
        qs = scope.get("query_string")
        target = (raw + b"?" + qs if qs else raw) if type(raw) is bytes else _target(scope)
        client = scope.get("client")
        d = self.engine.classify(
            method, scheme, host, target, headers, client[0] if client else None, now()
        )
        if isinstance(d, Hit):
            return d
        if isinstance(d, Reply):
            await send({"type": "http.response.start", "status": d.status, "headers": d.headers})
            await send({"type": "http.response.body", "body": d.body, "more_body": False})
            if d.refresh is not None:
                self._refresh(scope, d.refresh)
            return None
        if isinstance(d, Pass):
            mine = for_app(headers)
            if mine is not None:
                scope = {**scope, "headers": mine}
            await self._pass(d, scope, receive, send, scheme, host, target)
            return None
        await self._fill(d, scope, receive, send)
        return None

    async def _pass(
        self,
        p: Pass,
        scope: Scope,
        receive: Receive,
        send: Send,
        scheme: str,
        host: bytes | None,
        target: bytes,
    ) -> None:
        engine = self.engine

        async def wrapped(message: Message) -> None:
            if message.get("type") == "http.response.start":
                try:
                    hdrs = engine.passed_head(
                        p,
                        int(message["status"]),
                        _headers(message.get("headers") or ()),
                        scheme,
                        host,
                        target,
                    )
                    message = {**message, "headers": hdrs}
                except Exception as e:
                    log.warning("ziggurat.http: response head left as is: %r", e)
            await send(message)

        await self.app(scope, receive, wrapped)

    async def _fill(self, fill: Fill, scope: Scope, receive: Receive, send: Send) -> None:
        state = _State()

        async def loader() -> str | None:
            state.ran = True
            r = fill.recheck(now())
            if r is not None:
                state.outcome = r
                return fill.marker()
            try:
                state.outcome = await self._forward(scope, receive, fill)
            except Exception as e:
                state.error = e
                return ERROR if fill.stale is not None else None
            return fill.marker()

        try:
            for attempt in range(2 if fill.coalesce else 0):
                try:
                    marker = await self.cache.afetch(
                        fill.lock, loader, ttl=MARKER_TTL, neg_ttl=self.options.hit_for_miss
                    )
                except Exception as e:
                    if not state.ran:
                        log.info("ziggurat.http: not coalesced: %r", e)
                        break
                if state.ran:
                    break
                try:
                    r = fill.after_wait(marker, now())
                except Exception:
                    r = None
                if r is not None:
                    await _send_reply(r, send)
                    return
                if not fill.retry_wait(marker, attempt):
                    break
            if not state.ran:
                await loader()
            if state.error is not None:
                r = fill.stale_if_error(None, now())
                if r is None:
                    raise state.error
                await _send_reply(r, send)
                return
            out = state.outcome
            if isinstance(out, Reply):
                await _send_reply(out, send)
            elif out is not None:
                await out.relay(send)
        finally:
            if isinstance(state.outcome, _Stream):
                state.outcome.cancel()

    async def _forward(self, scope: Scope, receive: Receive, fill: Fill) -> Reply | _Stream:
        """Runs the app for ``fill``; reads the body only when it is to be stored."""
        sc = dict(scope)
        sc["headers"] = fill.upstream_headers()
        feed = _Feed()
        queue = feed.queue
        t0 = now()

        async def app_send(message: Message) -> None:
            # An abandoned call runs on to its end: what it sends then goes nowhere.
            if feed.reading:
                await queue.put(message)

        async def run() -> None:
            try:
                await self.app(sc, receive, app_send)
            except asyncio.CancelledError:
                raise
            except BaseException as e:
                await feed.fail(e)
            else:
                await queue.put(_DONE)

        task = asyncio.ensure_future(run())
        try:
            timeout = fill.app_timeout()
            if timeout is None:
                first = await queue.get()
            else:
                try:
                    first = await asyncio.wait_for(queue.get(), timeout)
                except asyncio.TimeoutError:
                    r = fill.timed_out(now()) if abandoned.calls.admit() else None
                    if r is not None:
                        # Not cancelled: a sync view in a thread pool would run on after
                        # a cancel, unseen. The call runs to its end, and until then the
                        # URL is answered without the app (see ``abandoned``).
                        cache, lock = self.cache, fill.lock
                        abandoned.calls.start(cache, lock)

                        def ended(_: asyncio.Future[None]) -> None:
                            abandoned.calls.end(cache, lock)

                        task.add_done_callback(ended)
                        feed.close()
                        return r
                    first = await queue.get()
        except BaseException:
            task.cancel()
            feed.close()
            raise
        if isinstance(first, _Failed):
            feed.close()
            raise first.error
        if first is _DONE or first.get("type") != "http.response.start":
            task.cancel()
            feed.close()
            raise RuntimeError("the ASGI app did not start a response")
        status = int(first["status"])
        hdrs = _headers(first.get("headers") or ())
        d = fill.head(status, hdrs, t0, now())
        if isinstance(d, Reply):
            await _Stream(first, [], feed, task).drain()
            return d
        if isinstance(d, list):
            return _Stream({**first, "headers": d}, [], feed, task)
        if fill.tee:
            return _Stream({**first, "headers": fill.tee_headers()}, [], feed, task, tee=(fill, d))
        if first.get("trailers"):
            return _Stream(
                {**first, "headers": fill._pass(hdrs, "trailers", status)}, [], feed, task
            )
        parts: list[Message] = []
        size = 0
        while True:
            m = await queue.get()
            if m is _DONE:
                break
            if isinstance(m, _Failed):
                start = {**first, "headers": fill._pass(hdrs, "body-error", status)}
                return _Stream(start, parts, feed, task, m.error)
            if m.get("type") != "http.response.body":
                parts.append(m)
                return _Stream(
                    {**first, "headers": fill._pass(hdrs, "extension", status)}, parts, feed, task
                )
            parts.append(m)
            size += len(m.get("body", b""))
            if size > d:
                return _Stream(
                    {**first, "headers": fill.too_large(hdrs, status)}, parts, feed, task
                )
            if not m.get("more_body", False):
                break
        # Complete: the app's task may go on (background work) and is left to finish.
        feed.close()
        body = b"".join(bytes(m.get("body", b"")) for m in parts)
        return fill.complete(body, now())

    def _refresh(self, scope: Scope, fill: Fill) -> None:
        """stale-while-revalidate: one background validation per URL per host."""
        if fill.refresh_lock in self._refreshing:
            return
        self._refreshing.add(fill.refresh_lock)
        done = asyncio.Event()
        sc = dict(scope)
        sent = False

        async def receive() -> Message:
            nonlocal sent
            if not sent:
                sent = True
                return {"type": "http.request", "body": b"", "more_body": False}
            await done.wait()
            return {"type": "http.disconnect"}

        async def load() -> str | None:
            out = await self._forward(sc, receive, fill)
            if isinstance(out, _Stream):
                await out.drain()
            return fill.marker()

        async def work() -> None:
            try:
                await self.cache.afetch(
                    fill.refresh_lock, load, ttl=MARKER_TTL, neg_ttl=self.options.hit_for_miss
                )
            except Exception as e:
                log.warning("ziggurat.http: background refresh failed: %r", e)
            finally:
                done.set()
                self._refreshing.discard(fill.refresh_lock)

        task = asyncio.ensure_future(work())
        self._tasks.add(task)
        task.add_done_callback(self._tasks.discard)


def _target(scope: Scope) -> bytes:
    raw = scope.get("raw_path")
    if not raw:
        raw = quote(
            scope.get("root_path", "") + scope.get("path", "/"), safe="/:@!$&'()*+,;=-._~%"
        ).encode("ascii")
    t = bytes(raw)
    qs = scope.get("query_string")
    if qs:
        t += b"?" + bytes(qs)
    return t
