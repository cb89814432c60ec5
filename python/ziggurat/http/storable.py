"""Whether the cache may store a response, and what it keeps of it (RFC 9111 §3, §3.2 and
§4.2, RFC 9213): the rules a fill applies to the app's response head, without I/O. The
decisions are the ``ziggurat-http`` crate's; this module gives them their Python names.

>>> from ziggurat.http.options import Options
>>> o = Options()
>>> m = decide(o, 302, [(b"cache-control", b"max-age=60"), (b"location", b"/x")], Request())
>>> m.lifetime, m.headers
(60.0, ((b'cache-control', b'max-age=60'), (b'location', b'/x')))
>>> decide(o, 500, [], Request()), decide(Options(default_ttl=60), 500, [], Request())
('no-freshness', 'no-freshness')
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import NamedTuple

from ziggurat import _native
from ziggurat.http import rules
from ziggurat.http.options import Options
from ziggurat.http.store import Stored

__all__ = [
    "MAX_TTL",
    "STALE_FORBIDDING",
    "Meta",
    "Request",
    "decide",
    "entry_ttl",
    "refreshed",
    "stale_flags",
    "stale_if_error_window",
    "stored_headers",
]

Hdrs = Sequence[tuple[bytes, bytes]]
MAX_TTL: float = _native.HTTP_MAX_TTL
# RFC 9111 §3.2: fields that describe the stored body itself (its coding, digest, range),
# which a 304 does not change: kept as stored.
_KEPT_ON_UPDATE = frozenset({b"content-encoding", b"content-md5", b"content-range"})
# RFC 9111 §4.2.4, §5.2.2.2, §5.2.2.8, §5.2.2.10: a response with one of these is never
# served stale (nor under stale-while-revalidate or stale-if-error).
STALE_FORBIDDING = frozenset(_native.HTTP_STALE_FORBIDDING)


@dataclass(frozen=True)
class Request:
    """What storing a response needs to know of the request that asked for it.

    >>> Request(method="HEAD").method
    'HEAD'
    """

    method: str = "GET"
    headers: Hdrs = ()
    directives: dict[str, str | None] = field(default_factory=dict)
    has_auth: bool = False
    # RFC 9111 §3.5: the response directives that let a shared cache store a response to
    # a request with Authorization.
    auth_shared: frozenset[str] = frozenset({"public", "s-maxage"})
    key_headers: tuple[str, ...] = ()
    time: float = 0.0


class Meta(NamedTuple):
    """What is stored of a response besides its status and body, and for how long."""

    headers: tuple[tuple[bytes, bytes], ...]
    lifetime: float
    initial_age: float
    swr: float
    sie: float
    flags: frozenset[str]
    etag: bytes | None
    last_modified: bytes | None
    vary: tuple[str, ...]
    vary_values: tuple[bytes | None, ...]
    tags: tuple[str, ...]
    ttl: float


def stale_flags(cc: dict[str, str | None]) -> frozenset[str]:
    """The directives of ``STALE_FORBIDDING`` a response has (kept with it).

    >>> sorted(stale_flags({"max-age": "5", "s-maxage": "9", "public": None}))
    ['s-maxage']
    """
    return _native.http_stale_flags(cc)


def stale_if_error_window(s: Stored, opts: Options, req_cc: dict[str, str | None]) -> float:
    """Seconds past its freshness that ``s`` may answer for an app that failed (RFC 9111
    §4.2.4, RFC 5861): the largest of its ``stale-if-error``, the ``stale_if_error``
    option and the request's ``stale-if-error`` (with ``request_directives``); 0 when its
    directives forbid any stale use.

    >>> s = Stored(200, (), b"", 0.0, 0.0, 0.0, 60.0, 0.0, 30.0, frozenset(), None, None,
    ...            (), (), ())
    >>> stale_if_error_window(s, Options(stale_if_error=90), {}), stale_if_error_window(
    ...     s._replace(flags=frozenset({"must-revalidate"})), Options(stale_if_error=90), {})
    (90.0, 0.0)
    """
    return _native.http_stale_if_error_window(s.flags, s.sie, opts, req_cc)


def entry_ttl(
    opts: Options,
    lifetime: float,
    initial_age: float,
    window: float,
    flags: frozenset[str],
    keep: bool,
) -> float:
    """How long the cache keeps a stored response: while fresh, then for as long as it may
    be served stale (``window``: the larger of stale-while-revalidate and stale-if-error,
    or the ``stale_if_error`` option) unless its directives forbid that, then
    ``revalidate_keep`` more when ``keep`` (it has a validator).

    >>> entry_ttl(Options(), 60.0, 10.0, 30.0, frozenset(), False)
    80.0
    >>> entry_ttl(Options(), 60.0, 10.0, 30.0, frozenset({"no-cache"}), True)
    110.0
    """
    return _native.http_entry_ttl(opts, lifetime, initial_age, window, flags, keep)


def _never_stored(opts: Options) -> set[bytes]:
    return set(_native.http_never_stored(opts))


def stored_headers(
    opts: Options, headers: Hdrs, strip: set[bytes]
) -> tuple[tuple[bytes, bytes], ...]:
    """The header lines stored of a response: not the hop-by-hop ones (the fixed list and
    those its ``Connection`` names), ``Age``, ``Content-Length``, ``Cache-Status``, the
    tag header, ``Set-Cookie`` (stored only without it), nor ``strip`` (the names of
    ``private="…"`` and ``no-cache="…"``).

    >>> stored_headers(Options(), [(b"connection", b"x-a"), (b"x-a", b"1"), (b"x-b", b"2")], set())
    ((b'x-b', b'2'),)
    """
    return _native.http_stored_headers(opts, headers, strip)


def decide(opts: Options, status: int, headers: Hdrs, req: Request, now: float = 0.0) -> str | Meta:
    """Why the response to ``req`` cannot be stored (the ``Cache-Status`` detail), or what
    to store of it (see the module example).

    >>> decide(Options(), 200, [(b"cache-control", b"must-understand, no-store, max-age=9")],
    ...        Request()).lifetime
    9.0
    >>> decide(Options(), 201, [(b"cache-control", b"must-understand, max-age=9")], Request())
    'must-understand'
    """
    r = _native.http_decide(opts, status, headers, req, now)
    return r if isinstance(r, str) else Meta._make(r)


def refreshed(
    opts: Options, s: Stored, headers: Hdrs, request_time: float, now: float
) -> tuple[Stored, float]:
    """RFC 9111 §3.2: ``s`` with its headers updated from a response that describes it (a
    304, or a 200 to a HEAD), its freshness recomputed and its age counted from that
    response; and how long to keep it. ``Set-Cookie`` is never merged (a stored response
    is served to every client), nor are the fields that describe the stored body
    (``Content-Encoding``, ``Content-MD5``, ``Content-Range``).

    >>> s = Stored(200, ((b"cache-control", b"max-age=1"), (b"x", b"old")), b"hi", 0.0, 0.0,
    ...            0.0, 1.0, 0.0, 0.0, frozenset(), None, None, (), (), ())
    >>> fresh, ttl = refreshed(Options(), s, [(b"cache-control", b"max-age=60"),
    ...     (b"connection", b"x"), (b"x", b"new"), (b"set-cookie", b"a=1")], 100.0, 100.0)
    >>> fresh.headers, fresh.lifetime, ttl
    (((b'x', b'old'), (b'cache-control', b'max-age=60')), 60.0, 120.0)
    """
    drop = _never_stored(opts) | {b"set-cookie"} | _KEPT_ON_UPDATE
    drop |= rules.connection_listed(headers)
    update = [(k, v) for k, v in headers if k not in drop]
    names = {k for k, _ in update}
    merged = [(k, v) for k, v in s.headers if k not in names] + update
    cc, target = rules.response_directives(merged, opts.targeted_fields)
    lifetime, _ = rules.freshness_lifetime(
        cc, merged, s.status, now, opts.heuristic, opts.default_ttl, expires=target is None
    )
    age0 = rules.initial_age(headers, request_time, now)
    flags = stale_flags(cc)
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
    return fresh, entry_ttl(opts, lifetime, age0, max(swr, sie), flags, True)
