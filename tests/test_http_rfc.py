"""RFC 9111 behaviour of the HTTP cache, for the ASGI middleware (uvicorn + Starlette) and
the WSGI middleware (gunicorn + Flask), each server with two workers sharing one segment.

Every test uses URLs of its own; ``srv.count(name)`` is how many calls reached the app.
"""

from __future__ import annotations

import time
from collections.abc import Iterator
from email.utils import formatdate

import pytest
from http_servers import TOKEN, Server, running, url

pytestmark = pytest.mark.timeout(120)


@pytest.fixture(scope="module", params=["asgi", "wsgi"])
def srv(request: pytest.FixtureRequest) -> Iterator[Server]:
    with running(request.param, workers=2) as s:
        yield s


def _until(pred: object, seconds: float = 15) -> bool:
    deadline = time.monotonic() + seconds
    while time.monotonic() < deadline:
        if pred():  # type: ignore[operator]
            return True
        time.sleep(0.05)
    return False


# -- storing -------------------------------------------------------------------------------


def test_miss_then_hit_with_age_and_cache_status(srv: Server) -> None:
    n = srv.name()
    u = url(n, "Cache-Control: max-age=60")
    r1 = srv.request(u)
    assert r1.status == 200
    assert "fwd=uri-miss" in r1.cache_status and "stored" in r1.cache_status
    r2 = srv.request(u)
    assert r2.body == r1.body
    assert r2.cache_status.startswith("ziggurat; hit")
    assert r2.h("age") is not None and int(r2.h("age") or "-1") >= 0
    assert srv.count(n) == 1


@pytest.mark.parametrize(
    "headers, reason",
    [
        (["Cache-Control: max-age=60, no-store"], "no-store"),
        (["Cache-Control: max-age=60, Private"], "private"),
        (["Cache-Control: PRIVATE, max-age=60"], "private"),
        (["Cache-Control: max-age=60", "Set-Cookie: sid=1"], "set-cookie"),
        (["Cache-Control: max-age=60", "Vary:  * "], "vary-star"),
        (["Cache-Control: max-age=60", "Vary: accept, *"], "vary-star"),
        ([], "no-freshness"),
        (["Cache-Control: public"], "no-freshness"),
    ],
)
def test_not_stored(srv: Server, headers: list[str], reason: str) -> None:
    n = srv.name()
    u = url(n, *headers)
    r1 = srv.request(u, headers={"Cookie": "unrelated=1"})
    assert f"detail={reason}" in r1.cache_status
    r2 = srv.request(u)
    assert "hit" not in r2.cache_status.split("; ")
    assert srv.count(n) == 2


def test_error_status_stored_only_with_explicit_freshness(srv: Server) -> None:
    n = srv.name()
    u = url(n, s=500)
    assert srv.request(u).status == 500
    assert srv.request(u).status == 500
    assert srv.count(n) == 2
    n2 = srv.name()
    u2 = url(n2, "Cache-Control: max-age=60", s=500)
    assert "stored" in srv.request(u2).cache_status
    r = srv.request(u2)
    assert r.status == 500 and r.cache_status.startswith("ziggurat; hit")
    assert srv.count(n2) == 1


def test_tag_header_stripped_and_invalidate_tags_purges(srv: Server) -> None:
    n = srv.name()
    tag = srv.name("tag")
    u = url(n, "Cache-Control: max-age=60", f"Cache-Tag: {tag}, other")
    r1 = srv.request(u)
    assert r1.h("cache-tag") is None
    assert srv.request(u).cache_status.startswith("ziggurat; hit")
    assert srv.request(f"/admin/tag/{tag}", method="POST").status == 200
    r3 = srv.request(u)
    assert "fwd=uri-miss" in r3.cache_status
    assert srv.count(n) == 2


