"""G7 object modes (what ``get`` returns: shared / copy / decode, and the debug mode that
detects a caller mutating a cached object) and G5 degraded mode (no usable segment: the
cache still works from L1 and the loader, and says so).
"""

from __future__ import annotations

import asyncio
import logging
import os
import threading
import time
import warnings
from collections.abc import Callable
from typing import Any

import cache_helpers
import pytest
from cache_helpers import new_name, open_like
from ziggurat import Cache, MutationError
from ziggurat._native import LAYOUT_VERSION

cache_dir = cache_helpers.cache_dir
make_cache = cache_helpers.make_cache

CONTAINERS: list[Any] = [{"a": [1, 2], "b": {"c": 3}}, [1, [2, 3], {"x": 4}], {1, 2, 3}]


def _readers(make_cache: Callable[..., Cache], **kw: Any) -> tuple[Cache, Cache]:
    """The writing handle (its L1 filled by its own set) and another handle (its L1
    filled from L2), same mode."""
    cache = make_cache(**kw)
    return cache, open_like(cache, **kw)


# ---------------------------------------------------------------------------- shared mode


def test_shared_mode_returns_same_object(make_cache: Callable[..., Cache]) -> None:
    """G7 copy="shared": L1 hits return the cached object itself (identity), in the writing
    process (the object given to set) and in another one (the object decoded from L2)."""
    cache, other = _readers(make_cache, copy="shared")
    try:
        for i, value in enumerate(CONTAINERS):
            cache.set(f"k{i}", value)
            assert cache.get(f"k{i}") is value
            assert cache.get(f"k{i}") is cache.get(f"k{i}")
            first = other.get(f"k{i}")
            assert first == value and first is not value
            assert other.get(f"k{i}") is first
            assert other._core.peek(f"k{i}").value is first  # fetch path too
    finally:
        other.close()


# ------------------------------------------------------------------------------ copy mode


def test_copy_mode_returns_distinct_copies(make_cache: Callable[..., Cache]) -> None:
    """G7 copy="copy": every get of a dict/list/set returns an equal but distinct object of
    the same type; changing it does not change what the next get returns."""
    cache, other = _readers(make_cache, copy="copy")
    try:
        for i, value in enumerate(CONTAINERS):
            cache.set(f"k{i}", value)
            for reader in (cache, other):
                a, b = reader.get(f"k{i}"), reader.get(f"k{i}")
                assert a == value and b == value
                assert type(a) is type(value)
                assert a is not b and a is not value
                if isinstance(a, dict):
                    a["new"] = 1
                elif isinstance(a, list):
                    a.append("new")
                else:
                    a.add("new")
                assert reader.get(f"k{i}") == value
                assert reader.fetch(f"k{i}", lambda: None) == value
                # fetch's hit path (native) hands out copies too.
                f1 = reader.fetch(f"k{i}", lambda: None)
                assert f1 is not reader.fetch(f"k{i}", lambda: None) and f1 is not value
        # Immutable values are returned as they are.
        cache.set("t", (1, 2))
        assert cache.get("t") == (1, 2)
    finally:
        other.close()


def test_copy_mode_set_does_not_keep_callers_object(make_cache: Callable[..., Cache]) -> None:
    """G7 copy="copy": the object passed to set() (or returned by a loader) may be changed
    afterwards without changing the cached value, in this process as in the others."""
    cache, other = _readers(make_cache, copy="copy")
    try:
        value = {"a": 1}
        cache.set("k", value)
        value["a"] = 2
        assert other.get("k") == {"a": 1}
        assert cache.get("k") == {"a": 1}
        # The same for the object a loader returned to fetch's first caller.
        loaded = {"b": 1}
        assert cache.fetch("f", lambda: loaded) == {"b": 1}
        loaded["b"] = 2
        assert cache.get("f") == {"b": 1}
        assert other.get("f") == {"b": 1}
    finally:
        other.close()


# ---------------------------------------------------------------------------- decode mode


def test_decode_mode_returns_fresh_objects(make_cache: Callable[..., Cache]) -> None:
    """G7 copy="decode": every get returns a freshly decoded object (deeply distinct)."""
    cache, other = _readers(make_cache, copy="decode")
    try:
        for i, value in enumerate(CONTAINERS):
            cache.set(f"k{i}", value)
            for reader in (cache, other):
                a, b = reader.get(f"k{i}"), reader.get(f"k{i}")
                assert a == value and b == value
                assert a is not b and a is not value
                if isinstance(a, dict):
                    assert a["a"] is not b["a"]
                    a["a"].append(99)
                elif isinstance(a, list):
                    assert a[1] is not b[1]
                    a[1].append(99)
                else:
                    a.clear()
                assert reader.get(f"k{i}") == value
            # Changing the object given to set() does not change the cache either.
            if isinstance(value, dict):
                value["changed"] = True
                assert cache.get(f"k{i}") != value
                del value["changed"]
        # Reads of one key are L1 hits (no L2 read), decoded from the kept bytes.
        s0 = other.stats()
        for _ in range(5):
            other.get("k0")
        s = other.stats()
        assert s["process"]["l1"]["hits"] - s0["process"]["l1"]["hits"] == 5
        assert s["process"]["l2"]["hits"] == s0["process"]["l2"]["hits"]
    finally:
        other.close()


