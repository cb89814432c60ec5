"""``ZigguratCache`` under gunicorn with four workers, with and without ``--preload``: the
Django site in ``tests/django_site/`` shares one cache among the workers of the host.

- ``cache_page``, the per-site cache middleware and ``{% cache %}`` fragments render once
  for the host: every worker then serves what the first rendering stored;
- a write through one worker (``cache.set``, ``cache.delete``, a fragment's key deleted,
  ``cache.clear()``) is what the very next request to every worker sees;
- ``cache.incr`` from concurrent requests over the four workers ends at the exact count;
- with ``--preload`` the master opens the cache when it imports the application, and what it
  wrote there is read by the workers it forks.

Every check spreads its requests (new connections, several at once) until all four
workers, told apart by the ``X-Worker-Pid`` header, have answered.
"""

from __future__ import annotations

import contextlib
import json
import os
import re
import sys
import time
import uuid
from collections.abc import Iterator
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from typing import Any

import pytest
from http_servers import Resp, Server, free_port, serving

pytest.importorskip("django")
pytest.importorskip("gunicorn")

pytestmark = pytest.mark.timeout(240)

HERE = os.path.dirname(os.path.abspath(__file__))
WORKERS = 4
#: Requests sent at once in each round of ``spread``.
AT_ONCE = 12
ROUNDS = 25
#: How long ``spread`` goes on for a worker that has not answered yet.
SPREAD_S = 30.0


@dataclass
class Site:
    """A running gunicorn serving the Django site."""

    server: Server
    preload: bool
    #: The pid written under ``site:opened-by`` when the application was imported.
    opened_by: int

    def get(self, path: str, headers: dict[str, str] | None = None) -> Resp:
        r = self.server.request(path, headers=headers)
        assert r.status == 200, (path, r.status, r.text[-2000:])
        return r

    def post(self, path: str, data: Any = None, method: str = "POST") -> Any:
        body = json.dumps(data).encode() if data is not None else b""
        r = self.server.request(path, method=method, body=body)
        assert r.status == 200, (path, r.status, r.text[-2000:])
        return json.loads(r.body)

    def spread(
        self, path: str, method: str = "GET", headers: dict[str, str] | None = None
    ) -> list[Resp]:
        """Rounds of ``AT_ONCE`` concurrent requests, each on a new connection, until every
        worker has answered at least one; all the responses, in the order sent. At least
        ``ROUNDS`` rounds, and more up to ``SPREAD_S`` seconds: on a loaded machine a worker
        can still be starting (importing the application) when the first ones answer."""
        got: list[Resp] = []

        def one(_: int) -> Resp:
            return self.server.request(path, method=method, headers=headers)

        deadline = time.monotonic() + SPREAD_S
        rounds = 0
        while rounds < ROUNDS or time.monotonic() < deadline:
            rounds += 1
            with ThreadPoolExecutor(AT_ONCE) as ex:
                got += ex.map(one, range(AT_ONCE))
            if len(pids(got)) == WORKERS:
                assert all(r.status == 200 for r in got), [r.status for r in got]
                return got
        raise AssertionError(f"{len(got)} requests reached only the workers {pids(got)}")


def pids(responses: list[Resp]) -> set[int]:
    return {int(r.h("x-worker-pid") or 0) for r in responses}


def ident(r: Resp) -> dict[str, Any]:
    """The JSON body of a page response."""
    return dict(json.loads(r.body))


