"""``Cache.fetch``: single-flight loading across threads and processes, loaders that die,
negative caching and its separate budget (G4), fail-safe stale serving, early refresh and
TTL jitter.
"""

from __future__ import annotations

import asyncio
import os
import signal
import threading
import time
from collections.abc import Callable
from typing import Any

import cache_helpers
import pytest
from cache_helpers import CTX, CallLog, Worker, new_name, open_like, wait_until
from ziggurat import Cache, LoadTimeout
from ziggurat.loader import Found

cache_dir = cache_helpers.cache_dir
make_cache = cache_helpers.make_cache

SIZE = "8MiB"
_HIT, _NEG, _STALE = Found.HIT, Found.NEGATIVE, Found.STALE


# ------------------------------------------------------------------------- single-flight

SF_KEYS = ("sf-a", "sf-b", "sf-c")
SF_PROCS = 4
SF_THREADS = 4


def _sf_process(
    name: str, directory: str, inherited: Cache | None, barrier: Any, log: CallLog
) -> list[Any]:
    """One worker process: SF_THREADS threads fetch each key together (at a barrier)."""
    cache = inherited if inherited is not None else Cache(name, SIZE, directory=directory)

    def loader(key: str) -> dict[str, Any]:
        log.record(key)
        time.sleep(0.2)
        return {"key": key, "by": os.getpid(), "tid": threading.get_ident()}

    results: list[Any] = []
    lock = threading.Lock()

    def run() -> None:
        for key in SF_KEYS:
            try:
                barrier.wait(timeout=20)
                t0 = time.monotonic()
                v = cache.fetch(key, lambda key=key: loader(key))
                out = (key, v, time.monotonic() - t0)
            except BaseException as e:
                out = (key, repr(e), -1.0)
            with lock:
                results.append(out)

    threads = [threading.Thread(target=run) for _ in range(SF_THREADS)]
    for t in threads:
        t.start()
    for t in threads:
        t.join(60)
    return results


@pytest.mark.timeout(90)
def test_single_flight_processes_and_threads(cache_dir: str) -> None:
    """Single-flight (request path 4: one loader per key per host): 4 processes x 4 threads fetch
    the same missing keys at once; the loader (0.2 s) runs exactly once per key on the host, and
    every caller gets its value. Two processes open their own Cache, two use the one opened before
    the fork."""
    _single_flight_round(cache_dir)


@pytest.mark.stress
@pytest.mark.timeout(600)
def test_single_flight_processes_and_threads_stress(cache_dir: str) -> None:
    """The 4 x 4 single-flight test above, 30 times."""
    for _ in range(30):
        _single_flight_round(cache_dir)


def _single_flight_round(cache_dir: str) -> None:
    name = new_name("sf")
    cache = Cache(name, SIZE, directory=cache_dir)
    try:
        log = CallLog(cache_dir)
        barrier = CTX.Barrier(SF_PROCS * SF_THREADS)
        workers = [
            Worker(_sf_process, name, cache_dir, cache if i % 2 else None, barrier, log)
            for i in range(SF_PROCS)
        ]
        results = [r for w in workers for r in w.result(timeout=60)]
        assert log.counts() == dict.fromkeys(SF_KEYS, 1), log.lines()
        assert len(results) == SF_PROCS * SF_THREADS * len(SF_KEYS)
        for key in SF_KEYS:
            values = [v for k, v, _ in results if k == key]
            assert all(isinstance(v, dict) and v["key"] == key for v in values), values
            # Everyone got the one loaded value.
            assert len({(v["by"], v["tid"]) for v in values}) == 1, values
            assert cache.get(key) == values[0]
        # Waiters were woken when the value arrived, not after a timeout.
        assert max(dt for _, _, dt in results) < 3.0
    finally:
        cache.unlink()


def test_single_flight_threads_one_process(make_cache: Callable[..., Cache]) -> None:
    """Single-flight: 16 threads of one process fetch one missing key together: one loader call."""
    cache = make_cache()
    calls: list[int] = []
    barrier = threading.Barrier(16)
    out: list[Any] = []

    def loader() -> str:
        calls.append(1)
        time.sleep(0.2)
        return "value"

    def run() -> None:
        barrier.wait(10)
        out.append(cache.fetch("k", loader))

    threads = [threading.Thread(target=run) for _ in range(16)]
    for t in threads:
        t.start()
    for t in threads:
        t.join(30)
    assert calls == [1]
    assert out == ["value"] * 16
    assert cache.loader_stats.calls == 1


