"""The request flow of the HTTP cache, without I/O: both adapters drive this one engine.

An adapter turns the request into ``(method, scheme, host, target, headers, client)`` and
asks ``Engine.classify`` what to do. The answer is a ``Hit`` (a fresh stored response), a
``Reply`` to send at once (a 304, a stale response, an answered ``PURGE``), a ``Pass``
(forward to the app, only strip the tag header and the targeted fields meant for this
cache), or a ``Fill`` (``fill.py``: forward to the app with validators, then give the
response head to ``Fill.head`` and, if it asks for the body, the body to
``Fill.complete``; ``storable.py`` decides what is stored). Coalescing happens in the
adapters, around ``Fill``: they hold the fill's lease with ``Cache.fetch``.

Most requests are plain hits, so the adapters first ask ``Engine.fresh``: it answers a
request that carries none of the headers in ``Engine.heavy_headers`` with its ``Hit``, or
None, and ``classify`` then applies the full rules. Both give the same answer.
"""

from __future__ import annotations

import logging
from collections.abc import Callable
from typing import Any

from ziggurat import _native
from ziggurat._native import MAX_TAGS
from ziggurat.http import rules, store
from ziggurat.http.fill import Fill
from ziggurat.http.hit import Hit
from ziggurat.http.options import Options
from ziggurat.http.outcome import (
    ERROR,
    MARKER_TTL,
    PASSED,
    PURGE_TOKEN,
    STORED,
    TEE,
    Hdrs,
    Pass,
    Reply,
    for_app,
    now,
)
from ziggurat.http.store import Stored

__all__ = [
    "ERROR",
    "MARKER_TTL",
    "PURGE_TOKEN",
    "STORED",
    "TEE",
    "Engine",
    "Fill",
    "Hdrs",
    "Hit",
    "Pass",
    "Reply",
    "for_app",
    "now",
]

log = logging.getLogger("ziggurat.http")

_PASS_CONDITIONALS = frozenset(_native.HTTP_PASS_CONDITIONALS)
_overrides_method = _native.http_overrides_method
_UNSEEN: Any = object()
# The per-process table of Hits is emptied past either bound: it keeps stored responses
# alive after the cache dropped them.
_HITS_MAX = 4096
_HITS_MAX_BYTES = 32 << 20
# What the crate's classification and lookup answer (the first item of their tuples).
_LOOKUP, _PURGE, _PASS = range(3)
_SERVE, _TIMEOUT, _FORWARD, _FILL = range(4)
# What a purge asks, and the answer to a failed one (the crate's numbers).
_PURGE_TAGS, _PURGE_URL, _PURGE_FAILED = 2, 3, 4