@contextlib.contextmanager
def serve(settings: str, preload: bool) -> Iterator[Site]:
    """gunicorn with ``WORKERS`` sync workers serving ``django_site`` with ``settings``, its
    cache under a unique name in a private directory (removed afterwards)."""
    base = f"/dev/shm/zigdjango-{uuid.uuid4().hex}"
    os.mkdir(base, 0o700)
    port = free_port()
    env = dict(os.environ)
    env.update(
        DJANGO_SETTINGS_MODULE=f"django_site.{settings}",
        ZIG_DJANGO_SITE_CACHE="site-" + uuid.uuid4().hex[:12],
        ZIG_DJANGO_SITE_DIR=base,
        PYTHONPATH=HERE + os.pathsep + env.get("PYTHONPATH", ""),
    )
    cmd = [sys.executable, "-m", "gunicorn", "-w", str(WORKERS), "-b", f"127.0.0.1:{port}"]
    cmd += ["--log-level", "warning", "--timeout", "60"]
    cmd += ["--preload"] if preload else []
    cmd += ["django_site.wsgi:application"]
    with serving("django", cmd, port, base, cwd=HERE, env=env, ready="/opened-by") as server:
        r = server.request("/opened-by", timeout=2)
        yield Site(server, preload, int(json.loads(r.body)["pid"]))


@pytest.fixture(scope="module", params=["preload", "no-preload"])
def site(request: pytest.FixtureRequest) -> Iterator[Site]:
    with serve("settings", request.param == "preload") as s:
        yield s


@pytest.fixture(scope="module", params=["preload", "no-preload"])
def whole_site(request: pytest.FixtureRequest) -> Iterator[Site]:
    with serve("whole_site_settings", request.param == "preload") as s:
        yield s


def test_the_cache_is_opened_where_gunicorn_imports_the_application(site: Site) -> None:
    seen = pids(site.spread("/opened-by"))
    assert site.server.proc.pid not in seen
    if site.preload:
        # Imported once, in the master, which opened the cache before forking.
        assert site.opened_by == site.server.proc.pid
    else:
        # Every worker imported it; the first to open the cache wrote its pid.
        assert site.opened_by in seen


def test_cache_page_renders_once_for_the_host(site: Site) -> None:
    t = uuid.uuid4().hex
    first = site.get(f"/cached/?t={t}")
    page = ident(first)
    assert page["run"] == 1
    assert page["rendered_by"] == int(first.h("x-worker-pid") or 0)
    responses = site.spread(f"/cached/?t={t}")
    # Every worker, the one that rendered it and the three others, serves the stored page.
    assert {r.body for r in responses} == {first.body}
    assert {r.h("cache-control") for r in responses} == {"max-age=60"}
    assert site.get(f"/count/cached-{t}").body == b'{"count": 1}'


def test_without_the_per_site_cache_the_plain_page_renders_every_time(site: Site) -> None:
    t = uuid.uuid4().hex
    responses = site.spread(f"/plain/?t={t}")
    runs = sorted(ident(r)["run"] for r in responses)
    assert runs == list(range(1, len(responses) + 1))


def test_per_site_cache_renders_once_for_the_host(whole_site: Site) -> None:
    t = uuid.uuid4().hex
    first = whole_site.get(f"/plain/?t={t}")
    assert ident(first)["run"] == 1
    responses = whole_site.spread(f"/plain/?t={t}")
    assert {r.body for r in responses} == {first.body}
    assert whole_site.get(f"/count/plain-{t}").body == b'{"count": 1}'
    # Views marked never_cache are not stored by the middleware: a write through one worker
    # and the read of every worker go to the views.
    assert whole_site.post(f"/value/{t}", "new") == {"value": "new"}
    assert {r.body for r in whole_site.spread(f"/value/{t}")} == {b'{"value": "new"}'}


FRAGMENT = re.compile(
    r"<p>request (?P<request>[0-9a-f]{32}) served by (?P<pid>\d+)</p>\n"
    r"(?P<fragment><p>fragment (?P<var>\w+) rendered by (?P<by>\d+), render (?P<n>\d+)</p>)"
)


def fragments(site: Site, var: str) -> tuple[list[re.Match[str]], list[Resp]]:
    """The parsed fragment pages of one ``spread``, each checked against its header."""
    responses = site.spread(f"/fragment/{var}/")
    found = []
    for r in responses:
        m = FRAGMENT.search(r.body.decode())
        assert m, r.body
        # The page around the fragment is rendered by the worker that answered.
        assert int(m["pid"]) == int(r.h("x-worker-pid") or 0)
        found.append(m)
    # ... on every request.
    assert len({m["request"] for m in found}) == len(found)
    return found, responses


