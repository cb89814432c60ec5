"""The Cache's API beyond get/set/fetch: add, incr/decr, touch, ``in``, delete_many, the
async many-key calls, namespaces with the same methods, the context manager and close(),
``math.inf`` TTLs, ``cached`` keys, async loaders, ``version``, a changed ``size``, values
that fail to decode, and the same bad input reported the same way by every method."""

from __future__ import annotations

import asyncio
import datetime
import logging
import math
import multiprocessing
import os
import time
import warnings
from collections.abc import Callable
from typing import Any

import cache_helpers
import pytest
from cache_helpers import CTX, new_name
from ziggurat import Cache, ZigguratError
from ziggurat.keys import call_key

make_cache = cache_helpers.make_cache
cache_dir = cache_helpers.cache_dir


# -- add --------------------------------------------------------------------------------------


def test_add_stores_only_when_absent(make_cache: Callable[..., Cache]) -> None:
    cache = make_cache()
    assert cache.add("k", {"v": 1}, tags=["t"]) is True
    assert cache.add("k", {"v": 2}) is False
    assert cache.get("k") == {"v": 1}
    other = make_cache(cache.name)  # another worker's view
    assert other.add("k", 3) is False
    cache.invalidate_tags("t")  # the tag given to add is on the entry
    assert other.add("k", 3) is True
    assert cache.get("k") == 3


def test_add_replaces_an_expired_or_stale_value(make_cache: Callable[..., Cache]) -> None:
    cache = make_cache(stale_ttl=60)
    cache.set("k", "old", ttl=0.05)
    time.sleep(0.1)
    # Past its TTL but kept for fail-safe reads: stale, so absent for add.
    assert cache.add("k", "new") is True
    assert cache.get("k") == "new"


def _adder(name: str, directory: str, start: Any, conn: Any) -> None:
    cache = Cache(name, "8MiB", directory=directory)
    start.wait()
    conn.send(cache.add("race", os.getpid()))
    conn.close()


def test_add_one_winner_among_processes(cache_dir: str) -> None:
    """Of 4 processes adding one key at once, exactly one wins, and its value stays."""
    name = new_name()
    Cache(name, "8MiB", directory=cache_dir).close()
    for _round in range(5):
        start = CTX.Event()
        pipes = [CTX.Pipe(duplex=False) for _ in range(4)]
        procs = [CTX.Process(target=_adder, args=(name, cache_dir, start, w)) for _r, w in pipes]
        for p in procs:
            p.start()
        start.set()
        wins = [r.recv() for r, _w in pipes]
        for p in procs:
            p.join(30)
            assert p.exitcode == 0
        assert wins.count(True) == 1, wins
        winner = procs[wins.index(True)].pid
        cache = Cache(name, "8MiB", directory=cache_dir)
        assert cache.get("race") == winner
        cache.delete("race")
        cache.close()


# -- incr / decr ------------------------------------------------------------------------------


def test_incr_and_decr(make_cache: Callable[..., Cache]) -> None:
    cache = make_cache()
    cache.set("n", 10)
    assert cache.incr("n") == 11
    assert cache.incr("n", 5) == 16
    assert cache.decr("n", 6) == 10
    assert cache.get("n") == 10
    assert cache.incr("fresh", default=100) == 101
    assert cache.decr("fresh2", default=0) == -1
    other = make_cache(cache.name)
    assert other.incr("n") == 11  # one counter for the host


def test_incr_errors_change_nothing(make_cache: Callable[..., Cache]) -> None:
    cache = make_cache()
    with pytest.raises(KeyError):
        cache.incr("missing")
    assert "missing" not in cache
    cache.set("s", "text")
    cache.set("f", 1.5)
    cache.set("b", True)
    for k in ("s", "f", "b"):
        with pytest.raises(TypeError, match=r"Cache\.incr\(\)"):
            cache.incr(k)
    assert (cache.get("s"), cache.get("f"), cache.get("b")) == ("text", 1.5, True)
    cache.set("max", 2**63 - 1)
    with pytest.raises(OverflowError):
        cache.incr("max")
    assert cache.get("max") == 2**63 - 1
    for bad in (1.5, "1", True):
        with pytest.raises(TypeError, match="delta"):
            cache.incr("max", bad)  # type: ignore[arg-type]
    with pytest.raises(OverflowError, match="delta"):
        cache.incr("max", 2**70)