# --------------------------------------------------- keys that share a lease cell (192 cells)


def _same_cell(cache: Cache, cache_dir: str, key: str) -> str:
    """A key whose load lease is the cell of ``key``'s (docs/format.md, "Load lease")."""
    from format_reader import CacheReader

    reader = CacheReader(cache.name, cache_dir)
    try:
        cell = reader.neg.lease_cell_index(key)
        return next(
            k
            for k in (f"other-{j}" for j in range(100_000))
            if reader.neg.lease_cell_index(k) == cell
        )
    finally:
        reader.close()


def test_a_loader_fetching_a_key_of_its_own_lease_cell_does_not_wait_for_itself(
    make_cache: Callable[..., Cache], cache_dir: str
) -> None:
    """A loader that fetches another key (an HTTP cache's fill running an app that fetches,
    a cached function calling another) must not wait for the lease its own load holds when
    the two keys share a cell: that waited out loader_timeout, then raised LoadTimeout."""
    cache = make_cache(loader_timeout=5)
    inner = _same_cell(cache, cache_dir, "outer")
    t0 = time.monotonic()
    assert cache.fetch("outer", lambda: ("outer", cache.fetch(inner, lambda: 2))) == ("outer", 2)
    assert time.monotonic() - t0 < 2.5
    assert cache.get(inner) == 2 and cache.get("outer") == ("outer", 2)

    inner_a = _same_cell(cache, cache_dir, "outer-async")

    async def load_three() -> int:
        return 3

    async def load_outer() -> Any:
        return ("outer", await cache.afetch(inner_a, load_three))

    for _ in range(2):  # the second time after both are deleted: every lease was given back
        t0 = time.monotonic()
        assert asyncio.run(cache.afetch("outer-async", load_outer)) == ("outer", 3)
        assert time.monotonic() - t0 < 2.5
        cache.delete("outer-async")
        cache.delete(inner_a)


def test_threads_of_the_holding_process_load_other_keys_of_the_cell(
    make_cache: Callable[..., Cache], cache_dir: str
) -> None:
    """While one thread loads a key, another thread of the process loads another key of the
    same lease cell at once; a third thread on the first key still waits for its load."""
    cache = make_cache(loader_timeout=5)
    other = _same_cell(cache, cache_dir, "slow")
    release = threading.Event()
    calls: list[str] = []

    def slow() -> str:
        calls.append("slow")
        release.wait(10)
        return "slow value"

    first = threading.Thread(target=lambda: cache.fetch("slow", slow))
    first.start()
    assert wait_until(lambda: calls == ["slow"], 5)
    t0 = time.monotonic()
    assert cache.fetch(other, lambda: "other value") == "other value"
    assert time.monotonic() - t0 < 1.0, "waited for the other key's load"
    got: list[str] = []
    same = threading.Thread(target=lambda: got.append(cache.fetch("slow", slow)))
    same.start()
    time.sleep(0.2)
    assert got == [] and calls == ["slow"]
    release.set()
    first.join(10)
    same.join(10)
    assert got == ["slow value"] and calls == ["slow"]


def _fetch_other_key(name: str, directory: str, key: str, log: CallLog, go: Any) -> Any:
    """Another process: fetches ``key``, recording a load of it."""
    cache = Cache(name, SIZE, directory=directory, loader_timeout=10)
    go.set()

    def loader() -> str:
        log.record(key)
        return f"by-{os.getpid()}"

    return cache.fetch(key, loader)


