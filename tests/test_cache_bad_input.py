"""Keys the Cache cannot store: one rule, one clear error, no state changed.

A ``str`` key is stored as its UTF-8 bytes. A str holding a lone surrogate (``"a\\udc80b"``,
which ``os.fsdecode`` and ``surrogateescape`` decoding produce) has no UTF-8 form: every
keyed method refuses it with a ``ValueError`` naming the method, the argument and the
index of the surrogate, whichever path the call takes (the native quick entry, the native
method, the Python methods of namespaces, of degraded mode and of the cluster tier), and
writes, deletes and caches nothing.
"""

from __future__ import annotations

import asyncio
import json
import os
import re
from collections.abc import Callable
from typing import Any

import cache_helpers
import pytest
import redis
from cluster_helpers import SECRET
from redis_servers import KINDS, Server
from ziggurat import Cache, _native

make_cache = cache_helpers.make_cache
cache_dir = cache_helpers.cache_dir

BAD = "a\udc80b"  # a lone surrogate at index 1
BAD_MESSAGE = re.compile(r"key is not valid UTF-8 \(lone surrogate at index 1\)")


def _run(coro: Any) -> Any:
    return asyncio.run(coro)


# (id, the method's name in the message, call) for a Cache or a Namespace `c`.
KEYED: list[tuple[str, str, Callable[[Any, Any], Any]]] = [
    ("get", "get", lambda c, k: c.get(k)),
    ("get-default", "get", lambda c, k: c.get(k, 0)),
    ("get-keyword", "get", lambda c, k: c.get(key=k)),
    ("contains", "(get|__contains__)", lambda c, k: k in c),
    ("fetch", "fetch", lambda c, k: c.fetch(k, lambda: 1)),
    ("fetch-ttl", "fetch", lambda c, k: c.fetch(k, lambda: 1, ttl=5)),
    ("set", "set", lambda c, k: c.set(k, 1)),
    ("add", "add", lambda c, k: c.add(k, 1)),
    ("incr", "incr", lambda c, k: c.incr(k, default=0)),
    ("decr", "(decr|incr)", lambda c, k: c.decr(k, default=0)),
    ("touch", "touch", lambda c, k: c.touch(k, 5)),
    ("delete", "delete", lambda c, k: c.delete(k)),
    ("get_many", "get_many", lambda c, k: c.get_many(["ok", k])),
    ("set_many", "set_many", lambda c, k: c.set_many({"ok": 1, k: 2})),
    ("delete_many", "delete_many", lambda c, k: c.delete_many(["ok", k])),
    ("aget", "a?get", lambda c, k: _run(c.aget(k))),
    ("afetch", "a?fetch", lambda c, k: _run(c.afetch(k, lambda: 1))),
    ("aset", "a?set", lambda c, k: _run(c.aset(k, 1))),
    ("aget_many", "a?get_many", lambda c, k: _run(c.aget_many(["ok", k]))),
    ("aset_many", "a?set_many", lambda c, k: _run(c.aset_many({"ok": 1, k: 2}))),
]

# Methods of the Cache alone (a Namespace has none of them).
CACHE_ONLY: list[tuple[str, str, Callable[[Any, Any], Any]]] = [
    ("peek", "peek", lambda c, k: c.peek(k)),
    ("stamp", "stamp", lambda c, k: c.stamp(k)),
]

CACHES = {
    "l1": {},
    "no-l1": {"l1_items": 0},
    "debug-copy": {"copy": "copy", "debug": True},
}


def _state(c: Cache) -> tuple[Any, ...]:
    """What a refused call must leave as it was: both segments' entries and write counts,
    and this process's L1."""
    s = c.stats()
    host = s["host"]
    l1 = s["process"]["l1"]
    counts = tuple((seg.get("items"), seg.get("sets"), seg.get("deletes")) for seg in host.values())
    return counts, l1["items"], l1["negative_items"], s["process"]["l2"]["write_errors"]


def _check_refused(
    c: Any,
    cache: Cache,
    method: str,
    call: Callable[[Any, Any], Any],
    more_state: Callable[[], Any] = lambda: None,
) -> None:
    cache.set("ok", "kept")
    before = _state(cache), more_state()
    with pytest.raises(ValueError) as info:
        call(c, BAD)
    msg = str(info.value)
    assert re.match(rf"(Cache|Namespace)\.{method}\(\): ", msg), msg
    assert BAD_MESSAGE.search(msg), msg
    assert (_state(cache), more_state()) == before
    assert cache.get("ok") == "kept"


