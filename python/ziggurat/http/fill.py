"""``Fill``: one request the cache cannot answer alone, from the app's response head to
what is stored of it. What the fill knows between events, and every decision, is the
``ziggurat-http`` crate's ``Exchange`` (``_native.HttpExchange``: each event in, what to
do out); this class does the cache's I/O around it. The adapters call the app and hand
the results in (see ``engine`` for the order of the calls).
"""

from __future__ import annotations

import logging
from typing import TYPE_CHECKING, Any

from ziggurat import _native
from ziggurat.http import storable, store
from ziggurat.http.outcome import (
    ERROR,
    JUST_STORED,
    NOT_FOR_APP,
    PASSED,
    STORED,
    STREAMED,
    TEE,
    Hdrs,
    Reply,
)
from ziggurat.http.store import Stored

if TYPE_CHECKING:
    from ziggurat.http.engine import Engine

__all__ = ["ERROR_STATUSES", "Fill"]

log = logging.getLogger("ziggurat.http")

# RFC 9111 §4.2.4, RFC 5861: the app's answers that let a stale response be served.
ERROR_STATUSES = frozenset(_native.HTTP_ERROR_STATUSES)
_SURROGATE_CAPABILITY = _native.HTTP_SURROGATE_CAPABILITY.encode()
# What the exchange's head answers (the first item of its tuple).
_REFRESHED, _MISMATCH, _STALE, _PASS, _STORE = range(5)
# The exchange's markers, by number.
_MARKERS = (STORED, ERROR, TEE, None)


