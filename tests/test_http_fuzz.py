"""Fuzzed request and response headers through both middlewares under real servers.

Whatever the headers (malformed Cache-Control, Expires, Age, Vary or Date, huge values,
bytes that are not ASCII), the middleware never answers 500 when the app did not, and
never serves a body stored for another URL. And in process, whatever the header lines up
to the size a server lets through, classifying a request and deciding what to store of its
response cost in proportion to the lines.
"""

from __future__ import annotations

import functools
import statistics
import time
from collections.abc import Callable, Iterator

import pytest
from http_servers import Server, running
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from ziggurat.http.options import Options
from ziggurat.http.storable import Request, decide

pytestmark = pytest.mark.timeout(600)


@pytest.fixture(scope="module", params=["asgi", "wsgi"])
def srv(request: pytest.FixtureRequest) -> Iterator[Server]:
    with running(request.param, workers=2) as s:
        yield s


_ascii = st.text(st.characters(min_codepoint=0x20, max_codepoint=0x7E), max_size=40)
# Visible ASCII, space and obs-text (DEL is not allowed in a field value; servers refuse it).
_latin = st.text(
    st.characters(min_codepoint=0x20, max_codepoint=0xFF, blacklist_characters="\x7f"),
    max_size=40,
)
_directive = st.sampled_from(
    [
        "max-age=60",
        "MAX-AGE=60",
        "s-maxage=60",
        "max-age=-1",
        "max-age=1e3",
        'max-age="60"',
        "max-age=99999999999999999999",
        "no-store",
        "no-cache",
        "private",
        'private="set-cookie"',
        "public",
        "must-revalidate",
        "stale-while-revalidate=30",
        "stale-if-error=x",
        "=",
        ",,,",
        '"',
        "max-age",
    ]
)
_cc = st.one_of(st.lists(_directive, max_size=4).map(", ".join), _latin)
_date = st.one_of(
    st.just("Sun, 06 Nov 1994 08:49:37 GMT"),
    st.just("Thu, 01 Jan 2099 00:00:00 GMT"),
    st.just("0"),
    st.just("Sunday, 06-Nov-94 08:49:37 GMT"),
    _latin,
)
_resp_header = st.one_of(
    st.tuples(st.just("Cache-Control"), _cc),
    st.tuples(st.just("Expires"), _date),
    st.tuples(st.just("Date"), _date),
    st.tuples(st.just("Last-Modified"), _date),
    st.tuples(st.just("Age"), st.one_of(st.just("5"), st.just("-3"), _ascii)),
    st.tuples(st.just("Vary"), st.one_of(st.just("Accept-Language"), st.just(" * "), _ascii)),
    st.tuples(st.just("ETag"), st.one_of(st.just('"a"'), _latin)),
    st.tuples(st.just("Cache-Tag"), _latin),
    st.tuples(st.just("Content-Location"), _ascii),
    st.tuples(st.just("X-Big"), st.integers(1, 20_000).map(lambda n: "b" * n)),
)
_req_header = st.one_of(
    st.tuples(st.just("Cache-Control"), _cc),
    st.tuples(st.just("Pragma"), st.one_of(st.just("no-cache"), _ascii)),
    st.tuples(st.just("If-None-Match"), st.one_of(st.just('"a"'), st.just("*"), _latin)),
    st.tuples(st.just("If-Modified-Since"), _date),
    st.tuples(st.just("Accept-Language"), _latin),
    st.tuples(st.just("Cookie"), _latin),
    st.tuples(st.just("Authorization"), _ascii),
    st.tuples(st.just("X-Junk"), _latin),
)


@settings(
    max_examples=150,
    deadline=None,
    suppress_health_check=[HealthCheck.function_scoped_fixture, HealthCheck.too_slow],
)
@given(
    status=st.sampled_from([200, 203, 204, 301, 404, 410, 500, 503]),
    resp=st.lists(_resp_header, max_size=6),
    reqs=st.lists(st.lists(_req_header, max_size=4), min_size=1, max_size=3),
)
def test_fuzzed_headers_never_break_a_request(
    srv: Server,
    status: int,
    resp: list[tuple[str, str]],
    reqs: list[list[tuple[str, str]]],
) -> None:
    name = srv.name("fz")
    other = srv.name("fz")
    # A neighbour URL with a plain cacheable response: it must never leak into ``name``.
    srv.spec(other, 200, [("Cache-Control", "max-age=60")])
    srv.request(f"/e/{other}")
    srv.spec(name, status, [(k, v.strip()) for k, v in resp])
    for headers in reqs:
        r = srv.request(f"/e/{name}", headers=headers)
        if status != 500:
            assert r.status != 500, (r.headers, r.body)
        if r.body:
            assert r.body.startswith(name.encode() + b" #"), r.body
    r2 = srv.request(f"/e/{other}")
    assert r2.body.startswith(other.encode() + b" #")


# -- cost against the number of header lines ----------------------------------------------------

# The most a server lets through: nginx's default large_client_header_buffers (4 × 8 KiB)
# bounds a request head to about 32 KiB and a line to 8 KiB; gunicorn takes 100 lines of up
# to 8 KiB, uvicorn with h11 a 16 KiB head, and with httptools any size. Responses come from
# the app, and are scaled the same way.
_HEAD = 32 * 1024
_LINE = 8 * 1024

