"""``ziggurat.Cache`` basics: get/set/delete, tags, namespaces, clear, batch and asyncio
calls, the ``cached`` decorator, serializers, and bad input (G5: a clear TypeError or
ValueError, and no state changed).
"""

from __future__ import annotations

import asyncio
import json
import math
import os
import threading
from collections.abc import Callable
from typing import Any

import cache_helpers
import pytest
from cache_helpers import new_name, open_like
from ziggurat import Cache

# Fixtures, imported explicitly.
cache_dir = cache_helpers.cache_dir
make_cache = cache_helpers.make_cache

# ------------------------------------------------------------------------------- basics


def test_set_get_delete_roundtrip(make_cache: Callable[..., Cache]) -> None:
    """API get/set/delete on str and bytes keys, in this process (L1) and another handle (L2)."""
    cache = make_cache()
    other = open_like(cache, l1_items=0)  # reads L2 only
    try:
        assert cache.get("missing") is None
        assert cache.get("missing", "dflt") == "dflt"
        cache.set("k", {"a": [1, 2]})
        cache.set(b"bk", (1, "two", 3.0))
        assert cache.get("k") == {"a": [1, 2]}
        assert cache.get(b"bk") == (1, "two", 3.0)
        assert other.get("k") == {"a": [1, 2]}
        assert other.get(b"bk") == (1, "two", 3.0)
        # A str key and its UTF-8 bytes name the same entry in L2.
        assert other.get(b"k") == {"a": [1, 2]}
        cache.set("k", "replaced")
        assert cache.get("k") == "replaced"
        assert other.get("k") == "replaced"
        assert cache.delete("k") is True
        assert cache.delete("k") is False
        assert cache.get("k") is None
        assert other.get("k") is None
        assert cache.get(b"bk") == (1, "two", 3.0)
        # Falsy values are values, not misses.
        for i, v in enumerate([0, "", [], {}, False, b"\x00"]):
            cache.set(f"falsy{i}", v)
            assert cache.get(f"falsy{i}", "MISS") == v
            assert other.get(f"falsy{i}", "MISS") == v
    finally:
        other.close()


def test_ttl_expires_in_l1_and_l2(make_cache: Callable[..., Cache]) -> None:
    """API ttl: an entry set with ttl is served until it expires, then is a miss in every tier."""
    cache = make_cache()
    other = open_like(cache)
    try:
        cache.set("short", "v", ttl=0.3)
        cache.set("long", "w", ttl=60)
        assert cache.get("short") == "v"
        assert other.get("short") == "v"  # fills other's L1
        assert other.get("short") == "v"
        import time

        time.sleep(0.45)
        assert cache.get("short") is None
        assert other.get("short") is None
        assert cache.get("long") == "w"
        assert other.get("long") == "w"
    finally:
        other.close()


def test_stats_count_tiers(make_cache: Callable[..., Cache]) -> None:
    """API stats (G5: the state shows in stats): stats() has the tiers, counts L1 hits/misses and
    host-wide L2 sets."""
    cache = make_cache()
    s0 = cache.stats()
    assert s0["degraded"] is None
    assert cache.degraded is False
    cache.set("k", 1)
    for _ in range(5):
        assert cache.get("k") == 1
    assert cache.get("nope") is None
    s = cache.stats()
    assert s["process"]["l1"]["hits"] - s0["process"]["l1"]["hits"] == 5
    assert s["process"]["l1"]["misses"] - s0["process"]["l1"]["misses"] == 1
    assert s["process"]["l1"]["items"] == 1
    assert s["host"]["l2"]["sets"] - s0["host"]["l2"]["sets"] == 1
    assert set(s["process"]["loader"]) >= {"calls", "errors", "stale_served", "waits", "takeovers"}


# --------------------------------------------------------------------------------- tags