def test_incr_keeps_ttl_and_tags(make_cache: Callable[..., Cache]) -> None:
    cache = make_cache()
    cache.set("n", 1, ttl=0.3, tags=["counters"])
    assert cache.incr("n") == 2
    cache.invalidate_tags("counters")
    assert cache.get("n") is None
    cache.set("m", 1, ttl=0.2)
    cache.incr("m")
    time.sleep(0.3)
    assert cache.get("m") is None  # incr did not extend its life


def _counter(name: str, directory: str, n: int, start: Any) -> None:
    cache = Cache(name, "8MiB", directory=directory)
    start.wait()
    for _ in range(n):
        cache.incr("hits", default=0)
    cache.close()


def test_incr_is_atomic_across_processes(cache_dir: str) -> None:
    """4 processes x 10,000 increments of one key end at exactly 40,000."""
    name = new_name()
    Cache(name, "8MiB", directory=cache_dir).close()
    start = CTX.Event()
    procs = [CTX.Process(target=_counter, args=(name, cache_dir, 10_000, start)) for _ in range(4)]
    for p in procs:
        p.start()
    start.set()
    for p in procs:
        p.join(120)
        assert p.exitcode == 0
    cache = Cache(name, "8MiB", directory=cache_dir)
    assert cache.get("hits") == 40_000
    cache.unlink()


# -- touch, in, delete_many, async many-key calls --------------------------------------------


def test_touch(make_cache: Callable[..., Cache]) -> None:
    cache = make_cache()
    assert cache.touch("none", 10) is False
    cache.set("k", {"v": 1}, ttl=0.2, tags=["t"])
    assert cache.touch("k", 60) is True
    time.sleep(0.3)
    assert cache.get("k") == {"v": 1}
    cache.invalidate_tags("t")  # the tags stay on a touched entry
    assert cache.get("k") is None
    cache.set("forever", 1, ttl=0.2)
    assert cache.touch("forever", math.inf) is True
    time.sleep(0.3)
    assert cache.get("forever") == 1
    with pytest.raises(ValueError, match=r"Cache\.touch\(\): ttl"):
        cache.touch("forever", -1)


def test_contains_and_delete_many(make_cache: Callable[..., Cache]) -> None:
    cache = make_cache()
    cache.set_many({"a": 1, "b": None, "c": 0})
    assert "a" in cache and "b" in cache and "c" in cache
    assert "zz" not in cache
    assert cache.delete_many(["a", "b", "zz"]) == 2
    assert "a" not in cache and "c" in cache
    with pytest.raises(TypeError, match=r"Cache\.delete_many\(\)"):
        cache.delete_many(["c", 5])  # type: ignore[list-item]
    assert "c" in cache  # bad input anywhere deletes nothing
    with pytest.raises(TypeError, match="single key"):
        cache.delete_many("c")


def test_async_many_key_calls(make_cache: Callable[..., Cache]) -> None:
    cache = make_cache()

    async def main() -> dict[str | bytes, Any]:
        await cache.aset_many({"a": 1, "b": [2]}, ttl=60)
        return await cache.aget_many(["a", "b", "c"])

    assert asyncio.run(main()) == {"a": 1, "b": [2]}


