"""A purge that returns while a page renders wins over the render, under uvicorn and
gunicorn with several workers: the page rendered from the old data is answered to the
request that caused it, but never served from the cache afterwards.

This is the founding blog's own case: a comment posted (its tag purged) while a page
renders from the data before the comment.
"""

from __future__ import annotations

import time
from collections.abc import Iterator
from concurrent.futures import ThreadPoolExecutor
from urllib.parse import quote

import pytest
from http_servers import TOKEN, Server, running, url

pytestmark = pytest.mark.timeout(240)

RENDER = 0.8  # seconds the app takes to render
PURGE_AT = 0.3  # when the purge is sent, after the request
SPREAD = 24


@pytest.fixture(scope="module", params=["asgi", "wsgi"])
def srv(request: pytest.FixtureRequest) -> Iterator[Server]:
    with running(request.param, workers=3) as s:
        yield s


def _purge(srv: Server, how: str, path: str, tag: str) -> None:
    if how == "tag":
        srv.request(f"/admin/tag/{tag}", method="POST")
    elif how == "url":
        full = quote(f"http://127.0.0.1:{srv.port}{path}", safe="")
        srv.request(f"/admin/url?u={full}", method="POST")
    elif how == "post":
        assert srv.request(path, method="POST", body=b"x").status == 200
    else:
        # 404: nothing stored yet, as the fill is still rendering; the purge counts all the same.
        r = srv.request(path, method="PURGE", headers={"Purge-Token": TOKEN})
        assert r.status in (200, 404)


@pytest.mark.parametrize("how", ["tag", "url", "post", "purge-method"])
def test_a_purge_during_a_fill_keeps_the_rendered_page_out(srv: Server, how: str) -> None:
    stale = 0
    rounds = 3
    for _ in range(rounds):
        n, tag = srv.name(), srv.name("t")
        path = url(n, "Cache-Control: max-age=600", f"Cache-Tag: {tag}", sleep=RENDER)
        with ThreadPoolExecutor(1) as ex:
            render = ex.submit(srv.request, path)
            time.sleep(PURGE_AT)
            _purge(srv, how, path, tag)
            old = render.result().body
        # Every worker, many times: the page from before the purge is never served.
        with ThreadPoolExecutor(8) as ex:
            after = [r.body for r in ex.map(srv.request, [path] * SPREAD)]
        if old in after:
            stale += 1
    assert stale == 0, f"{stale} of {rounds} pages rendered before a {how} were served after it"