def test_purge_url_purges_every_variant(srv: Server) -> None:
    n = srv.name()
    u = url(n, "Cache-Control: max-age=60", "Vary: Accept-Language")
    for lang in ("fr", "en"):
        srv.request(u, headers={"Accept-Language": lang})
        assert srv.request(u, headers={"Accept-Language": lang}).cache_status.startswith(
            "ziggurat; hit"
        )
    full = f"http://127.0.0.1:{srv.port}{u}"
    r = srv.request("/admin/url?u=" + __import__("urllib.parse").parse.quote(full), method="POST")
    assert r.body == b"True"
    for lang in ("fr", "en"):
        assert "fwd=uri-miss" in srv.request(u, headers={"Accept-Language": lang}).cache_status
    assert srv.count(n) == 4


def test_authorization_needs_public(srv: Server) -> None:
    n1, n2 = srv.name(), srv.name()
    auth = {"Authorization": "Bearer x"}
    u1 = url(n1, "Cache-Control: max-age=60")
    assert "detail=authorization" in srv.request(u1, headers=auth).cache_status
    u2 = url(n2, "Cache-Control: public, max-age=60")
    assert "stored" in srv.request(u2, headers=auth).cache_status
    assert srv.request(u2).cache_status.startswith("ziggurat; hit")
    assert srv.count(n2) == 1


def test_hop_by_hop_and_connection_listed_not_stored(srv: Server) -> None:
    n = srv.name()
    u = url(n, "Cache-Control: max-age=60", "Connection: X-Secret", "X-Secret: 1", "X-Kept: 2")
    srv.request(u)
    r = srv.request(u)
    assert r.cache_status.startswith("ziggurat; hit")
    assert r.h("x-secret") is None
    assert r.h("x-kept") == "2"


def test_range_passes_and_is_not_stored(srv: Server) -> None:
    n = srv.name()
    u = url(n, "Cache-Control: max-age=60")
    r = srv.request(u, headers={"Range": "bytes=0-3"})
    assert "fwd=bypass" in r.cache_status
    assert "fwd=uri-miss" in srv.request(u).cache_status
    assert srv.count(n) == 2


# -- freshness -----------------------------------------------------------------------------


def test_s_maxage_wins_over_max_age(srv: Server) -> None:
    n = srv.name()
    u = url(n, "Cache-Control: max-age=0, s-maxage=60")
    srv.request(u)
    assert srv.request(u).cache_status.startswith("ziggurat; hit")
    n2 = srv.name()
    u2 = url(n2, "Cache-Control: max-age=60, s-maxage=0")
    srv.request(u2)
    assert "hit" not in srv.request(u2).cache_status.split("; ")
    assert srv.count(n2) == 2


def test_expires_minus_date(srv: Server) -> None:
    now = time.time()
    n = srv.name()
    u = url(
        n, f"Date: {formatdate(now, usegmt=True)}", f"Expires: {formatdate(now + 60, usegmt=True)}"
    )
    srv.request(u)
    assert srv.request(u).cache_status.startswith("ziggurat; hit")
    n2 = srv.name()
    u2 = url(n2, "Expires: not a date", 'ETag: "v"')
    srv.request(u2)
    r = srv.request(u2)
    assert "hit" not in r.cache_status.split("; ")
    assert srv.count(n2) == 2


def test_age_replaced_and_invalid_age_ignored(srv: Server) -> None:
    n = srv.name()
    u = url(n, "Cache-Control: max-age=600", "Age: 100")
    srv.request(u)
    r = srv.request(u)
    assert r.cache_status.startswith("ziggurat; hit")
    assert r.headers["age"] == [r.h("age")] and int(r.h("age") or 0) >= 100
    n2 = srv.name()
    u2 = url(n2, "Cache-Control: max-age=600, stale-if-error=600", "Age: soon")
    srv.request(u2)
    r2 = srv.request(u2)
    assert r2.cache_status.startswith("ziggurat; hit") and int(r2.h("age") or "-1") < 100
    assert srv.count(n2) == 1


# -- reuse ---------------------------------------------------------------------------------