def test_invalidate_tags(make_cache: Callable[..., Cache]) -> None:
    """G1 tags: invalidate_tags voids the entries carrying any of the tags, in this and other
    handles."""
    cache = make_cache()
    other = open_like(cache)
    try:
        cache.set("u1", "one", tags=["user:1", "users"])
        cache.set("u2", "two", tags=["user:2", "users"])
        cache.set("p1", "post", tags=["post:1"])
        cache.set("plain", "x")
        for k in ("u1", "u2", "p1", "plain"):
            assert other.get(k) is not None  # fill other's L1
        cache.invalidate_tags("user:1")
        assert cache.get("u1") is None
        assert other.get("u1") is None
        assert cache.get("u2") == "two"
        assert other.get("u2") == "two"
        cache.invalidate_tags("users", "post:1")
        for k in ("u2", "p1"):
            assert cache.get(k) is None
            assert other.get(k) is None
        assert other.get("plain") == "x"
        # A later set with the same tag is live again.
        cache.set("u1", "again", tags=["user:1"])
        assert other.get("u1") == "again"
        cache.invalidate_tags()  # no tags: nothing happens
        assert other.get("u1") == "again"
    finally:
        other.close()


# --------------------------------------------------------------------------- namespaces


def test_namespaces_prefix_and_clear_one(make_cache: Callable[..., Cache]) -> None:
    """G1 namespaces: a namespace prefixes keys, and clearing it leaves other namespaces and plain
    keys."""
    cache = make_cache()
    other = open_like(cache)
    try:
        posts = cache.namespace("posts")
        users = cache.namespace("users")
        posts.set("1", "hello")
        posts.set(b"2", "bytes key")
        users.set("1", "alice")
        cache.set("top", "level")
        assert cache.get("posts:1") == "hello"
        assert cache.get(b"posts:2") == "bytes key"
        assert users.get("1") == "alice"
        assert posts.get("1") == "hello"
        o_posts = other.namespace("posts")
        assert o_posts.get("1") == "hello"  # other's L1 holds it now
        assert posts.fetch("3", lambda: "loaded") == "loaded"
        posts.clear()
        assert posts.get("1") is None
        assert posts.get(b"2") is None
        assert posts.get("3") is None
        assert o_posts.get("1") is None
        assert cache.get("posts:1") is None
        assert users.get("1") == "alice"
        assert other.namespace("users").get("1") == "alice"
        assert cache.get("top") == "level"
        # The namespace is usable again after a clear.
        posts.set("1", "new")
        assert o_posts.get("1") == "new"
        assert posts.delete("1") is True
        assert o_posts.get("1") is None
    finally:
        other.close()


def test_namespace_bad_names(make_cache: Callable[..., Cache]) -> None:
    """G5: namespace names are non-empty str without ':'."""
    cache = make_cache()
    for bad in ("", "a:b"):
        with pytest.raises(ValueError, match=r"^Cache\.namespace\(\): name must be a non-empty"):
            cache.namespace(bad)
    with pytest.raises((TypeError, ValueError)):
        cache.namespace(5)  # type: ignore[arg-type]


# -------------------------------------------------------------------------------- clear


def test_clear_empties_every_handle(make_cache: Callable[..., Cache]) -> None:
    """G1 clear: clear() empties L2 and every handle's L1; later writes work."""
    cache = make_cache()
    other = open_like(cache)
    try:
        for i in range(50):
            cache.set(f"k{i}", i, tags=[f"t{i % 3}"])
        assert all(other.get(f"k{i}") == i for i in range(50))
        cache.clear()
        assert all(cache.get(f"k{i}") is None for i in range(50))
        assert all(other.get(f"k{i}") is None for i in range(50))
        other.set("k1", "after")
        assert cache.get("k1") == "after"
    finally:
        other.close()


# ------------------------------------------------------------------------ batch, asyncio


def test_get_many_set_many(make_cache: Callable[..., Cache]) -> None:
    """API get_many/set_many: set_many stores every item with ttl and tags; get_many returns the
    present ones."""
    cache = make_cache()
    other = open_like(cache)
    try:
        cache.set_many({"a": 1, b"b": [2], "c": {"three": 3}}, tags=["batch"])
        cache.set_many({"d": "short"}, ttl=60)
        assert cache.get_many(["a", b"b", "c", "d", "zz"]) == {
            "a": 1,
            b"b": [2],
            "c": {"three": 3},
            "d": "short",
        }
        assert other.get_many(["a", "zz", b"b"]) == {"a": 1, b"b": [2]}
        assert cache.get_many([]) == {}
        cache.invalidate_tags("batch")
        assert other.get_many(["a", b"b", "c", "d"]) == {"d": "short"}
        assert cache.get_many(iter(["d"])) == {"d": "short"}
    finally:
        other.close()


