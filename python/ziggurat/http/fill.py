"""``Fill``: one request the cache cannot answer alone, from the app's response head to
what is stored of it. The decisions are the ``ziggurat-http`` crate's (its ``fill``
module: each event in, what to do out); this class holds what the fill carries between
events and does the cache's I/O. The adapters call the app and hand the results in (see
``engine`` for the order of the calls).
"""

from __future__ import annotations

import logging
from typing import TYPE_CHECKING, Any

from ziggurat import _native
from ziggurat.http import rules, storable, store
from ziggurat.http.outcome import (
    CLIENT_CONDITIONALS,
    ERROR,
    NOT_FOR_APP,
    STORED,
    TEE,
    Hdrs,
    Reply,
    add_status,
)
from ziggurat.http.store import Stored

if TYPE_CHECKING:
    from ziggurat.http.engine import Engine

__all__ = ["ERROR_STATUSES", "Fill"]

log = logging.getLogger("ziggurat.http")

# RFC 9111 §4.2.4, RFC 5861: the app's answers that let a stale response be served.
ERROR_STATUSES = frozenset({500, 502, 503, 504})
_CAPABILITY = b"surrogate-capability"
_SURROGATE_CAPABILITY = _native.HTTP_SURROGATE_CAPABILITY.encode()
# What the crate's head_step answers (the first item of its tuple).
_REFRESHED, _MISMATCH, _STALE, _PASS, _STORE = range(5)