def test_namespace_has_the_cache_methods(make_cache: Callable[..., Cache]) -> None:
    cache = make_cache()
    ns = cache.namespace("posts")
    assert ns.add("1", "hello") is True and ns.add("1", "x") is False
    assert "1" in ns and "1" not in cache.namespace("other")
    assert ns.incr("views", default=0) == 1
    assert ns.decr("views") == 0
    ns.set_many({"2": "b", "3": "c"})
    assert ns.get_many(["1", "2", "9"]) == {"1": "hello", "2": "b"}
    assert ns.touch("2", 60) is True
    assert ns.delete_many(["2", "3"]) == 2
    assert asyncio.run(ns.aget_many(["1"])) == {"1": "hello"}
    ns.clear()
    assert ns.get("1") is None
    with pytest.raises(KeyError):
        ns.incr("views")  # the counter carried the namespace's tag


# -- lifecycle --------------------------------------------------------------------------------


def test_close_closes(cache_dir: str) -> None:
    name = new_name()
    with Cache(name, "8MiB", directory=cache_dir) as cache:
        cache.set("k", 1)
        assert "ok" in repr(cache)
    assert "closed" in repr(cache)
    calls: list[Callable[[], Any]] = [
        lambda: cache.get("k"),
        lambda: cache.set("k", 2),
        lambda: cache.fetch("k", lambda: 3),
        lambda: cache.add("k", 2),
        lambda: cache.incr("k"),
        lambda: cache.touch("k", 1),
        lambda: cache.delete("k"),
        lambda: cache.get_many(["k"]),
        lambda: cache.invalidate_tags("t"),
        lambda: cache.clear(),
        lambda: cache.stats(),
        lambda: "k" in cache,
        lambda: asyncio.run(cache.afetch("k", lambda: 3)),
    ]
    for call in calls:
        with pytest.raises(ZigguratError, match="is closed"):
            call()
    cache.close()  # twice is fine
    other = Cache(name, "8MiB", directory=cache_dir)
    assert other.get("k") == 1  # the data stays for the others
    other.unlink()


# -- TTLs -------------------------------------------------------------------------------------


def test_infinite_ttl(make_cache: Callable[..., Cache]) -> None:
    cache = make_cache(ttl=math.inf)
    cache.set("a", {"x": 1})
    cache.set("b", 1, ttl=math.inf)
    assert cache.fetch("c", lambda: "loaded", ttl=math.inf) == "loaded"
    other = make_cache(cache.name, l1_items=0)
    assert (other.get("a"), other.get("b"), other.get("c")) == ({"x": 1}, 1, "loaded")


@pytest.mark.parametrize("ttl", [-5, 0, -math.inf, math.nan, "10", True])
def test_bad_ttl_refused_on_hit_and_miss(make_cache: Callable[..., Cache], ttl: Any) -> None:
    """A TTL argument is checked on every path: an L1 hit, an L2 hit and a miss."""
    cache = make_cache()
    cache.set("hit", 1)
    other = make_cache(cache.name)  # its first read is an L2 hit
    for c, key in ((cache, "hit"), (other, "hit"), (cache, "miss")):
        with pytest.raises((TypeError, ValueError), match=r"Cache\.fetch\(\): ttl"):
            c.fetch(key, lambda: 2, ttl=ttl)
        with pytest.raises((TypeError, ValueError), match=r"Cache\.afetch\(\): ttl"):
            asyncio.run(c.afetch(key, lambda: 2, ttl=ttl))
    assert "miss" not in cache


# -- cached -----------------------------------------------------------------------------------


def test_cached_keys_bind_to_the_signature(make_cache: Callable[..., Cache]) -> None:
    cache = make_cache()
    calls: list[Any] = []

    @cache.cached(ttl=60)
    def area(w: int, h: int = 1, *rest: int, **opts: Any) -> int:
        calls.append((w, h))
        return w * h

    assert area(2) == 2 and area(w=2) == 2 and area(2, 1) == 2 and area(2, h=1) == 2
    assert calls == [(2, 1)]
    assert area.key(2) == area.key(w=2, h=1)  # type: ignore[attr-defined]
    assert area.key(2) != area.key(2, 3)  # type: ignore[attr-defined]
    assert area.key(2, opt=1) != area.key(2, opt=2)  # type: ignore[attr-defined]
    assert area.invalidate(w=2) is True  # type: ignore[attr-defined]
    assert area(2) == 2 and len(calls) == 2


