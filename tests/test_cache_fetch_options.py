"""``fetch``'s one miss path under each of the options that change what it does (per-call
TTLs, tags as a list or a generator, fail-safe stale values, early refresh, copy modes, no
L1). Every variant must behave alike: one loader call, the value stored for the other
handles, cached misses, the lease released after a failed store or a failed loader, the
loader counters, and failed stores logged and counted without failing the call.
"""

from __future__ import annotations

import logging
import time
from collections.abc import Callable, Iterator
from typing import Any

import cache_helpers
import pytest
from cache_helpers import open_like
from ziggurat import Cache

make_cache = cache_helpers.make_cache
cache_dir = cache_helpers.cache_dir

# (label, Cache options, fetch keyword arguments): the plain case, then one option each.
PATHS: list[tuple[str, dict[str, Any], dict[str, Any]]] = [
    ("plain", {}, {}),
    ("tags-list", {}, {"tags": ["t1"]}),
    ("per-call-ttl", {}, {"ttl": 60}),
    ("per-call-neg-ttl", {}, {"neg_ttl": 30}),
    ("tags-generator", {}, {"tags": "generator"}),
    ("stale-ttl", {"stale_ttl": 30}, {}),
    ("refresh-ahead", {"refresh_ahead": 0.1}, {}),
    ("copy-mode", {"copy": "copy"}, {}),
    ("no-l1", {"l1_items": 0}, {}),
]


def _kwargs(kw: dict[str, Any]) -> dict[str, Any]:
    """The fetch arguments, with a fresh generator where one is asked for."""
    out = dict(kw)
    if out.get("tags") == "generator":
        out["tags"] = (t for t in ["t1"])
    return out


@pytest.fixture(params=PATHS, ids=[p[0] for p in PATHS])
def path(request: pytest.FixtureRequest) -> Iterator[tuple[dict[str, Any], dict[str, Any]]]:
    yield request.param[1], request.param[2]


def test_miss_loads_once_and_stores(
    make_cache: Callable[..., Cache], path: tuple[dict[str, Any], dict[str, Any]]
) -> None:
    """Every variant: a miss calls the loader once, returns its value, stores it where another
    handle reads it from L2, and the next fetch hits without calling the loader."""
    opts, kw = path
    cache = make_cache(**opts)
    other = open_like(cache, l1_items=0)
    calls: list[int] = []

    def load() -> dict[str, int]:
        calls.append(1)
        return {"v": 7}

    assert cache.fetch("k", load, **_kwargs(kw)) == {"v": 7}
    assert cache.fetch("k", load, **_kwargs(kw)) == {"v": 7}
    assert len(calls) == 1
    assert other.get("k") == {"v": 7}
    assert cache.loader_stats.calls == 1
    assert cache.loader_stats.as_dict()["errors"] == 0


def test_none_is_cached_as_a_miss(
    make_cache: Callable[..., Cache], path: tuple[dict[str, Any], dict[str, Any]]
) -> None:
    """Every variant: a loader's None is returned and cached as a miss (no second call, for
    this handle and another), and a later set voids the cached miss."""
    opts, kw = path
    cache = make_cache(**opts)
    other = open_like(cache)
    calls: list[int] = []

    def load() -> None:
        calls.append(1)

    assert cache.fetch("gone", load, **_kwargs(kw)) is None
    assert cache.fetch("gone", load, **_kwargs(kw)) is None
    assert other.fetch("gone", load) is None
    assert len(calls) == 1
    other.set("gone", "back")
    assert cache.fetch("gone", load, **_kwargs(kw)) == "back"
    assert len(calls) == 1


def test_tags_reach_the_stored_entry(
    make_cache: Callable[..., Cache], path: tuple[dict[str, Any], dict[str, Any]]
) -> None:
    """Every variant: tags given to fetch are stored with the value, so invalidating one makes
    the next fetch load again."""
    opts, kw = path
    if "tags" not in kw:
        kw = {**kw, "tags": ["t1"]}
    cache = make_cache(**opts)
    calls: list[int] = []

    def load() -> int:
        calls.append(1)
        return len(calls)

    assert cache.fetch("k", load, **_kwargs(kw)) == 1
    cache.invalidate_tags("t1")
    assert cache.fetch("k", load, **_kwargs(kw)) == 2