class Fill:
    """One GET request that the cache cannot answer alone (see the module docstring for
    the calls an adapter makes; ``Engine`` shows how one is obtained)."""

    def __init__(
        self,
        engine: Engine,
        method: str,
        headers: Hdrs,
        base: bytes,
        key: bytes,
        req_cc: dict[str, str | None],
        has_auth: bool,
        now: float,
    ) -> None:
        self.engine = engine
        self.opts = engine.opts
        self.headers = headers
        self.base = base
        self.x = _native.HttpExchange(method, headers, req_cc, has_auth, base, key, now)
        self.lock = store.lock_key(key)
        self.refresh_lock = _native.http_refresh_lock_key(key)
        # Taken before the app is called: a purge of the URL, a tag invalidation or a
        # clear that returns while the app renders keeps this fill's older page out.
        self.seen = store.snapshot(engine.cache, base)
        # The stored response the exchange holds, for its body.
        self.stale: Stored | None = None
        self._moved = False

    @property
    def key(self) -> bytes:
        """The key the response lives under (a ``Vary`` variant's, or the URL's)."""
        return self.x.key

    @property
    def coalesce(self) -> bool:
        """Whether other requests for the key may wait on this fill."""
        return self.x.coalesce

    @property
    def stored(self) -> bool:
        """Whether the response is stored (by this fill, or found stored by another)."""
        return self.x.stored

    @property
    def tee(self) -> bool:
        """Whether the response is relayed as it comes, and stored at its end if it fits."""
        return self.x.tee

    def lookup(self, stored: Stored | None, now: float) -> tuple[Any, ...]:
        """The crate's lookup step for the stored response found (see ``Engine``); the
        response is held when the step needs it later."""
        step = self.x.lookup(None if stored is None else store.value_of(stored), now)
        if self.x.holds_stale:
            self.stale = stored
        return step

    # -- answering from a stored response ------------------------------------------------

    def reply(self, s: Stored, age: float, status: bytes) -> Reply:
        """The stored response for this request: a 304 when the client's own validators
        match a stored 200, headers only for HEAD, ``Age`` replaced."""
        cs = status.decode("ascii") if self.opts.cache_status else None
        code, hdrs, body = self.x.reply(store.value_of(s), age, self.engine.hidden_list, cs)
        return Reply(code, hdrs, s.body if body else b"")

    def gateway_timeout(self) -> Reply:
        """RFC 9111 §5.2.1.7: ``only-if-cached`` and nothing usable stored."""
        status, headers, body = _native.http_gateway_timeout(self.opts.cache_status)
        return Reply(status, headers, body)

    def recheck(self, now: float) -> Reply | None:
        """Inside the fill's lease, before calling the app: a response another process
        stored meanwhile (the lease may have been taken after its marker lapsed)."""
        try:
            stored, _ = store.lookup(self.engine.cache, self.base, self.headers)
        except Exception:
            return None
        if stored is None:
            return None
        cs = self.x.recheck(store.value_of(stored), now)
        return None if cs is None else self.reply(stored, stored.age(now), cs)

    def after_wait(self, marker: Any, now: float) -> Reply | None:
        """A collapsed request after the fill it waited for: the stored response if it may
        be used now, else None (the request goes to the app itself)."""
        if marker is None:
            return None
        stored, key = store.lookup(self.engine.cache, self.base, self.headers)
        # The fill waited for may have stored another Vary variant: a second round waits
        # on this request's own variant.
        self._moved = self.x.rekey(key)
        self.lock = store.lock_key(key)
        self.refresh_lock = _native.http_refresh_lock_key(key)
        if stored is None:
            return None
        cs = self.x.collapsed(store.value_of(stored), now)
        if cs is not None:
            return self.reply(stored, stored.age(now), cs)
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
        value = store.value_of(s)
        cs = self.x.stale_if_error(self.opts.native, value, status or 0, detail, now)
        return None if cs is None else self.reply(s, s.age(now), cs)

    def _current(self) -> Stored | None:
        try:
            return store.lookup(self.engine.cache, self.base, self.headers)[0]
        except Exception:
            return None

    def app_timeout(self) -> float | None:
        """How long to wait for the app's response head before ``timed_out``: the
        ``app_timeout`` option, when a stale response is stored that may be served stale
        (else None: the app is waited for, however long it takes)."""
        return self.x.app_timeout(self.opts.app_timeout)

    def timed_out(self, now: float) -> Reply | None:
        """The stale response to send when the app gave no response head within
        ``app_timeout`` and stale-if-error allows it (the app's call is then abandoned);
        None: keep waiting for the app."""
        return self.stale_if_error(None, now, "stale-if-error-timeout")

    # -- going to the app ----------------------------------------------------------------

    def upstream_headers(self) -> Hdrs:
        """The request headers for the app: the client's validators replaced by the
        stored response's (the client's own are answered from the result)."""
        # The Edge Architecture note: each surrogate on the way adds its device token,
        # which the app may target with Surrogate-Control.
        token = _SURROGATE_CAPABILITY if self.opts.surrogate_control else None
        return self.x.upstream_headers(list(NOT_FOR_APP), token)

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
        return self.engine.client_headers(headers, PASSED, self.x.pass_status(status, reason))

    def _head(
        self, status: int, headers: Hdrs, request_time: float, now: float
    ) -> Reply | Hdrs | int:
        s = self.stale
        current = None
        if s is None and self.x.needs_current(status):
            s = self._current()
            current = None if s is None else store.value_of(s)
        step = self.x.head(self.opts.native, current, status, headers, request_time, now)
        if step[0] == _STORE:
            self._meta = storable.Meta._make(step[1])
            self._status, self._headers = status, headers
            return self.opts.max_body
        if step[0] == _PASS:
            return self._pass(headers, step[1], status)
        assert s is not None
        if step[0] == _REFRESHED:
            # RFC 9111 §4.3.4: a 304 to our validation updates the stored headers.
            _, fresh_value, ttl, cs = step
            fresh = self._replace(fresh_value, ttl)
            self.x.release()
            self.stale = None
            return self.reply(fresh, fresh.age(now), cs)
        if step[0] == _MISMATCH:
            self.engine.cache.delete(self.key)
        return self.reply(s, s.age(now), step[1])

    def tee_headers(self) -> Hdrs:
        """The client headers of a streaming response that is stored if it ends in time."""
        cs = self.x.pass_status(self._status, "streamed")
        return self.engine.client_headers(self._headers, STREAMED, cs)

    def store_streamed(self, body: bytes, now: float) -> None:
        """Stores a streamed response whose body ended within ``max_body``."""
        self._save(body, now)

    def complete(self, body: bytes, now: float) -> Reply:
        """Stores the buffered response and returns what the client gets."""
        status, headers = self._status, self._headers
        s, cs = self._save(body, now)
        if self.x.answers_validators(status):
            # The client's own validators, answered from what was just stored.
            r = self.reply(s, s.age(now), cs)
            if r.status == 304:
                return r
        # What the cache serves, already on the miss (the crate's rule: the lines
        # Connection names, the tag header and the hidden targeted fields stay here).
        out = self.engine.client_headers(headers, JUST_STORED, cs, status, s.initial_age, len(body))
        return Reply(status, out, body)

    def _save(self, body: bytes, now: float) -> tuple[Stored, bytes]:
        """Stores the response; the Cache-Status member of what that came to."""
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
        outcome = "stored"
        try:
            s, stored = store.save(self.engine.cache, self.base, s, m.ttl, now, self.seen)
            if not stored:
                # A purge returned while the app rendered: this page may predate it.
                outcome = "purged"
        except Exception as e:
            log.warning("ziggurat.http: storing %r failed: %r", self.base, e)
            outcome = "store-failed"
        return s, self.x.saved(self._status, outcome)

    def too_large(self, headers: Hdrs, status: int) -> Hdrs:
        """The client headers when the body outgrew ``max_body`` while being buffered."""
        return self._pass(headers, "too-large", status)

    def _replace(self, value: bytes, ttl: float) -> Stored:
        """The refreshed response ``value``, stored in place under this fill's key."""
        fresh = store.decode(value)
        assert type(fresh) is Stored
        try:
            stored = store.replace(
                self.engine.cache, self.base, self.key, value, ttl, fresh.tags, self.seen
            )
            if stored:
                self.x.saved(fresh.status, "stored")
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
        r = self.x.head_update(self.opts.native, headers, now)
        self.x.release()
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
        return _MARKERS[self.x.marker()]