def _keyed(x: Any) -> None: ...


def _key_in_child(conn: Any) -> None:
    conn.send(call_key(_keyed, (({"b": [1, 2.5], "a": {"s"}}, datetime.date(2020, 1, 2)),), {}))
    conn.close()


def test_cached_keys_are_stable_across_processes() -> None:
    """The same call gives the same key in a fresh process (spawned: no memory shared),
    whatever the order of a dict's items."""
    here = call_key(_keyed, (({"a": {"s"}, "b": [1, 2.5]}, datetime.date(2020, 1, 2)),), {})
    ctx = multiprocessing.get_context("spawn")
    r, w = ctx.Pipe(duplex=False)
    p = ctx.Process(target=_key_in_child, args=(w,))
    p.start()
    there = r.recv()
    p.join(30)
    assert here == there
    assert here.startswith("test_cache_api._keyed:")


def test_cached_long_and_unencodable_arguments(make_cache: Callable[..., Cache]) -> None:
    cache = make_cache()

    @cache.cached()
    def total(xs: list[int]) -> int:
        return sum(xs)

    assert total(list(range(2000))) == sum(range(2000))  # no key length limit
    assert len(total.key(list(range(2000)))) < 300  # type: ignore[attr-defined]

    @cache.cached()
    def describe(obj: object) -> str:
        return str(obj)

    with pytest.raises(TypeError, match="argument 'obj' is an object"):
        describe(object())

    @cache.cached(key=lambda obj: type(obj).__name__)
    def describe2(obj: object) -> str:
        return "x"

    assert describe2(object()) == "x"


# -- loaders ----------------------------------------------------------------------------------


def test_fetch_refuses_async_loaders(make_cache: Callable[..., Cache]) -> None:
    cache = make_cache()

    async def aload() -> int:
        return 1

    with warnings.catch_warnings():
        warnings.simplefilter("error")  # "coroutine was never awaited" would fail here
        with pytest.raises(TypeError, match="afetch"):
            cache.fetch("k", aload)
        with pytest.raises(TypeError, match="afetch"):
            cache.fetch("k2", lambda: aload())
    assert "k" not in cache and "k2" not in cache
    assert asyncio.run(cache.afetch("k", aload)) == 1
    assert asyncio.run(cache.afetch("k3", lambda: 3)) == 3  # a sync loader in afetch


# -- version, size, decode failures ----------------------------------------------------------


def test_version_keys_every_entry(make_cache: Callable[..., Cache]) -> None:
    v1 = make_cache(version=1)
    v1.set("user:1", {"name": "a"})
    v2 = make_cache(v1.name, version=2)
    assert v2.get("user:1") is None
    v2.set("user:1", {"first": "a"})
    assert v1.get("user:1") == {"name": "a"}
    assert make_cache(v1.name, version=1).get("user:1") == {"name": "a"}
    for bad in (True, -1, "a b", 1.5):
        with pytest.raises(ValueError, match="version"):
            make_cache(v1.name, version=bad)


def test_other_size_warns_and_stats_show_the_real_one(make_cache: Callable[..., Cache]) -> None:
    first = make_cache(size="8MiB")
    with pytest.warns(RuntimeWarning, match="version=") as w:
        second = make_cache(first.name, size="16MiB")
    assert "8388608" in str(w[0].message) or str(first.stats()["host"]["l2"]["file_size"]) in str(
        w[0].message
    )
    assert second.stats()["host"]["l2"]["file_size"] == first.stats()["host"]["l2"]["file_size"]
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        make_cache(first.name, size="8MiB")  # same parameters: no warning


