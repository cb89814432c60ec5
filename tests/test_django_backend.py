"""``ziggurat.contrib.django.ZigguratCache`` through Django's own ``caches``: what Django's
suite does not cover (several worker processes, ``close()`` after every request, the async
API, configuration errors, the timeout mapping). Django's suite itself runs in
test_django_suite.py."""

from __future__ import annotations

import asyncio
import math
import os
import pickle
from collections.abc import Callable, Iterator
from typing import Any

import cache_helpers
import pytest
from cache_helpers import CTX, Worker, new_name

pytest.importorskip("django")

from django.conf import settings
from django.core import signals
from django.core.cache import caches
from django.core.exceptions import ImproperlyConfigured
from django.test.utils import override_settings
from ziggurat.contrib.django import ZigguratCache

cache_dir = cache_helpers.cache_dir  # a pytest fixture

BACKEND = "ziggurat.contrib.django.ZigguratCache"

if not settings.configured:
    # Only CACHES matters here; each test sets it with override_settings.
    settings.configure()

Configure = Callable[..., ZigguratCache]


@pytest.fixture
def configure(cache_dir: str) -> Iterator[Configure]:
    """``configure(open_now=True, **default_alias_params)`` sets CACHES (aliases "default"
    and "other", the same LOCATION, a fresh name in the test's directory) and returns
    ``caches["default"]`` (not yet opened in this process with ``open_now=False``). Every
    cache opened is unlinked at the end."""
    overrides: list[override_settings] = []

    def configure(open_now: bool = True, **params: Any) -> ZigguratCache:
        location = new_name("dj")
        alias = {
            "BACKEND": BACKEND,
            "LOCATION": location,
            "OPTIONS": {"directory": cache_dir, "size": "8MiB"},
            **params,
        }
        override = override_settings(CACHES={"default": alias, "other": dict(alias)})
        override.enable()
        overrides.append(override)
        if not open_now:
            return None  # type: ignore[return-value]
        backend = caches["default"]
        assert isinstance(backend, ZigguratCache)
        return backend

    yield configure
    for override in reversed(overrides):
        # Both aliases hold one Cache: unlinking it once removes the files.
        opened = {id(c): c for c in (caches["default"].cache, caches["other"].cache)}
        for cache in opened.values():
            cache.unlink()
        override.disable()


def ttl_of(backend: ZigguratCache, key: str) -> float:
    """The TTL the segment holds for a Django key (``math.inf``: never expires)."""
    found = backend.cache._core.peek(backend.make_key(key))
    # The segment records no TTL (0) for an entry that never expires.
    return math.inf if found.seconds_left == math.inf else found.ttl


# -- several worker processes -----------------------------------------------------------------


def _count(n: int, start: Any) -> int:
    # A forked worker that had not opened the cache: it opens its own, as a Django worker
    # process does on its first request.
    backend = caches["default"]
    start.wait()
    backend.add("hits", 0)
    for _ in range(n):
        backend.incr("hits")
    return os.getpid()


def test_incr_is_atomic_across_worker_processes(configure: Configure) -> None:
    """4 processes x 2,500 ``incr`` through the backend end at exactly 10,000."""
    configure(open_now=False)
    start = CTX.Event()
    workers = [Worker(_count, 2500, start) for _ in range(4)]
    start.set()
    pids = [w.result(timeout=120) for w in workers]
    assert len(set(pids)) == 4
    backend = caches["default"]
    assert backend.get("hits") == 10_000
    assert backend.incr("hits") == 10_001


def _add(start: Any) -> bool:
    # Forked after the parent opened the cache: the child uses the inherited Cache, as
    # workers of a preloading server (gunicorn --preload) do.
    backend = caches["default"]
    start.wait()
    return backend.add("race", os.getpid(), timeout=60)


def test_add_has_one_winner_among_processes(configure: Configure) -> None:
    backend = configure()
    for _round in range(3):
        start = CTX.Event()
        workers = [Worker(_add, start) for _ in range(4)]
        start.set()
        wins = [w.result(timeout=60) for w in workers]
        assert wins.count(True) == 1, wins
        assert backend.get("race") == workers[wins.index(True)].pid
        assert backend.delete("race") is True


# -- one Cache per process, close() -----------------------------------------------------------


def test_aliases_of_one_location_share_one_cache(configure: Configure) -> None:
    backend = configure()
    other = caches["other"]
    assert other is not backend
    assert other.cache is backend.cache
    backend.set("k", "v")
    assert other.get("k") == "v"
    # A KEY_PREFIX separates keys, not stores.
    prefixed = ZigguratCache(
        backend.cache.name,
        {"KEY_PREFIX": "p", "OPTIONS": {"directory": _directory(backend), "size": "8MiB"}},
    )
    assert prefixed.cache is backend.cache
    assert prefixed.get("k") is None
    # Other ziggurat options open another Cache of the same segment: still one store.
    l2_only = ZigguratCache(
        backend.cache.name,
        {"OPTIONS": {"directory": _directory(backend), "size": "8MiB", "l1_items": 0}},
    )
    assert l2_only.cache is not backend.cache
    assert l2_only.get("k") == "v"
    l2_only.set("k", "w")
    assert backend.get("k") == "w"
    l2_only.cache.close()


