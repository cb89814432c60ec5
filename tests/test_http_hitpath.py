"""The hit path of the HTTP cache: what a plain hit sends (the stored headers, then Age and
Cache-Status, built once per second of age), and the requests it must leave to the full
rules. Under uvicorn (ASGI) and gunicorn (WSGI) with two workers each, plus in process
for ``Hit`` and ``Engine.fresh``.
"""

from __future__ import annotations

import asyncio
import http.client
import re
import time
from collections.abc import Iterator
from typing import Any
from urllib.parse import quote

import pytest
from http_servers import OPTS, Server, asgi_scope, running, url
from ziggurat import Cache
from ziggurat.http import CacheMiddleware
from ziggurat.http.engine import Engine, Hit, now
from ziggurat.http.options import Options
from ziggurat.http.store import MAX_URL_KEY, Stored, base_key, save

pytestmark = pytest.mark.timeout(120)

# Lines the servers add to every response, cached or not.
_SERVER_LINES = {"date", "server", "connection", "keep-alive"}
_HIT = re.compile(r"ziggurat; hit; ttl=(\d+)")


@pytest.fixture(scope="module", params=["asgi", "wsgi"])
def srv(request: pytest.FixtureRequest) -> Iterator[Server]:
    with running(request.param, workers=2) as s:
        yield s


@pytest.fixture(scope="module", params=["asgi", "wsgi"])
def quiet(request: pytest.FixtureRequest) -> Iterator[Server]:
    opts = {**OPTS, "cache_status": False, "request_directives": False}
    with running(request.param, workers=2, opts=opts) as s:
        yield s


def _raw(
    srv: Server, path: str, method: str = "GET", headers: list[tuple[str, str]] | None = None
) -> tuple[int, list[tuple[str, str]], bytes]:
    """Status, header lines in the order sent (names lower-cased), body."""
    conn = http.client.HTTPConnection("127.0.0.1", srv.port, timeout=30)
    try:
        conn.putrequest(method, path, skip_accept_encoding=True, skip_host=True)
        items = headers or []
        if not any(k.lower() == "host" for k, _ in items):
            conn.putheader("Host", f"127.0.0.1:{srv.port}")
        for k, v in items:
            conn.putheader(k, v)
        conn.endheaders()
        r = conn.getresponse()
        return r.status, [(k.lower(), v) for k, v in r.getheaders()], r.read()
    finally:
        conn.close()


def _app_lines(lines: list[tuple[str, str]]) -> list[tuple[str, str]]:
    return [(k, v) for k, v in lines if k not in _SERVER_LINES | {"age", "cache-status"}]


def _one(lines: list[tuple[str, str]], name: str) -> str:
    values = [v for k, v in lines if k == name]
    assert len(values) == 1, (name, lines)
    return values[0]


# -- what a hit sends ------------------------------------------------------------------------


def test_hit_sends_the_stored_lines_then_age_and_cache_status(srv: Server) -> None:
    n = srv.name()
    srv.spec(
        n,
        200,
        [
            ("Content-Type", "text/plain; charset=utf-8"),
            ("Cache-Control", "max-age=60"),
            ("X-Multi", "one"),
            ("X-Multi", "two"),
            ("Cache-Tag", "hp-tag"),
            ("ETag", '"v1"'),
        ],
    )
    status, miss, body = _raw(srv, f"/e/{n}")
    assert status == 200 and "stored" in _one(miss, "cache-status")
    # Several hits, so both workers build their own finished lists.
    for _ in range(6):
        st, lines, b = _raw(srv, f"/e/{n}")
        assert st == 200 and b == body
        assert _app_lines(lines) == _app_lines(miss)
        assert lines[-2][0] == "age" and lines[-1][0] == "cache-status", lines
        assert int(_one(lines, "age")) >= 0
        assert _HIT.fullmatch(_one(lines, "cache-status")), lines
        assert _one(lines, "content-length") == str(len(body))
        assert [v for k, v in lines if k == "x-multi"] == ["one", "two"]
        assert "cache-tag" not in dict(lines)
    assert srv.count(n) == 1


def test_age_and_ttl_move_with_the_clock(srv: Server) -> None:
    n = srv.name()
    u = url(n, "Cache-Control: max-age=40")
    srv.request(u)
    first: list[tuple[int, int]] = []
    for _ in range(4):
        r = srv.request(u)
        m = _HIT.fullmatch(r.cache_status)
        assert m is not None, r.cache_status
        first.append((int(r.h("age") or "-1"), int(m.group(1))))
    time.sleep(2.2)
    later: list[tuple[int, int]] = []
    for _ in range(4):
        r = srv.request(u)
        m = _HIT.fullmatch(r.cache_status)
        assert m is not None, r.cache_status
        later.append((int(r.h("age") or "-1"), int(m.group(1))))
    for age, ttl in first + later:
        assert 38 <= age + ttl <= 40, (age, ttl)
    assert max(a for a, _ in first) <= 1
    assert all(a >= 2 for a, _ in later) and max(a for a, _ in later) <= 4, later
    assert srv.count(n) == 1