class Engine:
    """The caching rules bound to one cache and one set of options. ``emit_headers`` and
    ``emit_status`` put a ``Hit`` in the adapter's form (see ``Hit``; default: ASGI's).

    >>> from ziggurat import Cache
    >>> c = Cache("doc-engine", size="8MiB")
    >>> e = Engine(c, Options())
    >>> type(e.classify("GET", "http", b"localhost", b"/", [], None, now())).__name__
    'Fill'
    >>> e.classify("GET", "http", b"evil.test", b"/", [], None, now()).status
    b'ziggurat; fwd=bypass; detail=host'
    >>> c.unlink()
    """

    def __init__(
        self,
        cache: Any,
        opts: Options,
        *,
        emit_headers: Callable[[Hdrs], Any] | None = None,
        emit_status: Callable[[int], Any] | None = None,
    ) -> None:
        self.cache = cache
        self.opts = opts
        self._cookies = tuple(c.encode("latin-1") + b"=" for c in opts.bypass_cookies)
        self._classifier = opts.native
        # Removed from every response that leaves: the tag header and the targeted fields
        # meant for this cache alone (``hidden``, stored for a later 304 to update).
        self.hidden = opts.hidden_fields
        self.strip_out = frozenset({opts.tag_header}) | self.hidden
        self.strip_list = sorted(self.strip_out)
        self.hidden_list = sorted(self.hidden)
        self._hosts: dict[bytes, str | None] = {}
        # The request headers that can change the answer to a GET of a fresh stored
        # response (the crate's list for these options).
        heavy = set(opts.native.blockers())
        self.heavy_headers = frozenset(heavy)
        # Their WSGI environ keys (Content-Length under both names a server may use).
        self.heavy_environ = frozenset(
            {"HTTP_" + n.decode("latin-1").upper().replace("-", "_") for n in heavy}
            | {"CONTENT_LENGTH"}
        )
        # Raw Host value -> the key prefix of its URLs (b"" for a host not allowed), per
        # scheme, for ``fresh``.
        self._fresh_http: dict[bytes | str, bytes] = {}
        self._fresh_https: dict[bytes | str, bytes] = {}
        self._emit_headers, self._emit_status = emit_headers, emit_status
        # id(stored) -> its Hit (the Hit holds the stored object, so the id stays its own)
        self._hits: dict[int, Hit] = {}
        self._hits_bytes = 0

    # -- requests -------------------------------------------------------------------------

    def classify(
        self,
        method: str,
        scheme: str,
        host_raw: bytes | None,
        target: bytes,
        headers: Hdrs,
        client: str | None,
        now: float,
    ) -> Hit | Reply | Pass | Fill:
        """What to do with a request (never raises for any input). For a ``Hit``, the body
        is sent only to GET."""
        try:
            return self._classify(method, scheme, host_raw, target, headers, client, now)
        except Exception as e:  # a broken segment or a bug: the app answers, uncached
            log.warning("ziggurat.http: request not cached: %r", e)
            if method == "PURGE" and self.opts.purge_token is not None:
                # The cache's own method, answered by the cache alone.
                return self._purge_answer(_PURGE_FAILED, False)
            return Pass(rules.cache_status("fwd", fwd="bypass", detail="error"))

    def _classify(
        self,
        method: str,
        scheme: str,
        host_raw: bytes | None,
        target: bytes,
        headers: Hdrs,
        client: str | None,
        now: float,
    ) -> Hit | Reply | Pass | Fill:
        a = self._classifier.classify(method, scheme, host_raw, target, headers)
        if a[0] == _PASS:
            return Pass(a[1], a[2])
        if a[0] == _PURGE:
            return self._purge(scheme, host_raw, target, headers, client)
        _, _, base, req_cc, has_auth, conditional = a
        v = self.cache.get(base)
        h = self._hits.get(id(v))
        stored: Stored | None
        if h is not None and not h.stored.vary:
            stored, key = h.stored, base
        else:
            stored, key = store.lookup(self.cache, base, headers, v, self._entry)
        if stored is not None and not (req_cc or conditional):
            # The common hit: nothing in the request asks for more checks (in the response,
            # no-cache does; the other flags only matter once the response is stale).
            hit = self._hit(stored, now)
            if hit is not None:
                return hit
        fill = Fill(self, method, headers, base, key, req_cc, has_auth, now)
        step = fill.lookup(stored, now)
        if step[0] == _SERVE:
            assert stored is not None
            r = fill.reply(stored, stored.age(now), step[1])
            if step[2]:
                r.refresh = fill
            return r
        if step[0] == _TIMEOUT:
            return fill.gateway_timeout()
        if step[0] == _FORWARD:
            return Pass(step[1], head=fill if step[2] else None)
        return fill

    def _entry(self, v: Any) -> Stored | store.Variants | None:
        """The entry of value ``v``, decoded once per value and process (a stored response
        is kept with its ``Hit``)."""
        h = self._hits.get(id(v))
        if h is not None:
            return h.stored
        e = store.decode(v)
        if type(e) is Stored:
            self._new_hit(e)
        return e

    def _host(self, raw: bytes | None) -> str | None:
        """The normalised host if it is allowed, else None (remembered per raw value)."""
        host = rules.normalise_host(raw)
        if host is not None and not self.opts.host_allowed(host):
            host = None
        if len(self._hosts) > 1024:
            self._hosts.clear()
        self._hosts[raw or b""] = host
        return host

    def fresh(
        self, scheme: str, host_raw: bytes | str, target: bytes, headers: Hdrs | None, now: float
    ) -> Hit | None:
        """The ``Hit`` for a GET or HEAD request without any of ``heavy_headers``, or None
        when it is not a plain hit (``classify`` then decides). ``host_raw`` is the Host
        header's value (bytes, or a str from a WSGI environ); ``headers``, the request's
        headers, selects a ``Vary`` variant (None: only responses without ``Vary``).

        >>> from ziggurat import Cache
        >>> c = Cache("doc-engine-fresh", size="8MiB")
        >>> e = Engine(c, Options())
        >>> print(e.fresh("http", b"localhost", b"/", [], now()))
        None
        >>> c.unlink()
        """
        try:
            if scheme == "http":
                prefixes = self._fresh_http
            elif scheme == "https":
                prefixes = self._fresh_https
            else:
                return None
            prefix = prefixes.get(host_raw)
            if prefix is None:
                prefix = self._fresh_prefix(scheme, host_raw, prefixes)
            # 47 is "/": only the origin form is keyed (see classify). 63 is "?": an int is
            # found by memchr, and only a query can override the method.
            if not prefix or target[0] != 47 or (63 in target and _overrides_method(target)):
                return None
            # A key longer than MAX_URL_KEY is never stored as it is (store.base_key digests
            # it): the lookup misses, or the cache refuses it, and classify takes over.
            base = prefix + target
            v = self.cache.get(base)
            # The table holds each Hit's value bytes, so an id found there is that
            # value's: a response already served here skips the checks below.
            h = self._hits.get(id(v))
            if h is None:
                if v is None:
                    return None
                e = self._entry(v)
                if type(e) is not Stored:
                    if e is None or headers is None:
                        return None
                    e, _ = store.lookup(self.cache, base, headers, v, self._entry)
                    if e is None:
                        return None
                elif e.vary:
                    return None
                h = self._hits.get(id(e.value)) or self._new_hit(e)
            if h.since <= now < h.until or h.tick(now):
                return h
            return None
        except Exception:  # classify meets the same fault, and reports it
            return None

    def _fresh_prefix(
        self, scheme: str, host_raw: bytes | str, prefixes: dict[bytes | str, bytes]
    ) -> bytes:
        raw = host_raw.encode("latin-1", "replace") if isinstance(host_raw, str) else host_raw
        host = self._hosts.get(raw, _UNSEEN)
        if host is _UNSEEN:
            host = self._host(raw)
        prefix = b"" if host is None else store.base_key(scheme, host, b"")
        if len(prefixes) > 1024:
            prefixes.clear()
        prefixes[host_raw] = prefix
        return prefix

    def _hit(self, s: Stored, now: float) -> Hit | None:
        """``s`` as a ``Hit`` ready for ``now``, or None when it is not fresh then."""
        h = self._hits.get(id(s.value)) or self._new_hit(s)
        if h.since <= now < h.until or h.tick(now):
            return h
        return None

    def _new_hit(self, s: Stored) -> Hit:
        h = Hit(
            s,
            cache_status=self.opts.cache_status,
            hidden=self.hidden,
            emit_headers=self._emit_headers,
            emit_status=self._emit_status,
        )
        if len(self._hits) >= _HITS_MAX or self._hits_bytes > _HITS_MAX_BYTES:
            self._hits.clear()
            self._hits_bytes = 0
        # Keyed by the value bytes the Hit holds (so the id stays theirs); a response built
        # in this process without them is not kept.
        if s.value:
            self._hits[id(s.value)] = h
        self._hits_bytes += len(s.body)
        return h

    def _purge_answer(self, what: int, found: bool) -> Reply:
        status, headers, body = _native.http_purge_answer(what, found, self.opts.cache_status)
        return Reply(status, headers, body)

    def _purge(
        self, scheme: str, host_raw: bytes | None, target: bytes, headers: Hdrs, client: str | None
    ) -> Reply:
        o = self.opts
        ask = _native.http_purge_request(
            (o.purge_token or "").encode(),
            o.tag_header,
            client in o.purge_clients,
            scheme,
            host_raw,
            target,
            headers,
        )
        # A cache that fails here is answered by `classify` (503): a purge is the cache's
        # own request, never the app's (nor is its token).
        if ask[0] == _PURGE_TAGS:
            tags = ask[1]
            # invalidate_tags takes at most MAX_TAGS tags a call.
            for i in range(0, len(tags), MAX_TAGS):
                self.cache.invalidate_tags(*tags[i : i + MAX_TAGS])
            return self._purge_answer(_PURGE_TAGS, False)
        if ask[0] == _PURGE_URL:
            return self._purge_answer(_PURGE_URL, store.purge_key(self.cache, ask[1]))
        return self._purge_answer(ask[0], False)

    # -- responses to requests that pass -------------------------------------------------

    def passed_head(
        self,
        p: Pass,
        status: int,
        headers: Hdrs,
        scheme: str,
        host_raw: bytes | None,
        target: bytes,
    ) -> Hdrs:
        """The headers to send for a forwarded response; unsafe methods invalidate here,
        before the client sees the response."""
        if p.unsafe and 200 <= status < 400:
            try:
                self.invalidate(scheme, host_raw, target, headers)
            except Exception as e:
                log.warning("ziggurat.http: invalidation failed: %r", e)
        if p.head is not None and status == 200:
            try:
                detail = p.head.head_response(headers, now())
            except Exception as e:
                log.warning("ziggurat.http: HEAD response not applied: %r", e)
                detail = "head"
            cs = rules.cache_status("fwd", fwd="stale", fwd_status=status, detail=detail)
            return self.client_headers(headers, PASSED, cs)
        return self.client_headers(headers, PASSED, p.status)

    def client_headers(
        self,
        headers: Hdrs,
        how: int,
        cs: bytes,
        status: int = 200,
        initial_age: float = 0.0,
        body_len: int = 0,
    ) -> Hdrs:
        """The app's head ``headers`` as the client gets it (``how``: ``PASSED``,
        ``STREAMED`` or ``JUST_STORED``; see the crate's ``client_headers``), with the
        Cache-Status member ``cs`` when the option is on."""
        return _native.http_client_headers(
            headers,
            self.strip_list,
            how,
            cs if self.opts.cache_status else None,
            status,
            initial_age,
            body_len,
        )

    def invalidate(self, scheme: str, host_raw: bytes | None, target: bytes, headers: Hdrs) -> None:
        """RFC 9111 §4.4: the target URI, and same-origin ``Location``/``Content-Location``."""
        host = rules.normalise_host(host_raw)
        if host is None:
            return
        for key in _native.http_invalidated_keys(scheme, host, target, headers):
            store.purge_key(self.cache, key)
