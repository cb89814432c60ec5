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
import hashlib
import re
import time
from collections.abc import Iterable, Sequence

from ziggurat.http import targeted

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

# RFC 9111 §3: the final statuses stored when the response has explicit freshness. A
# status RFC 9110 does not define is understood by its class (RFC 9110 §15: a 299 as a
# 200). Never: 206 (ranges are not stored), 304 (it updates a stored response, §4.3.4),
# 305 and 306 (obsolete), 407 (it speaks to the proxy in front, not to every client).
STORABLE_STATUSES = frozenset(range(200, 600)) - {206, 304, 305, 306, 407}
# RFC 9110 §15.1: statuses that may get heuristic (or configured default) freshness.
HEURISTIC_STATUSES = frozenset({200, 203, 204, 300, 301, 308, 404, 405, 410, 414, 501})
# RFC 9111 §5.2.2.3 (must-understand): the statuses whose caching rules this cache
# implements beyond the general ones: the heuristically cacheable ones and the redirects.
UNDERSTOOD_STATUSES = HEURISTIC_STATUSES | {302, 303, 307}
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


_DAYS = "(Mon|Tue|Wed|Thu|Fri|Sat|Sun)"
_MONTHS = "(Jan|Feb|Mar|Apr|May|Jun|Jul|Aug|Sep|Oct|Nov|Dec)"
_MONTH_NUMBER = {m: i + 1 for i, m in enumerate(_MONTHS[1:-1].split("|"))}
_TIME = r"(\d\d):(\d\d):(\d\d)"
# RFC 9110 §5.6.7: the three forms, case-sensitive, single spaces, GMT only.
_IMF_FIXDATE = re.compile(rf"{_DAYS}, (\d\d) {_MONTHS} (\d{{4}}) {_TIME} GMT")
_RFC850 = re.compile(
    rf"(?:Monday|Tuesday|Wednesday|Thursday|Friday|Saturday|Sunday), "
    rf"(\d\d)-{_MONTHS}-(\d\d) {_TIME} GMT"
)
_ASCTIME = re.compile(rf"{_DAYS} {_MONTHS} ([ \d]\d) {_TIME} (\d{{4}})")


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
    if not value or len(value) > 64:
        return None
    try:
        text = value.decode("ascii").strip(" \t")
    except UnicodeDecodeError:
        return None
    m = _IMF_FIXDATE.fullmatch(text)
    if m is not None:
        _, day, mon, year, hh, mm, ss = m.groups()
        y = int(year)
    else:
        m = _RFC850.fullmatch(text)
        if m is not None:
            day, mon, yy, hh, mm, ss = m.groups()
            # RFC 9110 §5.6.7: a two-digit year more than 50 years ahead is in the past.
            y = 2000 + int(yy)
            if y > time.gmtime().tm_year + 50:
                y -= 100
        else:
            m = _ASCTIME.fullmatch(text)
            if m is None:
                return None
            _, mon, day, hh, mm, ss, year = m.groups()
            y = int(year)
    d, h, mi, sec = int(day), int(hh), int(mm), int(ss)
    month = _MONTH_NUMBER[mon]
    if not (1 <= d <= calendar.monthrange(y, month)[1] and h < 24 and mi < 60 and sec <= 60):
        return None
    return float(calendar.timegm((y, month, d, h, mi, sec, 0, 0, 0)))


def expires_time(headers: Headers) -> tuple[bool, float | None]:
    """Whether the response has ``Expires``, and its time (None when invalid: RFC 9111
    §5.3 makes an invalid date, or more than one ``Expires`` line, mean "already
    expired").

    >>> expires_time([(b"expires", b"Sun, 06 Nov 1994 08:49:37 GMT")])
    (True, 784111777.0)
    >>> expires_time([(b"expires", b"0")]), expires_time([])
    ((True, None), (False, None))
    """
    lines = fields(headers, b"expires")
    if not lines:
        return False, None
    if len(lines) > 1:
        return True, None
    return True, http_date(lines[0])


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
    return status < 400 and status in HEURISTIC_STATUSES


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
    for name in ("s-maxage", "max-age"):
        if name in cc:
            d = delta_seconds(cc[name])
            return (float(d) if d is not None else 0.0), True
    has_expires, exp = expires_time(headers) if expires else (False, None)
    if has_expires:
        if exp is None:
            return 0.0, True
        date = http_date(field(headers, b"date"))
        return max(0.0, exp - (date if date is not None else response_time)), True
    if not may_use_default_freshness(status):
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
    age_value = 0
    items = parse_list(fields(headers, b"age"))
    if items:
        d = delta_seconds(items[0].decode("latin-1"))
        if d is not None:
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
    if "must-understand" in cc:
        return None if status in UNDERSTOOD_STATUSES else "must-understand"
    return None if status in STORABLE_STATUSES else "status"


def ignores_no_store(status: int, cc: dict[str, str | None]) -> bool:
    """Whether ``no-store`` is overridden by ``must-understand`` on a status this cache
    understands (RFC 9111 §5.2.2.3).

    >>> ignores_no_store(200, {"must-understand": None, "no-store": None})
    True
    >>> ignores_no_store(200, {"no-store": None}), ignores_no_store(201, {"must-understand": None})
    (False, False)
    """
    return "must-understand" in cc and status in UNDERSTOOD_STATUSES


def connection_listed(headers: Headers) -> set[bytes]:
    """The lower-case names a response's ``Connection`` header lists: hop-by-hop fields
    of that message, never stored nor forwarded (RFC 9110 §7.6.1).

    >>> sorted(connection_listed([(b"connection", b"X-Secret, close"), (b"connection", b"a")]))
    [b'a', b'close', b'x-secret']
    """
    return {c.lower() for c in parse_list(fields(headers, b"connection"))}


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
    for name in targets:
        lines = fields(headers, name)
        if lines:
            cc = targeted.parse_targeted(lines)
            if cc is not None:
                return cc, name
    return parse_cache_control(fields(headers, b"cache-control")), None


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