@pytest.mark.parametrize("options", list(CACHES.values()), ids=list(CACHES))
@pytest.mark.parametrize(
    ("method", "call"), [k[1:] for k in KEYED + CACHE_ONLY], ids=[k[0] for k in KEYED + CACHE_ONLY]
)
def test_lone_surrogate_key_is_refused_by_every_method(
    make_cache: Callable[..., Cache],
    options: dict[str, Any],
    method: str,
    call: Callable[[Any, Any], Any],
) -> None:
    """A str key without a UTF-8 form raises ValueError naming the method and the key's
    problem, and changes nothing (on L1 and L2, with and without L1)."""
    cache = make_cache(**options)
    _check_refused(cache, cache, method, call)


@pytest.mark.parametrize(("method", "call"), [k[1:] for k in KEYED], ids=[k[0] for k in KEYED])
def test_lone_surrogate_key_is_refused_in_a_namespace(
    make_cache: Callable[..., Cache], method: str, call: Callable[[Any, Any], Any]
) -> None:
    """The same through a namespace, whose key check is the Cache's."""
    cache = make_cache()
    _check_refused(cache.namespace("ns"), cache, method, call)


@pytest.mark.parametrize(("method", "call"), [k[1:] for k in KEYED], ids=[k[0] for k in KEYED])
def test_lone_surrogate_key_is_refused_in_local_degraded_mode(
    cache_dir: str, method: str, call: Callable[[Any, Any], Any]
) -> None:
    """The same without a segment (degraded="local": incr, add and touch are Python)."""
    missing = os.path.join(cache_dir, "missing")
    with pytest.warns(RuntimeWarning):
        cache = Cache(cache_helpers.new_name(), "8MiB", directory=missing, degraded="local")
    try:
        assert cache.degraded
        _check_refused(cache, cache, method, call)
    finally:
        cache.close()


@pytest.mark.parametrize(
    ("method", "call"),
    [k[1:] for k in KEYED if k[0] in ("set", "add", "incr", "touch", "delete", "get", "aget")],
    ids=[k[0] for k in KEYED if k[0] in ("set", "add", "incr", "touch", "delete", "get", "aget")],
)
@pytest.mark.parametrize("kind", KINDS)
def test_lone_surrogate_key_is_refused_with_a_cluster_tier(
    cache_dir: str, kind: str, method: str, call: Callable[[Any, Any], Any]
) -> None:
    """The same with a cluster tier on a real redis-server or Valkey (writes are Python
    methods that check the key before any round trip); nothing reaches the server."""
    d = os.path.join(cache_dir, "server")
    os.mkdir(d)
    server = Server(kind, d).start()
    try:
        cache = Cache(
            cache_helpers.new_name(), "8MiB", directory=cache_dir, redis=server.url, secret=SECRET
        )
        r = redis.Redis.from_url(server.url)
        try:
            _check_refused(cache, cache, method, call, lambda: sorted(r.scan_iter()))
        finally:
            r.close()
            cache.unlink()
    finally:
        server.kill()


def test_cached_key_function_returning_a_lone_surrogate(make_cache: Callable[..., Cache]) -> None:
    """A ``cached`` key function's str goes through the same rule."""
    cache = make_cache()

    @cache.cached(key=lambda x: x)
    def f(x: str) -> int:
        return 1

    with pytest.raises(ValueError, match="lone surrogate"):
        f(BAD)
    assert cache.stats()["host"]["l2"]["sets"] == 0


def test_a_lone_surrogate_tag_is_a_clear_error(make_cache: Callable[..., Cache]) -> None:
    """Tags follow the same encoding: a clear ValueError, not a TypeError about arguments."""
    cache = make_cache()
    with pytest.raises(ValueError, match=r"^Cache\.set\(\): each tag must be valid UTF-8"):
        cache.set("k", 1, tags=["t\udc80"])
    assert cache.get("k") is None


def test_segment_refuses_a_lone_surrogate_key(make_cache: Callable[..., Cache]) -> None:
    """The L2-only ``Segment`` converts keys by the same function."""
    cache = make_cache()
    seg = cache._segment
    assert seg is not None
    with pytest.raises(ValueError, match=BAD_MESSAGE):
        seg.set(BAD, b"v")
    with pytest.raises(ValueError, match=BAD_MESSAGE):
        seg.get(BAD)


