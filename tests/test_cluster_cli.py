"""The command on caches with a cluster tier. ``ziggurat follow``: a process of its own
follows the cluster's stream for a host, the workers' threads stand aside while it lives
and take over, missing nothing, when it dies. ``ziggurat purge --redis``: the purge reaches
Redis and every host. Against a real Redis server (Valkey where redis-server is not
installed); the command runs in a subprocess.
"""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
import uuid
from collections.abc import Callable, Iterator

import pytest
from redis_servers import Server
from ziggurat import Cache
from ziggurat.cluster.tier import W

pytestmark = pytest.mark.timeout(120)

SECRET = "follow-test-secret-0123456789"


def converges(check: Callable[[], bool], within: float = 10.0) -> bool:
    deadline = time.monotonic() + within
    while time.monotonic() < deadline:
        if check():
            return True
        time.sleep(0.005)
    return check()


@pytest.fixture
def server(shm_dir: str) -> Iterator[Server]:
    d = os.path.join(shm_dir, "server")
    os.mkdir(d)
    s = Server("redis", d).start()
    try:
        yield s
    finally:
        s.kill()


def follow(name: str, directory: str, url: str, *extra: str) -> subprocess.Popen[str]:
    env = {**os.environ, "ZIGGURAT_SECRET": SECRET}
    cmd = [sys.executable, "-m", "ziggurat", "follow", name, "-d", directory, "--redis", url]
    return subprocess.Popen(
        [*cmd, *extra],
        env=env,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )


def open_host(name: str, d: str, url: str) -> Cache:
    os.makedirs(d, exist_ok=True)
    c = Cache(name, size="8MiB", directory=d, redis=url, secret=SECRET)
    assert converges(c._tier.positioned)  # type: ignore[union-attr]
    return c


def test_follow_takes_the_stream_and_hands_it_back_when_killed(
    server: Server, shm_dir: str
) -> None:
    name = "f" + uuid.uuid4().hex[:10]
    a = open_host(name, os.path.join(shm_dir, "a"), server.url)
    b = open_host(name, os.path.join(shm_dir, "b"), server.url)
    word = b._core.app_load
    assert converges(lambda: word(W.LEASE) == os.getpid())  # b's thread follows first
    p = follow(name, os.path.join(shm_dir, "b"), server.url)
    try:
        # The worker's thread stands aside; the command holds the lease.
        assert converges(lambda: word(W.FOLLOWER) == p.pid and word(W.LEASE) == p.pid), (
            word(W.FOLLOWER),
            word(W.LEASE),
            p.poll(),
        )
        assert p.stdout is not None
        assert "following the invalidation stream" in p.stdout.readline()
        applied = word(W.APPLIED)
        for i in range(20):
            a.set("k", i)
            assert converges(lambda i=i: b.get("k") == i)  # type: ignore[misc]
        assert word(W.APPLIED) >= applied + 20  # applied by the command's process
        # A second follower for the same host is refused, naming the first.
        second = follow(name, os.path.join(shm_dir, "b"), server.url)
        _, err = second.communicate(timeout=30)
        assert second.returncode == 1 and f"pid {p.pid}" in err, err
    finally:
        p.kill()
        p.wait()
    # Killed: b's thread takes the stream back from where the command left it.
    assert converges(lambda: word(W.LEASE) == os.getpid())
    for i in range(20, 40):
        a.set("k", i)
        assert converges(lambda i=i: b.get("k") == i)  # type: ignore[misc]
    assert b.stats()["l3"]["gap_clears"] == 0
    a.close()
    b.close()


def test_a_follower_pid_taken_by_another_process_does_not_stop_the_stream(
    server: Server, shm_dir: str
) -> None:
    """A follower that died leaves its pid behind; once the system gives that pid to an
    unrelated process, the workers must not stand aside for it."""
    name = "f" + uuid.uuid4().hex[:10]
    a = open_host(name, os.path.join(shm_dir, "a"), server.url)
    b = open_host(name, os.path.join(shm_dir, "b"), server.url)
    other = subprocess.Popen(["sleep", "60"])
    try:
        assert b._core.app_cas(W.FOLLOWER, 0, other.pid)  # alive, but never asked to follow
        time.sleep(1.0)  # a few election rounds
        assert b._core.app_load(W.LEASE) == os.getpid()
        a.set("k", 1)
        assert converges(lambda: b.get("k") == 1)
    finally:
        other.kill()
        other.wait()
        a.close()
        b.close()


def test_follow_waits_for_the_cache_and_stops_on_sigterm(server: Server, shm_dir: str) -> None:
    name = "f" + uuid.uuid4().hex[:10]
    d = os.path.join(shm_dir, "late")
    os.makedirs(d)
    p = follow(name, d, server.url, "--json")
    try:
        assert p.stdout is not None
        assert '"waiting"' in p.stdout.readline()
        b = open_host(name, d, server.url)
        assert '"following"' in p.stdout.readline()
        word = b._core.app_load
        assert converges(lambda: word(W.LEASE) == p.pid)
        p.send_signal(signal.SIGTERM)
        out, _ = p.communicate(timeout=30)
        assert p.returncode == 0 and '"stopped"' in out
        # It gave the stream back: the worker's thread follows again at once.
        assert word(W.FOLLOWER) == 0
        assert converges(lambda: word(W.LEASE) == os.getpid())
        b.close()
    finally:
        if p.poll() is None:
            p.kill()
            p.wait()