@pytest.mark.timeout(60)
def test_a_key_loaded_beside_the_cells_lease_is_loaded_once_on_the_host(
    make_cache: Callable[..., Cache], cache_dir: str
) -> None:
    """Single flight when keys share a lease cell: a process loads "slow" under the cell's lease
    and, in another thread, a second key of the cell beside it. Another process that wants the
    second key waits for the cell; when "slow" is stored, the second key's load still runs, and
    the waiter must not load it again: the cell stays held until both loads are done. Nor may a
    second thread of the holding process load the second key again."""
    cache = make_cache(loader_timeout=10)
    other = _same_cell(cache, cache_dir, "slow")
    log = CallLog(cache_dir)
    slow_done, other_done = threading.Event(), threading.Event()

    def load(key: str, done: threading.Event) -> str:
        log.record(key)
        done.wait(20)
        return f"{key} value"

    first = threading.Thread(target=lambda: cache.fetch("slow", lambda: load("slow", slow_done)))
    first.start()
    assert wait_until(lambda: log.counts()["slow"] == 1, 5)
    beside = threading.Thread(target=lambda: cache.fetch(other, lambda: load(other, other_done)))
    beside.start()
    assert wait_until(lambda: log.counts()[other] == 1, 5)
    # A second thread of this process that wants the key beside the lease waits for its load.
    again: list[Any] = []
    second = threading.Thread(
        target=lambda: again.append(cache.fetch(other, lambda: load(other, other_done)))
    )
    second.start()
    go = CTX.Event()
    waiter = Worker(_fetch_other_key, cache.name, cache_dir, other, log, go)
    assert go.wait(20)
    time.sleep(0.3)  # the other process waits for the cell
    slow_done.set()
    first.join(10)
    time.sleep(0.3)  # woken by the release of "slow": it must find the cell still held
    other_done.set()
    beside.join(10)
    second.join(10)
    assert waiter.result(timeout=30) == f"{other} value"
    assert again == [f"{other} value"]
    assert log.counts() == {"slow": 1, other: 1}, log.lines()


# ---------------------------------------------------------------------- a loader that dies

LOADER_TIMEOUT = 3.0


def _fork_killer(name: str, directory: str, leased: Any) -> int:
    """Forks process P, which fetches "victim" with a loader that SIGKILLs P once the
    lease is taken. Plain fork: P stays a zombie until the test reaps it with waitpid
    (multiprocessing would reap it behind the test's back)."""
    pid = os.fork()
    if pid == 0:  # pragma: no cover - child
        try:
            cache = Cache(name, SIZE, directory=directory, loader_timeout=LOADER_TIMEOUT)

            def loader() -> str:
                leased.set()  # fetch calls the loader only once it holds the lease
                os.kill(os.getpid(), signal.SIGKILL)
                return "never"

            cache.fetch("victim", loader)
        finally:
            os._exit(70)
    return pid


def _is_zombie(pid: int) -> bool:
    with open(f"/proc/{pid}/stat") as f:
        return f.read().rsplit(")", 1)[1].split()[0] == "Z"


def _waiter(
    name: str, directory: str, log: CallLog, go: Any, load_time: float = 0.1
) -> dict[str, Any]:
    cache = Cache(name, SIZE, directory=directory, loader_timeout=LOADER_TIMEOUT)

    def loader() -> str:
        log.record("victim")
        time.sleep(load_time)
        return f"by-{os.getpid()}"

    go.wait(10)
    t0 = time.monotonic()
    try:
        outcome: tuple[str, Any] = ("value", cache.fetch("victim", loader))
    except LoadTimeout as e:
        outcome = ("timeout", str(e))
    return {
        "outcome": outcome,
        "elapsed": time.monotonic() - t0,
        "stats": cache.loader_stats.as_dict(),
    }


@pytest.mark.timeout(60)
@pytest.mark.parametrize("reaped", [True, False], ids=["holder-reaped", "holder-zombie"])
def test_loader_killed_waiters_never_hang(cache_dir: str, reaped: bool) -> None:
    """Single-flight + G3-like liveness (a dead loader never blocks): process P takes the load lease
    and its loader SIGKILLs P. Waiters in 3 other processes (loader_timeout=3) get a value (taking
    over, with their own loader) or LoadTimeout within loader_timeout + 1 s; they never hang. When P
    has been reaped (its pid is gone), the waiters take over at once and all get a value."""
    _killed_round(cache_dir, reaped, 3)


@pytest.mark.stress
@pytest.mark.timeout(900)
def test_loader_killed_waiters_never_hang_stress(cache_dir: str) -> None:
    """The loader-killed test above with 6 waiters: 40 reaped rounds, 3 zombie rounds."""
    for i in range(43):
        _killed_round(cache_dir, i % 15 != 14, 6)


