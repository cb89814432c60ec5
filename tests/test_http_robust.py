"""The middleware never makes a request fail: bad bytes in any header, a body that fails
midway, a cache without its shared segment. Also the pure parsers on arbitrary bytes."""

from __future__ import annotations

import http.client
import time
from collections.abc import Iterator

import pytest
from http_servers import Server, running, server_log, url
from hypothesis import given, settings
from hypothesis import strategies as st
from ziggurat.http import CacheMiddleware, WSGICacheMiddleware, rules, storable
from ziggurat.http.options import Options

pytestmark = pytest.mark.timeout(180)


@pytest.fixture(scope="module", params=["asgi", "wsgi"])
def srv(request: pytest.FixtureRequest) -> Iterator[Server]:
    with running(request.param, workers=1) as s:
        yield s


def test_body_failing_midway_is_not_stored(srv: Server) -> None:
    n = srv.name()
    for size in (10, 3000):  # buffered (small) and streamed past max_body (large)
        path = f"/stream/{n}?n=3&size={size}&break=2&h=Cache-Control%3A%20max-age%3D60"
        conn = http.client.HTTPConnection("127.0.0.1", srv.port, timeout=20)
        try:
            conn.request("GET", path, headers={"Host": f"127.0.0.1:{srv.port}"})
            r = conn.getresponse()
            got = b""
            try:
                got = r.read()
            except (http.client.IncompleteRead, OSError) as e:
                got = getattr(e, "partial", b"")
            # Whatever reached the client is a prefix of the app's own body.
            assert (b"a" * size + b"b" * size).startswith(got)
        except (http.client.RemoteDisconnected, ConnectionError):
            pass
        finally:
            conn.close()
        again = srv.request(path.replace("break=2", "break=9"))
        assert again.status == 200
        assert "hit" not in again.cache_status.split("; ")


def test_an_error_of_the_app_reaches_the_server_log(srv: Server) -> None:
    # Starlette sends its 500 page, then raises for the server to log; Flask logs before
    # it answers. Behind the middleware the traceback is logged all the same.
    n = srv.name()
    r = srv.request(f"/boom/{n}")
    assert r.status == 500
    deadline = time.monotonic() + 10
    while "RuntimeError: the app failed" not in server_log(srv):
        assert time.monotonic() < deadline, server_log(srv)[-2000:]
        time.sleep(0.05)
    assert "Traceback" in server_log(srv)


@pytest.mark.parametrize("kind", ["asgi", "wsgi"])
def test_without_shared_segment_the_app_still_answers(kind: str) -> None:
    with running(kind, workers=2, cache_dir="/nonexistent/ziggurat-http") as s:
        n = s.name()
        u = url(n, "Cache-Control: max-age=60", "Cache-Tag: x")
        for _ in range(4):
            r = s.request(u)
            assert r.status == 200 and r.body.startswith(f"/e/{n}?".encode())
            assert r.h("cache-tag") is None
            assert r.cache_status.startswith("ziggurat")


def test_huge_and_binary_request_headers(srv: Server) -> None:
    n = srv.name()
    u = url(n, "Cache-Control: max-age=60", "Vary: Accept-Language")
    for value in ("x" * 6000, "\xe9\xff\x80 caf\xe9", ""):
        r = srv.request(u, headers={"Accept-Language": value, "Cache-Control": value})
        assert r.status == 200 and r.body.startswith(f"/e/{n}?".encode())


@settings(max_examples=300, deadline=None)
@given(st.lists(st.binary(max_size=60), max_size=4))
def test_parsers_accept_any_bytes(values: list[bytes]) -> None:
    cc = rules.parse_cache_control(values)
    assert all(k == k.lower() for k in cc)
    headers = [(b"cache-control", v) for v in values] + [(b"age", v) for v in values]
    headers += [(b"expires", v) for v in values] + [(b"date", v) for v in values]
    headers += [(b"vary", v) for v in values] + [(b"etag", v) for v in values]
    # Every response parser, through what the fill decides of such a response.
    m = storable.decide(Options(heuristic=True), 200, headers, storable.Request(), 1000.0)
    assert isinstance(m, str) or (m.lifetime >= 0 and m.initial_age >= 0)
    assert isinstance(m, str) or all(v == v.lower() for v in m.vary)
    for v in values:
        rules.normalise_host(v)
        assert all(t for t in rules.split_tags([v]))


def test_bad_options_name_the_function_and_argument() -> None:
    from ziggurat import Cache

    cache = Cache("http-badopts", size="8MiB", directory="/dev/shm")
    try:
        with pytest.raises(TypeError, match=r"CacheMiddleware\(\): unknown option"):
            CacheMiddleware(lambda *a: None, cache, max_bdy=5)
        with pytest.raises(ValueError, match=r"WSGICacheMiddleware\(\): max_body"):
            WSGICacheMiddleware(lambda *a: None, cache, max_body=-1)
        with pytest.raises(ValueError, match="purge_token"):
            CacheMiddleware(lambda *a: None, cache, purge_token="short")
        with pytest.raises(TypeError, match="allowed_hosts"):
            CacheMiddleware(lambda *a: None, cache, allowed_hosts="example.com")
        with pytest.raises(TypeError, match=r"cache must be a ziggurat\.Cache"):
            WSGICacheMiddleware(lambda *a: None, object())
    finally:
        cache.unlink()
