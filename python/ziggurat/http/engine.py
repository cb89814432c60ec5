"""The request flow of the HTTP cache, without I/O: both adapters drive this one engine.

An adapter turns the request into ``(method, scheme, host, target, headers, client)`` and
asks ``Engine.classify`` what to do. The answer is a ``Hit`` (a fresh stored response), a
``Reply`` to send at once (a 304, a stale response, an answered ``PURGE``), a ``Pass``
(forward to the app, only strip the tag header), or a ``Fill`` (forward to the app with
validators, then give the response head to ``Fill.head`` and, if it asks for the body,
the body to ``Fill.complete``). Coalescing happens in the adapters, around ``Fill``: they
hold the fill's lease with ``Cache.fetch``.

Most requests are plain hits, so the adapters first ask ``Engine.fresh``: it answers a
request that carries none of the headers in ``Engine.heavy_headers`` with its ``Hit``, or
None, and ``classify`` then applies the full rules. Both give the same answer.
"""

from __future__ import annotations

import hmac
import logging
import time
from collections.abc import Callable, Iterable
from dataclasses import dataclass
from typing import Any
from urllib.parse import urlsplit

from ziggurat._native import MAX_TAGS
from ziggurat.http import rules, store
from ziggurat.http.hit import Hit
from ziggurat.http.options import Options
from ziggurat.http.store import Stored

__all__ = ["PURGE_TOKEN", "Engine", "Fill", "Hit", "Pass", "Reply", "for_app"]

log = logging.getLogger("ziggurat.http")

Hdrs = list[tuple[bytes, bytes]]

SAFE_UNCACHED = frozenset({"OPTIONS", "TRACE", "CONNECT"})
ERROR_STATUSES = frozenset({500, 502, 503, 504})
# Headers a 304 may carry that describe the selected representation (RFC 9110 §15.4.5).
_NOT_MODIFIED_KEEP = frozenset(
    {b"cache-control", b"content-location", b"date", b"etag", b"expires", b"vary", b"last-modified"}
)
_CLIENT_CONDITIONALS = frozenset({b"if-none-match", b"if-modified-since"})
# The header that authorises a PURGE. It is the cache's secret: never passed to the app,
# under either spelling (a WSGI bridge maps "purge_token" to the same environ key).
PURGE_TOKEN = b"purge-token"
_NOT_FOR_APP = (PURGE_TOKEN, PURGE_TOKEN.replace(b"-", b"_"))
_PASS_CONDITIONALS = frozenset({b"if-match", b"if-unmodified-since", b"if-range", b"range"})
_MAX_STORED_HEADERS = 32 * 1024
_MAX_TTL = 365 * 86400.0
# Waiters read the fill's result right after it lands: the marker only needs to outlive that.
MARKER_TTL = 0.5
STORED, ERROR, TEE = "S", "E", "T"
_UNSEEN: Any = object()
# The clock of stored times: the wall clock, as Date and Expires are wall-clock times. The
# C function itself, not a wrapper: the hit path reads it on every request.
now: Callable[[], float] = time.time
# The per-process table of Hits is emptied past either bound: it keeps stored responses
# alive after the cache dropped them.
_HITS_MAX = 4096
_HITS_MAX_BYTES = 32 << 20
_BYPASS, _PASS_COND, _LENGTH, _CHUNKED, _AUTH, _COND, _COOKIE, _CC, _PRAGMA = range(9)


@dataclass(slots=True)
class Reply:
    """A complete response the middleware sends itself.

    >>> Reply(504, [(b"content-type", b"text/plain")], b"not in cache").status
    504
    """

    status: int
    headers: Hdrs
    body: bytes
    # Set when a stale response is served under stale-while-revalidate: the fill that
    # refreshes it in the background.
    refresh: Fill | None = None


