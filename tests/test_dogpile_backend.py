"""``ziggurat.contrib.dogpile`` through dogpile.cache's regions: what dogpile's own suites
(test_dogpile_suite.py) do not cover: several processes creating one value, the creation
lock across processes and after its holder dies, the entry point, the two expiration
times, serializers, argument errors."""

from __future__ import annotations

import math
import os
import re
import signal
import subprocess
import sys
import time
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import cache_helpers
import pytest
from cache_helpers import CTX, Worker, new_name

pytest.importorskip("dogpile.cache")

from dogpile.cache import make_region
from dogpile.cache.api import NO_VALUE, CachedValue
from dogpile.cache.region import CacheRegion
from ziggurat import Cache
from ziggurat.contrib.dogpile import ZigguratBackend, ZigguratMutex

cache_dir = cache_helpers.cache_dir  # a pytest fixture

MakeRegion = Callable[..., CacheRegion]


@pytest.fixture
def make(cache_dir: str) -> Iterator[MakeRegion]:
    """``make(name=None, expiration_time=None, **arguments)``: a region on a fresh (or the
    named) cache in the test's directory; every cache is unlinked at the end."""
    made: list[CacheRegion] = []

    def make(
        name: str | None = None, expiration_time: float | None = None, **arguments: Any
    ) -> CacheRegion:
        args = {"name": name or new_name("dp"), "directory": cache_dir, "size": "8MiB"}
        region = make_region().configure(
            "ziggurat", expiration_time=expiration_time, arguments={**args, **arguments}
        )
        made.append(region)
        return region

    yield make
    for region in made:
        region.backend.cache.unlink()


# -- several processes -------------------------------------------------------------------


def _get_or_create(name: str, directory: str, start: Any) -> tuple[int, str]:
    # Each child configures its own region, as each worker process of an app does.
    region = make_region().configure(
        "ziggurat", arguments={"name": name, "directory": directory, "size": "8MiB"}
    )
    cache = region.backend.cache

    def create() -> str:
        cache.incr("creators", default=0)
        # The creator holds the lock until every process has asked for the value, so the
        # others find no value and wait on the lock rather than finding it made.
        deadline = time.monotonic() + 30
        while (cache.get("arrived") or 0) < 4 and time.monotonic() < deadline:
            time.sleep(0.005)
        time.sleep(0.2)
        return f"made by {os.getpid()}"

    start.wait()
    cache.incr("arrived", default=0)
    return os.getpid(), region.get_or_create("report", create)


def test_get_or_create_has_one_creator_among_four_processes(
    make: MakeRegion, cache_dir: str
) -> None:
    region = make()
    name = region.backend.cache.name
    for round_ in range(3):
        cache = region.backend.cache
        cache.delete_many(["arrived", "creators"])
        region.delete("report")
        start = CTX.Event()
        workers = [Worker(_get_or_create, name, cache_dir, start) for _ in range(4)]
        start.set()
        results = [w.result(timeout=120) for w in workers]
        values = {value for _, value in results}
        assert len(values) == 1, (round_, results)
        assert values.pop() in {f"made by {pid}" for pid, _ in results}
        assert cache.get("creators") == 1, (round_, results)
        assert region.get("report") == results[0][1]


def _hold(name: str, directory: str, held: Any) -> None:
    backend = ZigguratBackend(
        {"name": name, "directory": directory, "size": "8MiB", "mutex_ttl": 1}
    )
    assert backend.get_mutex("k").acquire()
    held.set()
    time.sleep(3600)  # killed by the test, lock held


def test_the_mutex_is_held_across_processes_and_lapses_when_its_holder_dies(
    make: MakeRegion, cache_dir: str
) -> None:
    region = make(mutex_ttl=1)
    backend = region.backend
    held = CTX.Event()
    worker = Worker(_hold, backend.cache.name, cache_dir, held)
    try:
        assert held.wait(30)
        mutex = backend.get_mutex("k")
        assert mutex.locked()
        assert mutex.acquire(wait=False) is False
        assert region.key_is_locked("k")
        os.kill(worker.pid, signal.SIGKILL)
    finally:
        worker.stop()
    # The dead holder's lock lapses after mutex_ttl; a waiting acquire then takes it.
    assert mutex.acquire() is True
    assert mutex.locked()
    mutex.release()
    assert not mutex.locked()