def test_undecodable_value_is_a_counted_logged_miss(
    make_cache: Callable[..., Cache], caplog: pytest.LogCaptureFixture, capfd: Any
) -> None:
    writer = make_cache(serializer="pickle")
    writer.set("k", {"a": 1})
    reader = make_cache(writer.name, serializer="msgpack")
    with caplog.at_level(logging.WARNING, logger="ziggurat"):
        for _ in range(3):
            assert reader.get("k") is None
    assert reader.stats()["process"]["l2"]["decode_errors"] == 3
    logged = [r.getMessage() for r in caplog.records if "undecodable" in r.getMessage()]
    assert len(logged) == 1 and writer.name in logged[0] and "'k'" in logged[0]
    assert "Unpickl" not in capfd.readouterr().err  # nothing printed bare


def test_too_large_value(
    make_cache: Callable[..., Cache], caplog: pytest.LogCaptureFixture
) -> None:
    cache = make_cache()
    limit = cache.stats()["host"]["l2"]["max_value_size"]
    big = b"x" * (limit + 1)
    with pytest.raises(ValueError, match=rf"Cache\.set\(\): value is \d+ bytes.*{limit}"):
        cache.set("big", big)
    calls = []
    with caplog.at_level(logging.WARNING, logger="ziggurat"):
        for _ in range(3):
            assert cache.fetch("big", lambda: calls.append(1) or big) == big
    assert len(calls) == 3
    assert cache.stats()["process"]["l2"]["store_failures"] == 3
    logged = [r for r in caplog.records if "'big'" in r.getMessage()]
    assert len(logged) == 1 and cache.name in logged[0].getMessage()


# -- bad input: one exception and message per input, from every method -----------------------

_KEY_CALLS: dict[str, Callable[[Cache, Any], Any]] = {
    "Cache.get": lambda c, k: c.get(k),
    "Cache.set": lambda c, k: c.set(k, 1),
    "Cache.add": lambda c, k: c.add(k, 1),
    "Cache.incr": lambda c, k: c.incr(k, default=0),
    "Cache.touch": lambda c, k: c.touch(k, 1),
    "Cache.delete": lambda c, k: c.delete(k),
    "Cache.fetch": lambda c, k: c.fetch(k, lambda: 1),
    "Cache.afetch": lambda c, k: asyncio.run(c.afetch(k, lambda: 1)),
    "Cache.get_many": lambda c, k: c.get_many([k]),
    "Cache.delete_many": lambda c, k: c.delete_many([k]),
}


@pytest.mark.parametrize(
    ("key", "exc", "text"),
    [
        (["a"], TypeError, "key must be str or bytes, not list"),
        (5, TypeError, "key must be str or bytes, not int"),
        ("", ValueError, "key must be 1 to 4096 bytes, got 0"),
        ("x" * 5000, ValueError, "key must be 1 to 4096 bytes, got 5000"),
    ],
)
def test_same_bad_key_same_error_everywhere(
    make_cache: Callable[..., Cache], key: Any, exc: type[Exception], text: str
) -> None:
    cache = make_cache()
    for method, call in _KEY_CALLS.items():
        with pytest.raises(exc) as info:
            call(cache, key)
        assert str(info.value) == f"{method}(): {text}", method
        assert "CacheCore" not in str(info.value)


def test_positional_ttl_names_the_method(make_cache: Callable[..., Cache]) -> None:
    cache = make_cache()
    with pytest.raises(TypeError, match=r"^Cache\.set\(\)"):
        cache.set("k", 1, 60)  # type: ignore[misc]


# -- group ------------------------------------------------------------------------------------


