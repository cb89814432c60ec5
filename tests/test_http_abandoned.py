"""``app_timeout`` never stacks origin calls: while an abandoned app call of a URL still
runs (a WSGI app in its thread, a sync view in Starlette's thread pool), the URL is
answered with its stale response in every worker, and the app is not called again."""

from __future__ import annotations

import time

import pytest
from http_servers import OPTS, running, url

pytestmark = pytest.mark.timeout(180)

SLOW = 3.0  # seconds the origin takes once it turns slow


@pytest.mark.parametrize("kind", ["asgi", "wsgi"])
def test_an_abandoned_call_is_the_only_one_for_its_url_while_it_runs(kind: str) -> None:
    opts = {**OPTS, "app_timeout": 0.2}
    with running(kind, workers=2, opts=opts) as srv:
        n = srv.name()
        cc = "Cache-Control: max-age=1, stale-if-error=600"
        path = f"/sync/{n}?h={cc.replace(' ', '%20')}" if kind == "asgi" else url(n, cc)
        first = srv.request(path)
        assert first.status == 200
        time.sleep(1.3)  # stale now
        srv.fail(n, f"sleep {SLOW}")
        calls_before = srv.count(n)
        answers = []
        t_end = time.monotonic() + SLOW - 0.5
        while time.monotonic() < t_end:
            t0 = time.monotonic()
            r = srv.request(path)
            answers.append((r.status, r.body, time.monotonic() - t0))
            time.sleep(0.3)
        # Every request was answered at once with the stale page...
        assert all(status == 200 and body == first.body for status, body, _ in answers), answers
        assert all(took < 1.5 for _, _, took in answers), answers
        # ...and the slow origin saw one call for the URL, not one per request.
        assert srv.count(n) - calls_before == 1, (srv.count(n) - calls_before, len(answers))
        srv.fail(n, None)
        time.sleep(SLOW)
        # Once the abandoned call ended, the URL is filled again by the next request.
        srv.request(path)
        assert srv.count(n) - calls_before == 2