def test_release_leaves_a_lock_taken_over_by_another_holder(make: MakeRegion) -> None:
    backend = make(mutex_ttl=1).backend
    first = backend.get_mutex("k")
    assert first.acquire()
    # The holder kept the lock past mutex_ttl: it lapsed, and another took it.
    while not backend.get_mutex("k").acquire(wait=False):
        time.sleep(0.05)
    first.release()
    assert backend.get_mutex("k").locked(), "the release removed another holder's lock"


# -- registration ----------------------------------------------------------------------------


def test_the_entry_point_registers_the_backend_without_an_import(cache_dir: str) -> None:
    code = (
        "import sys; from dogpile.cache import make_region\n"
        f"r = make_region().configure('ziggurat', arguments={{'name': 'ep', 'directory': "
        f"{cache_dir!r}, 'size': '8MiB'}})\n"
        "print(type(r.backend).__module__, r.get_or_create('k', lambda: 7))\n"
        "r.backend.cache.unlink()\n"
    )
    out = subprocess.run(
        [sys.executable, "-c", code], capture_output=True, text=True, timeout=120, check=True
    )
    assert out.stdout.split() == ["ziggurat.contrib.dogpile", "7"]


def test_the_regions_share_one_cache(make: MakeRegion) -> None:
    one = make()
    two = make(name=one.backend.cache.name)
    assert two.backend.cache is one.backend.cache
    one.set("k", "v")
    assert two.get("k") == "v"


# -- expiration ------------------------------------------------------------------------------


def test_the_regions_expiration_time_recreates_values(make: MakeRegion) -> None:
    region = make(expiration_time=1)
    made = iter(range(1, 100))
    assert region.get_or_create("k", lambda: next(made)) == 1
    assert region.get_or_create("k", lambda: next(made)) == 1
    time.sleep(1.5)
    # Expired for the region but kept by the segment (expiration_time of the backend:
    # math.inf by default), so it can still be read while a new one is made.
    assert region.get("k", ignore_expiration=True) == 1
    assert region.get("k") is NO_VALUE
    assert region.get_or_create("k", lambda: next(made)) == 2


def test_the_backends_expiration_time_drops_entries(make: MakeRegion, cache_dir: str) -> None:
    backend = make().backend
    short = ZigguratBackend(
        {"name": backend.cache.name, "expiration_time": 1, "directory": cache_dir, "size": "8MiB"}
    )
    assert short.cache is backend.cache
    assert short.expiration_time == 1 and backend.expiration_time == math.inf
    short.set("k", CachedValue("v", {"ct": time.time(), "v": 2}))
    backend.set("kept", CachedValue("v", {"ct": time.time(), "v": 2}))
    time.sleep(1.5)
    assert short.get("k") is NO_VALUE
    assert backend.get("kept").payload == "v"


# -- values and serializers ------------------------------------------------------------------


@pytest.mark.parametrize("serializer", ["auto", "pickle", "msgpack", "orjson"])
def test_cached_values_come_back_as_cached_values(
    make: MakeRegion, cache_dir: str, serializer: str
) -> None:
    if serializer in ("msgpack", "orjson"):
        pytest.importorskip(serializer)
    region = make(serializer=serializer)
    region.set("k", {"a": [1, 2]})
    # A second Cache on the same segments reads them, as another process does, not the
    # first one's L1: the value went through the serializer.
    other = Cache(region.backend.cache.name, "8MiB", directory=cache_dir, serializer=serializer)
    try:
        stored = ZigguratBackend._out(other.get("k", NO_VALUE))
        assert isinstance(stored, CachedValue)
        assert stored.payload == {"a": [1, 2]} and "ct" in stored.metadata
    finally:
        other.close()
    assert region.get("k") == {"a": [1, 2]}


def test_get_multi_set_multi_delete_multi(make: MakeRegion) -> None:
    region = make()
    region.set_multi({"a": 1, "b": 2})
    assert region.get_multi(["a", "b", "c"]) == [1, 2, NO_VALUE]
    region.delete_multi(["a", "c"])
    assert region.get_multi(["a", "b"]) == [NO_VALUE, 2]


