"""The L1 table against a model: its bounds (G4) and its answers (G1) under a random mix of
sets, deletes, cached misses and reads over more keys than it holds, and CLOCK's second
chance for an entry read between evictions.
"""

from __future__ import annotations

import random
from collections.abc import Callable
from typing import Any

import cache_helpers
from ziggurat import Cache

cache_dir = cache_helpers.cache_dir
make_cache = cache_helpers.make_cache

ITEMS = 40
NEGATIVE = 8


def l1(cache: Cache) -> dict[str, Any]:
    return dict(cache.stats()["process"]["l1"])


def test_l1_stays_within_its_bounds_and_agrees_with_a_model(
    make_cache: Callable[..., Cache],
) -> None:
    cache = make_cache(l1_items=ITEMS, l1_negative_items=NEGATIVE)
    rnd = random.Random(7)
    model: dict[str, Any] = {}
    keys = [f"k{i}" for i in range(200)]
    for step in range(6000):
        k = rnd.choice(keys)
        op = rnd.random()
        if op < 0.35:
            v = [step]
            cache.set(k, v)
            model[k] = v
        elif op < 0.45:
            cache.delete(k)
            model.pop(k, None)
        elif op < 0.55:
            # a key the model lacks becomes a cached miss (an L1 negative entry)
            assert cache.fetch(k, lambda: None) == model.get(k)
        else:
            assert cache.get(k, "absent") == model.get(k, "absent"), (step, k)
        if step % 25 == 0:
            s = l1(cache)
            assert s["items"] <= ITEMS and s["negative_items"] <= NEGATIVE, (step, s)
    s = l1(cache)
    assert s["evictions"] > 0  # the mix did overflow the table
    assert s["hits"] > 0
    assert all(cache.get(k, "absent") == model.get(k, "absent") for k in keys)


def test_an_entry_read_between_evictions_stays(make_cache: Callable[..., Cache]) -> None:
    cache = make_cache(l1_items=ITEMS)
    cache.set("hot", {"v": 0})
    for i in range(20 * ITEMS):
        cache.set(f"cold{i}", i)
        hits = l1(cache)["hits"]
        assert cache.get("hot") == {"v": 0}
        assert l1(cache)["hits"] == hits + 1, i  # still in L1: CLOCK gave it a second chance
    s = l1(cache)
    assert s["items"] <= ITEMS
    assert s["evictions"] >= 19 * ITEMS
