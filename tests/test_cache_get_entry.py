"""The entry points of ``Cache.get`` and ``Cache.fetch``: an L1 hit is answered before
PyO3's argument parser, other plain calls go to the method's body without it, and calls with
keywords go to the full method. These tests hold the ways in agreement: the same answers,
errors, counters and coherence whichever way a call goes.
"""

from __future__ import annotations

import threading
from collections.abc import Callable
from typing import Any

import cache_helpers
import pytest
from cache_helpers import open_like
from ziggurat import Cache, ZigguratError

cache_dir = cache_helpers.cache_dir
make_cache = cache_helpers.make_cache


class Key(str):
    """A str subclass: a valid key that the quick entry leaves to the full method."""


def set_elsewhere(cache: Cache, key: str, value: Any) -> None:
    """``set`` through another handle of the cache (run in another process)."""
    with open_like(cache) as other:
        other.set(key, value)


def l1_counts(cache: Cache) -> tuple[int, int]:
    l1 = cache.stats()["process"]["l1"]
    return l1["hits"], l1["stale_drops"]


def test_answers_and_defaults_by_every_spelling(make_cache: Callable[..., Cache]) -> None:
    cache = make_cache()
    cache.set("k", {"v": 1})
    cache.set(b"b", [1, 2])
    v = cache.get("k")
    assert v == {"v": 1}
    # shared mode hands out the cached object itself, by either entry
    assert cache.get("k") is v
    assert cache.get(key="k") is v
    assert cache.get("k", default="d") is v
    assert cache.get("k", "d") is v
    assert cache.get(Key("k")) is v
    assert cache.get(b"b") == [1, 2]
    assert cache.get("absent") is None
    assert cache.get("absent", "d") == "d"
    assert cache.get("absent", default="d") == "d"
    assert cache.get(key="absent", default=7) == 7


def test_cached_miss_returns_the_callers_default(make_cache: Callable[..., Cache]) -> None:
    cache = make_cache()
    assert cache.fetch("none", lambda: None) is None  # a cached miss
    assert cache.get("none") is None  # now held in L1
    hits0, _ = l1_counts(cache)
    sentinel = object()
    assert cache.get("none") is None
    assert cache.get("none", sentinel) is sentinel
    assert cache.get("none", default=sentinel) is sentinel
    hits1, _ = l1_counts(cache)
    assert hits1 - hits0 == 3


def test_bad_calls_get_the_full_methods_errors(make_cache: Callable[..., Cache]) -> None:
    cache = make_cache()
    cache.set("k", 1)
    with pytest.raises(TypeError, match=r"^Cache\.get\(\): key must be str or bytes"):
        cache.get(["k"])  # type: ignore[arg-type]
    with pytest.raises(TypeError, match=r"^Cache\.get\(\): key must be str or bytes"):
        cache.get(3)  # type: ignore[arg-type]
    with pytest.raises(ValueError, match=r"^Cache\.get\(\)"):
        cache.get("")
    with pytest.raises(TypeError, match=r"Cache\.get\(\) missing 1 required"):
        cache.get()  # type: ignore[call-arg]
    with pytest.raises(TypeError, match=r"Cache\.get\(\) takes from 1 to 2 positional"):
        cache.get("k", 1, 2)  # type: ignore[call-arg]
    with pytest.raises(TypeError, match=r"Cache\.get\(\) got an unexpected keyword"):
        cache.get("k", bogus=1)  # type: ignore[call-arg]
    assert cache.get("k") == 1


def test_hits_are_counted_once_per_call(make_cache: Callable[..., Cache]) -> None:
    cache = make_cache()
    cache.set("k", "v")
    hits0, _ = l1_counts(cache)
    for _ in range(10):
        assert cache.get("k") == "v"
    for _ in range(5):
        assert cache.get(Key("k")) == "v"
    hits1, _ = l1_counts(cache)
    assert hits1 - hits0 == 15


def test_another_processs_write_is_seen_at_once(make_cache: Callable[..., Cache]) -> None:
    """A stale L1 entry is not answered by the quick entry: the full method drops it."""
    cache = make_cache()
    cache.set("k", "old")
    assert cache.get("k") == "old"
    _, stale0 = l1_counts(cache)
    cache_helpers.Worker(set_elsewhere, cache, "k", "new").result()
    assert cache.get("k") == "new"
    assert cache.get("k") == "new"
    _, stale1 = l1_counts(cache)
    assert stale1 - stale0 == 1


def test_expired_entry_is_not_answered(make_cache: Callable[..., Cache]) -> None:
    cache = make_cache()
    cache.set("k", "v", ttl=0.5)  # long enough to be read at once on a loaded machine
    assert cache.get("k") == "v"
    assert cache_helpers.wait_until(lambda: cache.get("k") is None, timeout=5)
    assert cache.get("k", "d") == "d"


@pytest.mark.parametrize("mode", ["copy", "decode"])
def test_other_copy_modes_keep_their_answers(make_cache: Callable[..., Cache], mode: str) -> None:
    cache = make_cache(copy=mode)
    cache.set("k", {"v": [1]})
    a = cache.get("k")
    b = cache.get("k")
    assert a == b == {"v": [1]}
    assert a is not b
    a["w"] = 2  # the caller's own dict: the cached one is unchanged in both modes
    assert cache.get("k") == {"v": [1]}