def test_a_long_key_is_stored_under_a_digest(make: MakeRegion) -> None:
    region = make()
    long_a, long_b = "a" * 5000, "a" * 4999 + "b"
    region.set(long_a, 1)
    region.set(long_b, 2)
    assert region.get(long_a) == 1 and region.get(long_b) == 2
    mutex = region.backend.get_mutex(long_a)
    assert mutex.acquire(False) and not region.backend.get_mutex(long_a).acquire(False)
    assert region.backend.get_mutex(long_b).acquire(False)


# -- bad input -------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("arguments", "error", "message"),
    [
        ({"ttl": 5}, ValueError, r"the argument 'ttl' is not taken"),
        ({"name": 3}, TypeError, r"the argument name must be a str, not int"),
        ({"name": "a/b"}, ValueError, r"cannot open the cache 'a/b'"),
        ({"size": "lots"}, ValueError, r"cannot open the cache"),
        ({"expiration_time": "1h"}, TypeError, r"expiration_time must be a number"),
        ({"mutex_ttl": 0}, ValueError, r"mutex_ttl must be a number of seconds > 0"),
    ],
)
def test_bad_arguments_are_refused(
    cache_dir: str, arguments: dict[str, Any], error: type[Exception], message: str
) -> None:
    with pytest.raises(error, match=r"ZigguratBackend\(\): .*" + message):
        ZigguratBackend({"directory": cache_dir, "size": "8MiB", **arguments})


def test_unknown_arguments_are_warned_about(cache_dir: str) -> None:
    with pytest.warns(UserWarning, match=r"ignoring unknown arguments 'sise'"):
        backend = ZigguratBackend({"name": new_name(), "directory": cache_dir, "sise": "8MiB"})
    backend.cache.unlink()


@pytest.mark.parametrize(
    ("call", "error", "message"),
    [
        (lambda b: b.get(3), TypeError, r"ZigguratBackend.get\(\): key must be a str, not int"),
        (lambda b: b.delete(""), ValueError, r"ZigguratBackend.delete\(\): key must not be"),
        (lambda b: b.set("k", "v"), TypeError, r"ZigguratBackend.set\(\): value must be a"),
        (lambda b: b.set_multi({"k": 1}), TypeError, r"ZigguratBackend.set_multi\(\): each"),
        (lambda b: b.get_mutex(None), TypeError, r"ZigguratBackend.get_mutex\(\): key must"),
        (
            lambda b: b.get_mutex("k").acquire(1),
            TypeError,
            r"ZigguratMutex.acquire\(\): wait must be a bool, not int",
        ),
    ],
)
def test_bad_calls_name_the_method(
    make: MakeRegion, call: Callable[[ZigguratBackend], Any], error: type, message: str
) -> None:
    backend = make().backend
    assert isinstance(backend, ZigguratBackend)
    with pytest.raises(error, match=message):
        call(backend)
    assert isinstance(backend.get_mutex("k"), ZigguratMutex)


# -- the documented example (docs/integrations/dogpile.md) ---------------------------------


def test_the_readme_example_runs(cache_dir: str) -> None:
    page = Path(__file__).resolve().parent.parent / "docs" / "integrations" / "dogpile.md"
    section = page.read_text().split("# dogpile.cache\n", 1)[1].split("\n#", 1)[0]
    code = re.findall(r"```python\n(.*?)```", section, re.DOTALL)[0]
    where = f'"name": "{new_name("rd")}", "directory": {cache_dir!r}, "size": "8MiB"'
    assert '"name": "myapp", "size": "256MiB"' in code
    code = code.replace('"name": "myapp", "size": "256MiB"', where)
    code = code.replace("    ...", "    return {'id': user_id, 'loads': next(loads)}")
    namespace: dict[str, Any] = {"loads": iter(range(1, 10))}
    exec(compile(code, str(page), "exec"), namespace)
    try:
        assert namespace["load_user"](7) == {"id": 7, "loads": 1}
        assert namespace["load_user"](7) == {"id": 7, "loads": 1}
        assert namespace["load_user"](8) == {"id": 8, "loads": 2}
    finally:
        namespace["region"].backend.cache.unlink()