# ----------------------------------------------------------------------------- debug mode


def test_debug_detects_mutation(make_cache: Callable[..., Cache]) -> None:
    """G7 debug=True: a caller mutating a returned shared object makes the next get raise
    ziggurat.MutationError naming the key (in the writing process and in another one)."""
    cache, other = _readers(make_cache, debug=True)
    try:
        cache.set("user:42", {"name": "ann", "roles": ["admin"]})
        for reader in (other, cache):
            got = reader.get("user:42")
            assert reader.get("user:42") == {"name": "ann", "roles": ["admin"]}
            got["roles"].append("root")  # a nested change counts too
            with pytest.raises(MutationError, match="user:42"):
                reader.get("user:42")
            with pytest.raises(MutationError, match="user:42"):
                reader.fetch("user:42", lambda: "never")
            got["roles"].pop()
        # Unmutated objects read fine, many times.
        cache.set("ok", [1, 2])
        for _ in range(10):
            assert other.get("ok") == [1, 2]
        # Changing the object given to set() is caught as well.
        mine = {"v": 1}
        cache.set("mine", mine)
        mine["v"] = 2
        with pytest.raises(MutationError, match="mine"):
            cache.get("mine")
        # A new set of the key replaces the damaged entry.
        cache.set("user:42", {"name": "bob"})
        assert other.get("user:42") == {"name": "bob"}
        assert cache.get("user:42") == {"name": "bob"}
    finally:
        other.close()


def test_debug_copy_mode_mutating_copies_is_fine(make_cache: Callable[..., Cache]) -> None:
    """G7 debug=True with copy="copy": callers may change the copies they get."""
    cache = make_cache(debug=True, copy="copy")
    cache.set("k", {"a": 1})
    got = cache.get("k")
    got["a"] = 2
    assert cache.get("k") == {"a": 1}


def test_without_debug_mutation_is_not_checked(make_cache: Callable[..., Cache]) -> None:
    """G7: without debug, shared mode hands out the object itself, so a caller's change shows
    (the documented cost of the fastest mode) and no error is raised."""
    cache = make_cache()
    cache.set("k", {"a": 1})
    cache.get("k")["a"] = 2
    assert cache.get("k") == {"a": 2}


# ------------------------------------------------------------------------- degraded mode


def _exercise(cache: Cache) -> None:
    """Everything an app does, on a degraded cache: it all works from L1 and the loader."""
    calls: list[str] = []
    cache.set("k", {"v": 1}, tags=["t"])
    assert cache.get("k") == {"v": 1}
    assert cache.get("nope", "dflt") == "dflt"
    assert cache.get_many(["k", "nope"]) == {"k": {"v": 1}}
    cache.set_many({"a": 1, "b": 2})
    assert cache.get("b") == 2
    assert cache.fetch("f", lambda: calls.append("f") or "loaded") == "loaded"
    assert cache.fetch("f", lambda: calls.append("f") or "again") == "loaded"
    assert calls == ["f"]
    assert cache.delete("a") is False  # no L2 held it
    assert cache.get("a") is None
    cache.invalidate_tags("t")
    assert cache.get("k") is None
    ns = cache.namespace("ns")
    ns.set("x", 1)
    assert ns.get("x") == 1
    ns.clear()
    assert ns.get("x") is None
    cache.set("short", 1, ttl=0.2)
    time.sleep(0.3)
    assert cache.get("short") is None
    cache.clear()
    assert cache.get("b") is None

    async def aload() -> str:
        return "async"

    assert asyncio.run(cache.afetch("af", aload)) == "async"

    @cache.cached(tags=lambda n: [f"n:{n}"])
    def double(n: int) -> int:
        calls.append("double")
        return 2 * n

    assert double(2) == 4 and double(2) == 4
    assert calls.count("double") == 1
    # Threads still get single-flight within the process.
    barrier = threading.Barrier(8)
    out: list[Any] = []

    def slow() -> str:
        calls.append("slow")
        time.sleep(0.1)
        return "s"

    def run() -> None:
        barrier.wait(10)
        out.append(cache.fetch("slow", slow))

    threads = [threading.Thread(target=run) for _ in range(8)]
    for t in threads:
        t.start()
    for t in threads:
        t.join(10)
    assert out == ["s"] * 8
    assert calls.count("slow") == 1
    s = cache.stats()
    assert isinstance(s["degraded"], str) and s["degraded"]
    assert s["process"]["l1"]["hits"] > 0
    assert s["process"]["loader"]["calls"] >= 4