def test_group_shares_the_segment_with_another_user(cache_dir: str) -> None:
    """group=: the files are made 0660 for that group, and a worker of another user in
    that group opens them; without group= the other user's files are refused."""
    import grp
    import stat

    gid = 65534
    gname = grp.getgrgid(gid).gr_name
    name = new_name()
    first = Cache(name, "8MiB", directory=cache_dir, group=gname)
    first.set("k", {"v": 1})
    files = sorted(os.listdir(cache_dir))
    assert len(files) == 2
    for f in files:
        st = os.stat(os.path.join(cache_dir, f))
        assert stat.S_IMODE(st.st_mode) == 0o660 and st.st_gid == gid, f
        os.chown(os.path.join(cache_dir, f), 65534, gid)  # now another user's files
    first.close()
    shared = Cache(name, "8MiB", directory=cache_dir, group=gid)
    assert not shared.degraded and shared.get("k") == {"v": 1}
    shared.close()
    with pytest.warns(RuntimeWarning, match="uid 65534"):
        alone = Cache(name, "8MiB", directory=cache_dir)
    assert alone.degraded_cause == "other_owner"
    with pytest.raises(ValueError, match="does not exist"):
        Cache(name, "8MiB", directory=cache_dir, group="no-such-group-here")
    with pytest.raises(TypeError, match="group"):
        Cache(name, "8MiB", directory=cache_dir, group=1.5)  # type: ignore[arg-type]


# -- stats after fork (gunicorn --preload) ----------------------------------------------------


def _child_reads(cache: Cache, conn: Any) -> None:
    before = cache.stats()["host"]["l2"]["hits"]
    for i in range(6):
        assert cache.get(f"k{i}") == i
    conn.send((before, cache.stats()["host"]["l2"]["hits"], cache.stats()["process"]["l2"]["hits"]))
    conn.close()


def test_host_counters_are_right_in_a_forked_worker(cache_dir: str) -> None:
    """A cache opened before fork (as under gunicorn --preload): the worker's L2 hits reach
    the host-wide counters (it used to flush nothing after the fork)."""
    cache = Cache(new_name(), "8MiB", directory=cache_dir, l1_items=0)
    try:
        for i in range(6):
            cache.set(f"k{i}", i)
        r, w = CTX.Pipe(duplex=False)
        p = CTX.Process(target=_child_reads, args=(cache, w))
        p.start()
        before, after, process_hits = r.recv()
        p.join(30)
        assert p.exitcode == 0
        assert process_hits == 6
        assert after - before == 6
        assert cache.stats()["host"]["l2"]["hits"] >= before + 6
    finally:
        cache.unlink()


# -- G1 for the writes that read first ---------------------------------------------------------


def _reader(name: str, directory: str, conn: Any) -> None:
    """Another worker: holds each key in its own L1, then reports what it reads after the
    parent's write returned."""
    cache = Cache(name, "8MiB", directory=directory)
    for k in ("n", "t", "a"):
        cache.get(k)  # fills this process's L1
    conn.send([cache.stats()["process"]["l1"]["items"]])
    conn.recv()  # the parent's writes have returned
    conn.send([cache.get("n"), cache.get("a"), cache.get("t")])
    conn.close()


def test_incr_touch_add_void_other_processes_l1(cache_dir: str) -> None:
    """G1: once incr, add (over a stale value) or touch returns, another process that held
    the key in its L1 reads the new entry, not its copy."""
    name = new_name()
    cache = Cache(name, "8MiB", directory=cache_dir, stale_ttl=60)
    try:
        cache.set("n", 1)
        cache.set("t", "v", ttl=0.4)
        cache.set("a", "old", ttl=0.4)
        parent, child = CTX.Pipe()
        p = CTX.Process(target=_reader, args=(name, cache_dir, child))
        p.start()
        assert parent.recv() == [3]
        time.sleep(0.5)  # "a" and "t" are stale now (kept for stale_ttl)
        assert cache.incr("n", 41) == 42
        assert cache.add("a", "new") is True
        assert cache.touch("t", 60) is False  # a stale value is not touched
        parent.send("go")
        assert parent.recv() == [42, "new", None]
        p.join(30)
        assert p.exitcode == 0
    finally:
        cache.unlink()
