"""asyncio: ``afetch`` single-flight (many tasks in one loop, and loops in several
processes), the async ``cached`` decorator, negative caching, fail-safe and early refresh
from async loaders.
"""

from __future__ import annotations

import asyncio
import os
import time
from collections.abc import Callable
from typing import Any

import cache_helpers
import pytest
from cache_helpers import CTX, CallLog, Worker, new_name, open_like
from ziggurat import Cache

cache_dir = cache_helpers.cache_dir
make_cache = cache_helpers.make_cache

# Keys also share the segment's stamp words (as many as the entries it expects): a write
# of one key during another's load then refuses that landing, which costs one load more
# (never a stale value). 64 MiB keeps such a shared word among the 48 keys rare, so what
# these tests count is single flight, not that cost.
SIZE = "64MiB"
KEYS = ("ak-a", "ak-b", "ak-c")
# Enough keys that some share one of the 192 lease cells in nearly every run (about six
# pairs on average): a process then loads one beside another's lease.
MANY_KEYS = tuple(f"ak-{i}" for i in range(48))


def _load_time(key: str) -> float:
    """0.2 s for the three keys; 0.05 to 0.3 s for the many, so that of two keys sharing a
    lease cell, one often loads for longer than the other (beside the other's lease)."""
    if key in KEYS:
        return 0.2
    return 0.05 * (1 + int(key.rsplit("-", 1)[1]) % 6)


async def _gather_fetches(
    cache: Cache, n_tasks: int, log: CallLog, keys: tuple[str, ...] = KEYS
) -> list[Any]:
    """n_tasks tasks per key, all started together, each awaiting afetch of its key."""

    async def loader(key: str) -> dict[str, Any]:
        log.record(key)
        await asyncio.sleep(_load_time(key))
        return {"key": key, "by": os.getpid()}

    async def one(key: str) -> tuple[str, Any, float]:
        t0 = time.monotonic()
        v = await cache.afetch(key, lambda: loader(key))
        return key, v, time.monotonic() - t0

    return await asyncio.gather(*(one(k) for k in keys for _ in range(n_tasks)))


def _check(results: list[Any], log: CallLog, keys: tuple[str, ...] = KEYS) -> None:
    assert log.counts() == dict.fromkeys(keys, 1), log.lines()
    for key in keys:
        values = [v for k, v, _ in results if k == key]
        assert values and all(v == values[0] for v in values), values
        assert values[0]["key"] == key
    assert max(dt for _, _, dt in results) < 3.0


def test_afetch_single_flight_tasks(make_cache: Callable[..., Cache], cache_dir: str) -> None:
    """Single-flight (request path 4) with asyncio: 50 tasks per key in one event loop: one loader
    call per key, every task gets the value, concurrently (about one loader's time in all)."""
    cache = make_cache()
    log = CallLog(cache_dir)
    t0 = time.monotonic()
    results = asyncio.run(_gather_fetches(cache, 50, log))
    assert time.monotonic() - t0 < 2.0
    assert len(results) == 150
    _check(results, log)
    assert cache.loader_stats.calls == 3


def _async_process(
    name: str,
    directory: str,
    inherited: Cache | None,
    barrier: Any,
    log: CallLog,
    keys: tuple[str, ...],
    n_tasks: int,
) -> list[Any]:
    cache = inherited if inherited is not None else Cache(name, SIZE, directory=directory)
    barrier.wait(20)
    return asyncio.run(_gather_fetches(cache, n_tasks, log, keys))


@pytest.mark.timeout(60)
@pytest.mark.parametrize(
    ("keys", "n_tasks"), [(KEYS, 20), (MANY_KEYS, 5)], ids=["3-keys", "48-keys"]
)
def test_afetch_single_flight_processes(
    cache_dir: str, keys: tuple[str, ...], n_tasks: int
) -> None:
    """Single-flight with asyncio across processes: 2 processes (one with its own Cache, one
    with the parent's, inherited) each run a loop of n_tasks tasks per key: one load per key
    on the host, and every task in both processes gets the same value. With 48 keys, some
    share a lease cell, and a process loads one beside its lease of another."""
    name = new_name("async")
    cache = Cache(name, SIZE, directory=cache_dir)
    try:
        log = CallLog(cache_dir)
        barrier = CTX.Barrier(2)
        workers = [
            Worker(_async_process, name, cache_dir, inh, barrier, log, keys, n_tasks)
            for inh in (None, cache)
        ]
        results = [r for w in workers for r in w.result(timeout=30)]
        assert len(results) == 2 * n_tasks * len(keys)
        _check(results, log, keys)
    finally:
        cache.unlink()


def test_afetch_error_propagates_to_every_waiter(make_cache: Callable[..., Cache]) -> None:
    """Never a cached exception (afetch): a raising async loader: every task waiting on it gets the
    exception, the loader ran once, and nothing is cached (the next afetch loads again)."""
    cache = make_cache()
    calls: list[int] = []

    async def bad() -> Any:
        calls.append(1)
        await asyncio.sleep(0.05)
        raise KeyError("backend")

    async def good() -> str:
        calls.append(2)
        return "ok"

    async def main() -> list[Any]:
        return await asyncio.gather(
            *(cache.afetch("k", bad) for _ in range(10)), return_exceptions=True
        )

    results = asyncio.run(main())
    assert calls == [1]
    assert all(isinstance(r, KeyError) for r in results), results
    assert asyncio.run(cache.afetch("k", good)) == "ok"
    assert calls == [1, 2]