def _killed_round(cache_dir: str, reaped: bool, n_waiters: int) -> None:
    name = new_name("kill")
    cache = Cache(name, SIZE, directory=cache_dir, loader_timeout=LOADER_TIMEOUT)
    try:
        log = CallLog(cache_dir)
        leased, go = CTX.Event(), CTX.Event()
        killer = _fork_killer(name, cache_dir, leased)
        try:
            assert leased.wait(10), "the killer never reached its loader"
            if reaped:
                assert os.waitstatus_to_exitcode(os.waitpid(killer, 0)[1]) == -signal.SIGKILL
            else:
                assert wait_until(lambda: _is_zombie(killer), 5.0)
            waiters = [Worker(_waiter, name, cache_dir, log, go) for _ in range(n_waiters)]
            go.set()
            results = [w.result(timeout=LOADER_TIMEOUT + 20) for w in waiters]
            if not reaped:
                assert _is_zombie(killer)  # still there, pid alive, all along
        finally:
            if not reaped:
                os.kill(killer, signal.SIGKILL)
                assert os.waitstatus_to_exitcode(os.waitpid(killer, 0)[1]) == -signal.SIGKILL
        for r in results:
            assert r["elapsed"] <= LOADER_TIMEOUT + 1.0, results
            kind, value = r["outcome"]
            assert kind in ("value", "timeout"), results
            if kind == "value":
                assert value.startswith("by-"), results
        values = [r["outcome"][1] for r in results if r["outcome"][0] == "value"]
        assert log.counts()["victim"] >= len(set(values))
        if reaped:
            assert len(values) == n_waiters, results
            assert all(r["elapsed"] < 1.5 for r in results), results
            assert sum(r["stats"]["takeovers"] for r in results) >= 1, results
            assert cache.get("victim") in values
    finally:
        cache.unlink()


@pytest.mark.timeout(60)
def test_takeover_after_dead_holder_is_single_flight(cache_dir: str) -> None:
    """Single-flight (request path 4) survives a dead holder: the lease holder is SIGKILLed; two
    waiters both see the dead pid; the take-over is a compare-and-set on the holder they saw, so
    exactly one of them loads (0.5 s) and the other waits for it: one loader call, one value."""
    name = new_name("takeover")
    cache = Cache(name, SIZE, directory=cache_dir, loader_timeout=LOADER_TIMEOUT)
    try:
        log = CallLog(cache_dir)
        leased, go_w2, go_w1 = CTX.Event(), CTX.Event(), CTX.Event()
        killer = _fork_killer(name, cache_dir, leased)
        assert leased.wait(10), "the killer never reached its loader"
        assert os.waitstatus_to_exitcode(os.waitpid(killer, 0)[1]) == -signal.SIGKILL
        w2 = Worker(_waiter, name, cache_dir, log, go_w2, 0.5)
        w1 = Worker(_waiter, name, cache_dir, log, go_w1, 0.5)
        go_w2.set()
        time.sleep(0.05)
        go_w1.set()
        results = [w.result(timeout=LOADER_TIMEOUT + 20) for w in (w1, w2)]
        assert [r["outcome"][0] for r in results] == ["value", "value"], results
        assert log.counts()["victim"] == 1, log.lines()
        assert results[0]["outcome"] == results[1]["outcome"], results
    finally:
        cache.unlink()


# ------------------------------------------------------------------------ negative caching


def test_negative_caching(make_cache: Callable[..., Cache]) -> None:
    """Negative caching (request path 4): a loader's None is cached as a miss for neg_ttl: fetch
    (here and in another handle) does not call the loader again until neg_ttl passes."""
    cache = make_cache(neg_ttl=0.5)
    other = open_like(cache, neg_ttl=0.5)
    calls: list[str] = []

    def loader() -> None:
        calls.append("x")
        return None

    try:
        assert cache.fetch("gone", loader) is None
        assert calls == ["x"]
        assert cache.fetch("gone", loader) is None
        assert other.fetch("gone", loader) is None  # from L2's negative segment
        assert other.fetch("gone", loader) is None  # from other's L1
        assert calls == ["x"]
        assert cache.get("gone", "dflt") == "dflt"
        assert other.get("gone", "dflt") == "dflt"
        p = cache._core.peek("gone")
        kind, left = p.found, p.seconds_left
        assert kind == _NEG and 0 < left <= 0.5
        assert other.stats()["process"]["l2"]["negative_hits"] >= 1
        time.sleep(0.6)
        assert cache.fetch("gone", loader) is None
        assert calls == ["x", "x"]
    finally:
        other.close()


