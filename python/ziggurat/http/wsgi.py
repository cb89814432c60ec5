"""``WSGICacheMiddleware``: the HTTP response cache for WSGI apps (Flask, Django, …).

A thin adapter: it converts the WSGI environ and the app's ``start_response`` call for the
shared ``Engine`` and does the I/O; the caching rules live in ``engine`` and ``rules``.
"""

from __future__ import annotations

import io
import logging
import threading
from collections.abc import Callable, Iterable, Iterator
from http import HTTPStatus
from typing import Any
from urllib.parse import quote

from ziggurat.http import abandoned
from ziggurat.http.engine import (
    ERROR,
    MARKER_TTL,
    PURGE_TOKEN,
    Engine,
    Fill,
    Hdrs,
    Hit,
    Pass,
    Reply,
    now,
)
from ziggurat.http.options import Options

__all__ = ["WSGICacheMiddleware"]

log = logging.getLogger("ziggurat.http")

StartResponse = Callable[..., Any]
WSGIApp = Callable[[dict[str, Any], StartResponse], Iterable[bytes]]
_END = object()
# The environ key of the cache's own request header, never passed to the app.
_PURGE_TOKEN_KEY = "HTTP_" + PURGE_TOKEN.decode().upper().replace("-", "_")


_STATUS_LINES: dict[int, str] = {}


def _status_line(code: int) -> str:
    line = _STATUS_LINES.get(code)
    if line is None:
        try:
            line = f"{code} {HTTPStatus(code).phrase}"
        except ValueError:
            line = f"{code} Unknown"
        _STATUS_LINES[code] = line
    return line


def _to_wsgi(headers: Hdrs) -> list[tuple[str, str]]:
    return [(k.decode("latin-1"), v.decode("latin-1")) for k, v in headers]


def _from_wsgi(headers: Iterable[tuple[str, str]]) -> Hdrs:
    return [
        (k.lower().encode("latin-1", "replace"), v.encode("latin-1", "replace")) for k, v in headers
    ]


def _close(result: Any) -> None:
    close = getattr(result, "close", None)
    if close is not None:
        try:
            close()
        except Exception:
            # The server would have logged it, traceback included.
            log.exception("ziggurat.http: closing the app's response failed")


class _Stream:
    """A forwarded response body: the chunks already read, then the rest of the app's
    iterable, never buffered; ``close`` reaches the app's iterable."""

    def __init__(
        self,
        status: str,
        headers: Hdrs,
        prefix: list[bytes],
        rest: Iterator[bytes],
        result: Any,
        error: BaseException | None = None,
        tee: tuple[Fill, int] | None = None,
    ) -> None:
        self.status, self.headers = status, headers
        self._prefix, self._rest, self._result, self._error = prefix, rest, result, error
        self._tee = tee

    def __iter__(self) -> Iterator[bytes]:
        if self._tee is None:
            yield from self._prefix
            if self._error is not None:
                raise self._error
            yield from self._rest
            return
        fill, limit = self._tee
        kept: list[bytes] | None = []
        size = 0
        for part in (self._prefix, self._rest):
            for c in part:
                if kept is not None:
                    size += len(c)
                    if size > limit:
                        kept = None
                    else:
                        kept.append(c)
                yield c
        if kept is not None:
            fill.store_streamed(b"".join(kept), now())

    def close(self) -> None:
        _close(self._result)


class _State:
    ran = False
    outcome: Reply | _Stream | None = None
    error: Exception | None = None


