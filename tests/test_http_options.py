"""Options of the middleware and request directives, under real servers: default_ttl,
heuristic, store_set_cookie, bypass_cookies, key_headers, request_directives, tag_header,
cache_status; and If-Modified-Since, max-age, min-fresh, max-stale from the client."""

from __future__ import annotations

import time
from collections.abc import Iterator
from email.utils import formatdate

import pytest
from http_servers import OPTS, Server, running, url
from ziggurat import Cache
from ziggurat.http import DEFAULT_BYPASS_HEADERS, rules
from ziggurat.http.engine import Engine, Fill, now
from ziggurat.http.options import Options

pytestmark = pytest.mark.timeout(120)

CUSTOM = {
    **OPTS,
    "default_ttl": 30,
    "heuristic": True,
    "store_set_cookie": True,
    "bypass_cookies": ["sessionid"],
    "bypass_headers": [h for h in DEFAULT_BYPASS_HEADERS if h != "x-forwarded-proto"],
    "key_headers": ["x-forwarded-proto"],
    "tag_header": "Surrogate-Key",
    "surrogate_control": True,
}


@pytest.fixture(scope="module", params=["asgi", "wsgi"])
def srv(request: pytest.FixtureRequest) -> Iterator[Server]:
    with running(request.param, workers=2, opts=CUSTOM) as s:
        yield s


@pytest.fixture(scope="module", params=["asgi", "wsgi"])
def plain(request: pytest.FixtureRequest) -> Iterator[Server]:
    opts = {**OPTS, "request_directives": False, "cache_status": False}
    with running(request.param, workers=1, opts=opts) as s:
        yield s


def _hit(r: object) -> bool:
    return str(getattr(r, "cache_status", "")).startswith("ziggurat; hit")


def test_default_ttl_for_responses_without_freshness(srv: Server) -> None:
    n = srv.name()
    u = url(n)
    srv.request(u)
    assert _hit(srv.request(u))
    n2 = srv.name()
    u2 = url(n2, s=500)
    srv.request(u2)
    srv.request(u2)
    assert srv.count(n2) == 2


def test_heuristic_freshness_from_last_modified(srv: Server) -> None:
    n = srv.name()
    now = time.time()
    lm = formatdate(now - 10 * 86400, usegmt=True)
    u = url(n, f"Last-Modified: {lm}", f"Date: {formatdate(now, usegmt=True)}")
    srv.request(u)
    r = srv.request(u)
    assert _hit(r)
    # 10 % of ten days, capped at one day.
    ttl = int(r.cache_status.split("ttl=")[1].split(";")[0])
    assert 86000 < ttl <= 86400


def test_store_set_cookie_strips_the_cookie(srv: Server) -> None:
    n = srv.name()
    u = url(n, "Cache-Control: max-age=60", "Set-Cookie: csrftoken=abc")
    r1 = srv.request(u)
    assert r1.h("set-cookie") == "csrftoken=abc"
    r2 = srv.request(u)
    assert _hit(r2) and r2.h("set-cookie") is None


def test_bypass_cookies(srv: Server) -> None:
    n = srv.name()
    u = url(n, "Cache-Control: max-age=60")
    srv.request(u)
    r = srv.request(u, headers={"Cookie": "theme=dark; sessionid=s3cret"})
    assert "detail=cookie" in r.cache_status
    assert _hit(srv.request(u, headers={"Cookie": "theme=dark"}))


def test_key_headers_key_the_forwarded_proto(srv: Server) -> None:
    n = srv.name()
    u = url(n, "Cache-Control: max-age=60", reflect="x-forwarded-proto")
    a = srv.request(u, headers={"X-Forwarded-Proto": "https"})
    b = srv.request(u, headers={"X-Forwarded-Proto": "http"})
    assert b"reflect=https" in a.body and b"reflect=http" in b.body and a.body != b.body
    again = srv.request(u, headers={"X-Forwarded-Proto": "https"})
    assert _hit(again) and again.body == a.body
    assert srv.count(n) == 2
    # The URL's purge reaches both.
    full = f"http://127.0.0.1:{srv.port}{u}"
    from urllib.parse import quote

    srv.request("/admin/url?u=" + quote(full, safe=""), method="POST")
    assert not _hit(srv.request(u, headers={"X-Forwarded-Proto": "http"}))


