"""``load_context()``: what a loader says of its own result (``set_ttl``, ``set_tags``,
``skip``), through ``fetch``, ``afetch`` and ``@cached``, with and without a segment; the rules
are the Cache's (``Miss::override_with``), as Node.js's ``ctx.setTtl``/``setTags``/``skip``.
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import Callable
from typing import Any

import cache_helpers
import pytest
from ziggurat import Cache, load_context

make_cache = cache_helpers.make_cache
cache_dir = cache_helpers.cache_dir


def test_set_tags_replaces_the_calls_tags_for_every_handle(
    make_cache: Callable[..., Cache],
) -> None:
    c = make_cache()
    other = make_cache(c.name)

    def load() -> dict[str, int]:
        load_context().set_tags("author:3")
        return {"id": 7, "author": 3}

    assert c.fetch("post:7", load, tags=["posts"]) == {"id": 7, "author": 3}
    assert other.get("post:7") == {"id": 7, "author": 3}
    c.invalidate_tags("posts")  # no longer its tag
    assert other.get("post:7") is not None
    c.invalidate_tags("author:3")
    assert other.get("post:7") is None
    assert c.get("post:7") is None


def test_set_ttl_stores_for_as_long_as_the_loader_said(make_cache: Callable[..., Cache]) -> None:
    c = make_cache()

    def load() -> str:
        load_context().set_ttl(0.2)
        return "brief"

    assert c.fetch("k", load, ttl=600) == "brief"
    assert c.get("k") == "brief"
    time.sleep(0.3)
    assert c.get("k") is None


def test_skip_returns_without_storing(make_cache: Callable[..., Cache]) -> None:
    c = make_cache()
    calls = []

    def load() -> dict[str, bool]:
        calls.append(1)
        load_context().skip()
        return {"partial": True}

    assert c.fetch("k", load) == {"partial": True}
    assert c.get("k") is None
    c.fetch("k", load)
    assert len(calls) == 2
    assert c.stats()["process"]["loader"]["calls"] == 2


def test_a_cached_miss_takes_the_loaders_tags(make_cache: Callable[..., Cache]) -> None:
    c = make_cache(neg_ttl=60)
    calls = []

    def load() -> None:
        calls.append(1)
        load_context().set_tags("user:9")

    assert c.fetch("user:9", load) is None
    assert c.fetch("user:9", load) is None
    assert len(calls) == 1
    c.invalidate_tags("user:9")
    c.fetch("user:9", load)
    assert len(calls) == 2


def test_tags_chosen_after_a_load_during_which_a_tag_was_invalidated_are_not_stored(
    make_cache: Callable[..., Cache],
) -> None:
    c = make_cache()
    other = make_cache(c.name)

    def load() -> str:
        other.invalidate_tags("author:3")  # another worker's change, while this load runs
        load_context().set_tags("author:3")
        return "read before the change"

    assert c.fetch("post:7", load) == "read before the change"
    assert other.get("post:7") is None


def test_afetch_and_cached_loaders_have_their_own_context(make_cache: Callable[..., Cache]) -> None:
    c = make_cache()

    async def load(n: int) -> int:
        await asyncio.sleep(0.01 * (3 - n))  # the loaders interleave on one loop
        load_context().set_tags(f"n:{n}")
        return n

    async def main() -> list[Any]:
        return await asyncio.gather(*(c.afetch(f"k{n}", lambda n=n: load(n)) for n in range(3)))

    assert asyncio.run(main()) == [0, 1, 2]
    c.invalidate_tags("n:1")
    assert [c.get(f"k{n}") for n in range(3)] == [0, None, 2]

    @c.cached(ttl=600)
    def square(x: int) -> int:
        load_context().set_tags("squares")
        return x * x

    assert square(4) == 16
    c.invalidate_tags("squares")
    calls = []

    @c.cached(ttl=600)
    def cube(x: int) -> int:
        calls.append(x)
        return x**3

    cube(2)
    cube(2)
    assert calls == [2]


def test_a_cache_without_segment_follows_the_context(tmp_path: Any) -> None:
    with pytest.warns(RuntimeWarning, match="runs without its shared segment"):
        c = Cache("ctx-degraded", directory=str(tmp_path / "missing"), degraded="local")
    try:
        assert c.degraded

        def load() -> int:
            load_context().skip()
            return 1

        assert c.fetch("k", load) == 1
        assert c.get("k") is None
    finally:
        c.close()


def test_bad_arguments_raise_in_the_loader_naming_the_method(
    make_cache: Callable[..., Cache],
) -> None:
    c = make_cache()
    with pytest.raises(ValueError, match=r"load_context\(\)\.set_ttl\(\): ttl must be"):
        c.fetch("a", lambda: load_context().set_ttl(-1))
    with pytest.raises(
        ValueError, match=r"load_context\(\)\.set_tags\(\): a tag must not be empty"
    ):
        c.fetch("b", lambda: load_context().set_tags("ok", ""))
    with pytest.raises(ValueError, match=r"load_context\(\)\.set_tags\(\): at most 8 tags"):
        c.fetch("c", lambda: load_context().set_tags(*["t"] * 9))
    with pytest.raises(RuntimeError, match=r"^load_context\(\): call it inside a loader"):
        load_context()
    assert c.get("a") is None
