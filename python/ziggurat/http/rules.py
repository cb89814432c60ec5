"""The caching rules of a shared HTTP cache (RFC 9111), as pure functions.

Nothing here does I/O or knows a framework: header lists are ``[(name, value)]`` pairs of
bytes with lower-case names, as ASGI gives them (the WSGI adapter converts). Every parser
accepts any bytes and never raises: a malformed field is treated the way the RFC says a
cache must treat it (usually: the response is stale, or the directive is ignored).

>>> cc = parse_cache_control([b"Public, MAX-AGE=60, s-maxage=\\"30\\""])
>>> cc["max-age"], cc["s-maxage"], "public" in cc
('60', '30', True)
"""

from __future__ import annotations

import calendar
import email.utils
import hashlib
import re
from collections.abc import Iterable, Sequence

Headers = Sequence[tuple[bytes, bytes]]

__all__ = [
    "HEURISTIC_STATUSES",
    "HOP_BY_HOP",
    "STORABLE_STATUSES",
    "Headers",
    "cache_status",
    "delta_seconds",
    "etag_matches",
    "field",
    "fields",
    "freshness_lifetime",
    "http_date",
    "initial_age",
    "normalise_host",
    "parse_cache_control",
    "parse_list",
    "parse_vary",
    "split_tags",
    "vary_digest",
]

# Statuses stored when the response gives explicit freshness. Other 4xx and every 5xx
# are never stored: a cached error page is a denial of service (CPDoS).
STORABLE_STATUSES = frozenset({200, 203, 204, 300, 301, 308, 404, 410})
# RFC 9110 §15.1: statuses that may get heuristic (or configured default) freshness.
HEURISTIC_STATUSES = frozenset({200, 203, 204, 300, 301, 308, 404, 405, 410, 414, 501})
# RFC 9111 §3.1 and RFC 9110 §7.6.1: never stored, never replayed.
HOP_BY_HOP = frozenset(
    {
        b"connection",
        b"keep-alive",
        b"proxy-connection",
        b"te",
        b"trailer",
        b"transfer-encoding",
        b"upgrade",
        b"proxy-authenticate",
        b"proxy-authentication-info",
        b"proxy-authorization",
    }
)
# 2**31: RFC 9111 §1.2.2 says an overflowing delta-seconds means "as long as possible".
_MAX_DELTA = 2147483648
_TOKEN = re.compile(rb"[!#$%&'*+\-.^_`|~0-9A-Za-z]+")
_HOST = re.compile(
    r"(?:[a-z0-9](?:[a-z0-9_-]{0,62})?(?:\.[a-z0-9_-]{1,63})*\.?|\[[0-9a-f:.]{2,45}\])(?::[0-9]{1,5})?"
)


def field(headers: Headers, name: bytes) -> bytes | None:
    """The first value of header ``name`` (lower-case bytes), or None.

    >>> field([(b"age", b"5"), (b"age", b"7")], b"age")
    b'5'
    """
    for k, v in headers:
        if k == name:
            return v
    return None


def fields(headers: Headers, name: bytes) -> list[bytes]:
    """Every value of header ``name``, in order.

    >>> fields([(b"vary", b"a"), (b"x", b"1"), (b"vary", b"b")], b"vary")
    [b'a', b'b']
    """
    return [v for k, v in headers if k == name]


def parse_list(values: Iterable[bytes]) -> list[bytes]:
    """The items of a comma-separated list field, stripped, empty items dropped.

    >>> parse_list([b" a, ,b ", b"c"])
    [b'a', b'b', b'c']
    """
    out = []
    for v in values:
        for item in v.split(b","):
            item = item.strip(b" \t")
            if item:
                out.append(item)
    return out


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
    out: dict[str, str | None] = {}
    for raw in values:
        i, n = 0, len(raw)
        while i < n:
            while i < n and raw[i] in b" \t,":
                i += 1
            m = _TOKEN.match(raw, i)
            if m is None:
                i = _skip_item(raw, i)
                continue
            name = m.group().decode("ascii").lower()
            i = m.end()
            while i < n and raw[i] in b" \t":
                i += 1
            arg: str | None = None
            ok = True
            if i < n and raw[i] == 0x3D:  # "="
                i += 1
                while i < n and raw[i] in b" \t":
                    i += 1
                if i < n and raw[i] == 0x22:  # quoted-string
                    j = i + 1
                    buf = bytearray()
                    while j < n and raw[j] != 0x22:
                        if raw[j] == 0x5C and j + 1 < n:
                            j += 1
                        buf.append(raw[j])
                        j += 1
                    if j >= n:
                        ok = False
                        i = n
                    else:
                        arg = buf.decode("latin-1")
                        i = j + 1
                else:
                    m = _TOKEN.match(raw, i)
                    if m is None:
                        ok = False
                    else:
                        arg = m.group().decode("ascii")
                        i = m.end()
            while i < n and raw[i] in b" \t":
                i += 1
            if i < n and raw[i] != 0x2C:
                ok = False
                i = _skip_item(raw, i)
            if ok and name not in out:
                out[name] = arg
    return out


