"""Fixtures and helpers of the cluster tier's tests, imported explicitly::

    import cluster_helpers
    server = cluster_helpers.server
    hosts = cluster_helpers.hosts

Each test starts its own server on a free port (with its append-only file, so a test can
restart it with its data); two hosts are two ``Cache``s with the same name and server but
their own directories, as docs/cluster.md describes.
"""

from __future__ import annotations

import os
import time
import uuid
from collections.abc import Callable, Iterator
from typing import Any

import pytest
from redis_servers import KINDS, Server
from ziggurat import Cache

SECRET = "cluster-test-secret-0123456789"
#: Generous for loaded CI machines; the measured lag is reported by the benchmark.
LAG_BOUND = 3.0


@pytest.fixture(params=KINDS)
def server(request: pytest.FixtureRequest, shm_dir: str) -> Iterator[Server]:
    """A redis-server, then a Valkey server (one test each; Valkey alone where redis-server
    is not installed: see ``redis_servers``)."""
    d = os.path.join(shm_dir, "server")
    os.mkdir(d)
    s = Server(request.param, d, aof=True).start()
    try:
        yield s
    finally:
        s.kill()


@pytest.fixture
def hosts(shm_dir: str) -> Iterator[Callable[..., Cache]]:
    """``host(url, label, wait=True, **options)``: a Cache as host ``label`` would open it;
    with ``wait``, once its stream reader has a place in the stream (a host keeps values
    from Redis only then)."""
    made: list[Cache] = []
    name = "c" + uuid.uuid4().hex[:10]

    def host(url: str, label: str, wait: bool = True, **kw: Any) -> Cache:
        d = os.path.join(shm_dir, label)
        os.makedirs(d, exist_ok=True)
        kw.setdefault("secret", SECRET)
        c = Cache(name, size="8MiB", directory=d, redis=url, **kw)
        made.append(c)
        assert not wait or converges(c._tier.positioned, within=10)  # type: ignore[union-attr]
        return c

    yield host
    for c in made:
        c.close()


def converges(check: Callable[[], bool], within: float = LAG_BOUND) -> bool:
    """Whether ``check()`` holds within ``within`` seconds (polled every 2 ms)."""
    deadline = time.monotonic() + within
    while time.monotonic() < deadline:
        if check():
            return True
        time.sleep(0.002)
    return check()