def test_hit_ends_when_the_response_goes_stale(srv: Server) -> None:
    n = srv.name()
    # The ETag keeps the stale response stored, to be revalidated.
    u = url(n, "Cache-Control: max-age=2", etag='"s1"')
    srv.request(u)
    assert srv.request(u).cache_status.startswith("ziggurat; hit")
    time.sleep(2.3)
    r = srv.request(u)
    assert "fwd=stale; fwd-status=304; detail=revalidated" in r.cache_status, r.cache_status
    assert srv.count(n) == 2


def test_head_hit_has_the_get_lines_and_no_body(srv: Server) -> None:
    n = srv.name()
    u = url(n, "Cache-Control: max-age=60", "X-Kind: page")
    _, got, body = _raw(srv, u)
    _raw(srv, u)
    st, lines, b = _raw(srv, u, method="HEAD")
    assert st == 200 and b == b""
    assert _app_lines(lines) == _app_lines(got)
    assert _one(lines, "content-length") == str(len(body))
    assert _HIT.fullmatch(_one(lines, "cache-status"))
    assert srv.count(n) == 1


def test_conditional_requests_on_a_hit(srv: Server) -> None:
    n = srv.name()
    lm = "Tue, 01 Jul 2025 10:00:00 GMT"
    u = url(n, "Cache-Control: max-age=60", f"Last-Modified: {lm}", etag='"e1"')
    body = srv.request(u).body
    assert srv.request(u).cache_status.startswith("ziggurat; hit")
    st, lines, b = _raw(srv, u, headers=[("If-None-Match", '"e1"')])
    assert st == 304 and b == b""
    assert _one(lines, "etag") == '"e1"' and int(_one(lines, "age")) >= 0
    assert _HIT.fullmatch(_one(lines, "cache-status"))
    assert "x-kind" not in dict(lines) and "content-length" not in dict(lines)
    st, _, b = _raw(srv, u, headers=[("If-None-Match", '"e0"')])
    assert st == 200 and b == body
    st, _, b = _raw(srv, u, headers=[("If-Modified-Since", lm)])
    assert st == 304 and b == b""
    st, _, b = _raw(srv, u, headers=[("If-Modified-Since", "Mon, 30 Jun 2025 10:00:00 GMT")])
    assert st == 200 and b == body
    assert srv.count(n) == 1


# -- requests the hit path leaves to the full rules -------------------------------------------


def test_request_headers_that_change_the_answer(srv: Server) -> None:
    n = srv.name()
    u = url(n, "Cache-Control: max-age=60")
    body = srv.request(u).body
    assert srv.request(u).body == body
    calls = 1
    for headers, expect in [
        ({"Cache-Control": "no-cache"}, "fwd="),
        ({"Pragma": "no-cache"}, "fwd="),
        ({"Cache-Control": "max-age=0"}, "fwd="),
        ({"X-Forwarded-Host": "evil.test"}, "detail=header"),
        ({"Range": "bytes=0-1"}, "detail=range"),
        ({}, "detail=body"),  # a body (Content-Length: 3)
    ]:
        r = srv.request(u, headers=headers, body=None if headers else b"abc")
        assert expect in r.cache_status and "hit" not in r.cache_status.split("; "), (
            headers,
            r.cache_status,
        )
        calls = srv.count(n)
    # The requests that revalidated replaced the stored response: serve the current one.
    current = srv.request(u)
    assert current.cache_status.startswith("ziggurat; hit")
    for headers in (
        {"Authorization": "Basic eDp5"},
        {"Cookie": "theme=dark"},
        {"Content-Length": "0"},
        {"Accept": "text/html", "User-Agent": "probe"},
    ):
        r = srv.request(u, headers=headers)
        assert r.cache_status.startswith("ziggurat; hit"), (headers, r.cache_status)
        assert r.body == current.body
    assert srv.count(n) == calls


def test_host_spellings_share_an_entry_and_other_hosts_do_not(srv: Server) -> None:
    n = srv.name()
    u = url(n, "Cache-Control: max-age=60")
    port = srv.port
    body = srv.request(u, headers={"Host": f"localhost:{port}"}).body
    for host in (f"LocalHost:{port}", f"LOCALHOST:{port}", f"localhost:{port}"):
        r = srv.request(u, headers={"Host": host})
        assert r.cache_status.startswith("ziggurat; hit") and r.body == body, host
    r = srv.request(u, headers={"Host": "evil.test"})
    assert "detail=host" in r.cache_status
    r = srv.request(u, headers={"Host": f"127.0.0.1:{port}"})
    assert "fwd=uri-miss" in r.cache_status
    assert srv.count(n) == 3