def test_the_encoded_key_is_a_key_of_its_own(make_cache: Callable[..., Cache]) -> None:
    """What the message says to do works: the key as bytes (encoded as the application
    chooses) is stored and read back."""
    cache = make_cache()
    kb = BAD.encode("utf-8", "surrogatepass")
    cache.set(kb, 1)
    assert cache.get(kb) == 1
    assert cache.fetch(kb, lambda: 2) == 1


def test_a_loader_error_reaches_the_caller_unchanged(make_cache: Callable[..., Cache]) -> None:
    """An error subclass raised inside a method (here a loader's ``JSONDecodeError``, whose
    constructor takes three arguments) is raised as it is, not rebuilt into a TypeError."""
    cache = make_cache()

    def loader() -> Any:
        return json.loads("{")

    with pytest.raises(json.JSONDecodeError):
        cache.fetch("k", loader)
    with pytest.raises(json.JSONDecodeError):
        cache.fetch("k", loader, ttl=5)
    assert cache.get("k") is None


@pytest.mark.parametrize("l1_items", [10_000, 0])
def test_key_length_rule_is_the_engines(make_cache: Callable[..., Cache], l1_items: int) -> None:
    """The length limit is counted in UTF-8 bytes by one rule (MAX_KEY of the engine), in
    the native methods and in the Python ones alike."""
    cache = make_cache(l1_items=l1_items)
    longest = "é" * (_native.MAX_KEY // 2)
    assert len(longest.encode()) == _native.MAX_KEY
    cache.set(longest, 1)
    assert cache.get(longest) == 1
    assert cache.get_many([longest]) == {longest: 1}
    too_long = longest + "a"
    for call, method in [
        (lambda: cache.get(too_long), "get"),
        (lambda: cache.set(too_long, 1), "set"),
        (lambda: cache.set_many({too_long: 1}), "set_many"),
        (lambda: cache.get_many([too_long]), "get_many"),
        (lambda: cache.namespace("n").get(too_long), "get"),
    ]:
        with pytest.raises(ValueError) as info:
            call()
        assert re.match(
            rf"(Cache|Namespace)\.{method}\(\): key must be 1 to {_native.MAX_KEY} bytes, "
            rf"got {_native.MAX_KEY + 1}$",
            str(info.value),
        ), str(info.value)
    for empty in ("", b""):
        with pytest.raises(ValueError, match=r"^Cache\.get\(\): key must be 1 to"):
            cache.get(empty)


# ------------------------------------------------------------- names and versions

LONGEST_NAME = "n" * 80
LONGEST_VERSION = "v" * 16


@pytest.mark.parametrize(
    ("name", "version"),
    [
        pytest.param(LONGEST_NAME, LONGEST_VERSION, id="80-and-16"),
        pytest.param(LONGEST_NAME, 10**16 - 1, id="80-and-16-digit-int"),
        pytest.param("n" * 76, "v" * 12, id="76-and-12"),
        pytest.param("n", LONGEST_VERSION, id="1-and-16"),
        pytest.param(LONGEST_NAME, None, id="80-no-version"),
        pytest.param("a." + "-" * 78, "_" * 16, id="punctuation"),
    ],
)
def test_every_documented_name_and_version_works(
    cache_dir: str, name: str, version: str | int | None
) -> None:
    """A name of 1-80 characters with any version of 1-16 characters opens its two
    segments and stores (the segment names may be 80 + len(".ver-") + 16 + len(".neg")
    = 105 characters)."""
    cache = Cache(name, "8MiB", directory=cache_dir, version=version, degraded="raise")
    try:
        cache.set("k", 1)
        assert cache.fetch("miss", lambda: None) is None
        assert cache.get("k") == 1
        seg = name if version is None else f"{name}.ver-{version}"
        assert sorted(os.listdir(cache_dir)) == sorted(
            [f"ziggurat.{seg}.v2", f"ziggurat.{seg}.neg.v2"]
        )
    finally:
        cache.unlink()
    assert os.listdir(cache_dir) == []


@pytest.mark.parametrize(
    ("kwargs", "message"),
    [
        ({"name": "n" * 81}, r"^Cache\(\): name must be 1-80 characters"),
        ({"name": "n", "version": "v" * 17}, r"^Cache\(\): version must be 1-16 characters"),
    ],
)
def test_names_beyond_the_documented_limits_are_refused(
    cache_dir: str, kwargs: dict[str, Any], message: str
) -> None:
    with pytest.raises(ValueError, match=message):
        Cache(size="8MiB", directory=cache_dir, **kwargs)
    assert os.listdir(cache_dir) == []