def test_afetch_cancelled_caller_does_not_cancel_waiters(make_cache: Callable[..., Cache]) -> None:
    """Single-flight + G5 (the cache never breaks the app): one caller's cancellation (a client that
    went away) is its own: the other tasks waiting on the same key still get the value (one of them
    loads it)."""
    cache = make_cache()
    calls: list[int] = []

    async def loader() -> str:
        calls.append(1)
        await asyncio.sleep(0.3)
        return "v"

    async def main() -> list[Any]:
        first = asyncio.create_task(cache.afetch("k", loader))
        await asyncio.sleep(0.05)  # first is loading
        others = [asyncio.create_task(cache.afetch("k", loader)) for _ in range(3)]
        await asyncio.sleep(0.05)  # the others wait for it
        first.cancel()
        with pytest.raises(asyncio.CancelledError):
            await first
        return await asyncio.gather(*others, return_exceptions=True)

    results = asyncio.run(main())
    assert results == ["v", "v", "v"], results
    assert cache.get("k") == "v"


def test_afetch_negative_and_stale(make_cache: Callable[..., Cache]) -> None:
    """Negative caching and fail-safe with afetch: a None is cached as a miss, and a stale value
    is served when the loader raises."""
    cache = make_cache(neg_ttl=30, stale_ttl=5, jitter=0)
    calls: list[str] = []

    async def none() -> None:
        calls.append("none")

    async def v1() -> str:
        calls.append("v1")
        return "v1"

    async def boom() -> str:
        calls.append("boom")
        raise RuntimeError("down")

    async def main() -> None:
        assert await cache.afetch("n", none) is None
        assert await cache.afetch("n", none) is None
        assert calls == ["none"]
        assert await cache.afetch("s", v1, ttl=0.3) == "v1"
        await asyncio.sleep(0.4)
        assert await cache.afetch("s", boom) == "v1"
        assert calls == ["none", "v1", "boom"]
        assert cache.loader_stats.stale_served == 1

    asyncio.run(main())


def test_afetch_refresh_ahead(make_cache: Callable[..., Cache]) -> None:
    """Early refresh from afetch: a hit in the last half of the TTL returns the current
    value at once and starts exactly one background task; the new value follows."""
    cache = make_cache(ttl=1, jitter=0, refresh_ahead=0.5)
    calls: list[int] = []

    async def loader() -> str:
        calls.append(1)
        n = len(calls)
        await asyncio.sleep(0.3)
        return f"v{n}"

    async def main() -> None:
        assert await cache.afetch("k", loader) == "v1"
        await asyncio.sleep(0.6)
        for _ in range(20):
            t0 = time.monotonic()
            assert await cache.afetch("k", loader) == "v1"
            assert time.monotonic() - t0 < 0.2
        for _ in range(100):
            if cache.get("k") == "v2":
                break
            await asyncio.sleep(0.02)
        assert cache.get("k") == "v2"
        assert len(calls) == 2
        assert cache.loader_stats.refreshes == 1

    asyncio.run(main())


def test_async_cached_decorator(make_cache: Callable[..., Cache]) -> None:
    """API decorator (async) + G1 tags: @cached on an async function: keyed by args/kwargs, shared
    through L2, tags from a lambda, and invalidation by tag runs the function again."""
    cache = make_cache()
    calls: list[Any] = []

    def make(c: Cache, who: str) -> Callable[..., Any]:
        @c.cached(ttl=60, tags=lambda post_id, **kw: [f"post:{post_id}"])
        async def render(post_id: int, *, lang: str = "en") -> str:
            calls.append((who, post_id, lang))
            await asyncio.sleep(0)
            return f"<p>{post_id}/{lang}</p>"

        return render

    render = make(cache, "a")
    other = open_like(cache)
    try:
        other_render = make(other, "b")

        async def main() -> None:
            assert await render(1) == "<p>1/en</p>"
            assert await render(1) == "<p>1/en</p>"
            assert await render(1, lang="fr") == "<p>1/fr</p>"
            assert await render(post_id=2) == "<p>2/en</p>"
            results = await asyncio.gather(*(render(3) for _ in range(10)))
            assert results == ["<p>3/en</p>"] * 10
            assert await other_render(1) == "<p>1/en</p>"  # through L2
            assert len(calls) == 4
            cache.invalidate_tags("post:1")
            assert await other_render(1) == "<p>1/en</p>"
            assert await render(1, lang="fr") == "<p>1/fr</p>"
            assert await render(post_id=2) == "<p>2/en</p>"
            assert calls[4:] == [("b", 1, "en"), ("a", 1, "fr")]

        asyncio.run(main())
    finally:
        other.close()