def test_aget_aset(make_cache: Callable[..., Cache]) -> None:
    """API aget/aset: they behave as get/set inside an event loop."""
    cache = make_cache()

    async def main() -> None:
        assert await cache.aget("k") is None
        assert await cache.aget("k", 5) == 5
        await cache.aset("k", {"x": 1}, ttl=30, tags=["t"])
        assert await cache.aget("k") == {"x": 1}
        cache.invalidate_tags("t")
        assert await cache.aget("k") is None

    asyncio.run(main())


# ----------------------------------------------------------------------------- decorator


def _user_loader(cache: Cache, calls: list[Any], who: str) -> Callable[..., dict[str, Any]]:
    """The same decorated function (same qualified name, so same keys) on ``cache``."""

    @cache.cached(ttl=60, tags=lambda user_id, **kw: [f"user:{user_id}"])
    def load_user(user_id: int, *, full: bool = False) -> dict[str, Any]:
        calls.append((who, user_id, full))
        return {"id": user_id, "full": full}

    return load_user


def test_cached_decorator_sync(make_cache: Callable[..., Cache]) -> None:
    """API decorator: @cached keys by args/kwargs, tags via a lambda, shares results through L2, and
    tag invalidation runs the function again for the tagged arguments only."""
    cache = make_cache()
    calls: list[tuple[Any, ...]] = []
    load_user = _user_loader(cache, calls, "a")
    assert load_user.__name__ == "load_user"
    assert load_user(1) == {"id": 1, "full": False}
    assert load_user(1) == {"id": 1, "full": False}
    assert calls == [("a", 1, False)]
    assert load_user(1, full=True) == {"id": 1, "full": True}
    assert load_user(2) == {"id": 2, "full": False}
    assert load_user(user_id=3) == {"id": 3, "full": False}
    assert load_user(1, full=True) == {"id": 1, "full": True}
    assert calls == [("a", 1, False), ("a", 1, True), ("a", 2, False), ("a", 3, False)]
    # Another worker (handle) gets the results through L2, without calling the function.
    other = open_like(cache)
    try:
        other_load = _user_loader(other, calls, "b")
        assert other_load(2) == {"id": 2, "full": False}
        assert other_load(1, full=True) == {"id": 1, "full": True}
        assert len(calls) == 4
        cache.invalidate_tags("user:1")
        assert other_load(1) == {"id": 1, "full": False}
        assert load_user(1, full=True) == {"id": 1, "full": True}
        assert other_load(2) == {"id": 2, "full": False}
        assert load_user(2) == {"id": 2, "full": False}
        assert calls[4:] == [("b", 1, False), ("a", 1, True)]
    finally:
        other.close()


def test_cached_decorator_invalidation_reruns(make_cache: Callable[..., Cache]) -> None:
    """API decorator + G1 tags: after invalidate_tags, the decorated function runs again for the
    tagged args only."""
    cache = make_cache()
    calls: list[int] = []

    @cache.cached(tags=lambda n: [f"n:{n}"])
    def square(n: int) -> int:
        calls.append(n)
        return n * n

    assert [square(i) for i in (1, 2, 3, 1, 2, 3)] == [1, 4, 9, 1, 4, 9]
    assert calls == [1, 2, 3]
    cache.invalidate_tags("n:2")
    assert [square(i) for i in (1, 2, 3)] == [1, 4, 9]
    assert calls == [1, 2, 3, 2]


