"""The caching rules of a shared HTTP cache (RFC 9111) the middleware reads itself, as pure
functions: the Python names of the ``ziggurat-http`` crate's header-list helpers, host
normalisation, ``Vary`` digest, tag lists and ``Cache-Status`` (every other rule runs in
the crate, behind ``engine``, ``fill`` and ``storable``).

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
    "HOP_BY_HOP",
    "Headers",
    "cache_status",
    "connection_listed",
    "field",
    "fields",
    "normalise_host",
    "parse_cache_control",
    "split_tags",
    "vary_digest",
]

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


def vary_digest(names: Sequence[str], headers: Headers) -> tuple[bytes, tuple[bytes | None, ...]]:
    """A digest of the request's values of ``names``, and the values themselves.

    An absent header (None) differs from an empty one.

    >>> d1, v1 = vary_digest(["accept"], [(b"accept", b"a, b")])
    >>> d2, v2 = vary_digest(["accept"], [(b"accept", b"a"), (b"accept", b"b")])
    >>> d1 == d2, v1
    (True, (b'a,b',))
    """
    return _native.http_vary_digest(names, headers)


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


def connection_listed(headers: Headers) -> set[bytes]:
    """The lower-case names a response's ``Connection`` header lists: hop-by-hop fields
    of that message, never stored nor forwarded (RFC 9110 §7.6.1).

    >>> sorted(connection_listed([(b"connection", b"X-Secret, close"), (b"connection", b"a")]))
    [b'a', b'close', b'x-secret']
    """
    return _native.http_connection_listed(headers)


def cache_status(kind: str, **params: str | int | bool) -> bytes:
    """A ``Cache-Status`` member (RFC 9211) for this cache, named ``ziggurat``.

    >>> cache_status("hit", ttl=12)
    b'ziggurat; hit; ttl=12'
    >>> cache_status("fwd", fwd="uri-miss", detail="no-store")
    b'ziggurat; fwd=uri-miss; detail=no-store'
    """
    return _native.http_cache_status(kind, **params)