def test_vary_selects_and_normalises(srv: Server) -> None:
    n = srv.name()
    u = url(n, "Cache-Control: max-age=60", "Vary: Accept-Language")
    fr = srv.request(u, headers={"Accept-Language": "fr, de"})
    en = srv.request(u, headers={"Accept-Language": "en"})
    assert fr.body != en.body
    again = srv.request(u, headers={"Accept-Language": "fr,de"})
    assert again.cache_status.startswith("ziggurat; hit") and again.body == fr.body
    none = srv.request(u)
    assert "hit" not in none.cache_status.split("; ")
    assert srv.count(n) == 3


def test_no_cache_response_is_revalidated(srv: Server) -> None:
    n = srv.name()
    u = url(n, "Cache-Control: max-age=60, no-cache", etag='"v1"')
    r1 = srv.request(u)
    r2 = srv.request(u)
    assert "fwd-status=304" in r2.cache_status and "revalidated" in r2.cache_status
    assert r2.status == 200 and r2.body == r1.body
    assert srv.count(n) == 2


def test_request_no_cache_revalidates(srv: Server) -> None:
    n = srv.name()
    u = url(n, "Cache-Control: max-age=60", etag='"v1"')
    r1 = srv.request(u)
    r2 = srv.request(u, headers={"Cache-Control": "no-cache"})
    assert "fwd=stale" in r2.cache_status and r2.body == r1.body
    assert srv.count(n) == 2
    assert srv.request(u).cache_status.startswith("ziggurat; hit")


def test_client_conditional_answered_from_store(srv: Server) -> None:
    n = srv.name()
    u = url(n, "Cache-Control: max-age=60", etag='"abc"')
    srv.request(u)
    r = srv.request(u, headers={"If-None-Match": 'W/"abc"'})
    assert r.status == 304 and r.body == b""
    assert r.h("etag") == '"abc"'
    r2 = srv.request(u, headers={"If-None-Match": '"other"'})
    assert r2.status == 200
    assert srv.count(n) == 1


def test_head_answered_from_stored_get(srv: Server) -> None:
    n = srv.name()
    u = url(n, "Cache-Control: max-age=60")
    body = srv.request(u).body
    r = srv.request(u, method="HEAD")
    assert r.status == 200 and r.body == b""
    assert r.h("content-length") == str(len(body))
    assert srv.count(n) == 1


def test_only_if_cached(srv: Server) -> None:
    n = srv.name()
    r = srv.request(
        url(n, "Cache-Control: max-age=60"), headers={"Cache-Control": "only-if-cached"}
    )
    assert r.status == 504
    assert srv.count(n) == 0


# -- invalidation (MKCOL: a method the middleware does not know, which servers accept) --


@pytest.mark.parametrize("method", ["POST", "PUT", "DELETE", "PATCH", "MKCOL"])
def test_unsafe_method_invalidates(srv: Server, method: str) -> None:
    n = srv.name()
    u = url(n, "Cache-Control: max-age=60")
    srv.request(u)
    assert srv.request(u).cache_status.startswith("ziggurat; hit")
    r = srv.request(u, method=method, body=b"x")
    assert r.status == 200
    assert "fwd=uri-miss" in srv.request(u).cache_status


def test_unsafe_invalidates_same_origin_location_only(srv: Server) -> None:
    target, other = srv.name(), srv.name()
    tu = url(target, "Cache-Control: max-age=60")
    srv.request(tu)
    post = url(other, f"Location: {tu}", s=201)
    assert srv.request(post, method="POST", body=b"").status == 201
    assert "fwd=uri-miss" in srv.request(tu).cache_status
    t2 = srv.name()
    tu2 = url(t2, "Cache-Control: max-age=60")
    srv.request(tu2)
    post2 = url(srv.name(), f"Location: http://example.com{tu2}", s=201)
    srv.request(post2, method="POST", body=b"")
    assert srv.request(tu2).cache_status.startswith("ziggurat; hit")