def test_cached_decorator_keys(make_cache: Callable[..., Cache]) -> None:
    """API decorator: distinct arguments are distinct keys; a custom key function and static tags
    work."""
    cache = make_cache()
    calls: list[Any] = []

    @cache.cached(tags=["static"])
    def f(*args: Any, **kwargs: Any) -> str:
        calls.append((args, kwargs))
        return f"{args}{sorted(kwargs.items())}"

    f(1)
    f("1")
    f(1, 2)
    f(1, b=2)
    f(b=2, a=1)
    f(a=1, b=2)  # same kwargs, other order: same key
    assert len(calls) == 5
    cache.invalidate_tags("static")
    f(1)
    assert len(calls) == 6

    @cache.cached(key=lambda obj_id, **kw: f"obj-{obj_id}")
    def g(obj_id: int, verbose: bool = False) -> int:
        calls.append(obj_id)
        return obj_id

    g(7)
    g(7, verbose=True)  # the key function ignores verbose
    assert calls[-1] == 7 and len(calls) == 7


def test_cached_decorator_bad_ttl(make_cache: Callable[..., Cache]) -> None:
    """G5: a bad ttl is refused when decorating."""
    cache = make_cache()
    with pytest.raises(ValueError):
        cache.cached(ttl=0)
    with pytest.raises(TypeError):
        cache.cached(ttl="5")  # type: ignore[arg-type]


# --------------------------------------------------------------------------- serializers


class _JsonSerializer:
    """A custom serializer: an object with dumps/loads that counts its calls."""

    def __init__(self) -> None:
        self.dumps_calls = 0
        self.loads_calls = 0

    def dumps(self, obj: Any) -> bytes:
        self.dumps_calls += 1
        return json.dumps(obj, sort_keys=True).encode()

    def loads(self, data: bytes) -> Any:
        self.loads_calls += 1
        return json.loads(data)


class _Point:
    def __init__(self, x: int, y: int) -> None:
        self.x, self.y = x, y

    def __eq__(self, other: object) -> bool:
        return isinstance(other, _Point) and (self.x, self.y) == (other.x, other.y)

    __hash__ = None  # type: ignore[assignment]


_PLAIN = [
    0,
    -7,
    2**40,
    1.5,
    "text ünïcode",
    True,
    [1, "two", [3.0, None]],
    {"nested": {"list": [1, 2], "none": None, "bool": False}},
]
SERIALIZER_VALUES: dict[str, list[Any]] = {
    "pickle": [
        *_PLAIN,
        (1, 2),
        {1, 2, 3},
        frozenset({"a"}),
        b"\x00bytes",
        _Point(1, 2),
        {("tuple", "key"): 1},
    ],
    "msgpack": [*_PLAIN, b"\x00bytes", {1: "int key"}],
    "orjson": _PLAIN,
}


@pytest.mark.parametrize("name", ["pickle", "msgpack", "orjson"])
def test_builtin_serializers_roundtrip(make_cache: Callable[..., Cache], name: str) -> None:
    """API serializers: each built-in serializer stores the values it supports, read back through L1
    and L2."""
    cache = make_cache(serializer=name)
    other = open_like(cache, serializer=name, l1_items=0)
    try:
        for i, v in enumerate(SERIALIZER_VALUES[name]):
            cache.set(f"k{i}", v)
            assert cache.get(f"k{i}") == v, (name, v)
            assert other.get(f"k{i}") == v, (name, v)
        assert cache.fetch("fetched", lambda: {"a": [1]}) == {"a": [1]}
        assert other.get("fetched") == {"a": [1]}
    finally:
        other.close()


def test_serializer_unsupported_value(make_cache: Callable[..., Cache]) -> None:
    """G5: a value the serializer cannot encode raises and changes nothing."""
    cache = make_cache(serializer="orjson")
    cache.set("k", [1])
    sets = cache.stats()["host"]["l2"]["sets"]
    with pytest.raises(TypeError):
        cache.set("k", {1, 2})  # orjson has no sets
    assert cache.get("k") == [1]
    assert cache.stats()["host"]["l2"]["sets"] == sets