def _skip_item(raw: bytes, i: int) -> int:
    j = raw.find(b",", i)
    return len(raw) if j < 0 else j + 1


def delta_seconds(arg: str | None) -> int | None:
    """A delta-seconds argument as int; None when absent or malformed.

    >>> delta_seconds("60"), delta_seconds("-1"), delta_seconds("9" * 30), delta_seconds(None)
    (60, None, 2147483648, None)
    """
    if arg is None or not arg.isascii() or not arg.isdigit():
        return None
    if len(arg) > 10:
        return _MAX_DELTA
    return min(int(arg), _MAX_DELTA)


def http_date(value: bytes | None) -> float | None:
    """An HTTP-date (IMF-fixdate, RFC 850 or asctime) as a Unix time; None if invalid.

    >>> http_date(b"Sun, 06 Nov 1994 08:49:37 GMT")
    784111777.0
    >>> http_date(b"0") is None, http_date(None) is None
    (True, True)
    """
    if not value or len(value) > 64:
        return None
    try:
        text = value.decode("ascii").strip()
        parts = email.utils.parsedate_tz(text)
        if parts is None or parts[0] < 1900:
            return None
        return float(calendar.timegm(parts[:9]) - (parts[9] or 0))
    except (ValueError, OverflowError, UnicodeDecodeError, IndexError, TypeError):
        return None


def freshness_lifetime(
    cc: dict[str, str | None],
    headers: Headers,
    status: int,
    response_time: float,
    heuristic: bool,
    default_ttl: float | None,
) -> tuple[float, bool]:
    """Seconds a response is fresh for a shared cache, and whether it said so explicitly.

    ``s-maxage`` wins over ``max-age``, which wins over ``Expires`` - ``Date``; a malformed
    value of the directive or field that decides means 0 (stale). Without explicit
    information, ``heuristic`` gives 10 % of the time since ``Last-Modified`` (at most a
    day) and ``default_ttl`` a fixed lifetime, both only for heuristically cacheable
    statuses.

    >>> freshness_lifetime({"max-age": "60", "s-maxage": "5"}, [], 200, 0.0, False, None)
    (5.0, True)
    >>> freshness_lifetime({}, [(b"expires", b"garbage")], 200, 0.0, False, None)
    (0.0, True)
    >>> freshness_lifetime({}, [], 200, 0.0, False, 30)
    (30.0, False)
    """
    for name in ("s-maxage", "max-age"):
        if name in cc:
            d = delta_seconds(cc[name])
            return (float(d) if d is not None else 0.0), True
    expires = field(headers, b"expires")
    if expires is not None:
        exp = http_date(expires)
        if exp is None:
            return 0.0, True
        date = http_date(field(headers, b"date"))
        return max(0.0, exp - (date if date is not None else response_time)), True
    if status not in HEURISTIC_STATUSES:
        return 0.0, False
    if heuristic:
        lm = http_date(field(headers, b"last-modified"))
        date = http_date(field(headers, b"date"))
        base = date if date is not None else response_time
        if lm is not None and lm < base:
            return min(0.1 * (base - lm), 86400.0), False
    if default_ttl is not None:
        return float(default_ttl), False
    return 0.0, False


def initial_age(headers: Headers, request_time: float, response_time: float) -> float | None:
    """The corrected initial age of a response (RFC 9111 §4.2.3); None if ``Age`` is invalid.

    >>> initial_age([(b"age", b"10")], 100.0, 101.0)
    11.0
    >>> initial_age([(b"age", b"ten")], 100.0, 101.0) is None
    True
    """
    age_value = 0
    raw = field(headers, b"age")
    if raw is not None:
        d = delta_seconds(raw.strip(b" \t").decode("latin-1"))
        if d is None:
            return None
        age_value = d
    date = http_date(field(headers, b"date"))
    apparent = max(0.0, response_time - date) if date is not None else 0.0
    corrected = age_value + (response_time - request_time)
    return max(apparent, corrected)