class Fill:
    """One GET request that the cache cannot answer alone (see the module docstring for
    the calls an adapter makes; ``Engine`` shows how one is obtained)."""

    def __init__(
        self,
        engine: Engine,
        method: str,
        scheme: str,
        host: str,
        target: bytes,
        headers: Hdrs,
        base: bytes,
        key: bytes,
        stored: Stored | None,
        req_cc: dict[str, str | None],
        has_auth: bool,
        now: float,
    ) -> None:
        self.engine = engine
        self.opts = engine.opts
        self.method = method
        self.scheme = scheme
        self.host = host
        self.target = target
        self.headers = headers
        self.base = base
        self.key = key
        self.lock = store.lock_key(key)
        self.refresh_lock = self.lock + b"\x00refresh"
        self.req_cc = req_cc
        self.has_auth = has_auth
        self.start = now
        # Taken before the app is called: a purge of the URL, a tag invalidation or a
        # clear that returns while the app renders keeps this fill's older page out.
        self.seen = store.snapshot(engine.cache, base)
        self.stale: Stored | None = None
        self.coalesce = False
        self._moved = False
        self.stored = False
        self.purged = False
        self.tee = False
        self._validated = False
        # Set when a stale response answered for the failed app: the requests that waited
        # on this fill are answered the same way (the ERROR marker).
        self.failed = False

    # -- answering from a stored response ------------------------------------------------

    def usable(self, s: Stored, age: float) -> bool:
        """Whether ``s`` may be served without validation to this request."""
        return _native.http_usable(store.value_of(s), age, self.req_cc)

    def reply(self, s: Stored, age: float, status: bytes) -> Reply:
        """The stored response for this request: a 304 when the client's own validators
        match a stored 200, headers only for HEAD, ``Age`` replaced."""
        cs = status.decode("ascii") if self.opts.cache_status else None
        code, hdrs, body = _native.http_reply(
            store.value_of(s), age, self.engine.hidden_list, self.headers, self.method == "HEAD", cs
        )
        return Reply(code, hdrs, s.body if body else b"")

    def gateway_timeout(self) -> Reply:
        """RFC 9111 §5.2.1.7: ``only-if-cached`` and nothing usable stored."""
        body = b"not in cache\n"
        hdrs: Hdrs = [(b"content-type", b"text/plain"), (b"content-length", b"%d" % len(body))]
        cs = rules.cache_status("fwd", fwd="miss", detail="only-if-cached")
        return Reply(504, add_status(self.opts.cache_status, hdrs, cs), body)

    def recheck(self, now: float) -> Reply | None:
        """Inside the fill's lease, before calling the app: a response another process
        stored meanwhile (the lease may have been taken after its marker lapsed)."""
        try:
            stored, _ = store.lookup(self.engine.cache, self.base, self.headers)
        except Exception:
            return None
        if stored is None:
            return None
        age = stored.age(now)
        if self.usable(stored, age) or stored.response_time >= self.start:
            self.stored = True
            cs = rules.cache_status("hit", ttl=int(stored.lifetime - age), collapsed=True)
            return self.reply(stored, age, cs)
        return None

    def after_wait(self, marker: Any, now: float) -> Reply | None:
        """A collapsed request after the fill it waited for: the stored response if it may
        be used now, else None (the request goes to the app itself)."""
        if marker is None:
            return None
        stored, key = store.lookup(self.engine.cache, self.base, self.headers)
        # The fill waited for may have stored another Vary variant: a second round waits
        # on this request's own variant.
        lock = store.lock_key(key)
        self._moved = lock != self.lock
        self.key, self.lock = key, lock
        self.refresh_lock = lock + b"\x00refresh"
        if stored is None:
            return None
        age = stored.age(now)
        # A response validated after this request arrived is as good as validating it now.
        if self.usable(stored, age) or stored.response_time >= self.start:
            return self.reply(
                stored,
                age,
                rules.cache_status("hit", ttl=int(stored.lifetime - age), collapsed=True),
            )
        if marker == ERROR:
            return self.stale_if_error(None, now)
        return None

    def retry_wait(self, marker: Any, attempt: int) -> bool:
        """Whether to wait once more after a marker that did not lead to a usable response.

        A marker can be older than this request (the response it announced was purged or
        went stale since): it is removed, and the requests that meet here coalesce again.
        The fill's loader looks at the cache before calling the app, so a second round
        never calls the app twice.
        """
        if attempt or marker is None or marker == ERROR:
            return False
        if self._moved:
            return True  # the next round waits on another key, whose marker is current
        try:
            self.engine.cache.delete(self.lock)
        except Exception:
            return False
        return True

    def stale_if_error(
        self, status: int | None, now: float, detail: str = "stale-if-error"
    ) -> Reply | None:
        """The stale response when the app failed (raised, timed out, or answered
        ``status`` 500/502/503/504) and ``stale-if-error`` (response or request) or the
        ``stale_if_error`` option allows it, unless the stored response forbids any stale
        use; else None."""
        s = self.stale or self._current()
        if s is None:
            return None
        cs = _native.http_stale_if_error(
            store.value_of(s), self.opts.native, self.req_cc, status or 0, detail, now
        )
        if cs is None:
            return None
        self.failed = True
        return self.reply(s, s.age(now), cs)

    def _current(self) -> Stored | None:
        try:
            return store.lookup(self.engine.cache, self.base, self.headers)[0]
        except Exception:
            return None

    def app_timeout(self) -> float | None:
        """How long to wait for the app's response head before ``timed_out``: the
        ``app_timeout`` option, when a stale response is stored that may be served stale
        (else None: the app is waited for, however long it takes)."""
        t = self.opts.app_timeout
        if t is None or self.stale is None or not self.stale.may_serve_stale():
            return None
        return t

    def timed_out(self, now: float) -> Reply | None:
        """The stale response to send when the app gave no response head within
        ``app_timeout`` and stale-if-error allows it (the app's call is then abandoned);
        None: keep waiting for the app."""
        return self.stale_if_error(None, now, "stale-if-error-timeout")

    # -- going to the app ----------------------------------------------------------------

    def upstream_headers(self) -> Hdrs:
        """The request headers for the app: the client's validators replaced by the
        stored response's (the client's own are answered from the result)."""
        out = [
            (k, v) for k, v in self.headers if k not in CLIENT_CONDITIONALS and k not in NOT_FOR_APP
        ]
        s = self.stale
        if s is not None:
            if s.etag is not None:
                out.append((b"if-none-match", s.etag))
            if s.last_modified is not None:
                out.append((b"if-modified-since", s.last_modified))
            self._validated = s.etag is not None or s.last_modified is not None
        if self.opts.surrogate_control:
            # The Edge Architecture note: each surrogate on the way adds its device token,
            # which the app may target with Surrogate-Control (one line, for WSGI's sake).
            seen = rules.fields(out, _CAPABILITY)
            out = [(k, v) for k, v in out if k != _CAPABILITY]
            out.append((_CAPABILITY, b", ".join([*seen, _SURROGATE_CAPABILITY])))
        return out

    def head(
        self, status: int, headers: Hdrs, request_time: float, now: float
    ) -> Reply | Hdrs | int:
        """Decides on the app's response head.

        Returns a ``Reply`` to send instead of the app's response (a freshened stored
        response after a 304, a stale one after an error); the client headers (a list) when
        the response passes uncached; or the maximum number of body bytes to buffer (an
        int) when it is to be stored, after which ``complete`` or ``too_large`` follows.
        """
        self._request_time = request_time
        try:
            return self._head(status, headers, request_time, now)
        except Exception as e:
            log.warning("ziggurat.http: response not cached: %r", e)
            return self._pass(headers, "error", status)

    def _pass(self, headers: Hdrs, reason: str, status: int) -> Hdrs:
        strip = self.engine.strip_out
        out = [(k, v) for k, v in headers if k not in strip]
        fwd = "stale" if self.stale is not None else "uri-miss"
        cs = rules.cache_status("fwd", fwd=fwd, fwd_status=status, detail=reason)
        return add_status(self.opts.cache_status, out, cs)

    def _head(
        self, status: int, headers: Hdrs, request_time: float, now: float
    ) -> Reply | Hdrs | int:
        s = self.stale
        if s is None and status in ERROR_STATUSES:
            s = self._current()
        req = storable.Request(
            self.method,
            self.headers,
            self.req_cc,
            self.has_auth,
            self.engine.auth_shared,
            self.engine.key_headers,
            request_time,
        )
        value = None if s is None else store.value_of(s)
        step = _native.http_head_step(
            self.opts.native, req, value, self._validated, status, headers, now
        )
        if step[0] == _STORE:
            self._meta = storable.Meta._make(step[1])
            self._status, self._headers = status, headers
            # A body of unknown length (a streaming response) is relayed as it comes and
            # stored at its end if it fits; waiters are released at the head.
            self.tee = status not in (204, 304) and rules.field(headers, b"content-length") is None
            return self.opts.max_body
        if step[0] == _PASS:
            return self._pass(headers, step[1], status)
        assert s is not None
        if step[0] == _REFRESHED:
            # RFC 9111 §4.3.4: a 304 to our validation updates the stored headers.
            _, fresh_value, ttl, cs = step
            fresh = self._replace(fresh_value, ttl)
            self.stale = None
            return self.reply(fresh, fresh.age(now), cs)
        if step[0] == _MISMATCH:
            self.engine.cache.delete(self.key)
        else:
            self.failed = True
        return self.reply(s, s.age(now), step[1])

    def tee_headers(self) -> Hdrs:
        """The client headers of a streaming response that is stored if it ends in time."""
        drop = self.engine.strip_out | rules.connection_listed(self._headers)
        out = [(k, v) for k, v in self._headers if k not in drop and k != b"age"]
        fwd = "stale" if self.stale is not None else "uri-miss"
        cs = rules.cache_status("fwd", fwd=fwd, fwd_status=self._status, detail="streamed")
        return add_status(self.opts.cache_status, out, cs)

    def store_streamed(self, body: bytes, now: float) -> None:
        """Stores a streamed response whose body ended within ``max_body``."""
        self._save(body, now)

    def complete(self, body: bytes, now: float) -> Reply:
        """Stores the buffered response and returns what the client gets."""
        status, headers = self._status, self._headers
        s, detail = self._save(body, now)
        fwd = "stale" if self.stale is not None else "uri-miss"
        cs = rules.cache_status(
            "fwd",
            fwd=fwd,
            fwd_status=status,
            stored=detail == "stored",
            detail=detail if detail != "stored" else False,
        )
        if status == 200 and any(k in CLIENT_CONDITIONALS for k, _ in self.headers):
            # The client's own validators, answered from what was just stored.
            r = self.reply(s, s.age(now), cs)
            if r.status == 304:
                return r
        # What the cache serves, already on the miss: hop-by-hop lines named by Connection
        # (RFC 9110 §7.6.1), the tag header and the hidden targeted fields are not sent.
        drop = self.engine.strip_out | rules.connection_listed(headers)
        out = [(k, v) for k, v in headers if k not in drop and k not in (b"content-length", b"age")]
        out.append((b"age", str(int(s.initial_age)).encode()))
        if status not in (204, 304):
            out.append((b"content-length", str(len(body)).encode()))
        return Reply(status, add_status(self.opts.cache_status, out, cs), body)

    def _save(self, body: bytes, now: float) -> tuple[Stored, str]:
        m = self._meta
        s = Stored(
            self._status,
            m.headers,
            body,
            self._request_time,
            now,
            m.initial_age,
            m.lifetime,
            m.swr,
            m.sie,
            m.flags,
            m.etag,
            m.last_modified,
            m.vary,
            m.vary_values,
            m.tags,
        )
        ttl = m.ttl
        detail = "stored"
        try:
            s, self.stored = store.save(self.engine.cache, self.base, s, ttl, now, self.seen)
            if not self.stored:
                # A purge returned while the app rendered: this page may predate it.
                # The requests waiting on this fill coalesce again behind a new one.
                detail = "purged"
                self.purged = True
        except Exception as e:
            log.warning("ziggurat.http: storing %r failed: %r", self.base, e)
            detail = "store-failed"
        return s, detail

    def too_large(self, headers: Hdrs, status: int) -> Hdrs:
        """The client headers when the body outgrew ``max_body`` while being buffered."""
        return self._pass(headers, "too-large", status)

    def _replace(self, value: bytes, ttl: float) -> Stored:
        """The refreshed response ``value``, stored in place under this fill's key."""
        fresh = store.decode(value)
        assert type(fresh) is Stored
        try:
            self.stored = store.replace(
                self.engine.cache, self.base, self.key, value, ttl, fresh.tags, self.seen
            )
        except Exception as e:
            log.warning("ziggurat.http: freshening %r failed: %r", self.key, e)
        return fresh

    def head_response(self, headers: Hdrs, now: float) -> str:
        """RFC 9111 §4.3.5: a 200 to this forwarded HEAD freshens the stored GET response
        when it describes the same representation (same ``ETag``, ``Last-Modified`` and, if
        sent, ``Content-Length``), else removes it. The HEAD's body is never stored.
        Returns the Cache-Status detail."""
        s, self.stale = self.stale, None
        if s is None:
            return "head"
        cache = self.engine.cache
        current, _ = store.lookup(cache, self.base, self.headers)
        if current != s:
            # Purged, or replaced by another request meanwhile: this HEAD describes
            # neither for sure, and a purged response must not come back.
            return "head"
        r = _native.http_head_update(
            self.opts.native,
            store.value_of(s),
            headers,
            self.has_auth,
            list(self.engine.auth_shared),
            self.start,
            now,
        )
        if r is None:
            return "head"  # an answer for this client alone does not speak for the others
        if r is False:
            cache.delete(self.key)
            return "head-invalidated"
        self._replace(*r)
        return "head-freshened"

    def marker(self) -> str | None:
        """What the waiters of this fill are told: read the stored response, or go to the
        app themselves (the URL is then not waited on for ``hit_for_miss`` seconds)."""
        if self.stored or self.purged:
            return STORED
        if self.failed:
            return ERROR
        return TEE if self.tee else None
