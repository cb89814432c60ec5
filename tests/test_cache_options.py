"""The options of ``Cache`` are checked in one place (``CacheOptions.build``), with the
limits of the native module: the constructor's signature is written once (``Cache.__init__``),
and a bad option is refused before any file exists.
"""

from __future__ import annotations

import inspect
import math
import os
from typing import Any

import pytest
from ziggurat import Cache, _native
from ziggurat.args import MAX_KEY, MAX_TAGS, MAX_TTL
from ziggurat.options import CacheOptions


def test_the_constructor_signature_is_written_once() -> None:
    # __init__ holds the one signature (the one documentation tools and type checkers
    # read); __new__ binds to it, inspect.signature(Cache) shows it, and build reads the
    # bound arguments only.
    init = dict(inspect.signature(Cache.__init__).parameters)
    del init["self"]
    assert list(inspect.signature(Cache).parameters) == list(init)
    new = inspect.signature(Cache.__new__).parameters
    assert [p.kind for p in new.values()][1:] == [
        inspect.Parameter.VAR_POSITIONAL,
        inspect.Parameter.VAR_KEYWORD,
    ]
    assert list(inspect.signature(CacheOptions.build).parameters) == ["arguments"]
    o = Cache.options("opts-sig", "2MiB")
    for name, p in init.items():
        if p.default not in (None, p.empty) and hasattr(o, name) and name != "serializer":
            assert getattr(o, name) == p.default, name


@pytest.mark.parametrize(
    ("args", "kwargs", "message"),
    [
        ((), {}, "Cache(): missing a required argument: 'name'"),
        (("a", "1MiB", 3), {}, "Cache(): too many positional arguments"),
        (("a",), {"colour": "red"}, "Cache(): got an unexpected keyword argument 'colour'"),
        (("a",), {"name": "b"}, "Cache(): multiple values for argument 'name'"),
    ],
)
def test_arguments_that_do_not_bind_name_the_constructor(
    args: tuple[Any, ...], kwargs: dict[str, Any], message: str
) -> None:
    before = set(os.listdir("/dev/shm"))
    with pytest.raises(TypeError) as e:
        Cache(*args, **kwargs)
    assert str(e.value) == message
    assert set(os.listdir("/dev/shm")) == before


def test_build_resolves_the_options() -> None:
    o = Cache.options("opts", "2MiB", l1_items=50, version="v2", neg_ttl=None)
    assert o.size_bytes == 2 << 20
    assert o.neg_bytes is None  # the engine's default where the pair opens: size / 16, >= 1 MiB
    assert o.l1_negative_items == 5
    assert o.neg_ttl is None and o.ttl == 300.0
    assert o.segment_name == "opts.ver-v2"
    assert o.link is None and o.secrets is None


def test_the_limits_are_the_native_module_s() -> None:
    assert (MAX_TTL, MAX_KEY, MAX_TAGS) == (_native.MAX_TTL, _native.MAX_KEY, _native.MAX_TAGS)
    assert Cache.options("opts", ttl=_native.MAX_TTL).ttl == _native.MAX_TTL
    assert Cache.options("opts", ttl=math.inf).ttl == math.inf
    with pytest.raises(ValueError, match=r"^Cache\(\): ttl must be at most 100 years"):
        Cache.options("opts", ttl=_native.MAX_TTL * 1.001)


@pytest.mark.parametrize(
    ("options", "error", "message"),
    [
        ({"name": 3}, TypeError, r"^Cache\(\): name must be a str, not int$"),
        ({"name": ".x"}, ValueError, r"^Cache\(\): name must be 1-80 characters"),
        ({"l1_items": -1}, ValueError, r"^Cache\(\): l1_items must be an int >= 0, got -1$"),
        ({"jitter": 1.0}, ValueError, r"^Cache\(\): jitter must be in \[0, 1\), got 1.0$"),
        ({"copy": "deep"}, ValueError, r"^Cache\(\): copy must be 'shared', 'copy' or"),
        ({"degraded": "x"}, ValueError, r"^Cache\(\): degraded must be 'passthrough'"),
        ({"version": "a b"}, ValueError, r"^Cache\(\): version must be 1-16 characters"),
        ({"group": 1.5}, TypeError, r"^Cache\(\): group must be a group name or a gid"),
        ({"secret": "s" * 16}, ValueError, r"^Cache\(\): secret is only used with redis="),
        ({"cluster_single_flight": True}, ValueError, r"^Cache\(\): cluster_single_flight"),
    ],
)
def test_bad_options_are_refused_before_any_file(
    shm_dir: str, options: dict[str, object], error: type[Exception], message: str
) -> None:
    kw: dict[str, object] = {"name": "opts-bad", "size": "8MiB", "directory": shm_dir}
    kw.update(options)
    with pytest.raises(error, match=message):
        Cache.options(**kw)
    with pytest.raises(error, match=message):
        Cache(**kw)  # type: ignore[arg-type]
    assert os.listdir(shm_dir) == []