def _directory(backend: ZigguratCache) -> str:
    segment = backend.cache._segment
    assert segment is not None
    return os.path.dirname(segment.path)


def test_close_is_free_and_keeps_the_cache_usable(configure: Configure) -> None:
    backend = configure()
    backend.set("k", {"v": 1})
    assert backend.get("k") == {"v": 1}
    l1_items = backend.cache.stats()["process"]["l1"]["items"]
    backend.close()
    backend.close()
    # What Django does at the end of every request: close every cache used.
    signals.request_finished.send(sender=None)
    assert backend.cache.closed is False
    # Nothing was dropped: the process's L1 still holds the value.
    assert backend.cache.stats()["process"]["l1"]["items"] == l1_items
    assert backend.get("k") == {"v": 1}
    backend.set("k2", 2)
    assert caches["default"].get("k2") == 2
    asyncio.run(backend.aclose())
    assert backend.incr("k2") == 3


def test_a_closed_cache_is_reopened(configure: Configure) -> None:
    """Closing the Cache underneath (e.g. in a test's tear-down) does not break the next
    backend of that LOCATION."""
    backend = configure()
    backend.set("k", 1)
    backend.cache.close()
    fresh = ZigguratCache(
        backend.cache.name, {"OPTIONS": {"directory": _directory(backend), "size": "8MiB"}}
    )
    assert fresh.cache is not backend.cache
    assert fresh.get("k") == 1
    fresh.cache.close()


# -- timeouts ---------------------------------------------------------------------------------


def test_timeout_none_never_expires(configure: Configure) -> None:
    backend = configure()
    backend.set("a", 1, timeout=None)
    assert ttl_of(backend, "a") == math.inf
    assert backend.add("b", 2, timeout=None) is True
    assert ttl_of(backend, "b") == math.inf
    backend.set_many({"c": 3}, timeout=None)
    assert ttl_of(backend, "c") == math.inf
    backend.set("d", 4, timeout=5)
    assert ttl_of(backend, "d") == 5
    assert backend.touch("d", timeout=None) is True
    assert ttl_of(backend, "d") == math.inf
    # Beyond the segment's 100 years: forever too.
    backend.set("e", 5, timeout=10**10)
    assert ttl_of(backend, "e") == math.inf


@pytest.mark.parametrize("timeout", [0, -1, -0.5])
def test_timeout_zero_or_negative_stores_nothing_and_deletes(
    configure: Configure, timeout: float
) -> None:
    backend = configure()
    backend.set("k", "old")
    backend.set("k", "new", timeout=timeout)
    assert backend.get("k", "absent") == "absent"
    assert backend.add("k", "v", timeout=timeout) is True
    assert backend.has_key("k") is False
    backend.set("k", "kept")
    assert backend.add("k", "v", timeout=timeout) is False
    assert backend.get("k") == "kept"
    assert backend.touch("k", timeout=timeout) is True
    assert backend.has_key("k") is False
    assert backend.touch("k", timeout=timeout) is False
    backend.set_many({"x": 1, "y": 2})
    assert backend.set_many({"x": 3, "y": 4}, timeout=timeout) == []
    assert backend.get_many(["x", "y"]) == {}


def test_default_timeout_is_the_timeout_setting(configure: Configure) -> None:
    backend = configure(TIMEOUT=42)
    backend.set("k", 1)
    assert ttl_of(backend, "k") == 42
    backend.add("a", 1)
    assert ttl_of(backend, "a") == 42
    backend.set("k", 1, timeout=7)
    backend.touch("k")
    assert ttl_of(backend, "k") == 42
    forever = configure(TIMEOUT=None)
    forever.set("k", 1)
    assert ttl_of(forever, "k") == math.inf


def test_bad_timeout_names_the_method(configure: Configure) -> None:
    backend = configure()
    with pytest.raises(TypeError, match=r"ZigguratCache\.set\(\): timeout must be a number"):
        backend.set("k", 1, timeout="60")  # type: ignore[arg-type]
    with pytest.raises(ValueError, match=r"ZigguratCache\.touch\(\): timeout"):
        backend.touch("k", timeout=math.nan)
    assert backend.has_key("k") is False


# -- values, keys, counters -------------------------------------------------------------------


def test_values_keep_their_types(configure: Configure) -> None:
    backend = configure()
    values = {
        "true": True,
        "false": False,
        "float": 1.5,
        "bytes": b"\x00\xff",
        "big": 2**100,
        "negative": -(2**63),
        "tuple": (1, "a"),
        "set": {1, 2},
        "nested": {"a": [1, (2, 3)], "b": None},
        "none": None,
    }
    for key, value in values.items():
        backend.set(key, value)
        got = backend.get(key, "default")
        assert got == value and type(got) is type(value), key
    # A stored None is a value, not a miss.
    assert backend.get("none", "default") is None
    assert backend.has_key("none") is True
    assert backend.get_many(["none", "absent"]) == {"none": None}