class WSGICacheMiddleware:
    """Caches a WSGI app's responses in a ``ziggurat.Cache`` shared by every worker.

    Options are those of ``CacheMiddleware`` (see docs/http.md).

    >>> from ziggurat import Cache
    >>> def app(environ, start_response):
    ...     start_response("200 OK", [("Cache-Control", "max-age=60"), ("Cache-Tag", "home")])
    ...     return [b"hello"]
    >>> cache = Cache("doc-wsgi-mw", size="8MiB")
    >>> wrapped = WSGICacheMiddleware(app, cache, allowed_hosts=["example.com"])
    >>> cache.unlink()
    """

    def __init__(self, app: WSGIApp, cache: Any, **options: Any) -> None:
        if not callable(app):
            raise TypeError("WSGICacheMiddleware(): app must be a WSGI callable")
        for m in ("get", "set", "delete", "fetch", "invalidate_tags"):
            if not callable(getattr(cache, m, None)):
                raise TypeError(
                    f"WSGICacheMiddleware(): cache must be a ziggurat.Cache, got {cache!r}"
                )
        self.app = app
        self.cache = cache
        self.options = Options.build("WSGICacheMiddleware", **options)
        self.engine = Engine(cache, self.options, emit_headers=_to_wsgi, emit_status=_status_line)
        self._heavy = self.engine.heavy_environ
        self._fresh = self.engine.fresh
        self._refreshing: set[bytes] = set()
        self._guard = threading.Lock()

    def __call__(self, environ: dict[str, Any], start_response: StartResponse) -> Iterable[bytes]:
        method = environ.get("REQUEST_METHOD", "GET")
        h = None
        # The plain hit: none of the headers that need the full rules (one set operation
        # in C), and the server's raw target.
        if (method == "GET" or method == "HEAD") and self._heavy.isdisjoint(environ):
            host = environ.get("HTTP_HOST")
            raw = environ.get("RAW_URI") or environ.get("REQUEST_URI")
            if type(host) is str and type(raw) is str and raw[:1] == "/":
                h = self._fresh(
                    environ.get("wsgi.url_scheme", "http"),
                    host,
                    raw.encode("latin-1", "replace"),
                    None,
                    now(),
                )
        if h is None:
            out = self._full(environ, start_response, method)
            if not isinstance(out, Hit):
                return out
            h = out
        start_response(h.status, h.headers.copy())
        return [h.body] if method == "GET" and h.body else []

    def _full(
        self, environ: dict[str, Any], start_response: StartResponse, method: str
    ) -> Hit | Iterable[bytes]:
        """A request that is not a plain hit: the full rules. Returns the ``Hit`` to send
        when they find one, else the response body."""
        scheme = environ.get("wsgi.url_scheme", "http")
        headers = _environ_headers(environ)
        h = environ.get("HTTP_HOST")
        host = h.encode("latin-1", "replace") if isinstance(h, str) else None
        if host is None:
            host = f"{environ.get('SERVER_NAME', '')}:{environ.get('SERVER_PORT', '')}".encode(
                "latin-1", "replace"
            )
        target = _target(environ)
        client = environ.get("REMOTE_ADDR")
        d = self.engine.classify(method, scheme, host, target, headers, client, now())
        if isinstance(d, Hit):
            return d
        if isinstance(d, Reply):
            if d.refresh is not None:
                self._refresh(environ, d.refresh)
            return self._send(d, start_response)
        if isinstance(d, Pass):
            return self._pass(d, environ, start_response, scheme, host, target)
        return self._fill(d, environ, start_response)

    # -- the three outcomes --------------------------------------------------------------

    def _send(self, r: Reply, start_response: StartResponse) -> Iterable[bytes]:
        start_response(_status_line(r.status), _to_wsgi(r.headers))
        return [r.body] if r.body else []

    def _pass(
        self,
        p: Pass,
        environ: dict[str, Any],
        start_response: StartResponse,
        scheme: str,
        host: bytes,
        target: bytes,
    ) -> Iterable[bytes]:
        engine = self.engine
        if _PURGE_TOKEN_KEY in environ:
            environ = dict(environ)
            del environ[_PURGE_TOKEN_KEY]

        def sr(status: str, headers: list[tuple[str, str]], exc_info: Any = None) -> Any:
            try:
                code = int(status.split(" ", 1)[0])
                out = _to_wsgi(
                    engine.passed_head(p, code, _from_wsgi(headers), scheme, host, target)
                )
            except Exception:
                out = headers
            if exc_info is not None:
                return start_response(status, out, exc_info)
            return start_response(status, out)

        return self.app(environ, sr)

    def _fill(
        self, fill: Fill, environ: dict[str, Any], start_response: StartResponse
    ) -> Iterable[bytes]:
        state = _State()

        def loader() -> str | None:
            state.ran = True
            r = fill.recheck(now())
            if r is not None:
                state.outcome = r
                return fill.marker()
            try:
                state.outcome = self._forward(environ, fill)
            except Exception as e:
                state.error = e
                return ERROR if fill.stale is not None else None
            return fill.marker()

        for attempt in range(2 if fill.coalesce else 0):
            try:
                marker = self.cache.fetch(
                    fill.lock, loader, ttl=MARKER_TTL, neg_ttl=self.options.hit_for_miss
                )
            except Exception as e:
                # A wait that ran out (LoadTimeout) or a broken segment: go to the app.
                if not state.ran:
                    log.info("ziggurat.http: not coalesced: %r", e)
                    break
            if state.ran:
                return self._outcome(state, fill, start_response)
            try:
                r = fill.after_wait(marker, now())
            except Exception:
                r = None
            if r is not None:
                return self._send(r, start_response)
            if not fill.retry_wait(marker, attempt):
                break
        loader()
        return self._outcome(state, fill, start_response)

    def _outcome(self, state: _State, fill: Fill, start_response: StartResponse) -> Iterable[bytes]:
        if state.error is not None:
            r = fill.stale_if_error(None, now())
            if r is None:
                raise state.error
            return self._send(r, start_response)
        out = state.outcome
        if isinstance(out, Reply):
            return self._send(out, start_response)
        assert out is not None
        start_response(out.status, _to_wsgi(out.headers))
        return out

    # -- calling the app -----------------------------------------------------------------

    def _forward(self, environ: dict[str, Any], fill: Fill) -> Reply | _Stream:
        """Calls the app for ``fill``; reads the body only when it is to be stored."""
        env = dict(environ)
        env.pop("HTTP_IF_NONE_MATCH", None)
        env.pop("HTTP_IF_MODIFIED_SINCE", None)
        env.pop(_PURGE_TOKEN_KEY, None)
        for k, v in fill.upstream_headers():
            if k in (b"if-none-match", b"if-modified-since", b"surrogate-capability"):
                env["HTTP_" + k.decode().upper().replace("-", "_")] = v.decode("latin-1")
        t0 = now()
        captured: list[Any] = []
        chunks: list[bytes] = []

        def sr(status: str, headers: list[tuple[str, str]], exc_info: Any = None) -> Any:
            captured[:] = [status, headers]
            return chunks.append

        timeout = fill.app_timeout()
        if timeout is None:
            result, it = _begin(self.app, env, sr, captured, chunks)
        else:
            # The app runs in a thread of its own, so that a stale response can answer
            # when it has not started its response in time.
            call = _Call(self.app, env, sr, captured, chunks)
            if not call.wait(timeout):
                r = fill.timed_out(now()) if abandoned.calls.admit() else None
                if r is not None:
                    call.abandon(self.cache, fill.lock)
                    return r
                call.wait(None)
            result, it = call.outcome()
        status, wsgi_headers = captured
        try:
            code = int(str(status).split(" ", 1)[0])
            hdrs = _from_wsgi(wsgi_headers)
        except Exception:
            return _Stream(status, _from_wsgi_safe(wsgi_headers), chunks, it, result)
        d = fill.head(code, hdrs, t0, now())
        if isinstance(d, Reply):
            _close(result)
            return d
        if isinstance(d, list):
            return _Stream(status, d, chunks, it, result)
        if fill.tee:
            return _Stream(status, fill.tee_headers(), chunks, it, result, tee=(fill, d))
        size = sum(len(c) for c in chunks)
        try:
            while size <= d:
                c = next(it, _END)
                if c is _END:
                    break
                chunks.append(c)  # type: ignore[arg-type]
                size += len(c)  # type: ignore[arg-type]
        except Exception as e:
            # The body failed midway: the client gets what the app produced, then the same
            # failure; nothing is stored.
            return _Stream(
                status, fill._pass(hdrs, "body-error", code), chunks, iter(()), result, e
            )
        if size > d:
            return _Stream(status, fill.too_large(hdrs, code), chunks, it, result)
        _close(result)
        return fill.complete(b"".join(chunks), now())

    def _refresh(self, environ: dict[str, Any], fill: Fill) -> None:
        """stale-while-revalidate: one background validation per URL per host."""
        with self._guard:
            if fill.refresh_lock in self._refreshing:
                return
            self._refreshing.add(fill.refresh_lock)
        env = dict(environ)
        env["wsgi.input"] = io.BytesIO(b"")
        env.pop("CONTENT_LENGTH", None)

        def load() -> str | None:
            out = self._forward(env, fill)
            if isinstance(out, _Stream):
                for _ in out:
                    pass
                out.close()
            return fill.marker()

        def work() -> None:
            try:
                self.cache.fetch(
                    fill.refresh_lock, load, ttl=MARKER_TTL, neg_ttl=self.options.hit_for_miss
                )
            except Exception as e:
                log.warning("ziggurat.http: background refresh failed: %r", e)
            finally:
                with self._guard:
                    self._refreshing.discard(fill.refresh_lock)

        threading.Thread(target=work, name="ziggurat-http-refresh", daemon=True).start()