def test_follow_refuses_a_missing_secret_before_touching_anything(shm_dir: str) -> None:
    env = {k: v for k, v in os.environ.items() if k != "ZIGGURAT_SECRET"}
    r = subprocess.run(
        [sys.executable, "-m", "ziggurat", "follow", "x", "-d", shm_dir, "--redis", "redis://h"],
        env=env,
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert r.returncode == 1
    assert "ZIGGURAT_SECRET" in r.stderr and os.listdir(shm_dir) == []


def zig(*args: str) -> subprocess.CompletedProcess[str]:
    env = {**os.environ, "ZIGGURAT_SECRET": SECRET}
    return subprocess.run(
        [sys.executable, "-m", "ziggurat", *args],
        env=env,
        capture_output=True,
        text=True,
        timeout=60,
    )


def test_purge_with_redis_reaches_every_host_and_redis(server: Server, shm_dir: str) -> None:
    name = "p" + uuid.uuid4().hex[:10]
    dir_a = os.path.join(shm_dir, "a")
    a = open_host(name, dir_a, server.url)
    b = open_host(name, os.path.join(shm_dir, "b"), server.url)
    a.set("k", "v")
    a.set("t1", 1, tags=["red"])
    a.set("n", 2)
    assert converges(lambda: b.get("k") == "v" and b.get("t1") == 1)  # in b's segment now
    r = zig("purge", name, "-d", dir_a, "--key", "k", "--redis", server.url, "--json")
    assert r.returncode == 0, r.stderr
    assert '"cluster": true' in r.stdout and '"deleted": true' in r.stdout
    r = zig("purge", name, "-d", dir_a, "--tag", "red", "--redis", server.url)
    assert r.returncode == 0 and "on every host" in r.stdout, (r.stdout, r.stderr)
    assert converges(lambda: b.get("k") is None and b.get("t1") is None)
    # Nothing comes back from Redis: a host that never saw the keys finds none.
    c = open_host(name, os.path.join(shm_dir, "c"), server.url)
    assert c.get("k") is None and c.get("t1") is None and c.get("n") == 2
    r = zig("purge", name, "-d", dir_a, "--all", "--redis", server.url)
    assert r.returncode == 0, r.stderr
    assert converges(lambda: b.get("n") is None and c.get("n") is None)
    for x in (a, b, c):
        x.close()


def test_purge_with_an_unreachable_redis_says_so(server: Server, shm_dir: str) -> None:
    name = "p" + uuid.uuid4().hex[:10]
    d = os.path.join(shm_dir, "a")
    a = open_host(name, d, server.url)
    a.set("k", "v")
    r = zig("purge", name, "-d", d, "--key", "k", "--redis", "redis://127.0.0.1:1/0")
    assert r.returncode == 1
    assert "could not be reached" in r.stderr and "this host only" in r.stderr, r.stderr
    # Applied on this host and marked there: the host's reader (on the reachable server)
    # publishes its recovery, a clear, after which no host and no tier has the value.
    assert a.get("k") is None  # not read back from Redis while the recovery waits
    assert converges(lambda: a.stats()["l3"]["gap_clears"] >= 1)
    assert converges(lambda: a.get("k") is None)
    a.close()


def test_stats_shows_the_hosts_stream_figures(server: Server, shm_dir: str) -> None:
    import json

    name = "s" + uuid.uuid4().hex[:10]
    dir_a, dir_b = os.path.join(shm_dir, "a"), os.path.join(shm_dir, "b")
    a = open_host(name, dir_a, server.url)
    b = open_host(name, dir_b, server.url)
    for i in range(5):
        a.set(f"k{i}", i)
    assert converges(lambda: b.get("k4") == 4)
    r = zig("stats", name, "-d", dir_b, "--json")
    assert r.returncode == 0, r.stderr
    cl = json.loads(r.stdout)["cluster"]
    # The same figures as the host's processes see, and this process holds the stream.
    l3 = b.stats()["l3"]
    assert cl["events_applied"] == l3["events_applied"] >= 5
    assert cl["last_seq"] == l3["last_seq"] > 0
    assert cl["events_published"] == l3["events_published"] == 0
    assert cl["reader_pid"] == os.getpid() and cl["follower_pid"] == 0
    r = zig("stats", name, "-d", dir_a)
    assert r.returncode == 0 and "cluster events_published" in r.stdout, r.stdout
    # A cache that never had a cluster tier on its host has no such section.
    plain_dir = os.path.join(shm_dir, "plain")
    os.mkdir(plain_dir)
    plain = Cache(name, size="8MiB", directory=plain_dir)
    r = zig("stats", name, "-d", plain_dir, "--json")
    assert r.returncode == 0 and json.loads(r.stdout)["cluster"] is None, r.stdout
    for x in (a, b, plain):
        x.close()