def _open_degraded(name: str, directory: str, **kw: Any) -> Cache:
    # These tests exercise the per-process L1 of a degraded cache: "local" mode, with a
    # bound longer than the tests (the bound itself is tested in test_cache_degraded.py).
    kw.setdefault("degraded", "local")
    kw.setdefault("degraded_ttl", 60)
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        cache = Cache(name, "8MiB", directory=directory, **kw)
    runtime = [w for w in caught if issubclass(w.category, RuntimeWarning)]
    assert len(runtime) == 1, [str(w.message) for w in caught]  # warned once
    assert name in str(runtime[0].message)
    return cache


def test_degraded_nonexistent_directory(caplog: pytest.LogCaptureFixture) -> None:
    """G5: a segment that cannot be created (no such directory) -> one RuntimeWarning and a
    log record; get/set/fetch and the rest still work (L1 + loader); stats()["degraded"]
    says why; cache.degraded is True; no further warnings."""
    name = new_name("deg")
    with pytest.warns(RuntimeWarning, match="without its shared segment"):
        Cache(name, "8MiB", directory="/nonexistent/dir").unlink()
    with caplog.at_level(logging.WARNING, logger="ziggurat"):
        cache = _open_degraded(name, "/nonexistent/dir")
    try:
        assert any("without its shared segment" in r.getMessage() for r in caplog.records)
        assert cache.degraded is True
        reason = cache.stats()["degraded"]
        assert isinstance(reason, str) and "/nonexistent/dir" in reason
        assert "degraded" in repr(cache)
        with warnings.catch_warnings():
            warnings.simplefilter("error")  # any further warning fails the test
            _exercise(cache)
    finally:
        cache.unlink()


def test_degraded_corrupt_segment_file(cache_dir: str) -> None:
    """G5: a corrupt segment file at {dir}/ziggurat.{name}.v{LAYOUT_VERSION} (garbage bytes)
    -> degraded with one warning, the app keeps working, and the file is left as it was."""
    name = new_name("corrupt")
    path = os.path.join(cache_dir, f"ziggurat.{name}.v{LAYOUT_VERSION}")
    garbage = os.urandom(1 << 16)
    with open(path, "wb") as f:
        f.write(garbage)
    os.chmod(path, 0o600)
    cache = _open_degraded(name, cache_dir)
    try:
        assert cache.degraded is True
        reason = cache.stats()["degraded"]
        assert isinstance(reason, str) and reason
        _exercise(cache)
        # A second worker on the host degrades the same way (and warns again, once).
        second = _open_degraded(name, cache_dir)
        assert second.degraded
        second.close()
    finally:
        cache.unlink()
    with open(path, "rb") as f:
        assert f.read() == garbage


def test_degraded_corrupt_negative_segment(cache_dir: str) -> None:
    """G5: a corrupt NAME.neg segment file degrades the cache too, and it keeps working."""
    name = new_name("corneg")
    path = os.path.join(cache_dir, f"ziggurat.{name}.neg.v{LAYOUT_VERSION}")
    with open(path, "wb") as f:
        f.write(b"\xff" * (1 << 16))
    os.chmod(path, 0o600)
    cache = _open_degraded(name, cache_dir)
    try:
        assert cache.degraded is True
        _exercise(cache)
    finally:
        cache.unlink()


def test_degraded_copy_modes() -> None:
    """G5 + G7: in degraded mode the shared and copy modes behave as documented."""
    for copy in ("shared", "copy"):
        cache = _open_degraded(new_name("degc"), "/nonexistent/dir", copy=copy)
        try:
            value = {"a": [1]}
            cache.set("k", value)
            a, b = cache.get("k"), cache.get("k")
            assert a == value and b == value
            if copy == "copy":
                assert a is not b
            else:
                assert a is b
        finally:
            cache.unlink()


def test_degraded_decode_mode() -> None:
    """G5 + G7: a degraded cache in copy="decode" mode still serves what was set/fetched."""
    cache = _open_degraded(new_name("degd"), "/nonexistent/dir", copy="decode")
    try:
        cache.set("k", {"a": [1]})
        a, b = cache.get("k"), cache.get("k")
        assert a == {"a": [1]} and a is not b
        assert cache.fetch("f", lambda: [1]) == [1]
        assert cache.fetch("f", lambda: [2]) == [1]
    finally:
        cache.unlink()


def test_degraded_bad_key_still_refused() -> None:
    """G5: bad input raises the same error with or without a segment."""
    cache = _open_degraded(new_name("degk"), "/nonexistent/dir")
    try:
        with pytest.raises(TypeError):
            cache.get(5)
        with pytest.raises(ValueError):
            cache.set("", 1)
        with pytest.raises(ValueError):
            cache.get("")
    finally:
        cache.unlink()
