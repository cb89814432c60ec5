"""The HTTP cache across worker processes: uvicorn and gunicorn with four workers each.

A purge, a tag invalidation or an unsafe request handled by one worker is seen by every
worker at once; concurrent misses on one cold URL from every worker reach the app once.
"""

from __future__ import annotations

from collections.abc import Iterator
from concurrent.futures import ThreadPoolExecutor
from urllib.parse import quote

import pytest
from http_servers import Server, running, url

pytestmark = pytest.mark.timeout(180)

WORKERS = 4
# Enough requests that every worker answers some (the kernel spreads connections).
SPREAD = 40


@pytest.fixture(scope="module", params=["asgi", "wsgi"])
def srv(request: pytest.FixtureRequest) -> Iterator[Server]:
    with running(request.param, workers=WORKERS) as s:
        yield s


def _many(srv: Server, path: str, n: int, threads: int = 8) -> list[bytes]:
    with ThreadPoolExecutor(threads) as ex:
        return [r.body for r in ex.map(lambda _: srv.request(path), range(n))]


def test_fifty_concurrent_misses_reach_the_app_once(srv: Server) -> None:
    n = srv.name()
    u = url(n, "Cache-Control: max-age=60", sleep=1)
    with ThreadPoolExecutor(50) as ex:
        rs = list(ex.map(lambda _: srv.request(u, timeout=60), range(50)))
    assert all(r.status == 200 for r in rs)
    assert len({r.body for r in rs}) == 1
    assert srv.count(n) == 1


@pytest.mark.parametrize("how", ["tag", "url", "post", "purge-method"])
def test_invalidation_in_one_worker_seen_by_all(srv: Server, how: str) -> None:
    from http_servers import TOKEN

    n = srv.name()
    tag = srv.name("t")
    u = url(n, "Cache-Control: max-age=600", f"Cache-Tag: {tag}")
    old = srv.request(u).body
    # Every worker now holds the response in its own L1 as well.
    assert set(_many(srv, u, SPREAD)) == {old}
    if how == "tag":
        srv.request(f"/admin/tag/{tag}", method="POST")
    elif how == "url":
        full = quote(f"http://127.0.0.1:{srv.port}{u}", safe="")
        assert srv.request(f"/admin/url?u={full}", method="POST").body == b"True"
    elif how == "post":
        assert srv.request(u, method="POST", body=b"x").status == 200
    else:
        assert srv.request(u, method="PURGE", headers={"Purge-Token": TOKEN}).status == 200
    after = _many(srv, u, SPREAD)
    assert old not in after
    # One new fill (plus the POST itself when the invalidation was a POST).
    assert srv.count(n) == (3 if how == "post" else 2)


def test_stale_while_revalidate_refreshes_once_for_the_host(srv: Server) -> None:
    import time

    n = srv.name()
    u = url(n, "Cache-Control: max-age=1, stale-while-revalidate=60", sleep=0.5)
    first = srv.request(u).body
    assert set(_many(srv, u, SPREAD)) == {first}
    # The refreshed response stays fresh for the rest of the test: any further app call
    # would be a second refresh.
    srv.spec(n, 200, [("Cache-Control", "max-age=600")])
    time.sleep(1.5)
    # Every worker sees the stale response; each serves it and asks for a refresh.
    served = _many(srv, u, SPREAD)
    assert first in served
    deadline = time.monotonic() + 20
    while srv.count(n) < 2 and time.monotonic() < deadline:
        time.sleep(0.05)
    assert srv.count(n) == 2
    fresh = srv.request(u).body
    deadline = time.monotonic() + 20
    while fresh == first and time.monotonic() < deadline:
        fresh = srv.request(u).body
    assert fresh != first
    assert srv.count(n) == 2


def test_concurrent_requests_for_many_urls_get_their_own_bodies(srv: Server) -> None:
    names = [srv.name() for _ in range(20)]
    paths = [url(n, "Cache-Control: max-age=60", "Vary: Accept-Language") for n in names]
    langs = ["fr", "en", "de"]
    jobs = [(p, lang) for p in paths for lang in langs] * 4
    # Requests for the three variants of one URL arrive together.
    jobs.sort(key=lambda j: j[0])

    def get(job: tuple[str, str]) -> tuple[str, str, bytes, str]:
        p, lang = job
        r = srv.request(p, headers={"Accept-Language": lang}, timeout=60)
        return p, lang, r.body, r.cache_status

    with ThreadPoolExecutor(16) as ex:
        results = list(ex.map(get, jobs))
    seen: dict[tuple[str, str], bytes] = {}
    for p, lang, body, _status in results:
        assert body.startswith(p.encode() + b" #"), (p, body)
        seen.setdefault((p, lang), body)
        # Every answer for one URL and language is the one stored response.
        assert seen[(p, lang)] == body
    # One fill per URL and language: the three variants of a URL are three responses.
    for n in names:
        assert srv.count(n) == 3