def test_failed_unsafe_request_does_not_invalidate(srv: Server) -> None:
    n = srv.name()
    u = url(n, "Cache-Control: max-age=60")
    srv.request(u)
    srv.fail(n, "500")
    try:
        assert srv.request(u, method="POST", body=b"").status == 500
    finally:
        srv.fail(n, None)
    assert srv.request(u).cache_status.startswith("ziggurat; hit")


# -- stale ---------------------------------------------------------------------------------


def test_stale_while_revalidate_refreshes_once_in_background(srv: Server) -> None:
    n = srv.name()
    u = url(n, "Cache-Control: max-age=1, stale-while-revalidate=60")
    first = srv.request(u)
    srv.spec(n, 200, [("Cache-Control", "max-age=600")])  # the refreshed one stays fresh
    time.sleep(1.5)
    r = srv.request(u)
    assert "stale-while-revalidate" in r.cache_status and r.body == first.body
    assert _until(lambda: srv.count(n) == 2)
    assert _until(lambda: srv.request(u).body != first.body)
    assert srv.count(n) == 2


def test_stale_if_error_serves_stale(srv: Server) -> None:
    for how in ("503", "raise"):
        n = srv.name()
        u = url(n, "Cache-Control: max-age=1, stale-if-error=600")
        first = srv.request(u)
        time.sleep(1.5)
        srv.fail(n, how)
        try:
            r = srv.request(u)
        finally:
            srv.fail(n, None)
        assert r.status == 200 and r.body == first.body, how
        assert "stale-if-error" in r.cache_status


@pytest.mark.parametrize(
    "directive", ["must-revalidate", "proxy-revalidate", "no-cache", "s-maxage=1"]
)
def test_stale_if_error_forbidden(srv: Server, directive: str) -> None:
    n = srv.name()
    u = url(n, f"Cache-Control: max-age=1, stale-if-error=600, {directive}", etag='"e"')
    srv.request(u)
    time.sleep(1.5)
    srv.fail(n, "503")
    try:
        r = srv.request(u)
    finally:
        srv.fail(n, None)
    assert r.status == 503


# -- streaming -----------------------------------------------------------------------------


def _stream(srv: Server, path: str, gate: str) -> tuple[bytes, bytes, dict[str, str]]:
    import http.client

    conn = http.client.HTTPConnection("127.0.0.1", srv.port, timeout=20)
    try:
        conn.request("GET", path, headers={"Host": f"127.0.0.1:{srv.port}"})
        r = conn.getresponse()
        first = r.read1(65536) if hasattr(r, "read1") else r.read(1)
        # The last chunk is only produced once the gate opens: the first chunks must
        # have reached the client without it.
        srv.open_gate(gate)
        rest = r.read()
        return first, rest, {k.lower(): v for k, v in r.getheaders()}
    finally:
        conn.close()


def test_large_stream_passes_through_unbuffered(srv: Server) -> None:
    n = srv.name()
    gate = srv.name("gate")
    path = f"/stream/{n}?n=3&size=3000&gate={gate}&h=Cache-Control%3A%20max-age%3D60"
    first, rest, _headers = _stream(srv, path, gate)
    assert len(first) > 0
    assert len(first) + len(rest) == 9000
    r = srv.request(path)
    assert "hit" not in r.cache_status.split("; ")
    assert srv.count(n) == 2


def test_small_stream_relayed_then_stored(srv: Server) -> None:
    n = srv.name()
    gate = srv.name("gate")
    path = f"/stream/{n}?n=3&size=10&gate={gate}&h=Cache-Control%3A%20max-age%3D60"
    first, rest, _headers = _stream(srv, path, gate)
    assert first and (first + rest) == b"a" * 10 + b"b" * 10 + b"c" * 10
    r = srv.request(path)
    assert r.cache_status.startswith("ziggurat; hit") and r.body == first + rest
    assert srv.count(n) == 1


# -- poisoning -----------------------------------------------------------------------------


