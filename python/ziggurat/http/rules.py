"""The caching rules of a shared HTTP cache (RFC 9111), as pure functions: the Python names
of the rules the ``ziggurat-http`` crate holds (every front end calls that one crate).

Nothing here does I/O or knows a framework: header lists are ``[(name, value)]`` pairs of
bytes with lower-case names, as ASGI gives them (the WSGI adapter converts). Every parser
accepts any bytes and never raises: a malformed field is treated the way the RFC says a
cache must treat it (usually: the response is stale, or the directive is ignored).

>>> cc = parse_cache_control([b"Public, MAX-AGE=60, s-maxage=\\"30\\""])
>>> cc["max-age"], cc["s-maxage"], "public" in cc
('60', '30', True)
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence

from ziggurat import _native

Headers = Sequence[tuple[bytes, bytes]]

__all__ = [
    "HEURISTIC_STATUSES",
    "HOP_BY_HOP",
    "STORABLE_STATUSES",
    "UNDERSTOOD_STATUSES",
    "Headers",
    "cache_status",
    "connection_listed",
    "delta_seconds",
    "etag_matches",
    "expires_time",
    "field",
    "fields",
    "freshness_lifetime",
    "http_date",
    "ignores_no_store",
    "initial_age",
    "may_use_default_freshness",
    "normalise_host",
    "parse_cache_control",
    "parse_list",
    "parse_vary",
    "response_directives",
    "split_tags",
    "status_storable",
    "vary_digest",
]

# RFC 9111 §3: the final statuses stored when the response has explicit freshness.
STORABLE_STATUSES = frozenset(_native.HTTP_STORABLE_STATUSES)
# RFC 9110 §15.1: statuses that may get heuristic (or configured default) freshness.
HEURISTIC_STATUSES = frozenset(_native.HTTP_HEURISTIC_STATUSES)
# RFC 9111 §5.2.2.3 (must-understand): the statuses whose caching rules this cache
# implements beyond the general ones.
UNDERSTOOD_STATUSES = frozenset(_native.HTTP_UNDERSTOOD_STATUSES)
# RFC 9111 §3.1 and RFC 9110 §7.6.1: never stored, never replayed.
HOP_BY_HOP = frozenset(_native.HTTP_HOP_BY_HOP)


def field(headers: Headers, name: bytes) -> bytes | None:
    """The first value of header ``name`` (lower-case bytes), or None.

    >>> field([(b"age", b"5"), (b"age", b"7")], b"age")
    b'5'
    """
    return _native.http_field(headers, name)


def fields(headers: Headers, name: bytes) -> list[bytes]:
    """Every value of header ``name``, in order.

    >>> fields([(b"vary", b"a"), (b"x", b"1"), (b"vary", b"b")], b"vary")
    [b'a', b'b']
    """
    return _native.http_fields(headers, name)


def parse_list(values: Iterable[bytes]) -> list[bytes]:
    """The items of a comma-separated list field, stripped, empty items dropped.

    >>> parse_list([b" a, ,b ", b"c"])
    [b'a', b'b', b'c']
    """
    return _native.http_parse_list(values)


def parse_cache_control(values: Iterable[bytes]) -> dict[str, str | None]:
    """Cache-Control directives: lower-case name to argument (None when absent).

    Names are case-insensitive; quoted arguments may hold commas; the first occurrence of
    a directive wins (RFC 9111 §4.2.1); items that are not ``token[=token|quoted]`` are
    ignored.

    >>> parse_cache_control([b'private="set-cookie, x", No-Store', b"max-age=5"])
    {'private': 'set-cookie, x', 'no-store': None, 'max-age': '5'}
    >>> parse_cache_control([b"\\xff, max-age==3, ok"])
    {'ok': None}
    """
    return _native.http_parse_cache_control(values)


def delta_seconds(arg: str | None) -> int | None:
    """A delta-seconds argument as int; None when absent or malformed.

    >>> delta_seconds("60"), delta_seconds("-1"), delta_seconds("9" * 30), delta_seconds(None)
    (60, None, 2147483648, None)
    """
    return _native.http_delta_seconds(arg)


def http_date(value: bytes | None) -> float | None:
    """An HTTP-date as a Unix time; None for anything but the three forms RFC 9110 §5.6.7
    allows (IMF-fixdate, the obsolete RFC 850 form, asctime), leading and trailing
    whitespace aside.

    >>> http_date(b"Sun, 06 Nov 1994 08:49:37 GMT"), http_date(b"Sunday, 06-Nov-94 08:49:37 GMT")
    (784111777.0, 784111777.0)
    >>> http_date(b"Sun Nov  6 08:49:37 1994")
    784111777.0
    >>> [http_date(v) for v in (b"Sun, 06 Nov 94 08:49:37 GMT", b"Sun, 06 Nov 1994 08:49:37 UTC",
    ...  b"Sun 06 Nov 1994 08:49:37 GMT", b"Sun, 06  Nov 1994 08:49:37 GMT",
    ...  b"Sun, 06-Nov-1994 08:49:37 GMT", b"Sun, 06 Nov 1994 08.49.37 GMT",
    ...  b"Sun, 06 Nov 1994 8:49:37 GMT", b"0", None)]
    [None, None, None, None, None, None, None, None, None]
    """
    return _native.http_date(value)


def expires_time(headers: Headers) -> tuple[bool, float | None]:
    """Whether the response has ``Expires``, and its time (None when invalid: RFC 9111
    §5.3 makes an invalid date, or more than one ``Expires`` line, mean "already
    expired").

    >>> expires_time([(b"expires", b"Sun, 06 Nov 1994 08:49:37 GMT")])
    (True, 784111777.0)
    >>> expires_time([(b"expires", b"0")]), expires_time([])
    ((True, None), (False, None))
    """
    return _native.http_expires_time(headers)


def may_use_default_freshness(status: int) -> bool:
    """Whether a response without explicit freshness may get a heuristic or configured
    lifetime: only a status RFC 9110 §15.1 names heuristically cacheable, and never an
    error status: an error page is stored only when the app itself gives it a lifetime
    (a cached error served to everyone is the cache-poisoning denial of service).

    >>> may_use_default_freshness(200), may_use_default_freshness(302)
    (True, False)
    >>> may_use_default_freshness(404), may_use_default_freshness(501)
    (False, False)
    """
    return _native.http_may_use_default_freshness(status)


def freshness_lifetime(
    cc: dict[str, str | None],
    headers: Headers,
    status: int,
    response_time: float,
    heuristic: bool,
    default_ttl: float | None,
    *,
    expires: bool = True,
) -> tuple[float, bool]:
    """Seconds a response is fresh for a shared cache, and whether it said so explicitly.

    ``s-maxage`` wins over ``max-age``, which wins over ``Expires`` - ``Date`` (not read
    when ``expires`` is False: a targeted field decides alone); a malformed value of the
    directive or field that decides means 0 (stale). Without explicit information,
    ``heuristic`` gives 10 % of the time since ``Last-Modified`` (at most a day) and
    ``default_ttl`` a fixed lifetime, both only where ``may_use_default_freshness``.

    >>> freshness_lifetime({"max-age": "60", "s-maxage": "5"}, [], 200, 0.0, False, None)
    (5.0, True)
    >>> freshness_lifetime({}, [(b"expires", b"garbage")], 200, 0.0, False, None)
    (0.0, True)
    >>> freshness_lifetime({}, [], 200, 0.0, False, 30)
    (30.0, False)
    """
    return _native.http_freshness_lifetime(
        cc, headers, status, response_time, heuristic, default_ttl, expires
    )


def initial_age(headers: Headers, request_time: float, response_time: float) -> float:
    """The corrected initial age of a response (RFC 9111 §4.2.3). Of several ``Age``
    values the first counts; an invalid one (not a non-negative integer) is ignored
    (RFC 9111 §5.1).

    >>> initial_age([(b"age", b"10")], 100.0, 101.0)
    11.0
    >>> initial_age([(b"age", b"0, 7200")], 100.0, 101.0)
    1.0
    >>> initial_age([(b"age", b"1a")], 100.0, 101.0)
    1.0
    """
    return _native.http_initial_age(headers, request_time, response_time)


def parse_vary(headers: Headers) -> tuple[str, ...] | None:
    """The request header names a response varies on, lower-case and sorted; None for ``*``.

    >>> parse_vary([(b"vary", b"Accept-Encoding, accept-language"), (b"vary", b" * ")])
    >>> parse_vary([(b"vary", b"Accept-Encoding, ,Cookie")])
    ('accept-encoding', 'cookie')
    """
    return _native.http_parse_vary(headers)


def vary_digest(names: Sequence[str], headers: Headers) -> tuple[bytes, tuple[bytes | None, ...]]:
    """A digest of the request's values of ``names``, and the values themselves.

    An absent header (None) differs from an empty one.

    >>> d1, v1 = vary_digest(["accept"], [(b"accept", b"a, b")])
    >>> d2, v2 = vary_digest(["accept"], [(b"accept", b"a"), (b"accept", b"b")])
    >>> d1 == d2, v1
    (True, (b'a,b',))
    """
    return _native.http_vary_digest(names, headers)


def etag_matches(condition: bytes, etag: bytes | None) -> bool:
    """Weak comparison of an ``If-None-Match`` value against a stored ETag.

    >>> etag_matches(b'"a", W/"b"', b'"b"'), etag_matches(b"*", b'"x"'), etag_matches(b'"a"', None)
    (True, True, False)
    """
    return _native.http_etag_matches(condition, etag)


def normalise_host(raw: bytes | None) -> str | None:
    """A request's host, lower-case, checked for syntax; None when missing or malformed.

    >>> normalise_host(b"Example.COM:8000"), normalise_host(b"a b"), normalise_host(b"[::1]:80")
    ('example.com:8000', None, '[::1]:80')
    """
    return _native.http_normalise_host(raw)


def split_tags(values: Iterable[bytes]) -> list[str]:
    """Tags named by the tag header: comma- or space-separated, empty items dropped.

    >>> split_tags([b"posts, post:1 lists", b"  "])
    ['posts', 'post:1', 'lists']
    """
    return _native.http_split_tags(values)


def status_storable(status: int, cc: dict[str, str | None]) -> str | None:
    """Why a response with this status and these directives cannot be stored, or None.

    With ``must-understand`` (RFC 9111 §5.2.2.3) only the statuses whose caching rules
    this cache implements may be stored (and its ``no-store`` is then ignored, see
    ``ignores_no_store``); otherwise any status in ``STORABLE_STATUSES``.

    >>> status_storable(302, {}), status_storable(599, {}), status_storable(206, {})
    (None, None, 'status')
    >>> mu = {"must-understand": None}
    >>> status_storable(200, mu), status_storable(201, mu), status_storable(599, mu)
    (None, 'must-understand', 'must-understand')
    """
    return _native.http_status_storable(status, cc)


def ignores_no_store(status: int, cc: dict[str, str | None]) -> bool:
    """Whether ``no-store`` is overridden by ``must-understand`` on a status this cache
    understands (RFC 9111 §5.2.2.3).

    >>> ignores_no_store(200, {"must-understand": None, "no-store": None})
    True
    >>> ignores_no_store(200, {"no-store": None}), ignores_no_store(201, {"must-understand": None})
    (False, False)
    """
    return _native.http_ignores_no_store(status, cc)


def connection_listed(headers: Headers) -> set[bytes]:
    """The lower-case names a response's ``Connection`` header lists: hop-by-hop fields
    of that message, never stored nor forwarded (RFC 9110 §7.6.1).

    >>> sorted(connection_listed([(b"connection", b"X-Secret, close"), (b"connection", b"a")]))
    [b'a', b'close', b'x-secret']
    """
    return _native.http_connection_listed(headers)


def response_directives(
    headers: Headers, targets: Sequence[bytes]
) -> tuple[dict[str, str | None], bytes | None]:
    """The cache directives this cache obeys for a response, and the targeted field they
    came from: the first field of ``targets`` (RFC 9213 target list, lower-case names)
    with a valid, non-empty value, which overrides ``Cache-Control`` and ``Expires``;
    else ``Cache-Control`` (and None).

    >>> h = [(b"cache-control", b"no-store"), (b"cdn-cache-control", b"max-age=600")]
    >>> response_directives(h, (b"ziggurat-cache-control", b"cdn-cache-control"))
    ({'max-age': '600'}, b'cdn-cache-control')
    >>> bad = [(b"cdn-cache-control", b"max-age =1"), (b"cache-control", b"no-store")]
    >>> response_directives(bad, (b"cdn-cache-control",))
    ({'no-store': None}, None)
    """
    return _native.http_response_directives(headers, targets)


def cache_status(kind: str, **params: str | int | bool) -> bytes:
    """A ``Cache-Status`` member (RFC 9211) for this cache, named ``ziggurat``.

    >>> cache_status("hit", ttl=12)
    b'ziggurat; hit; ttl=12'
    >>> cache_status("fwd", fwd="uri-miss", detail="no-store")
    b'ziggurat; fwd=uri-miss; detail=no-store'
    """
    return _native.http_cache_status(kind, **params)