def test_negative_caching_per_call_and_disabled(make_cache: Callable[..., Cache]) -> None:
    """Negative caching: fetch(neg_ttl=...) overrides the cache's; Cache(neg_ttl=None) caches no
    misses."""
    cache = make_cache(neg_ttl=60)
    calls: list[int] = []
    cache.fetch("a", lambda: calls.append(1), neg_ttl=0.3)
    cache.fetch("a", lambda: calls.append(1), neg_ttl=0.3)
    assert calls == [1]
    time.sleep(0.4)
    cache.fetch("a", lambda: calls.append(1))
    assert calls == [1, 1]

    nocache = make_cache(neg_ttl=None)
    for _ in range(3):
        assert nocache.fetch("b", lambda: calls.append(2)) is None
    assert calls.count(2) == 3


@pytest.mark.parametrize("write", ["set", "delete", "clear", "tag"])
def test_cached_miss_voided_by_later_write(make_cache: Callable[..., Cache], write: str) -> None:
    """G1 for cached misses: a set() of the key after a cached miss is seen at once, in every handle
    (the cached miss is void); so is a delete/clear/tag invalidation (the loader runs again)."""
    cache = make_cache(neg_ttl=60)
    other = open_like(cache, neg_ttl=60)
    calls: list[str] = []

    def loader() -> Any:
        calls.append("load")
        return None

    try:
        assert cache.fetch("k", loader, tags=["t"]) is None
        assert other.fetch("k", loader) is None  # other's L1 now holds the cached miss
        assert other._core.peek("k").found == _NEG
        assert calls == ["load"]
        if write == "set":
            other.set("k", "real")
            assert cache.fetch("k", loader) == "real"
            assert cache.get("k") == "real"
            cache.set("k", "real2")
            assert other.fetch("k", loader) == "real2"
            assert other.get("k") == "real2"
            assert calls == ["load"]
            return
        if write == "delete":
            cache.delete("k")
        elif write == "clear":
            cache.clear()
        else:
            cache.invalidate_tags("t")
        assert other.fetch("k", loader) is None
        assert calls == ["load", "load"]
    finally:
        other.close()


def _real_and_junk(cache: Cache, n_real: int, n_junk: int) -> None:
    for i in range(n_real):
        cache.set(f"real{i}", {"i": i, "pad": "x" * 100})
    for i in range(n_real):
        assert cache.get(f"real{i}") == {"i": i, "pad": "x" * 100}
    for i in range(n_junk):
        assert cache.fetch(f"junk{i}", lambda: None) is None
    for i in range(n_junk):  # read them back: cached misses enter L1 too
        assert cache.get(f"junk{i}") is None


def test_junk_misses_do_not_evict_real_entries_l2(make_cache: Callable[..., Cache]) -> None:
    """G4: cached misses have their own budget: 20k junk keys overflow the negative segment
    (which evicts) and the L1 negative bound, but every real entry stays in L2 and L1."""
    cache = make_cache(size=SIZE, l1_items=1000, l1_negative_items=50, neg_size="1MiB")
    s0 = cache.stats()["host"]["l2"]
    _real_and_junk(cache, 300, 20_000)
    s = cache.stats()
    assert s["host"]["negative_l2"]["evictions"] > 0  # the junk did overflow its own budget
    assert s["process"]["l1"]["negative_items"] <= 50
    assert s["process"]["l1"]["items"] == 300  # no real entry was evicted from L1
    assert s["host"]["l2"]["evictions"] == s0["evictions"]
    assert s["host"]["l2"]["entries"] == s0["entries"] + 300
    reader = open_like(cache, SIZE, l1_items=0)
    try:
        assert all(reader.get(f"real{i}") is not None for i in range(300))
    finally:
        reader.close()


def test_junk_misses_do_not_void_real_entries_l1(make_cache: Callable[..., Cache]) -> None:
    """G4: after 20k junk cached misses, the real entries are still L1 hits (no L2 read):
    loading the junk (leases included) never touches the stamps real entries depend on."""
    cache = make_cache(size=SIZE, l1_items=1000, l1_negative_items=50, neg_size="1MiB")
    _real_and_junk(cache, 300, 20_000)
    s0 = cache.stats()
    for i in range(300):
        assert cache.get(f"real{i}") == {"i": i, "pad": "x" * 100}
    s = cache.stats()
    assert s["process"]["l1"]["hits"] - s0["process"]["l1"]["hits"] == 300
    assert s["process"]["l2"]["hits"] == s0["process"]["l2"]["hits"]