def test_closed_cache_refuses(make_cache: Callable[..., Cache]) -> None:
    cache = make_cache()
    cache.set("k", 1)
    assert cache.get("k") == 1
    cache.close()
    with pytest.raises(ZigguratError, match="closed"):
        cache.get("k")


def test_threads_hitting_while_another_writes(make_cache: Callable[..., Cache]) -> None:
    """Readers in threads see only values that were written, and the last one at the end."""
    cache = make_cache()
    keys = [f"k{i}" for i in range(50)]
    for k in keys:
        cache.set(k, (k, 0))
    errors: list[str] = []
    stop = threading.Event()

    def read() -> None:
        while not stop.is_set():
            for k in keys:
                v = cache.get(k)
                if v is None or v[0] != k:
                    errors.append(f"{k}: {v!r}")

    readers = [threading.Thread(target=read) for _ in range(3)]
    for t in readers:
        t.start()
    for n in range(1, 200):
        for k in keys[:: 1 + n % 5]:
            cache.set(k, (k, n))
    stop.set()
    for t in readers:
        t.join()
    assert errors == []
    cache.set("k0", ("k0", "last"))
    assert cache.get("k0") == ("k0", "last")


def test_fetch_hits_misses_and_options(make_cache: Callable[..., Cache]) -> None:
    cache = make_cache()
    calls: list[str] = []

    def load() -> dict[str, int]:
        calls.append("load")
        return {"v": 1}

    v = cache.fetch("k", load)
    assert v == {"v": 1} and calls == ["load"]
    hits0, _ = l1_counts(cache)
    assert cache.fetch("k", load) is v
    assert cache.fetch(Key("k"), load) is v
    assert cache.fetch("k", load, ttl=60) is v
    assert cache.fetch(key="k", loader=load) is v
    assert calls == ["load"]
    hits1, _ = l1_counts(cache)
    assert hits1 - hits0 == 4
    # a cached miss answers None by either entry, and the loader is not called again
    assert cache.fetch("none", lambda: None) is None
    assert cache.fetch("none", load) is None
    assert cache.fetch("none", load, ttl=5) is None
    assert calls == ["load"]
    # a hit needs no loader call, so a hit does not look at the loader
    assert cache.fetch("k", None) is v  # type: ignore[arg-type]


def test_fetch_bad_calls_get_the_full_methods_errors(make_cache: Callable[..., Cache]) -> None:
    cache = make_cache()
    cache.set("k", 1)
    with pytest.raises(TypeError, match=r"^Cache\.fetch\(\): key must be str or bytes"):
        cache.fetch(3, lambda: 1)  # type: ignore[arg-type]
    with pytest.raises(TypeError, match=r"Cache\.fetch\(\) missing 1 required"):
        cache.fetch("k")  # type: ignore[call-arg]
    with pytest.raises(TypeError, match=r"Cache\.fetch\(\) takes 2 positional"):
        cache.fetch("k", lambda: 1, 60)  # type: ignore[misc]
    with pytest.raises(ValueError, match=r"^Cache\.fetch\(\): ttl"):
        cache.fetch("k", lambda: 1, ttl=-5)
    with pytest.raises(TypeError, match=r"^Cache\.fetch\(\): loader must be callable"):
        cache.fetch("absent", 5)  # type: ignore[arg-type]
    assert cache.fetch("k", lambda: 2) == 1


def test_fetch_sees_another_processs_write(make_cache: Callable[..., Cache]) -> None:
    cache = make_cache()
    assert cache.fetch("k", lambda: "old") == "old"
    assert cache.fetch("k", lambda: "unused") == "old"
    cache_helpers.Worker(set_elsewhere, cache, "k", "new").result()
    assert cache.fetch("k", lambda: "unused") == "new"


def test_misses_reach_the_body_with_errors_and_reentry(make_cache: Callable[..., Cache]) -> None:
    """Plain calls that miss go to the method's body directly: its errors, a loader's
    exception and a loader that calls the cache again all behave as through the method."""
    cache = make_cache()

    class Boom(Exception):
        pass

    def failing() -> Any:
        raise Boom("loader failed")

    with pytest.raises(Boom, match="loader failed"):
        cache.fetch("f", failing)
    # a loader that reads and fills other keys of the same cache while its own load runs
    cache.set("inner", 1)

    def nested() -> Any:
        return {"inner": cache.get("inner"), "other": cache.fetch("other", lambda: 2)}

    assert cache.fetch("outer", nested) == {"inner": 1, "other": 2}
    assert cache.get("outer") == {"inner": 1, "other": 2}
    assert cache.get("other") == 2
    # a value that cannot be encoded: returned, logged, counted, nothing stored
    fn = lambda: 0  # noqa: E731
    assert cache.fetch("bad", lambda: fn) is fn
    assert cache.get("bad", "absent") == "absent"


def test_a_cache_without_l1_answers_through_the_same_entries(
    make_cache: Callable[..., Cache],
) -> None:
    cache = make_cache(l1_items=0)
    cache.set("k", [1])
    assert cache.get("k") == [1]
    assert cache.get("k", "d") == [1]
    assert cache.get("absent", "d") == "d"
    assert cache.fetch("f", lambda: {"v": 3}) == {"v": 3}
    assert cache.fetch("f", lambda: {"v": 4}) == {"v": 3}
    assert cache.stats()["process"]["l1"]["hits"] == 0