def test_purged_response_is_not_served_again(srv: Server) -> None:
    n = srv.name()
    u = url(n, "Cache-Control: max-age=60")
    first = srv.request(u).body
    for _ in range(4):
        assert srv.request(u).body == first
    full = quote(f"http://127.0.0.1:{srv.port}{u}", safe="")
    assert srv.request("/admin/url?u=" + full, method="POST").body == b"True"
    second = srv.request(u)
    assert "fwd=uri-miss" in second.cache_status and second.body != first
    for _ in range(4):
        assert srv.request(u).body == second.body
    assert srv.count(n) == 2


def test_without_cache_status_a_hit_still_has_age(quiet: Server) -> None:
    n = quiet.name()
    u = url(n, "Cache-Control: max-age=60")
    _, miss, body = _raw(quiet, u)
    for headers in ([], [("Cache-Control", "no-cache")], [("Pragma", "no-cache")]):
        st, lines, b = _raw(quiet, u, headers=headers)
        assert st == 200 and b == body
        assert "cache-status" not in dict(lines) and int(_one(lines, "age")) >= 0
        assert lines[-1][0] == "age"
        assert _app_lines(lines) == _app_lines(miss)
    assert quiet.count(n) == 1


# -- in process --------------------------------------------------------------------------------


def _stored(
    *, lifetime: float = 60.0, initial_age: float = 0.0, at: float = 1000.0, **kw: Any
) -> Stored:
    fields: dict[str, Any] = dict(
        status=200,
        headers=((b"content-type", b"text/plain"),),
        body=b"hello",
        request_time=at,
        response_time=at,
        initial_age=initial_age,
        lifetime=lifetime,
        swr=0.0,
        sie=0.0,
        flags=frozenset(),
        etag=None,
        last_modified=None,
        vary=(),
        vary_values=(),
        tags=(),
    )
    fields.update(kw)
    return Stored(**fields)


def test_hit_seconds_follow_the_age() -> None:
    h = Hit(_stored(initial_age=2.5), cache_status=True)
    assert h.tick(1000.2)
    assert h.raw[-2:] == [(b"age", b"2"), (b"cache-status", b"ziggurat; hit; ttl=57")]
    assert (h.since, h.until) == (float("-inf"), 1000.5)
    assert h.tick(1003.7)
    assert h.raw[-2] == (b"age", b"6") and (h.since, h.until) == (1003.5, 1004.5)
    assert h.raw[:-2] == [(b"content-type", b"text/plain"), (b"content-length", b"5")]
    # A clock behind the response's time: the age is its initial age.
    assert h.tick(990.0) and h.raw[-2] == (b"age", b"2")
    # The last second ends where freshness does.
    assert h.tick(1057.0) and h.until == 1057.5
    assert not h.tick(1057.5) and not h.tick(2000.0)


def test_hit_never_fresh_for_no_cache_or_an_age_past_its_lifetime() -> None:
    assert not Hit(_stored(flags=frozenset({"no-cache"})), cache_status=True).tick(1000.0)
    assert not Hit(_stored(lifetime=5.0, initial_age=5.0), cache_status=True).tick(999.0)
    assert Hit(_stored(flags=frozenset({"must-revalidate"})), cache_status=True).tick(1000.0)


def test_hit_in_the_adapters_form() -> None:
    def wsgi(hdrs: list[tuple[bytes, bytes]]) -> list[tuple[str, str]]:
        return [(k.decode(), v.decode()) for k, v in hdrs]

    h = Hit(
        _stored(status=204, body=b""),
        cache_status=False,
        emit_headers=wsgi,
        emit_status=lambda code: f"{code} No Content",
    )
    assert h.tick(1001.5)
    assert h.status == "204 No Content"
    assert h.headers == [("content-type", "text/plain"), ("age", "1")]
    assert h.raw == [(b"content-type", b"text/plain"), (b"age", b"1")]


@pytest.fixture
def cache() -> Iterator[Cache]:
    c = Cache(f"test-hitpath-{time.monotonic_ns()}", size="8MiB")
    try:
        yield c
    finally:
        c.unlink()