def test_custom_serializer(make_cache: Callable[..., Cache]) -> None:
    """API serializers: an object with dumps/loads is used for every write and every L2 read."""
    ser = _JsonSerializer()
    cache = make_cache(serializer=ser)
    cache.set("k", {"b": 1, "a": [1, 2]})
    assert ser.dumps_calls == 1
    assert cache.get("k") == {"b": 1, "a": [1, 2]}
    ser2 = _JsonSerializer()
    other = open_like(cache, serializer=ser2)
    try:
        assert other.get("k") == {"b": 1, "a": [1, 2]}
        assert ser2.loads_calls == 1
        assert other.get("k") == {"b": 1, "a": [1, 2]}
        assert ser2.loads_calls == 1  # second read is an L1 hit: no decode
    finally:
        other.close()
    # The bytes in L2 are the serializer's own.
    assert cache._segment is not None
    raw = cache._segment.get("k")
    assert raw is not None and raw.startswith(b'{"a": [1, 2], "b": 1}')


def test_custom_serializer_returning_str(make_cache: Callable[..., Cache]) -> None:
    """G5: a serializer whose dumps returns str is refused with TypeError; nothing is stored."""

    class Bad:
        def dumps(self, obj: Any) -> Any:
            return json.dumps(obj)

        def loads(self, data: bytes) -> Any:
            return json.loads(data)

    cache = make_cache(serializer=Bad())
    with pytest.raises(TypeError):
        cache.set("k", [1])
    assert cache.get("k") is None
    assert cache.stats()["host"]["l2"]["sets"] == 0


def test_undecodable_value_is_a_miss(make_cache: Callable[..., Cache]) -> None:
    """G5: a value written by another serializer, which this one cannot read, is a miss."""
    cache = make_cache(serializer="pickle")
    cache.set("k", {"a": 1})
    other = open_like(cache, serializer="orjson")
    try:
        assert other.get("k", "MISS") == "MISS"
        assert other.stats()["process"]["l2"]["decode_errors"] == 1
    finally:
        other.close()


# ----------------------------------------------------------------------------- bad input

_MISSING = object()


def _snapshot(cache: Cache) -> tuple[Any, ...]:
    """Everything a bad call must leave unchanged: the values (through L1 and L2 alone)
    and the host-wide write counters of both segments."""
    keys = ("a", b"b", "new", "ns:x")
    reader = open_like(cache, l1_items=0)
    try:
        l2 = {k: reader.get(k, _MISSING) for k in keys}
    finally:
        reader.close()
    l1 = {k: cache.get(k, _MISSING) for k in keys}
    s = cache.stats()
    counters = {
        k: s["host"]["l2"][k]
        for k in ("sets", "deletes", "entries", "tag_invalidations", "clears", "epoch")
    }
    neg = {
        k: s["host"]["negative_l2"][k] for k in ("sets", "entries", "tag_invalidations", "clears")
    }
    return l2, l1, counters, neg, s["process"]["loader"]["calls"]


def _loader() -> str:
    raise AssertionError("a loader was called for a call that must be refused")