# ------------------------------------------------------------------------------- fail-safe


class Boom(Exception):
    pass


def _boom() -> Any:
    raise Boom("database down")


def test_fail_safe_serves_stale(make_cache: Callable[..., Cache]) -> None:
    """Fail-safe (request path 4, stale_ttl): with stale_ttl, a value past its ttl is served when
    the loader raises (counted in loader_stats stale_served); a plain get does not return it; a
    working loader replaces it."""
    cache = make_cache(stale_ttl=5, jitter=0)
    assert cache.fetch("k", lambda: "v1", ttl=0.3) == "v1"
    time.sleep(0.4)
    assert cache.get("k") is None  # expired for normal reads
    assert cache._core.peek("k").found == _STALE
    assert cache.fetch("k", _boom) == "v1"
    assert cache.loader_stats.stale_served == 1
    assert cache.loader_stats.errors == 1
    other = open_like(cache, stale_ttl=5, jitter=0)
    try:
        assert other.fetch("k", _boom) == "v1"
        assert other.loader_stats.stale_served == 1
    finally:
        other.close()
    assert cache.fetch("k", lambda: "v2", ttl=60) == "v2"
    assert cache.get("k") == "v2"


def test_fail_safe_per_call_stale_ttl(make_cache: Callable[..., Cache]) -> None:
    """Fail-safe: fetch(stale_ttl=...) enables fail-safe for one key on a cache without a
    default."""
    cache = make_cache(jitter=0)
    assert cache.fetch("k", lambda: "v1", ttl=0.3, stale_ttl=5) == "v1"
    time.sleep(0.4)
    assert cache.fetch("k", _boom, stale_ttl=5) == "v1"
    assert cache.loader_stats.stale_served == 1


def _assert_nothing_cached_after_error(cache: Cache) -> None:
    calls: list[int] = []
    with pytest.raises(Boom):
        cache.fetch("k", _boom)
    assert cache.get("k") is None
    assert cache._core.peek("k").found not in (_HIT, _NEG)
    # The exception was not cached: the next fetch calls its loader.
    assert cache.fetch("k", lambda: calls.append(1) or "fresh") == "fresh"
    assert calls == [1]


def test_fail_safe_without_stale_ttl_raises(make_cache: Callable[..., Cache]) -> None:
    """Fail-safe, never a cached exception: without stale_ttl the loader's exception propagates and
    nothing is cached."""
    cache = make_cache(jitter=0)
    assert cache.fetch("k", lambda: "v1", ttl=0.3) == "v1"
    time.sleep(0.4)
    _assert_nothing_cached_after_error(cache)
    assert cache.loader_stats.stale_served == 0


def test_fail_safe_after_stale_ttl_raises(make_cache: Callable[..., Cache]) -> None:
    """Fail-safe, never a cached exception: once stale_ttl has passed too, the exception propagates
    and nothing is cached."""
    cache = make_cache(stale_ttl=0.3, jitter=0)
    assert cache.fetch("k", lambda: "v1", ttl=0.3) == "v1"
    time.sleep(0.75)
    _assert_nothing_cached_after_error(cache)
    assert cache.loader_stats.stale_served == 0


def test_loader_error_on_miss_not_cached(make_cache: Callable[..., Cache]) -> None:
    """Never a cached exception: a loader that raises on a plain miss: the error propagates, is not
    cached, and the lease is released (the next fetch loads at once)."""
    cache = make_cache(stale_ttl=10)
    _assert_nothing_cached_after_error(cache)
    assert cache.loader_stats.errors == 1


# --------------------------------------------------------------------------- early refresh


def test_refresh_ahead_one_background_load(make_cache: Callable[..., Cache]) -> None:
    """Early refresh: refresh_ahead=0.5, ttl=1: fetch hits in the last half return the
    current value at once and start exactly one background load; the new value follows."""
    cache = make_cache(ttl=1, jitter=0, refresh_ahead=0.5)
    calls: list[float] = []

    def loader() -> str:
        calls.append(time.monotonic())
        n = len(calls)
        time.sleep(0.3)
        return f"v{n}"

    assert cache.fetch("k", loader) == "v1"
    # First half of the TTL: no refresh.
    for _ in range(10):
        assert cache.fetch("k", loader) == "v1"
    assert len(calls) == 1
    time.sleep(0.6)  # now in the last half (about 0.4 s left)
    for _ in range(30):
        t0 = time.monotonic()
        assert cache.fetch("k", loader) == "v1"
        assert time.monotonic() - t0 < 0.2  # never waits for the refresh
    assert wait_until(lambda: cache.get("k") == "v2", 2.0)
    assert len(calls) == 2
    assert cache.loader_stats.refreshes == 1
    for _ in range(10):
        assert cache.fetch("k", loader) == "v2"
    time.sleep(0.1)
    assert len(calls) == 2


