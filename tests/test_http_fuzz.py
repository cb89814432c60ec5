"""Fuzzed request and response headers through both middlewares under real servers.

Whatever the headers (malformed Cache-Control, Expires, Age, Vary or Date, huge values,
bytes that are not ASCII), the middleware never answers 500 when the app did not, and
never serves a body stored for another URL.
"""

from __future__ import annotations

from collections.abc import Iterator

import pytest
from http_servers import Server, running
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

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