BAD_CALLS: list[Any] = [
    # keys
    pytest.param(lambda c: c.get(1), TypeError, id="get-int-key"),
    pytest.param(lambda c: c.get(None), TypeError, id="get-None-key"),
    pytest.param(lambda c: c.get(""), ValueError, id="get-empty-key"),
    pytest.param(lambda c: c.get(b""), ValueError, id="get-empty-bytes-key"),
    pytest.param(lambda c: c.get(["a"]), TypeError, id="get-list-key"),
    pytest.param(lambda c: c.get("k" * 5000), ValueError, id="get-long-key"),
    pytest.param(lambda c: c.set(1, "x"), TypeError, id="set-int-key"),
    pytest.param(lambda c: c.set(None, "x"), TypeError, id="set-None-key"),
    pytest.param(lambda c: c.set("", "x"), ValueError, id="set-empty-key"),
    pytest.param(lambda c: c.set("k" * 5000, "x"), ValueError, id="set-long-key"),
    pytest.param(lambda c: c.delete(1), TypeError, id="delete-int-key"),
    pytest.param(lambda c: c.delete(None), TypeError, id="delete-None-key"),
    pytest.param(lambda c: c.delete(""), ValueError, id="delete-empty-key"),
    pytest.param(lambda c: c.fetch(1, _loader), TypeError, id="fetch-int-key"),
    pytest.param(lambda c: c.fetch(None, _loader), TypeError, id="fetch-None-key"),
    pytest.param(lambda c: c.fetch("", _loader), ValueError, id="fetch-empty-key"),
    pytest.param(lambda c: c.get_many(["a", 1]), TypeError, id="get_many-int-key"),
    pytest.param(lambda c: c.set_many({"new": 1, 2: 2}), TypeError, id="set_many-int-key"),
    pytest.param(lambda c: c.set_many({"new": 1, "": 2}), ValueError, id="set_many-empty-key"),
    pytest.param(lambda c: c.namespace("ns").set("", 1), ValueError, id="ns-set-empty-key"),
    pytest.param(lambda c: c.namespace("ns").set(1, 1), TypeError, id="ns-set-int-key"),
    # ttl
    pytest.param(lambda c: c.set("a", "x", ttl=0), ValueError, id="set-ttl-0"),
    pytest.param(lambda c: c.set("a", "x", ttl=-1), ValueError, id="set-ttl-neg"),
    pytest.param(lambda c: c.set("a", "x", ttl=math.nan), ValueError, id="set-ttl-nan"),
    pytest.param(lambda c: c.set("a", "x", ttl=-math.inf), ValueError, id="set-ttl-neg-inf"),
    pytest.param(lambda c: c.set("a", "x", ttl="5"), TypeError, id="set-ttl-str"),
    pytest.param(lambda c: c.set("a", "x", ttl=True), TypeError, id="set-ttl-bool"),
    pytest.param(lambda c: c.set_many({"a": "x"}, ttl=0), ValueError, id="set_many-ttl-0"),
    pytest.param(lambda c: c.set_many({"a": "x"}, ttl="5"), TypeError, id="set_many-ttl-str"),
    pytest.param(
        lambda c: c.fetch("new", _loader, ttl=0),
        ValueError,
        id="fetch-ttl-0",
    ),
    pytest.param(
        lambda c: c.fetch("new", _loader, ttl=-1),
        ValueError,
        id="fetch-ttl-neg",
    ),
    pytest.param(
        lambda c: c.fetch("new", _loader, ttl=math.nan),
        ValueError,
        id="fetch-ttl-nan",
    ),
    pytest.param(
        lambda c: c.fetch("new", _loader, ttl="5"),
        TypeError,
        id="fetch-ttl-str",
    ),
    pytest.param(
        lambda c: c.fetch("new", _loader, ttl=True),
        TypeError,
        id="fetch-ttl-bool",
    ),
    pytest.param(
        lambda c: c.fetch("new", _loader, neg_ttl=0),
        ValueError,
        id="fetch-neg_ttl-0",
    ),
    pytest.param(
        lambda c: c.fetch("new", _loader, stale_ttl=-1),
        ValueError,
        id="fetch-stale_ttl-neg",
    ),
    # tags
    pytest.param(lambda c: c.set("a", "x", tags="abc"), TypeError, id="set-tags-str"),
    pytest.param(lambda c: c.set("a", "x", tags=[1]), TypeError, id="set-tags-int"),
    pytest.param(lambda c: c.set("a", "x", tags=[""]), ValueError, id="set-tags-empty"),
    pytest.param(lambda c: c.set("a", "x", tags=5), TypeError, id="set-tags-not-iterable"),
    pytest.param(
        lambda c: c.set("a", "x", tags=[f"t{i}" for i in range(40)]),
        ValueError,
        id="set-too-many-tags",
    ),
    pytest.param(lambda c: c.fetch("new", _loader, tags="abc"), TypeError, id="fetch-tags-str"),
    pytest.param(lambda c: c.fetch("new", _loader, tags=[1]), TypeError, id="fetch-tags-int"),
    pytest.param(lambda c: c.set_many({"a": 1}, tags="abc"), TypeError, id="set_many-tags-str"),
    pytest.param(lambda c: c.invalidate_tags(1), TypeError, id="invalidate-int"),
    pytest.param(lambda c: c.invalidate_tags(""), ValueError, id="invalidate-empty"),
    pytest.param(lambda c: c.invalidate_tags("t", ["t"]), TypeError, id="invalidate-list"),
    pytest.param(lambda c: c.namespace("ns").set("x", 1, tags="abc"), TypeError, id="ns-tags-str"),
    # loader
    pytest.param(lambda c: c.fetch("new", 5), TypeError, id="fetch-loader-int"),
    pytest.param(lambda c: c.fetch("new", None), TypeError, id="fetch-loader-None"),
    pytest.param(lambda c: c.fetch("new", "loader"), TypeError, id="fetch-loader-str"),
    # values
    pytest.param(lambda c: c.set("a", threading.Lock()), TypeError, id="set-unpicklable"),
    pytest.param(
        lambda c: c.set_many({"new": 1, "a": threading.Lock()}),
        TypeError,
        id="set_many-unpicklable",
    ),
]