def test_template_fragment_renders_once_for_the_host(site: Site) -> None:
    var = "f" + uuid.uuid4().hex[:12]
    first = FRAGMENT.search(site.get(f"/fragment/{var}/").body.decode())
    assert first and first["n"] == "1" and first["var"] == var
    found, _ = fragments(site, var)
    assert {m["fragment"] for m in found} == {first["fragment"]}
    assert site.get(f"/count/fragment:{var}").body == b'{"count": 1}'


def test_a_deleted_fragment_key_is_rendered_again_once_for_every_worker(site: Site) -> None:
    var = "f" + uuid.uuid4().hex[:12]
    site.get(f"/fragment/{var}/")
    before, _ = fragments(site, var)
    assert {m["n"] for m in before} == {"1"}
    assert site.post(f"/fragment/{var}/invalidate") == {"deleted": True}
    # The first request after the delete renders the fragment; every worker then serves it.
    again = FRAGMENT.search(site.get(f"/fragment/{var}/").body.decode())
    assert again and again["n"] == "2"
    after, _ = fragments(site, var)
    assert {m["fragment"] for m in after} == {again["fragment"]}
    assert site.get(f"/count/fragment:{var}").body == b'{"count": 2}'


def test_a_set_or_delete_through_one_worker_is_seen_by_every_worker_at_once(
    site: Site,
) -> None:
    key = uuid.uuid4().hex
    assert {r.body for r in site.spread(f"/value/{key}")} == {b'{"value": null}'}
    for value in ["one", {"n": 2}, [3, "three"]]:
        # Every worker has read the previous value (its L1 holds it) before the write.
        assert site.post(f"/value/{key}", value) == {"value": value}
        seen = {json.dumps(json.loads(r.body)) for r in site.spread(f"/value/{key}")}
        assert seen == {json.dumps({"value": value})}
    assert site.post(f"/value/{key}", method="DELETE") == {"value": None}
    assert {r.body for r in site.spread(f"/value/{key}")} == {b'{"value": null}'}


def test_clear_through_one_worker_drops_every_workers_cached_page(site: Site) -> None:
    t = uuid.uuid4().hex
    old = site.get(f"/cached/?t={t}").body
    assert {r.body for r in site.spread(f"/cached/?t={t}")} == {old}
    assert site.post("/clear") == {"cleared": True}
    after = site.spread(f"/cached/?t={t}")
    assert old not in {r.body for r in after}
    # Once rendered again, the new page is served by every worker.
    new = site.get(f"/cached/?t={t}").body
    assert {r.body for r in site.spread(f"/cached/?t={t}")} == {new}


def test_concurrent_incr_over_every_worker_ends_at_the_exact_count(site: Site) -> None:
    name = "hits-" + uuid.uuid4().hex
    calls = 400

    def one(_: int) -> tuple[int, int]:
        r = site.server.request(f"/incr/{name}", method="POST", body=b"")
        assert r.status == 200, r.text
        return int(json.loads(r.body)["count"]), int(r.h("x-worker-pid") or 0)

    with ThreadPoolExecutor(16) as ex:
        results = list(ex.map(one, range(calls)))
    assert len({pid for _, pid in results}) == WORKERS
    # Each increment returned its own count: none was lost or applied twice.
    assert sorted(n for n, _ in results) == list(range(1, calls + 1))
    assert site.get(f"/count/{name}").body == json.dumps({"count": calls}).encode()


def test_a_compressed_cache_page_hit_does_not_change_the_cached_page(site: Site) -> None:
    t = uuid.uuid4().hex
    plain = site.get(f"/cached/?t={t}")
    assert plain.h("content-encoding") is None
    zipped = site.spread(f"/cached/?t={t}", headers={"Accept-Encoding": "gzip"})
    assert {r.h("content-encoding") for r in zipped} == {"gzip"}
    again = site.spread(f"/cached/?t={t}")
    assert {r.h("content-encoding") for r in again} == {None}
    assert {r.body for r in again} == {plain.body}