def parse_vary(headers: Headers) -> tuple[str, ...] | None:
    """The request header names a response varies on, lower-case and sorted; None for ``*``.

    >>> parse_vary([(b"vary", b"Accept-Encoding, accept-language"), (b"vary", b" * ")])
    >>> parse_vary([(b"vary", b"Accept-Encoding, ,Cookie")])
    ('accept-encoding', 'cookie')
    """
    names = set()
    for item in parse_list(fields(headers, b"vary")):
        if item == b"*":
            return None
        names.add(item.decode("latin-1").lower())
    return tuple(sorted(names))


def _normalise_value(values: list[bytes]) -> bytes:
    """One request header's lines, combined and normalised as RFC 9111 §4.1 allows:
    the lines joined as one list, whitespace around items dropped."""
    return b",".join(parse_list(values))


def vary_digest(names: Sequence[str], headers: Headers) -> tuple[bytes, tuple[bytes | None, ...]]:
    """A digest of the request's values of ``names``, and the values themselves.

    An absent header (None) differs from an empty one.

    >>> d1, v1 = vary_digest(["accept"], [(b"accept", b"a, b")])
    >>> d2, v2 = vary_digest(["accept"], [(b"accept", b"a"), (b"accept", b"b")])
    >>> d1 == d2, v1
    (True, (b'a,b',))
    """
    values: list[bytes | None] = []
    h = hashlib.blake2b(digest_size=16)
    for name in names:
        lines = fields(headers, name.encode("latin-1"))
        if not lines:
            values.append(None)
            h.update(b"\x00")
        else:
            v = _normalise_value(lines)
            values.append(v)
            h.update(b"\x01" + len(v).to_bytes(4, "big") + v)
    return h.hexdigest().encode(), tuple(values)


def etag_matches(condition: bytes, etag: bytes | None) -> bool:
    """Weak comparison of an ``If-None-Match`` value against a stored ETag.

    >>> etag_matches(b'"a", W/"b"', b'"b"'), etag_matches(b"*", b'"x"'), etag_matches(b'"a"', None)
    (True, True, False)
    """
    if etag is None:
        return False
    if condition.strip() == b"*":
        return True
    mine = etag.strip()
    mine = mine[2:] if mine.startswith(b"W/") else mine
    for item in parse_list([condition]):
        if item.startswith(b"W/"):
            item = item[2:]
        if item == mine:
            return True
    return False


def normalise_host(raw: bytes | None) -> str | None:
    """A request's host, lower-case, checked for syntax; None when missing or malformed.

    >>> normalise_host(b"Example.COM:8000"), normalise_host(b"a b"), normalise_host(b"[::1]:80")
    ('example.com:8000', None, '[::1]:80')
    """
    if not raw or len(raw) > 260:
        return None
    try:
        host = raw.decode("ascii").strip().lower()
    except UnicodeDecodeError:
        return None
    if not _HOST.fullmatch(host):
        return None
    return host


def split_tags(values: Iterable[bytes]) -> list[str]:
    """Tags named by the tag header: comma- or space-separated, empty items dropped.

    >>> split_tags([b"posts, post:1 lists", b"  "])
    ['posts', 'post:1', 'lists']
    """
    # A dict keeps the first occurrence of each tag in order, in linear time (a PURGE may
    # name any number of tags).
    out: dict[str, None] = {}
    for v in values:
        for item in v.replace(b",", b" ").split():
            out[item.decode("latin-1")] = None
    return list(out)


def cache_status(kind: str, **params: str | int | bool) -> bytes:
    """A ``Cache-Status`` member (RFC 9211) for this cache, named ``ziggurat``.

    >>> cache_status("hit", ttl=12)
    b'ziggurat; hit; ttl=12'
    >>> cache_status("fwd", fwd="uri-miss", detail="no-store")
    b'ziggurat; fwd=uri-miss; detail=no-store'
    """
    parts = ["ziggurat"]
    if kind == "hit":
        parts.append("hit")
    for k, v in params.items():
        if v is True:
            parts.append(k.replace("_", "-"))
        elif v is not False:
            parts.append(f"{k.replace('_', '-')}={v}")
    return "; ".join(parts).encode("ascii")