@pytest.mark.parametrize(("call", "exc"), BAD_CALLS)
def test_bad_input_raises_and_changes_nothing(
    make_cache: Callable[..., Cache], call: Callable[[Cache], Any], exc: type[Exception]
) -> None:
    """G5: bad input raises a clear TypeError or ValueError, and no state changes
    (existing keys keep their values in L1 and L2, no loader runs, no write is counted)."""
    cache = make_cache()
    cache.set("a", {"v": 1}, tags=["t"])
    cache.set(b"b", [2])
    cache.namespace("ns").set("x", "nsx")
    before = _snapshot(cache)
    assert before[0]["a"] == {"v": 1} and before[1]["a"] == {"v": 1}
    with pytest.raises(exc):
        call(cache)
    assert _snapshot(cache) == before


BAD_CACHES: list[Any] = [
    pytest.param({"copy": "weird"}, ValueError, id="copy-weird"),
    pytest.param({"serializer": "json"}, ValueError, id="serializer-json"),
    pytest.param({"serializer": object()}, TypeError, id="serializer-object"),
    pytest.param({"ttl": 0}, ValueError, id="ttl-0"),
    pytest.param({"ttl": -5}, ValueError, id="ttl-neg"),
    pytest.param({"ttl": math.nan}, ValueError, id="ttl-nan"),
    pytest.param({"ttl": "5"}, TypeError, id="ttl-str"),
    pytest.param({"ttl": True}, TypeError, id="ttl-bool"),
    pytest.param({"neg_ttl": 0}, ValueError, id="neg_ttl-0"),
    pytest.param({"stale_ttl": -1}, ValueError, id="stale_ttl-neg"),
    pytest.param({"loader_timeout": 0}, ValueError, id="loader_timeout-0"),
    pytest.param({"jitter": 1.5}, ValueError, id="jitter-big"),
    pytest.param({"refresh_ahead": 1.0}, ValueError, id="refresh_ahead-1"),
    pytest.param({"l1_items": -1}, ValueError, id="l1_items-neg"),
    pytest.param({"l1_negative_items": -1}, ValueError, id="l1_negative_items-neg"),
    pytest.param({"size": "12 parsecs"}, ValueError, id="size-unit"),
    pytest.param({"size": 0}, ValueError, id="size-0"),
    pytest.param({"neg_size": "zz"}, ValueError, id="neg_size-bad"),
    pytest.param({"lock_timeout": 0}, ValueError, id="lock_timeout-0"),
    pytest.param({"name": ""}, (TypeError, ValueError), id="name-empty"),
    pytest.param({"name": 5}, TypeError, id="name-int"),
    pytest.param({"name": "bad/name"}, ValueError, id="name-slash"),
    # Room must be left for the ".neg" suffix: refused before any file is made.
    pytest.param({"name": "x" * 100}, ValueError, id="name-too-long-for-neg"),
]


@pytest.mark.parametrize(("kwargs", "exc"), BAD_CACHES)
def test_bad_constructor_raises_and_creates_nothing(
    cache_dir: str, kwargs: dict[str, Any], exc: Any
) -> None:
    """G5: a bad Cache(...) argument raises TypeError/ValueError and leaves no segment file."""
    kwargs = dict(kwargs)
    name = kwargs.pop("name", new_name())
    size = kwargs.pop("size", "8MiB")
    with pytest.raises(exc):
        Cache(name, size, directory=cache_dir, **kwargs)
    assert os.listdir(cache_dir) == []