def _refresh_peer(name: str, directory: str, log: CallLog, barrier: Any) -> list[str]:
    cache = Cache(name, SIZE, directory=directory, ttl=2, jitter=0, refresh_ahead=0.5)

    def loader() -> str:
        log.record("k")
        time.sleep(0.25)
        return "v2"

    got = [cache.fetch("k", loader)]  # fills this process's L1
    barrier.wait(10)
    time.sleep(1.2)
    barrier.wait(10)
    got += [cache.fetch("k", loader) for _ in range(20)]
    # Stay alive until the refresh (maybe this process's background thread) has landed.
    assert wait_until(lambda: cache.get("k") == "v2", 3.0)
    return got


@pytest.mark.timeout(60)
def test_refresh_ahead_once_per_host(cache_dir: str) -> None:
    """Early refresh (refresh_ahead) is one background load per host: 3 processes hitting the last
    half of the TTL together start exactly one refresh between them."""
    name = new_name("ra")
    cache = Cache(name, SIZE, directory=cache_dir, ttl=2, jitter=0, refresh_ahead=0.5)
    try:
        log = CallLog(cache_dir)
        assert cache.fetch("k", lambda: "v1") == "v1"
        barrier = CTX.Barrier(3)
        workers = [Worker(_refresh_peer, name, cache_dir, log, barrier) for _ in range(3)]
        results = [w.result(timeout=30) for w in workers]
        for got in results:
            assert got[0] == "v1"
            assert set(got) <= {"v1", "v2"}
        assert log.counts()["k"] == 1, log.lines()
        assert wait_until(lambda: cache.get("k") == "v2", 2.0)
    finally:
        cache.unlink()


# ------------------------------------------------------------------------------ TTL jitter


def test_ttl_jitter_spreads_deadlines(make_cache: Callable[..., Cache]) -> None:
    """TTL jitter: fetch with jitter=0.5 stores soft deadlines spread over
    [ttl * 0.5, ttl], seen in this process (L1) and another handle (L2); jitter=0 does not
    spread them, and set() is never jittered."""
    cache = make_cache(ttl=100, jitter=0.5)
    other = open_like(cache, ttl=100, jitter=0.5)
    try:
        for i in range(60):
            cache.fetch(f"k{i}", lambda i=i: i)
        lefts = [cache._core.peek(f"k{i}").seconds_left for i in range(60)]
        l2_lefts = [other._core.peek(f"k{i}").seconds_left for i in range(60)]
        for left in (*lefts, *l2_lefts):
            assert 50 - 0.5 <= left <= 100
        assert len({round(x, 1) for x in lefts}) > 30
        assert max(lefts) - min(lefts) > 20
        for a, b in zip(lefts, l2_lefts, strict=True):
            assert abs(a - b) < 0.5  # the same stored deadline through both tiers
        # set() stores the exact ttl.
        cache.set("s", 1, ttl=100)
        assert 99 <= cache._core.peek("s").seconds_left <= 100
    finally:
        other.close()
    flat = make_cache(ttl=100, jitter=0)
    for i in range(20):
        flat.fetch(f"k{i}", lambda i=i: i)
    lefts = [flat._core.peek(f"k{i}").seconds_left for i in range(20)]
    assert max(lefts) - min(lefts) < 1.0
    assert min(lefts) > 99


def test_ttl_jitter_observed_expiry(make_cache: Callable[..., Cache]) -> None:
    """TTL jitter seen from outside: keys fetched together with ttl=1, jitter=0.5 expire at
    different times (some are gone at 0.75 s while others are still there)."""
    cache = make_cache(ttl=1, jitter=0.5)
    for i in range(40):
        cache.fetch(f"k{i}", lambda i=i: i)
    time.sleep(0.75)
    alive = sum(cache.get(f"k{i}") is not None for i in range(40))
    assert 0 < alive < 40