def test_incr_and_decr_follow_django(configure: Configure) -> None:
    backend = configure()
    backend.set("n", 41)
    assert backend.incr("n") == 42
    assert backend.decr("n", 2) == 40
    assert backend.get("n") == 40
    with pytest.raises(ValueError, match="Key 'missing' not found"):
        backend.incr("missing")
    with pytest.raises(ValueError):
        backend.decr("missing")
    backend.set("none", None)
    with pytest.raises(TypeError):
        backend.incr("none")
    with pytest.raises(TypeError, match=r"ZigguratCache\.incr\(\): delta must be an int"):
        backend.incr("n", 1.5)  # type: ignore[arg-type]
    with pytest.raises(TypeError, match=r"ZigguratCache\.decr\(\): delta must be an int"):
        backend.decr("n", "1")  # type: ignore[arg-type]
    assert backend.get("n") == 40
    # Versions are separate keys.
    backend.set("n", 7, version=2)
    assert backend.incr("n", version=2) == 8
    assert backend.get("n") == 40


def test_unpicklable_value_raises_a_pickling_error(configure: Configure) -> None:
    class Unpicklable:
        def __reduce__(self) -> Any:
            raise pickle.PicklingError("no")

    backend = configure()
    with pytest.raises(pickle.PickleError, match=r"ZigguratCache\.set\(\)"):
        backend.set("k", Unpicklable())
    with pytest.raises(pickle.PickleError, match=r"ZigguratCache\.add\(\)"):
        backend.add("k", Unpicklable())
    assert backend.has_key("k") is False


def test_keys_longer_than_the_segment_takes_work(configure: Configure) -> None:
    backend = configure()
    a, b = "a" * 5000, "a" * 4999 + "b"
    with pytest.warns(Warning):  # Django's memcached portability warning
        backend.set(a, 1)
        backend.set(b, 2)
    with pytest.warns(Warning):
        assert (backend.get(a), backend.get(b)) == (1, 2)
        assert backend.delete(a) is True
        assert backend.get(a) is None


# -- configuration ----------------------------------------------------------------------------


def test_configuration_errors_are_clear(cache_dir: str) -> None:
    with pytest.raises(ImproperlyConfigured, match="unknown OPTIONS 'sise'"):
        ZigguratCache("x", {"OPTIONS": {"sise": "8MiB"}})
    with pytest.raises(ImproperlyConfigured, match="must not set 'ttl'"):
        ZigguratCache("x", {"OPTIONS": {"ttl": 5}})
    with pytest.raises(ImproperlyConfigured, match="LOCATION='a/b'"):
        ZigguratCache("a/b", {"OPTIONS": {"directory": cache_dir}})
    with pytest.raises(ImproperlyConfigured, match="l1_items"):
        ZigguratCache("x", {"OPTIONS": {"directory": cache_dir, "l1_items": -1}})
    assert os.listdir(cache_dir) == []


def test_djangos_culling_options_are_ignored(cache_dir: str) -> None:
    options = {"directory": cache_dir, "size": "8MiB", "MAX_ENTRIES": 2, "CULL_FREQUENCY": 0}
    backend = ZigguratCache("culling", {"OPTIONS": options})
    backend.set_many({f"k{i}": i for i in range(10)})
    assert len(backend.get_many([f"k{i}" for i in range(10)])) == 10
    backend.cache.unlink()


# -- asyncio ----------------------------------------------------------------------------------


def test_async_methods(configure: Configure) -> None:
    backend = configure()

    async def scenario() -> None:
        await backend.aset("k", {"v": 1})
        assert await backend.aget("k") == {"v": 1}
        assert await backend.aget("absent", "d") == "d"
        assert await backend.aadd("k", 2) is False
        assert await backend.aadd("n", 1) is True
        assert await backend.aincr("n", 4) == 5
        assert await backend.adecr("n") == 4
        with pytest.raises(ValueError):
            await backend.aincr("absent")
        assert await backend.ahas_key("n") is True
        assert await backend.atouch("n", None) is True
        assert await backend.aset_many({"a": 1, "b": 2}) == []
        assert await backend.aget_many(["a", "b", "c"]) == {"a": 1, "b": 2}
        await backend.adelete_many(["a"])
        assert await backend.adelete("b") is True
        assert await backend.aget_or_set("g", lambda: "made") == "made"
        assert await backend.aget_or_set("g", "other") == "made"
        assert await backend.aincr_version("g") == 2
        assert await backend.aget("g", version=2) == "made"
        await backend.aset("zero", 1, timeout=0)
        assert await backend.ahas_key("zero") is False
        await backend.aclear()
        assert await backend.aget("k") is None

    asyncio.run(scenario())
    # The async writes are the sync ones: another process-wide handle sees them.
    backend.set("after", 1)
    assert caches["other"].get("after") == 1