@dataclass(slots=True)
class Pass:
    """Forward to the app untouched; ``status`` is the Cache-Status member to add.

    >>> Pass(b"ziggurat; fwd=method", unsafe=True).unsafe
    True
    """

    status: bytes
    unsafe: bool = False
    # A HEAD forwarded while a GET response is stored for it (stale, or the request asked
    # for validation): a 200 to it updates or removes that response (RFC 9111 §4.3.5).
    head: Fill | None = None


def for_app(headers: Iterable[tuple[bytes, bytes]]) -> Hdrs | None:
    """The request headers without the cache's own (``Purge-Token``), or None when there
    are none to remove (the list can go to the app as it is).

    >>> for_app([(b"host", b"h"), (b"purge-token", b"secret")])
    [(b'host', b'h')]
    >>> print(for_app([(b"host", b"h")]))
    None
    """
    # A tuple: its names are compared, not hashed, so a scope whose names the full rules
    # could not read (not bytes) still reaches the app.
    names = _NOT_FOR_APP
    for k, _ in headers:
        if k in names:
            return [(k, v) for k, v in headers if k not in names]
    return None


def _status(opts: Options, headers: Hdrs, value: bytes) -> Hdrs:
    if opts.cache_status:
        headers.append((b"cache-status", value))
    return headers


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
        self._bypass = opts.bypass_headers
        self._cookies = tuple(c.encode("latin-1") + b"=" for c in opts.bypass_cookies)
        self._key_headers = tuple(sorted(opts.key_headers))
        # RFC 9111 §3.5: the response directives that let a shared cache store a response
        # to a request with Authorization. must-revalidate only by choice: many APIs send
        # "max-age=N, must-revalidate" on answers meant for one user.
        self._auth_shared = frozenset(
            {"public", "s-maxage"}
            | ({"must-revalidate"} if opts.store_auth_must_revalidate else set())
        )
        self._hosts: dict[bytes, str | None] = {}
        # host -> the key prefix of its URLs, per scheme
        self._http: dict[str, bytes] = {}
        self._https: dict[str, bytes] = {}
        # Request header name -> what it means for the lookup (one dict probe per header).
        self._special: dict[bytes, int] = {
            b"content-length": _LENGTH,
            b"transfer-encoding": _CHUNKED,
            b"authorization": _AUTH,
            b"cookie": _COOKIE,
            b"cache-control": _CC,
            b"pragma": _PRAGMA,
            **dict.fromkeys(_CLIENT_CONDITIONALS, _COND),
            **dict.fromkeys(_PASS_CONDITIONALS, _PASS_COND),
            **dict.fromkeys(opts.bypass_headers, _BYPASS),
        }
        # The request headers that can change the answer to a GET of a fresh stored
        # response (Authorization cannot: it only matters to what is stored).
        heavy = {b"content-length", b"transfer-encoding", *_CLIENT_CONDITIONALS}
        heavy |= _PASS_CONDITIONALS | opts.bypass_headers
        if self._cookies:
            heavy.add(b"cookie")
        if opts.request_directives:
            heavy |= {b"cache-control", b"pragma"}
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
                cs = rules.cache_status("fwd", fwd="method", detail="purge")
                text = [(b"content-type", b"text/plain")]
                return Reply(503, _status(self.opts, text, cs), b"purge failed\n")
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
        o = self.opts
        if method not in ("GET", "HEAD"):
            if method == "PURGE" and o.purge_token is not None:
                return self._purge(scheme, host_raw, target, headers, client)
            if method in SAFE_UNCACHED:
                return Pass(rules.cache_status("fwd", fwd="method"))
            return Pass(rules.cache_status("fwd", fwd="method", detail="invalidates"), True)
        if target[:1] != b"/":
            # The origin form only: "*" and absolute or authority forms name no path of
            # this host (and a key must not let ":8443/x" on one host meet "/x" on another).
            return Pass(rules.cache_status("fwd", fwd="bypass", detail="target"))
        host = self._hosts.get(host_raw or b"", _UNSEEN)
        if host is _UNSEEN:
            host = self._host(host_raw)
        if host is None:
            return Pass(rules.cache_status("fwd", fwd="bypass", detail="host"))
        if scheme == "http":
            prefixes = self._http
        elif scheme == "https":
            prefixes = self._https
        else:
            return Pass(rules.cache_status("fwd", fwd="bypass", detail="scheme"))
        prefix = prefixes.get(host)
        if prefix is None:
            prefix = store.base_key(scheme, host, b"")
            if len(prefixes) > 1024:
                prefixes.clear()
            prefixes[host] = prefix
        req_cc: dict[str, str | None] = {}
        has_auth = False
        conditional = False
        special = self._special
        for k, v in headers:
            what = special.get(k)
            if what is None:
                # 95 is "_": bridges to WSGI (and many frameworks) read "X_Forwarded_Host"
                # as X-Forwarded-Host, which neither the bypass list nor a Vary sees here.
                if 95 in k:
                    return Pass(rules.cache_status("fwd", fwd="bypass", detail="underscore"))
                continue
            if what == _BYPASS:
                return Pass(rules.cache_status("fwd", fwd="bypass", detail="header"))
            if what == _PASS_COND:
                return Pass(rules.cache_status("fwd", fwd="bypass", detail=k.decode()))
            if what == _LENGTH:
                if v.strip() not in (b"0", b""):
                    return Pass(rules.cache_status("fwd", fwd="bypass", detail="body"))
            elif what == _CHUNKED:
                return Pass(rules.cache_status("fwd", fwd="bypass", detail="body"))
            elif what == _AUTH:
                has_auth = True
            elif what == _COND:
                conditional = True
            elif what == _COOKIE:
                if self._cookies:
                    for c in v.split(b";"):
                        if c.strip().startswith(self._cookies):
                            return Pass(rules.cache_status("fwd", fwd="bypass", detail="cookie"))
            elif what == _CC:
                if o.request_directives:
                    req_cc = rules.parse_cache_control(rules.fields(headers, b"cache-control"))
            elif (
                o.request_directives
                and b"no-cache" in v.lower()
                and not rules.field(headers, b"cache-control")
            ):
                # Pragma: RFC 9111 §5.4: "no-cache" counts only without Cache-Control.
                req_cc.setdefault("no-cache", None)
        q = target.find(b"?")
        if q >= 0 and b"_method=" in target[q:].lower():
            return Pass(rules.cache_status("fwd", fwd="bypass", detail="method-override"))
        base = prefix + target
        if len(base) > store.MAX_KEY:
            base = store.base_key(scheme, host, target)
        v = self.cache.get(base)
        stored: Stored | None
        if type(v) is Stored and not v.vary:
            stored, key = v, base
        else:
            stored, key = store.lookup(self.cache, base, headers, v)
        if stored is not None and not (req_cc or conditional):
            # The common hit: nothing in the request asks for more checks (in the response,
            # no-cache does; the other flags only matter once the response is stale).
            hit = self._hit(stored, now)
            if hit is not None:
                return hit
        fill = Fill(
            self, method, scheme, host, target, headers, base, key, stored, req_cc, has_auth, now
        )
        if stored is None:
            if "only-if-cached" in req_cc:
                return fill.gateway_timeout()
            return self._miss(fill)
        age = stored.age(now)
        if fill.usable(stored, age):
            return fill.reply(
                stored, age, rules.cache_status("hit", ttl=int(stored.lifetime - age))
            )
        if (
            stored.swr
            and "no-cache" not in req_cc
            and stored.may_serve_stale()
            and age - stored.lifetime <= stored.swr
        ):
            fill.stale = stored
            r = fill.reply(
                stored,
                age,
                rules.cache_status(
                    "hit", ttl=int(stored.lifetime - age), detail="stale-while-revalidate"
                ),
            )
            r.refresh = fill
            return r
        max_stale = rules.delta_seconds(req_cc.get("max-stale")) if "max-stale" in req_cc else None
        if (
            "max-stale" in req_cc
            and "no-cache" not in req_cc
            and stored.may_serve_stale()
            and (max_stale is None or age - stored.lifetime <= max_stale)
        ):
            return fill.reply(
                stored,
                age,
                rules.cache_status("hit", ttl=int(stored.lifetime - age), detail="max-stale"),
            )
        if "only-if-cached" in req_cc:
            return fill.gateway_timeout()
        fill.stale = stored
        return self._miss(fill)

    def _miss(self, fill: Fill) -> Pass | Fill:
        # Requests whose response will not be stored are not coalesced, and do not mark
        # the URL "do not wait" for the requests that could store it.
        if fill.method == "HEAD":
            if fill.stale is not None:
                return Pass(rules.cache_status("fwd", fwd="stale", detail="head"), head=fill)
            return Pass(rules.cache_status("fwd", fwd="uri-miss", detail="head"))
        if "no-store" in fill.req_cc:
            return Pass(rules.cache_status("fwd", fwd="uri-miss", detail="request-no-store"))
        fill.coalesce = not fill.has_auth
        return fill

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
            # found by memchr, a bytes needle takes the slow search.
            if (
                not prefix
                or target[0] != 47
                or (63 in target and target.lower().find(b"_method=") >= 0)
            ):
                return None
            # A key longer than MAX_KEY is never stored as it is (store.base_key digests
            # it): the lookup misses, or the cache refuses it, and classify takes over.
            base = prefix + target
            v = self.cache.get(base)
            # The table holds each Hit's stored object, so an id found there is that
            # object's: a response already served here skips the checks below.
            h = self._hits.get(id(v))
            if h is None:
                if type(v) is not Stored:
                    if v is None or headers is None:
                        return None
                    v, _ = store.lookup(self.cache, base, headers, v)
                    if v is None:
                        return None
                    h = self._hits.get(id(v))
                elif v.vary:
                    return None
                if h is None:
                    h = self._new_hit(v)
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
        h = self._hits.get(id(s)) or self._new_hit(s)
        if h.since <= now < h.until or h.tick(now):
            return h
        return None

    def _new_hit(self, s: Stored) -> Hit:
        h = Hit(
            s,
            cache_status=self.opts.cache_status,
            emit_headers=self._emit_headers,
            emit_status=self._emit_status,
        )
        if len(self._hits) >= _HITS_MAX or self._hits_bytes > _HITS_MAX_BYTES:
            self._hits.clear()
            self._hits_bytes = 0
        self._hits[id(s)] = h
        self._hits_bytes += len(s.body)
        return h

    def _purge(
        self, scheme: str, host_raw: bytes | None, target: bytes, headers: Hdrs, client: str | None
    ) -> Reply:
        o = self.opts
        cs = rules.cache_status("fwd", fwd="method", detail="purge")
        text = [(b"content-type", b"text/plain")]
        token = rules.field(headers, PURGE_TOKEN) or b""
        expected = (o.purge_token or "").encode()
        if client not in o.purge_clients or not hmac.compare_digest(token, expected):
            return Reply(403, _status(o, [*text], cs), b"purge not allowed\n")
        tags = rules.split_tags(rules.fields(headers, o.tag_header))
        # A cache that fails here is answered by `classify` (503): a purge is the cache's
        # own request, never the app's (nor is its token).
        if tags:
            # invalidate_tags takes at most MAX_TAGS tags a call.
            for i in range(0, len(tags), MAX_TAGS):
                self.cache.invalidate_tags(*tags[i : i + MAX_TAGS])
            return Reply(200, _status(o, [*text], cs), b"purged tags\n")
        host = rules.normalise_host(host_raw)
        if host is None:
            return Reply(400, _status(o, [*text], cs), b"bad host\n")
        found = self.cache.delete(store.base_key(scheme, host, target))
        return Reply(200 if found else 404, _status(o, [*text], cs), b"purged\n")

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
        out = [(k, v) for k, v in headers if k != self.opts.tag_header]
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
            return _status(self.opts, out, cs)
        return _status(self.opts, out, p.status)

    def invalidate(self, scheme: str, host_raw: bytes | None, target: bytes, headers: Hdrs) -> None:
        """RFC 9111 §4.4: the target URI, and same-origin ``Location``/``Content-Location``."""
        host = rules.normalise_host(host_raw)
        if host is None:
            return
        self.cache.delete(store.base_key(scheme, host, target))
        for name in (b"location", b"content-location"):
            loc = rules.field(headers, name)
            if not loc:
                continue
            try:
                parts = urlsplit(loc.decode("latin-1").strip())
            except ValueError:
                continue
            if parts.scheme and (
                parts.scheme != scheme
                or rules.normalise_host(parts.netloc.encode("latin-1")) != host
            ):
                continue
            if parts.netloc and not parts.scheme:
                continue
            path = parts.path
            if not path.startswith("/"):
                # Relative to the request's path.
                base_path = target.split(b"?", 1)[0].decode("latin-1")
                path = base_path.rsplit("/", 1)[0] + "/" + path
            t = path.encode("latin-1")
            if parts.query:
                t += b"?" + parts.query.encode("latin-1")
            self.cache.delete(store.base_key(scheme, host, t))


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
        self.stale: Stored | None = None
        self.coalesce = False
        self._moved = False
        self.stored = False
        self.tee = False
        self._validated = False

    # -- answering from a stored response ------------------------------------------------

    def usable(self, s: Stored, age: float) -> bool:
        """Whether ``s`` may be served without validation to this request."""
        if "no-cache" in s.flags or "no-cache" in self.req_cc:
            return False
        if age >= s.lifetime:
            return False
        cc = self.req_cc
        if cc:
            ma = rules.delta_seconds(cc.get("max-age")) if "max-age" in cc else None
            if ma is not None and age > ma:
                return False
            mf = rules.delta_seconds(cc.get("min-fresh")) if "min-fresh" in cc else None
            if mf is not None and s.lifetime - age < mf:
                return False
        return True

    def reply(self, s: Stored, age: float, status: bytes) -> Reply:
        """The stored response for this request: a 304 when the client's own validators
        match a stored 200, headers only for HEAD, ``Age`` replaced."""
        hdrs: Hdrs = list(s.headers)
        hdrs.append((b"age", str(int(age)).encode()))
        _status(self.opts, hdrs, status)
        if s.status == 200 and self._not_modified(s):
            return Reply(
                304,
                [
                    (k, v)
                    for k, v in hdrs
                    if k in _NOT_MODIFIED_KEEP or k in (b"age", b"cache-status")
                ],
                b"",
            )
        if s.status not in (204, 304):
            hdrs.append((b"content-length", str(len(s.body)).encode()))
        return Reply(s.status, hdrs, b"" if self.method == "HEAD" else s.body)

    def _not_modified(self, s: Stored) -> bool:
        inm = rules.field(self.headers, b"if-none-match")
        if inm is not None:
            return rules.etag_matches(inm, s.etag)
        ims = rules.http_date(rules.field(self.headers, b"if-modified-since"))
        if ims is not None and s.last_modified is not None:
            lm = rules.http_date(s.last_modified)
            return lm is not None and lm <= ims
        return False

    def gateway_timeout(self) -> Reply:
        """RFC 9111 §5.2.1.7: ``only-if-cached`` and nothing usable stored."""
        body = b"not in cache\n"
        hdrs: Hdrs = [(b"content-type", b"text/plain"), (b"content-length", b"%d" % len(body))]
        cs = rules.cache_status("fwd", fwd="miss", detail="only-if-cached")
        return Reply(504, _status(self.opts, hdrs, cs), body)

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

    def stale_if_error(self, status: int | None, now: float) -> Reply | None:
        """The stale response when the app failed (raised, or ``status`` 500/502/503/504)
        and ``stale-if-error`` (response or request) allows it; else None."""
        s = self.stale
        if s is None:
            try:
                s, _ = store.lookup(self.engine.cache, self.base, self.headers)
            except Exception:
                return None
        if s is None or not s.may_serve_stale():
            return None
        window = s.sie
        if self.opts.request_directives and "stale-if-error" in self.req_cc:
            req = rules.delta_seconds(self.req_cc["stale-if-error"])
            if req is not None:
                window = max(window, float(req))
        age = s.age(now)
        if not window or age - s.lifetime > window:
            return None
        return self.reply(
            s,
            age,
            rules.cache_status(
                "hit", ttl=int(s.lifetime - age), fwd_status=status or 0, detail="stale-if-error"
            ),
        )

    # -- going to the app ----------------------------------------------------------------

    def upstream_headers(self) -> Hdrs:
        """The request headers for the app: the client's validators replaced by the
        stored response's (the client's own are answered from the result)."""
        out = [
            (k, v)
            for k, v in self.headers
            if k not in _CLIENT_CONDITIONALS and k not in _NOT_FOR_APP
        ]
        s = self.stale
        if s is not None:
            if s.etag is not None:
                out.append((b"if-none-match", s.etag))
            if s.last_modified is not None:
                out.append((b"if-modified-since", s.last_modified))
            self._validated = s.etag is not None or s.last_modified is not None
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
        out = [(k, v) for k, v in headers if k != self.opts.tag_header]
        fwd = "stale" if self.stale is not None else "uri-miss"
        return _status(
            self.opts, out, rules.cache_status("fwd", fwd=fwd, fwd_status=status, detail=reason)
        )

    def _head(
        self, status: int, headers: Hdrs, request_time: float, now: float
    ) -> Reply | Hdrs | int:
        o = self.opts
        s = self.stale
        if status == 304 and s is not None and self._validated:
            return self._freshen(s, headers, request_time, now)
        if status in ERROR_STATUSES:
            r = self.stale_if_error(status, now)
            if r is not None:
                return r
        self._reason, self._meta = self._storable(status, headers, request_time, now)
        if self._reason is not None:
            return self._pass(headers, self._reason, status)
        self._status, self._headers = status, headers
        # A body of unknown length (a streaming response) is relayed as it comes and
        # stored at its end if it fits; waiters are released at the head.
        self.tee = status not in (204, 304) and rules.field(headers, b"content-length") is None
        return o.max_body

    def _storable(
        self, status: int, headers: Hdrs, request_time: float, now: float
    ) -> tuple[str | None, Any]:
        o = self.opts
        if self.method != "GET":
            return "method", None
        if status == 206:
            return "partial", None
        if status not in rules.STORABLE_STATUSES:
            return "status", None
        cc = rules.parse_cache_control(rules.fields(headers, b"cache-control"))
        if "no-store" in cc:
            return "no-store", None
        strip: set[bytes] = set()
        if "private" in cc:
            if cc["private"] is None:
                return "private", None
            strip.update(n.encode().lower() for n in cc["private"].replace(" ", "").split(",") if n)
        if cc.get("no-cache"):
            strip.update(
                n.encode().lower() for n in (cc["no-cache"] or "").replace(" ", "").split(",") if n
            )
        if "no-store" in self.req_cc:
            return "request-no-store", None
        if self.has_auth and self.engine._auth_shared.isdisjoint(cc):
            return "authorization", None
        if not o.store_set_cookie and rules.field(headers, b"set-cookie") is not None:
            return "set-cookie", None
        vary = rules.parse_vary(headers)
        if vary is None:
            return "vary-star", None
        if self._key_headers_missing(vary):
            vary = tuple(sorted(set(vary) | set(self.engine._key_headers)))
        lifetime, explicit = rules.freshness_lifetime(
            cc, headers, status, now, o.heuristic, o.default_ttl
        )
        if not explicit and lifetime <= 0:
            return "no-freshness", None
        age0 = rules.initial_age(headers, request_time, now)
        if age0 is None:
            lifetime, age0 = 0.0, 0.0  # an invalid Age makes the response stale
        tags = rules.split_tags(rules.fields(headers, o.tag_header))
        if len(tags) > MAX_TAGS:
            return "too-many-tags", None
        cl = rules.field(headers, b"content-length")
        if cl is not None:
            n = rules.delta_seconds(cl.strip().decode("latin-1"))
            if n is not None and n > o.max_body:
                return "too-large", None
        flags = frozenset(
            d for d in ("no-cache", "must-revalidate", "proxy-revalidate", "s-maxage") if d in cc
        )
        swr = float(rules.delta_seconds(cc.get("stale-while-revalidate")) or 0)
        sie = float(rules.delta_seconds(cc.get("stale-if-error")) or 0)
        etag = rules.field(headers, b"etag")
        lm = rules.field(headers, b"last-modified")
        ttl = max(0.0, lifetime - age0)
        if not flags & {"must-revalidate", "proxy-revalidate", "no-cache", "s-maxage"}:
            ttl += max(swr, sie)
        if etag is not None or lm is not None:
            ttl += o.revalidate_keep
        if ttl <= 0:
            return "stale", None
        stored_headers = self._stored_headers(headers, strip)
        if sum(len(k) + len(v) for k, v in stored_headers) > _MAX_STORED_HEADERS:
            return "headers-too-large", None
        _, values = rules.vary_digest(vary, self.headers)
        meta = (
            stored_headers,
            lifetime,
            age0,
            swr,
            sie,
            flags,
            etag,
            lm,
            vary,
            values,
            tuple(tags),
            min(ttl, _MAX_TTL),
        )
        return None, meta

    def _key_headers_missing(self, vary: tuple[str, ...]) -> bool:
        return bool(self.engine._key_headers) and not set(self.engine._key_headers) <= set(vary)

    def _stored_headers(self, headers: Hdrs, strip: set[bytes]) -> tuple[tuple[bytes, bytes], ...]:
        o = self.opts
        drop = (
            set(rules.HOP_BY_HOP)
            | strip
            | {b"age", o.tag_header, b"content-length", b"cache-status"}
        )
        for c in rules.parse_list(rules.fields(headers, b"connection")):
            drop.add(c.lower())
        if o.store_set_cookie:
            drop.add(b"set-cookie")
        return tuple((k, v) for k, v in headers if k not in drop)

    def tee_headers(self) -> Hdrs:
        """The client headers of a streaming response that is stored if it ends in time."""
        out = [(k, v) for k, v in self._headers if k not in (self.opts.tag_header, b"age")]
        fwd = "stale" if self.stale is not None else "uri-miss"
        cs = rules.cache_status("fwd", fwd=fwd, fwd_status=self._status, detail="streamed")
        return _status(self.opts, out, cs)

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
        if status == 200 and self._not_modified(s):
            return self.reply(s, s.age(now), cs)
        out = [
            (k, v) for k, v in headers if k not in (self.opts.tag_header, b"content-length", b"age")
        ]
        out.append((b"age", str(int(s.initial_age)).encode()))
        if status not in (204, 304):
            out.append((b"content-length", str(len(body)).encode()))
        return Reply(status, _status(self.opts, out, cs), body)

    def _save(self, body: bytes, now: float) -> tuple[Stored, str]:
        status = self._status
        (sh, lifetime, age0, swr, sie, flags, etag, lm, vary, values, tags, ttl) = self._meta
        s = Stored(
            status,
            sh,
            body,
            self._request_time,
            now,
            age0,
            lifetime,
            swr,
            sie,
            flags,
            etag,
            lm,
            vary,
            values,
            tags,
        )
        detail = "stored"
        try:
            store.save(self.engine.cache, self.base, s, ttl, now)
            self.stored = True
        except Exception as e:
            log.warning("ziggurat.http: storing %r failed: %r", self.base, e)
            detail = "store-failed"
        return s, detail

    def too_large(self, headers: Hdrs, status: int) -> Hdrs:
        """The client headers when the body outgrew ``max_body`` while being buffered."""
        self._reason = "too-large"
        return self._pass(headers, "too-large", status)

    def _freshen(self, s: Stored, headers: Hdrs, request_time: float, now: float) -> Reply | Hdrs:
        """RFC 9111 §4.3.4: a 304 to our validation updates the stored headers."""
        new_etag = rules.field(headers, b"etag")
        if new_etag is not None and s.etag is not None and new_etag.strip() != s.etag.strip():
            self.engine.cache.delete(self.key)
            return self.reply(
                s,
                s.age(now),
                rules.cache_status("fwd", fwd="stale", fwd_status=304, detail="validator-mismatch"),
            )
        fresh = self._update(s, headers, request_time, now)
        self.stale = None
        return self.reply(
            fresh,
            fresh.age(now),
            rules.cache_status("fwd", fwd="stale", fwd_status=304, detail="revalidated"),
        )

    def _update(self, s: Stored, headers: Hdrs, request_time: float, now: float) -> Stored:
        """RFC 9111 §3.2: ``s`` with its headers updated from a response that describes it
        (a 304, or a 200 to a HEAD), its age counted from that response; stored in place."""
        o = self.opts
        # Set-Cookie is never merged: a stored response is served to every client.
        drop = set(rules.HOP_BY_HOP) | {
            b"age",
            b"content-length",
            o.tag_header,
            b"cache-status",
            b"set-cookie",
        }
        update = [(k, v) for k, v in headers if k not in drop]
        names = {k for k, _ in update}
        merged = [(k, v) for k, v in s.headers if k not in names] + update
        cc = rules.parse_cache_control(rules.fields(merged, b"cache-control"))
        lifetime, _ = rules.freshness_lifetime(
            cc, merged, s.status, now, o.heuristic, o.default_ttl
        )
        age0 = rules.initial_age(headers, request_time, now)
        if age0 is None:
            lifetime, age0 = 0.0, 0.0
        flags = frozenset(
            d for d in ("no-cache", "must-revalidate", "proxy-revalidate", "s-maxage") if d in cc
        )
        swr = float(rules.delta_seconds(cc.get("stale-while-revalidate")) or 0)
        sie = float(rules.delta_seconds(cc.get("stale-if-error")) or 0)
        fresh = s._replace(
            headers=tuple(merged),
            request_time=request_time,
            response_time=now,
            initial_age=age0,
            lifetime=lifetime,
            flags=flags,
            swr=swr,
            sie=sie,
            etag=rules.field(merged, b"etag"),
            last_modified=rules.field(merged, b"last-modified"),
        )
        ttl = max(0.0, lifetime - age0) + o.revalidate_keep
        if not flags & {"must-revalidate", "proxy-revalidate", "no-cache", "s-maxage"}:
            ttl += max(swr, sie)
        try:
            store.replace(self.engine.cache, self.key, fresh, min(ttl, _MAX_TTL))
            self.stored = True
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
        cc = rules.parse_cache_control(rules.fields(headers, b"cache-control"))
        if self.has_auth and self.engine._auth_shared.isdisjoint(cc):
            return "head"  # an answer for this client alone does not speak for the others
        if s.status != 200 or "no-store" in cc or "private" in cc or not self._same(s, headers):
            cache.delete(self.key)
            return "head-invalidated"
        self._update(s, headers, self.start, now)
        return "head-freshened"

    @staticmethod
    def _same(s: Stored, headers: Hdrs) -> bool:
        """Whether a HEAD response's validators and length are the stored response's (a
        validator the stored response has and the HEAD lacks counts as different)."""
        for name, mine in ((b"etag", s.etag), (b"last-modified", s.last_modified)):
            theirs = rules.field(headers, name)
            if (theirs.strip() if theirs is not None else None) != (
                mine.strip() if mine is not None else None
            ):
                return False
        cl = rules.field(headers, b"content-length")
        return cl is None or cl.strip() == b"%d" % len(s.body)

    def marker(self) -> str | None:
        """What the waiters of this fill are told: read the stored response, or go to the
        app themselves (the URL is then not waited on for ``hit_for_miss`` seconds)."""
        if self.stored:
            return STORED
        return TEE if self.tee else None
