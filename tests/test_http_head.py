"""RFC 9111 §4.3.5: a ``HEAD`` that reaches the app freshens or removes the stored ``GET``
response, for the ASGI middleware (uvicorn + Starlette) and the WSGI middleware
(gunicorn + Flask), each server with two workers sharing one segment.

The endpoints answer the headers the test writes with ``srv.spec`` and the body
``<name> #<call number>``; Starlette sends that body with its ``HEAD`` responses too.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Iterator
from email.utils import formatdate
from urllib.parse import quote

import pytest
from http_servers import Server, running

pytestmark = pytest.mark.timeout(120)


@pytest.fixture(scope="module", params=["asgi", "wsgi"])
def srv(request: pytest.FixtureRequest) -> Iterator[Server]:
    with running(request.param, workers=2) as s:
        yield s


def _hit(cache_status: str) -> bool:
    return cache_status.startswith("ziggurat; hit")


def _stale_stored(srv: Server, headers: list[tuple[str, str]]) -> tuple[str, bytes]:
    """A URL whose GET response is stored and stale by now; its stored body."""
    n = srv.name()
    srv.spec(n, 200, [("Cache-Control", "max-age=1"), *headers])
    r = srv.request(f"/e/{n}")
    assert "stored" in r.cache_status and r.body == f"{n} #1".encode()
    time.sleep(1.2)
    return n, r.body


LM = formatdate(time.time() - 3600, usegmt=True)
LM_LATER = formatdate(time.time() - 60, usegmt=True)


@pytest.mark.parametrize(
    "validators",
    [[("ETag", '"v1"')], [("Last-Modified", LM)], [("ETag", '"v1"'), ("Last-Modified", LM)]],
)
def test_head_with_same_validators_freshens_stored_get(
    srv: Server, validators: list[tuple[str, str]]
) -> None:
    n, body = _stale_stored(srv, validators)
    srv.spec(n, 200, [("Cache-Control", "max-age=60"), ("X-Version", "2"), *validators])
    h = srv.request(f"/e/{n}", method="HEAD")
    assert h.status == 200 and h.body == b""
    assert "fwd=stale" in h.cache_status and "detail=head-freshened" in h.cache_status
    assert srv.count(n) == 2
    g = srv.request(f"/e/{n}")
    assert _hit(g.cache_status), g.cache_status
    # The stored body, with the HEAD response's headers; never the HEAD's own body.
    assert g.body == body and g.body != f"{n} #2".encode()
    assert g.h("x-version") == "2"
    assert g.h("content-length") == str(len(body))
    assert srv.count(n) == 2


@pytest.mark.parametrize(
    "stored, head",
    [
        ([("ETag", '"v1"')], [("ETag", '"v2"')]),
        ([("ETag", '"v1"')], []),
        ([("Last-Modified", LM)], [("Last-Modified", LM_LATER)]),
    ],
    ids=["etag", "etag-gone", "last-modified"],
)
def test_head_that_differs_removes_stored_get(
    srv: Server, stored: list[tuple[str, str]], head: list[tuple[str, str]]
) -> None:
    n, body = _stale_stored(srv, stored)
    srv.spec(n, 200, [("Cache-Control", "max-age=60"), *head])
    h = srv.request(f"/e/{n}", method="HEAD")
    assert h.status == 200
    assert "detail=head-invalidated" in h.cache_status
    assert srv.count(n) == 2
    # The stale response is gone: the next GET is a miss, not a revalidation of it.
    srv.spec(n, 200, [("Cache-Control", "max-age=60"), *stored])
    g = srv.request(f"/e/{n}")
    assert "fwd=uri-miss" in g.cache_status and "stored" in g.cache_status
    assert g.body == f"{n} #3".encode() and g.body != body
    assert srv.count(n) == 3
    assert _hit(srv.request(f"/e/{n}").cache_status)


def test_head_with_other_length_removes_stored_get(srv: Server) -> None:
    n = srv.name()
    validators = [("ETag", '"v1"')]
    srv.spec(n, 200, [("Cache-Control", "max-age=1"), *validators])
    for _ in range(8):  # calls #1 to #8: HEADs with nothing stored, not stored either
        assert "fwd=uri-miss" in srv.request(f"/e/{n}", method="HEAD").cache_status
    body = srv.request(f"/e/{n}").body
    assert body == f"{n} #9".encode()
    time.sleep(1.2)
    # Call #10: the same ETag, but a body one byte longer (Content-Length says so).
    h = srv.request(f"/e/{n}", method="HEAD")
    assert h.h("content-length") == str(len(body) + 1)
    assert "detail=head-invalidated" in h.cache_status
    g = srv.request(f"/e/{n}")
    assert "fwd=uri-miss" in g.cache_status and g.body == f"{n} #11".encode()
    assert srv.count(n) == 11


def test_head_with_request_no_cache_freshens_fresh_stored_get(srv: Server) -> None:
    n = srv.name()
    srv.spec(n, 200, [("Cache-Control", "max-age=60"), ("ETag", '"v1"'), ("X-Version", "1")])
    body = srv.request(f"/e/{n}").body
    srv.spec(n, 200, [("Cache-Control", "max-age=60"), ("ETag", '"v1"'), ("X-Version", "2")])
    h = srv.request(f"/e/{n}", method="HEAD", headers={"Cache-Control": "no-cache"})
    assert "detail=head-freshened" in h.cache_status
    g = srv.request(f"/e/{n}")
    assert _hit(g.cache_status) and g.body == body and g.h("x-version") == "2"
    assert srv.count(n) == 2


def test_head_body_never_stored_as_get(srv: Server) -> None:
    n = srv.name()
    srv.spec(n, 200, [("Cache-Control", "max-age=60"), ("ETag", '"v1"')])
    # Nothing stored: the HEAD passes and its response (and body) is not stored.
    h = srv.request(f"/e/{n}", method="HEAD")
    assert h.status == 200 and "fwd=uri-miss" in h.cache_status
    assert "stored" not in h.cache_status
    assert "fwd=uri-miss" in srv.request(f"/e/{n}", method="HEAD").cache_status
    g = srv.request(f"/e/{n}")
    assert "fwd=uri-miss" in g.cache_status and g.body == f"{n} #3".encode()
    assert srv.count(n) == 3


def test_purge_during_head_is_not_undone(srv: Server) -> None:
    n = srv.name()
    u = f"/e/{n}?sleep=1.5"
    srv.spec(n, 200, [("Cache-Control", "max-age=1"), ("ETag", '"v1"')])
    assert "stored" in srv.request(u).cache_status
    time.sleep(1.2)
    srv.spec(n, 200, [("Cache-Control", "max-age=60"), ("ETag", '"v1"')])
    out: list[str] = []
    head = threading.Thread(
        target=lambda: out.append(srv.request(u, method="HEAD").cache_status), daemon=True
    )
    head.start()
    # The app counts a call before its sleep: the HEAD is in the app now.
    deadline = time.monotonic() + 15
    while srv.count(n) < 2 and time.monotonic() < deadline:
        time.sleep(0.02)
    assert srv.count(n) == 2
    full = quote(f"http://127.0.0.1:{srv.port}{u}", safe="")
    assert srv.request("/admin/url?u=" + full, method="POST").body == b"True"
    head.join(30)
    assert out and "fwd=stale" in out[0] and "head-" not in out[0]
    # The purged response did not come back with the HEAD's headers.
    g = srv.request(u)
    assert "fwd=uri-miss" in g.cache_status and g.body == f"{n} #3".encode()
    assert srv.count(n) == 3


def test_head_error_leaves_stored_get(srv: Server) -> None:
    n, body = _stale_stored(srv, [("ETag", '"v1"')])
    srv.fail(n, "503")
    h = srv.request(f"/e/{n}", method="HEAD")
    assert h.status == 503 and "head-" not in h.cache_status
    srv.fail(n, None)
    srv.spec(n, 200, [("Cache-Control", "max-age=60"), ("ETag", '"v1"')])
    # Still stored and stale: the GET revalidates it (the endpoint's spec answers 200).
    g = srv.request(f"/e/{n}")
    assert "fwd=stale" in g.cache_status
    assert srv.count(n) == 3
    assert g.body == f"{n} #3".encode() and g.body != body