def test_fresh_agrees_with_classify(cache: Cache) -> None:
    e = Engine(cache, Options(allowed_hosts=("example.com",)))
    t = now()
    plain = _stored(at=t)
    save(cache, base_key("http", "example.com", b"/a?x=1"), plain, 60, t)
    varied = _stored(at=t, body=b"fr", vary=("accept-language",), vary_values=(b"fr",))
    save(cache, base_key("http", "example.com", b"/v"), varied, 60, t)
    no_cache = _stored(at=t, flags=frozenset({"no-cache"}))
    save(cache, base_key("http", "example.com", b"/nc"), no_cache, 60, t)
    stale = _stored(at=t - 100)
    save(cache, base_key("http", "example.com", b"/old"), stale, 60, t)
    long_target = b"/" + b"l" * MAX_URL_KEY
    save(cache, base_key("http", "example.com", long_target), plain, 60, t)

    fr = [(b"host", b"example.com"), (b"accept-language", b"fr")]
    cases: list[tuple[str, bytes, bytes, Any, bool]] = [
        ("http", b"example.com", b"/a?x=1", [], True),
        ("http", b"EXAMPLE.com:80", b"/a?x=1", [], False),  # another key: port kept
        ("http", b"Example.COM", b"/a?x=1", [], True),
        ("https", b"example.com", b"/a?x=1", [], False),
        ("http", b"evil.test", b"/a?x=1", [], False),
        ("http", b"example.com", b"/a?x=1&_method=PUT", [], False),
        ("http", b"example.com", b"/v", fr, True),
        ("http", b"example.com", b"/v", [(b"accept-language", b"de")], False),
        ("http", b"example.com", b"/nc", [], False),
        ("http", b"example.com", b"/old", [], False),
        ("http", b"example.com", b"/missing", [], False),
    ]
    for scheme, host, target, headers, hit in cases:
        h = e.fresh(scheme, host, target, headers, now())
        d = e.classify("GET", scheme, host, target, headers, None, now())
        assert (h is not None) == hit, (host, target)
        if h is not None:
            assert d is h
            assert h.body == (b"fr" if target == b"/v" else b"hello")
        else:
            assert not isinstance(d, Hit) or target == b"/missing", (host, target, d)
    # Left to classify: a Vary variant without the request's headers, a URL keyed by digest.
    assert e.fresh("http", b"example.com", b"/v", None, now()) is None
    assert isinstance(e.classify("GET", "http", b"example.com", b"/v", fr, None, now()), Hit)
    assert e.fresh("http", b"example.com", long_target, [], now()) is None
    long_hit = e.classify("GET", "http", b"example.com", long_target, [], None, now())
    assert isinstance(long_hit, Hit) and long_hit.body == b"hello"
    # A str Host (a WSGI environ's) finds the same entry.
    assert e.fresh("http", "example.com", b"/a?x=1", None, now()) is not None


def test_clients_get_their_own_header_list(cache: Cache) -> None:
    async def app(scope: Any, receive: Any, send: Any) -> None:
        await send(
            {
                "type": "http.response.start",
                "status": 200,
                "headers": [(b"cache-control", b"max-age=60")],
            }
        )
        await send({"type": "http.response.body", "body": b"page"})

    mw = CacheMiddleware(app, cache, allowed_hosts=["example.com"])
    scope = asgi_scope(b"/p", [(b"host", b"example.com")])

    async def receive() -> dict[str, Any]:
        return {"type": "http.request", "body": b"", "more_body": False}

    async def run() -> list[list[Any]]:
        got: list[list[Any]] = []

        async def send(message: dict[str, Any]) -> None:
            if message["type"] == "http.response.start":
                got.append(message["headers"])
                # An outer layer that edits what it is given.
                message["headers"].append((b"x-outer", b"1"))
            else:
                assert message["body"] == b"page" and not message.get("more_body", False)

        for _ in range(4):
            await mw(scope, receive, send)
        return got

    got = asyncio.run(run())
    for hdrs in got[1:]:
        names = [k for k, _ in hdrs]
        assert names == [b"cache-control", b"content-length", b"age", b"cache-status", b"x-outer"]


def test_a_scope_the_precheck_cannot_read_gets_the_full_rules(cache: Cache) -> None:
    calls: list[int] = []

    async def app(scope: Any, receive: Any, send: Any) -> None:
        calls.append(1)
        headers = [(b"cache-control", b"max-age=60"), (b"content-length", b"2")]
        await send({"type": "http.response.start", "status": 200, "headers": headers})
        await send({"type": "http.response.body", "body": b"ok"})

    mw = CacheMiddleware(app, cache, allowed_hosts=["example.com"])
    # A header name that is not bytes (unhashable): no server sends it, and still the
    # request is answered, by the app.
    scope = asgi_scope(b"/odd", [(bytearray(b"x-odd"), b"1"), (b"host", b"example.com")])

    async def receive() -> dict[str, Any]:
        return {"type": "http.request", "body": b"", "more_body": False}

    async def run() -> list[dict[str, Any]]:
        sent: list[dict[str, Any]] = []

        async def send(message: dict[str, Any]) -> None:
            sent.append(message)

        await mw(scope, receive, send)
        return sent

    sent = asyncio.run(run())
    assert sent[0]["status"] == 200 and sent[-1]["body"] == b"ok" and calls == [1]
    status = dict(sent[0]["headers"])[b"cache-status"]
    assert status == b"ziggurat; fwd=bypass; detail=error"