def test_configured_tag_header(srv: Server) -> None:
    n = srv.name()
    tag = srv.name("sk")
    u = url(n, "Cache-Control: max-age=60", f"Surrogate-Key: a {tag}")
    r = srv.request(u)
    assert r.h("surrogate-key") is None
    srv.request(f"/admin/tag/{tag}", method="POST")
    assert not _hit(srv.request(u))
    assert srv.count(n) == 2


def test_if_modified_since_answered_from_store(srv: Server) -> None:
    n = srv.name()
    lm = "Sun, 06 Nov 1994 08:49:37 GMT"
    u = url(n, "Cache-Control: max-age=60", f"Last-Modified: {lm}")
    srv.request(u)
    assert srv.request(u, headers={"If-Modified-Since": lm}).status == 304
    r = srv.request(u, headers={"If-Modified-Since": "Sun, 06 Nov 1994 08:49:36 GMT"})
    assert r.status == 200 and r.body
    assert srv.count(n) == 1


def test_request_max_age_min_fresh_max_stale(srv: Server) -> None:
    n = srv.name()
    u = url(n, "Cache-Control: max-age=60", "Age: 30")
    srv.request(u)
    assert not _hit(srv.request(u, headers={"Cache-Control": "max-age=10"}))
    assert not _hit(srv.request(u, headers={"Cache-Control": "min-fresh=50"}))
    assert _hit(srv.request(u, headers={"Cache-Control": "max-age=100, min-fresh=5"}))
    n2 = srv.name()
    u2 = url(n2, "Cache-Control: max-age=1", etag='"x"')
    first = srv.request(u2)
    time.sleep(1.5)
    r = srv.request(u2, headers={"Cache-Control": "max-stale=60"})
    assert r.body == first.body and "max-stale" in r.cache_status


def test_request_directives_can_be_ignored(plain: Server) -> None:
    n = plain.name()
    u = url(n, "Cache-Control: max-age=60")
    first = plain.request(u)
    assert first.h("cache-status") is None
    r = plain.request(u, headers={"Cache-Control": "no-cache", "Pragma": "no-cache"})
    assert r.body == first.body
    assert plain.count(n) == 1


def test_surrogate_control_speaks_to_this_cache_alone(srv: Server) -> None:
    # It overrides Cache-Control here, and never reaches the client.
    n = srv.name()
    u = url(n, "Cache-Control: no-store", "Surrogate-Control: max-age=60")
    r1 = srv.request(u)
    assert r1.h("surrogate-control") is None and r1.h("cache-control") == "no-store"
    r2 = srv.request(u)
    assert _hit(r2) and r2.h("surrogate-control") is None and srv.count(n) == 1
    # A directive for another surrogate (a parameter names it) is not for this cache; one
    # for the device token it announced in Surrogate-Capability is.
    for sc, calls in (
        ("max-age=60;edge-2", 1),
        ("no-store", 2),
        ("max-age=0", 2),
        ("no-store;edge-2", 1),
        ("no-store;ziggurat", 2),
    ):
        n = srv.name()
        u = url(n, "Cache-Control: max-age=60", f"Surrogate-Control: {sc}")
        srv.request(u)
        srv.request(u)
        assert srv.count(n) == calls, sc


def test_surrogate_control_is_off_by_default(plain: Server) -> None:
    n = plain.name()
    u = url(n, "Cache-Control: no-store", "Surrogate-Control: max-age=60")
    r = plain.request(u)
    assert r.h("surrogate-control") == "max-age=60"
    plain.request(u)
    assert plain.count(n) == 2


def test_surrogate_capability_goes_to_the_app() -> None:
    c = Cache(f"test-surrogate-{time.monotonic_ns()}", size="8MiB")
    try:
        e = Engine(c, Options(allowed_hosts=("h",), surrogate_control=True))
        cap = [(b"surrogate-capability", b'cdn="ESI/1.0"')]
        f = e.classify("GET", "http", b"h", b"/", cap, None, now())
        assert isinstance(f, Fill)
        sent = rules.fields(f.upstream_headers(), b"surrogate-capability")
        assert sent == [b'cdn="ESI/1.0", ziggurat="Surrogate/1.0"']
        off = Engine(c, Options(allowed_hosts=("h",))).classify(
            "GET", "http", b"h", b"/x", cap, None, now()
        )
        assert isinstance(off, Fill) and rules.fields(
            off.upstream_headers(), b"surrogate-capability"
        ) == [b'cdn="ESI/1.0"']
    finally:
        c.unlink()
