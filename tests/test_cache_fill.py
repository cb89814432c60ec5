"""``fill``: how a value copied in from the cluster tier reaches the segment. It stores only
if nothing that could void the value happened since the snapshot taken before the value was
read elsewhere (G1 and G8: a write, a tag invalidation or a clear that lands while a value
travels from Redis always wins), here with another process doing the write."""

from __future__ import annotations

import multiprocessing as mp
import uuid
from collections.abc import Callable, Iterator

import pytest
from ziggurat import Cache


@pytest.fixture
def cache(shm_dir: str) -> Iterator[Cache]:
    c = Cache("fill-" + uuid.uuid4().hex[:8], size="8MiB", directory=shm_dir)
    yield c
    c.unlink()


def _in_other_process(name: str, directory: str, what: str) -> None:
    c = Cache(name, size="8MiB", directory=directory)
    {
        "set": lambda: c.set("k", "newer", tags=["t"]),
        "delete": lambda: c.delete("k"),
        "tags": lambda: c.invalidate_tags("t"),
        "clear": c.clear,
    }[what]()
    c.close()


def test_fill_stores_when_nothing_changed(cache: Cache) -> None:
    seen = cache._core.seen("k")
    assert seen is not None
    assert cache._core.fill("k", "from redis", 60.0, ["t"], seen) is True
    assert cache.get("k") == "from redis"
    cache.invalidate_tags("t")  # the tags it was given are the entry's own
    assert cache.get("k") is None


@pytest.mark.parametrize("what", ["set", "delete", "tags", "clear"])
def test_fill_loses_to_a_write_that_landed_meanwhile(cache: Cache, shm_dir: str, what: str) -> None:
    cache.set("k", "old", tags=["t"])
    seen = cache._core.seen("k")
    assert seen is not None
    p = mp.get_context("fork").Process(target=_in_other_process, args=(cache.name, shm_dir, what))
    p.start()
    p.join(30)
    assert p.exitcode == 0
    expect: Callable[[object], bool] = {
        "set": lambda v: v == "newer",
        "delete": lambda v: v is None,
        "tags": lambda v: v is None,
        "clear": lambda v: v is None,
    }[what]
    assert expect(cache.get("k"))
    assert cache._core.fill("k", "stale copy", 60.0, ["t"], seen) is False
    assert expect(cache.get("k"))