Hdrs = list[tuple[bytes, bytes]]
Line = Callable[[int], tuple[bytes, bytes]]


def _items(width: int, copy: int, form: bytes) -> bytes:
    return b", ".join(form % (copy, j) for j in range(width))


# Each kind makes copy ``i`` of a line, ``w`` items wide: distinct directives or names per
# copy (the ones a search through earlier ones finds last), or the same ones every time.
_REQUEST_LINES: dict[str, Callable[[int], Line]] = {
    "cc-distinct": lambda w: lambda i: (b"cache-control", _items(w, i, b"d%x-%d")),
    "cc-quoted": lambda w: lambda i: (b"cache-control", _items(w, i, b'd%x-%d="a, b"')),
    "cc-repeated": lambda w: lambda i: (b"cache-control", _items(w, 0, b"max-age=%d%d")),
    "pragma": lambda w: lambda i: (b"pragma", b"no-cache" * w),
    "cookie": lambda w: lambda i: (b"cookie", b"; ".join(b"c%x-%d=1" % (i, j) for j in range(w))),
    "accept-language": lambda w: lambda i: (b"accept-language", _items(w, i, b"l%x-%d")),
    "other": lambda w: lambda i: (b"x-r%x" % i, b"v" * w),
}
_RESPONSE_LINES: dict[str, Callable[[int], Line]] = {
    "cc-distinct": lambda w: lambda i: (b"cache-control", _items(w, i, b"d%x-%d")),
    "cc-private": lambda w: lambda i: (b"cache-control", b'private="%s"' % _items(w, i, b"x%x-%d")),
    # The last occurrence of a member wins: every line ends with the lifetime.
    "targeted": lambda w: (
        lambda i: (b"cdn-cache-control", _items(w, i, b"d%x-%d") + b", max-age=60")
    ),
    "targeted-repeated": lambda w: lambda i: (b"cdn-cache-control", _items(w, 0, b"max-age=%d%d")),
    "vary": lambda w: lambda i: (b"vary", _items(w, i, b"x-l%x-%d")),
    "connection": lambda w: lambda i: (b"connection", _items(w, i, b"x%x-%d")),
    "other": lambda w: lambda i: (b"x%x" % i, b"v" * w),
}
# A few items per line, or lines near the limit of one.
_width = st.one_of(st.integers(1, 8), st.integers(200, 300))


def _block(kinds: dict[str, Callable[[int], Line]]) -> st.SearchStrategy[list[Line]]:
    line = st.tuples(st.sampled_from(sorted(kinds)), _width).map(lambda t: kinds[t[0]](t[1]))
    return st.lists(line, min_size=1, max_size=4)


def _copies(block: list[Line], n: int) -> Hdrs:
    return [line(i) for i in range(n) for line in block]


def _median_costs(calls: dict[int, Callable[[], object]]) -> dict[int, float]:
    """Median CPU seconds of this thread for each call (what other processes take of the
    machine does not count), over runs that take turns, after one run that warms up."""
    times: dict[int, list[float]] = {n: [] for n in calls}
    for _ in range(10):
        for n, call in calls.items():
            start = time.thread_time()
            call()
            times[n].append(time.thread_time() - start)
    return {n: statistics.median(t[1:]) for n, t in times.items()}


@settings(max_examples=60, deadline=None)
@given(request=_block(_REQUEST_LINES), response=_block(_RESPONSE_LINES))
def test_classify_and_decide_cost_in_proportion_to_the_header_lines(
    request: list[Line], response: list[Line]
) -> None:
    # n copies of each block, then 4n, the larger as many as fit in a request head: linear
    # work costs about 4 times as much, work that grows with the square 16 times.
    # Sized by the longest copy: copy numbers stay under 0x1000 (at least 8 bytes a copy).
    last = [line(0xFFF) for line in request + response]
    assert max(len(v) for _, v in last) <= _LINE
    per_copy = max(
        sum(len(k) + len(v) + 4 for k, v in (f(0xFFF) for f in b)) for b in (request, response)
    )
    n = max(1, _HEAD // (4 * per_copy))
    opts = Options(allowed_hosts=("example.com",))
    native = opts.native
    sizes = {
        c: (_copies(request, c), [(b"cache-control", b"max-age=60"), *_copies(response, c)])
        for c in (n, 4 * n)
    }
    looked_up = {
        c: native.classify("GET", "http", b"example.com", b"/", q) for c, (q, _) in sizes.items()
    }
    assert all(a[0] == 0 for a in looked_up.values()), "looked up, not passed"
    cost = _median_costs(
        {
            c: functools.partial(native.classify, "GET", "http", b"example.com", b"/", q)
            for c, (q, _) in sizes.items()
        }
    )
    assert cost[4 * n] / cost[n] <= 8, ("classify", n, cost)
    cost = _median_costs(
        {
            c: functools.partial(
                decide, opts, 200, r, Request(headers=q, directives=looked_up[c][3])
            )
            for c, (q, r) in sizes.items()
        }
    )
    assert cost[4 * n] / cost[n] <= 8, ("decide", n, cost)