def test_unkeyed_forwarded_headers_bypass(srv: Server) -> None:
    n = srv.name()
    u = url(n, "Cache-Control: max-age=60", reflect="x-forwarded-host")
    for h in ("X-Forwarded-Host", "X-Forwarded-Proto", "X-Original-URL", "Forwarded"):
        r = srv.request(u, headers={h: "evil.test", "X-Forwarded-Host": "evil.test"})
        assert "fwd=bypass" in r.cache_status
    clean = srv.request(u)
    assert b"evil" not in clean.body
    assert srv.request(u).cache_status.startswith("ziggurat; hit")


def test_host_not_allowed_never_stored_or_served(srv: Server) -> None:
    n = srv.name()
    u = url(n, "Cache-Control: max-age=60")
    r = srv.request(u, headers={"Host": "evil.test"})
    assert "detail=host" in r.cache_status
    srv.request(u)
    r2 = srv.request(u, headers={"Host": "evil.test"})
    assert "hit" not in r2.cache_status.split("; ")
    assert srv.count(n) == 3


def test_hosts_are_keyed_apart(srv: Server) -> None:
    n = srv.name()
    u = url(n, "Cache-Control: max-age=60")
    a = srv.request(u, headers={"Host": "localhost"})
    b = srv.request(u, headers={"Host": "example.com"})
    assert a.body != b.body
    assert srv.count(n) == 2


# -- coalescing within a server, hit-for-miss, PURGE ----------------------------------------


def test_uncacheable_url_not_serialised(srv: Server) -> None:
    from concurrent.futures import ThreadPoolExecutor

    n = srv.name()
    u = url(n, "Cache-Control: no-store")
    srv.request(u)  # the URL is now marked "do not wait"
    # Each of the next two calls (one per worker: gunicorn's sync workers serve one
    # request at a time) waits inside the app until both are there: requests serialised
    # behind one another would never meet (the app then answers 500).
    srv.barrier(n, 3)
    with ThreadPoolExecutor(2) as ex:
        rs = list(ex.map(lambda _: srv.request(u), range(2)))
    assert [r.status for r in rs] == [200, 200]
    assert srv.count(n) == 3


def test_purge_method_guarded(srv: Server) -> None:
    n = srv.name()
    u = url(n, "Cache-Control: max-age=60")
    srv.request(u)
    denied = srv.request(u, method="PURGE")
    assert denied.status == 403 and "detail=purge" in denied.cache_status
    assert (
        srv.request(u, method="PURGE", headers={"Purge-Token": "wrong-token-0123456789"}).status
        == 403
    )
    assert srv.request(u).cache_status.startswith("ziggurat; hit")
    r = srv.request(u, method="PURGE", headers={"Purge-Token": TOKEN})
    assert r.status == 200
    assert "fwd=uri-miss" in srv.request(u).cache_status


def test_cache_status_on_every_response(srv: Server) -> None:
    n = srv.name()
    for method, u in [
        ("GET", url(n, "Cache-Control: no-store")),
        ("POST", url(n)),
        ("OPTIONS", url(n)),
        ("GET", "/boom/" + n + "?s=503"),
    ]:
        r = srv.request(u, method=method, body=b"" if method == "POST" else None)
        assert r.cache_status.startswith("ziggurat"), (method, u, r.headers)


def test_tag_header_stripped_from_every_response(srv: Server) -> None:
    n = srv.name()
    for method, u in [
        ("GET", url(n, "Cache-Control: no-store", "Cache-Tag: secret-a")),
        ("POST", url(n, "Cache-Tag: secret-b")),
        ("GET", url(n, "Cache-Control: max-age=60", "Cache-Tag: secret-c")),
    ]:
        for _ in range(2):
            r = srv.request(u, method=method, body=b"" if method == "POST" else None)
            assert r.h("cache-tag") is None and b"secret" not in b"".join(
                v.encode() for vs in r.headers.values() for v in vs
            )