def _begin(
    app: WSGIApp,
    env: dict[str, Any],
    sr: StartResponse,
    captured: list[Any],
    chunks: list[bytes],
) -> tuple[Any, Iterator[bytes]]:
    result = app(env, sr)
    try:
        it = iter(result)
        while not captured:
            c = next(it, _END)
            if c is _END:
                break
            chunks.append(c)  # type: ignore[arg-type]
        if not captured:
            raise RuntimeError("the WSGI app returned without calling start_response")
    except BaseException:
        _close(result)
        raise
    return result, it


class _Call:
    """An app call started in a thread of its own, for ``app_timeout``: the request thread
    waits for its response head at most that long, then may abandon it."""

    def __init__(
        self,
        app: WSGIApp,
        env: dict[str, Any],
        sr: StartResponse,
        captured: list[Any],
        chunks: list[bytes],
    ) -> None:
        self._done = threading.Event()
        self._guard = threading.Lock()
        self._abandoned: tuple[Any, bytes] | None = None
        self._result: tuple[Any, Iterator[bytes]] | None = None
        self._error: BaseException | None = None
        args = (app, env, sr, captured, chunks)
        threading.Thread(target=self._run, args=args, name="ziggurat-http-app", daemon=True).start()

    def _run(self, *args: Any) -> None:
        try:
            self._result = _begin(*args)
        except BaseException as e:
            self._error = e
        with self._guard:
            self._done.set()
            late = self._abandoned
        if late is not None:
            if self._result is not None:
                _close(self._result[0])
            abandoned.calls.end(*late)

    def wait(self, timeout: float | None) -> bool:
        """Whether the app started its response within ``timeout`` (None: waits)."""
        return self._done.wait(timeout)

    def abandon(self, cache: Any, lock: bytes) -> None:
        """Nobody waits for this call any more: its response is closed when it comes, and
        until then the URL (its fill ``lock`` in ``cache``) is answered without the app
        (see ``abandoned``)."""
        abandoned.calls.start(cache, lock)
        with self._guard:
            self._abandoned = (cache, lock)
            done = self._done.is_set()
        if done:
            if self._result is not None:
                _close(self._result[0])
            abandoned.calls.end(cache, lock)

    def outcome(self) -> tuple[Any, Iterator[bytes]]:
        if self._error is not None:
            raise self._error
        assert self._result is not None
        return self._result