def test_loader_error_propagates_and_releases_the_lease(
    make_cache: Callable[..., Cache], path: tuple[dict[str, Any], dict[str, Any]]
) -> None:
    """Every variant: a loader's exception propagates, is counted, caches nothing, and releases
    the lease: the next fetch (another handle) calls its loader at once instead of waiting
    for loader_timeout."""
    opts, kw = path
    cache = make_cache(loader_timeout=5, **opts)
    other = open_like(cache, loader_timeout=5)

    def fail() -> Any:
        raise RuntimeError("db down")

    with pytest.raises(RuntimeError, match="db down"):
        cache.fetch("k", fail, **_kwargs(kw))
    assert cache.loader_stats.as_dict()["errors"] == 1
    t0 = time.monotonic()
    assert other.fetch("k", lambda: "ok") == "ok"
    assert time.monotonic() - t0 < 2.0, "the failed loader's lease was not released"


def test_failed_store_is_logged_counted_and_released(
    make_cache: Callable[..., Cache],
    path: tuple[dict[str, Any], dict[str, Any]],
    caplog: pytest.LogCaptureFixture,
) -> None:
    """Every variant: a loaded value that cannot be stored (larger than the segment's largest
    value) is still returned; the failure is logged and counted in write_errors; the lease
    is released (another handle's fetch loads at once)."""
    opts, kw = path
    cache = make_cache(loader_timeout=5, **opts)
    other = open_like(cache, loader_timeout=5)
    big = b"x" * (cache._segment.max_value_size + 1) if cache._segment else b""
    with caplog.at_level(logging.WARNING, logger="ziggurat"):
        assert cache.fetch("big", lambda: big, **_kwargs(kw)) == big
    assert cache.stats()["process"]["l2"]["write_errors"] == 1
    assert any("store" in r.getMessage() for r in caplog.records), caplog.records
    t0 = time.monotonic()
    assert other.fetch("big", lambda: "small") == "small"
    assert time.monotonic() - t0 < 2.0, "the lease of the failed store was not released"


def test_unserializable_value_is_returned_not_cached(
    make_cache: Callable[..., Cache], path: tuple[dict[str, Any], dict[str, Any]]
) -> None:
    """Every variant: a loaded value the serializer cannot encode is returned, not cached (the
    next fetch calls the loader again), and counted as a failed write."""
    opts, kw = path
    cache = make_cache(**opts)
    calls: list[int] = []

    def load() -> Any:
        calls.append(1)
        return lambda: None  # pickle refuses lambdas

    assert callable(cache.fetch("fn", load, **_kwargs(kw)))
    assert callable(cache.fetch("fn", load, **_kwargs(kw)))
    assert len(calls) == 2
    assert cache.stats()["process"]["l2"]["write_errors"] == 2


def test_bad_arguments_raise_before_loading(make_cache: Callable[..., Cache]) -> None:
    """Bad input on a miss (tags, TTLs) raises TypeError/ValueError before the loader runs,
    and leaves nothing behind."""
    cache = make_cache()
    calls: list[int] = []

    def load() -> int:
        calls.append(1)
        return 1

    with pytest.raises(TypeError, match="single str"):
        cache.fetch("k", load, tags="users")
    with pytest.raises(TypeError, match="each tag must be a str"):
        cache.fetch("k", load, tags=[1])
    with pytest.raises(ValueError, match="must not be empty"):
        cache.fetch("k", load, tags=[""])
    with pytest.raises(ValueError, match="ttl"):
        cache.fetch("k", load, ttl=-1)
    with pytest.raises(TypeError, match="callable"):
        cache.fetch("k", "not a function")  # type: ignore[arg-type]
    with pytest.raises(TypeError, match="str or bytes"):
        cache.fetch(3, load)  # type: ignore[arg-type]
    assert calls == []
    assert cache.get("k") is None
    assert cache.fetch("k", load) == 1  # and the lease was never left held
