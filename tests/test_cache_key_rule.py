"""One key rule, one error: a ``str`` key that cannot be encoded as UTF-8 (a lone surrogate)
gets the same ``ValueError`` from every public method, naming that method, whichever way the
cache runs (with its segment, without it, with a cluster tier), and nothing is written.
"""

from __future__ import annotations

import asyncio
import os
import warnings
from collections.abc import Callable
from typing import Any

import cache_helpers
import cluster_helpers
import pytest
from redis_servers import Server
from ziggurat import Cache

make_cache = cache_helpers.make_cache
cache_dir = cache_helpers.cache_dir
server = cluster_helpers.server
hosts = cluster_helpers.hosts

BAD = "key\udc80"


def _run(coro: Any) -> Any:
    return asyncio.run(coro)


def calls(c: Cache) -> dict[str, Callable[[], Any]]:
    """Every public method taking keys, called with the bad key, by the name its error
    must give."""
    ns = c.namespace("ns")
    return {
        "Cache.get": lambda: c.get(BAD),
        "Cache.__contains__": lambda: BAD in c,
        "Cache.get_many": lambda: c.get_many(["ok", BAD]),
        "Cache.aget": lambda: _run(c.aget(BAD)),
        "Cache.aget_many": lambda: _run(c.aget_many(["ok", BAD])),
        "Cache.set": lambda: c.set(BAD, 1),
        "Cache.set_many": lambda: c.set_many({"ok": 1, BAD: 2}),
        "Cache.aset": lambda: _run(c.aset(BAD, 1)),
        "Cache.aset_many": lambda: _run(c.aset_many({"ok": 1, BAD: 2})),
        "Cache.add": lambda: c.add(BAD, 1),
        "Cache.incr": lambda: c.incr(BAD, default=0),
        "Cache.decr": lambda: c.decr(BAD, default=0),
        "Cache.touch": lambda: c.touch(BAD),
        "Cache.delete": lambda: c.delete(BAD),
        "Cache.delete_many": lambda: c.delete_many(["ok", BAD]),
        "Cache.fetch": lambda: c.fetch(BAD, lambda: 1),
        "Cache.afetch": lambda: _run(c.afetch(BAD, lambda: 1)),
        "Namespace.get": lambda: ns.get(BAD),
        "Namespace.__contains__": lambda: BAD in ns,
        "Namespace.get_many": lambda: ns.get_many(["ok", BAD]),
        "Namespace.aget": lambda: _run(ns.aget(BAD)),
        "Namespace.aget_many": lambda: _run(ns.aget_many(["ok", BAD])),
        "Namespace.set": lambda: ns.set(BAD, 1),
        "Namespace.set_many": lambda: ns.set_many({"ok": 1, BAD: 2}),
        "Namespace.aset": lambda: _run(ns.aset(BAD, 1)),
        "Namespace.aset_many": lambda: _run(ns.aset_many({"ok": 1, BAD: 2})),
        "Namespace.add": lambda: ns.add(BAD, 1),
        "Namespace.incr": lambda: ns.incr(BAD, default=0),
        "Namespace.decr": lambda: ns.decr(BAD, default=0),
        "Namespace.touch": lambda: ns.touch(BAD),
        "Namespace.delete": lambda: ns.delete(BAD),
        "Namespace.delete_many": lambda: ns.delete_many(["ok", BAD]),
        "Namespace.fetch": lambda: ns.fetch(BAD, lambda: 1),
        "Namespace.afetch": lambda: _run(ns.afetch(BAD, lambda: 1)),
    }


def check_every_method(c: Cache) -> None:
    wrong = {}
    for method, call in calls(c).items():
        try:
            call()
        except ValueError as e:
            expected = f"{method}(): key is not valid UTF-8 (lone surrogate at index 3)"
            if not str(e).startswith(expected):
                wrong[method] = str(e)
        except Exception as e:
            wrong[method] = f"{type(e).__name__}: {e}"
        else:
            wrong[method] = "no error"
    assert wrong == {}
    # Nothing was written: not even the good keys of the calls that take many.
    assert c.get("ok") is None and c.namespace("ns").get("ok") is None


def test_every_method_refuses_a_lone_surrogate(make_cache: Callable[..., Cache]) -> None:
    check_every_method(make_cache())


@pytest.mark.parametrize("mode", ["local", "passthrough"])
def test_every_method_refuses_it_without_a_segment(mode: str) -> None:
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", RuntimeWarning)
        c = Cache(cache_helpers.new_name(), size="8MiB", directory="/nonexistent", degraded=mode)
    assert c.degraded
    check_every_method(c)


def test_every_method_refuses_it_with_a_cluster_tier(
    server: Server, hosts: Callable[..., Cache]
) -> None:
    c = hosts(server.url, "a")
    assert c._tier is not None
    check_every_method(c)


def test_the_methods_are_the_native_ones_on_every_instance(
    make_cache: Callable[..., Cache], cache_dir: str
) -> None:
    # No method is bound per instance: the class serves them, the native entries themselves
    # for get and fetch (descriptors of the instance's exact class), whatever the mode.
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", RuntimeWarning)
        degraded = Cache(cache_helpers.new_name(), directory=os.path.join(cache_dir, "none"))
    for c in (make_cache(), degraded):
        own = set(vars(c))
        assert not own & {"get", "fetch", "set", "add", "incr", "touch", "delete"}
        for name in ("get", "fetch"):
            descriptor = type(c).__dict__[name]
            assert type(descriptor).__name__ == "method_descriptor"
            assert descriptor.__objclass__ is type(c)
        assert isinstance(c, Cache)
    c.close()
    assert "get" not in vars(c)
    with pytest.raises(Exception, match="is closed"):
        c.get("k")