def _from_wsgi_safe(headers: Any) -> Hdrs:
    try:
        return _from_wsgi(headers)
    except Exception:
        return []


# environ key -> header name; None for keys that are not headers. Bounded: unknown keys
# come from clients.
_NAMES: dict[str, bytes | None] = {}
_UNKNOWN: Any = object()


def _environ_name(k: str) -> bytes | None:
    if k.startswith("HTTP_"):
        name: bytes | None = k[5:].replace("_", "-").lower().encode("latin-1", "replace")
    elif k in ("CONTENT_TYPE", "CONTENT_LENGTH"):
        name = k.replace("_", "-").lower().encode()
    else:
        name = None
    if len(_NAMES) < 4096:
        _NAMES[k] = name
    return name


def _environ_headers(environ: dict[str, Any]) -> Hdrs:
    names = _NAMES
    out: Hdrs = []
    append = out.append
    for k, v in environ.items():
        name = names.get(k, _UNKNOWN)
        if name is None:
            continue
        if name is _UNKNOWN:
            name = _environ_name(k)
            if name is None:
                continue
        if type(v) is str and (v or k[0] == "H"):
            append((name, v.encode("latin-1", "replace")))
    return out


def _target(environ: dict[str, Any]) -> bytes:
    """The raw path and query the app receives (the server's own copy when it keeps one)."""
    raw = environ.get("RAW_URI") or environ.get("REQUEST_URI")
    if isinstance(raw, str) and raw:
        # Also "*" or an absolute URL as the client sent it: the engine bypasses any
        # target that does not start with "/", rather than key a path rebuilt from it.
        return raw.encode("latin-1", "replace")
    path = environ.get("SCRIPT_NAME", "") + environ.get("PATH_INFO", "")
    t = quote(path.encode("latin-1", "replace"), safe="/:@!$&'()*+,;=-._~%").encode("ascii")
    qs = environ.get("QUERY_STRING", "")
    if qs:
        t += b"?" + qs.encode("latin-1", "replace")
    return t or b"/"
