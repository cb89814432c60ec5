"""G5 when the segment cannot be used: for each cause (directory missing, not writable,
file owned by another user, no room, a damaged file), in each ``degraded`` mode, no process
returns a value older than another process's completed write beyond what the mode
documents, and the message names the cause and the remedy.

- ``"passthrough"``: nothing is cached; every ``get`` misses and ``fetch`` loads (once per
  key among the threads that miss together).
- ``"local"``: each process caches alone; no entry outlives ``degraded_ttl``.
- ``"raise"``: the constructor raises ``SegmentError``.
"""

from __future__ import annotations

import os
import shutil
import threading
import time
import warnings
from collections.abc import Callable, Iterator
from typing import Any

import cache_helpers
import pytest
from cache_helpers import CTX, new_name
from ziggurat import Cache, SegmentError

cache_dir = cache_helpers.cache_dir

# Each cause: a function of a fresh directory returning (directory, name) for a cache that
# cannot open its segment there, and words its message must contain.
Cause = Callable[[str], tuple[str, str]]


def _missing_dir(d: str) -> tuple[str, str]:
    return os.path.join(d, "no", "such", "dir"), new_name()


def _not_writable(d: str) -> tuple[str, str]:
    # Tests run as root, which ignores permission bits; sysfs refuses new files to root too.
    return "/sys", new_name()


def _other_owner(d: str) -> tuple[str, str]:
    name = new_name()
    Cache(name, "8MiB", directory=d).close()
    for f in os.listdir(d):
        os.chown(os.path.join(d, f), 65534, 65534)
    return d, name


def _no_room(d: str) -> tuple[str, str]:
    # Twice what the filesystem holds: the file cannot be allocated.
    st = os.statvfs(d)
    return d, new_name() + f"@{2 * st.f_blocks * st.f_frsize}"


def _damaged(d: str) -> tuple[str, str]:
    name = new_name()
    Cache(name, "8MiB", directory=d).close()
    for f in os.listdir(d):
        if ".neg" not in f:
            with open(os.path.join(d, f), "r+b") as fh:
                fh.write(b"\xde\xad" * 2048)
    return d, name


CAUSES: dict[str, tuple[Cause, tuple[str, ...]]] = {
    "missing_directory": (_missing_dir, ("no/such/dir", "does not exist", "create it")),
    "not_writable": (_not_writable, ("/sys",)),
    "other_owner": (_other_owner, ("'nobody' (uid 65534)", "'root' (uid 0)", "group=")),
    "no_space": (_no_room, ("no room", "smaller size")),
    "damaged": (_damaged, ("recreate=True",)),
}


def _open(directory: str, name: str, **kw: Any) -> Cache:
    size: int | str = "8MiB"
    if "@" in name:
        name, raw = name.split("@")
        size = int(raw)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", RuntimeWarning)
        return Cache(name, size, directory=directory, **kw)


# Which cause each (directory, name) was made for.
_MADE: dict[tuple[str, str], str] = {}


@pytest.fixture(params=sorted(CAUSES))
def cause(
    request: pytest.FixtureRequest, cache_dir: str
) -> Iterator[tuple[str, str, tuple[str, ...]]]:
    make, words = CAUSES[request.param]
    directory, name = make(cache_dir)
    _MADE[(directory, name)] = request.param
    yield directory, name, words
    shutil.rmtree(cache_dir, ignore_errors=True)
    os.makedirs(cache_dir, exist_ok=True)


def test_raise_mode_raises_with_the_cause(cause: tuple[str, str, tuple[str, ...]]) -> None:
    directory, name, words = cause
    with pytest.raises(SegmentError) as info:
        _open(directory, name, degraded="raise")
    expected = {"damaged": ("damaged", "incompatible")}.get(_MADE[(directory, name)])
    assert info.value.cause in (expected or (_MADE[(directory, name)],))  # type: ignore[attr-defined]
    msg = str(info.value)
    assert name.split("@")[0] in msg
    for w in words:
        assert w in msg, msg


def _writer(directory: str, name: str, mode: str, steps: Any, done: Any) -> None:
    """Another worker: writes each value it is sent, then says it is done."""
    cache = _open(directory, name, degraded=mode, degraded_ttl=0.3)
    while True:
        v = steps.recv()
        if v is None:
            break
        cache.set("k", v)
        done.send(True)


def _run_writer(directory: str, name: str, mode: str) -> tuple[Any, Any, Any]:
    steps_r, steps_w = CTX.Pipe(duplex=False)
    done_r, done_w = CTX.Pipe(duplex=False)
    p = CTX.Process(target=_writer, args=(directory, name, mode, steps_r, done_w))
    p.start()
    return p, steps_w, done_r


def test_passthrough_never_serves_an_older_value(cause: tuple[str, str, tuple[str, ...]]) -> None:
    directory, name, _ = cause
    cache = _open(directory, name)  # passthrough is the default
    assert cache.degraded and cache.stats()["degraded_mode"] == "passthrough"
    p, steps, done = _run_writer(directory, name, "passthrough")
    try:
        for i in range(20):
            cache.set("k", f"mine-{i}")
            steps.send(f"theirs-{i}")
            assert done.recv()
            # The other process's write completed: nothing older may come back.
            assert cache.get("k") is None
            loads: list[int] = []
            assert cache.fetch("k", lambda i=i, ls=loads: ls.append(i) or f"loaded-{i}") == (
                f"loaded-{i}"
            )
            assert cache.fetch("k", lambda i=i, ls=loads: ls.append(i) or f"again-{i}") == (
                f"again-{i}"
            )
            assert loads == [i, i]
    finally:
        steps.send(None)
        p.join(10)
    assert cache.add("a", 1) is True and cache.add("a", 1) is True  # nothing is kept
    assert cache.incr("n", default=5) == 6 and cache.touch("a") is False
    with pytest.raises(KeyError):
        cache.incr("n")


def test_passthrough_fetch_loads_once_for_threads_that_miss_together(
    cause: tuple[str, str, tuple[str, ...]],
) -> None:
    directory, name, _ = cause
    cache = _open(directory, name)
    calls: list[int] = []
    gate = threading.Event()

    def load() -> str:
        calls.append(1)
        gate.wait(5)
        return "v"

    results: list[Any] = []
    threads = [
        threading.Thread(target=lambda: results.append(cache.fetch("k", load))) for _ in range(8)
    ]
    for t in threads:
        t.start()
    time.sleep(0.2)
    gate.set()
    for t in threads:
        t.join(10)
    assert results == ["v"] * 8
    assert len(calls) == 1


def test_local_bounds_staleness_by_degraded_ttl(cause: tuple[str, str, tuple[str, ...]]) -> None:
    directory, name, _ = cause
    cache = _open(directory, name, degraded="local", degraded_ttl=0.3)
    assert cache.degraded and cache.stats()["degraded_mode"] == "local"
    p, steps, done = _run_writer(directory, name, "local")
    try:
        for i in range(3):
            cache.set("k", f"mine-{i}", ttl=3600)
            written = time.monotonic()
            steps.send(f"theirs-{i}")
            assert done.recv()
            # This process may still see its own value, but never past degraded_ttl.
            deadline = written + 0.3 + 0.05
            while time.monotonic() < deadline:
                v = cache.get("k")
                assert v in (f"mine-{i}", None)
                if v is None:
                    break
                time.sleep(0.02)
            time.sleep(max(0.0, deadline - time.monotonic()))
            assert cache.get("k") is None
    finally:
        steps.send(None)
        p.join(10)


def test_messages_name_the_cause_and_remedy(cause: tuple[str, str, tuple[str, ...]]) -> None:
    directory, name, words = cause
    with pytest.warns(RuntimeWarning) as w:
        c = Cache(
            name.split("@")[0],
            int(name.split("@")[1]) if "@" in name else "8MiB",
            directory=directory,
        )
    msg = str(w[0].message)
    assert "degraded='passthrough'" in msg
    for word in words:
        assert word in msg, msg
    assert c.stats()["degraded"]
    assert c.stats()["degraded_cause"] == c.degraded_cause
    assert c.degraded_cause in (_MADE[(directory, name)], "incompatible")


def test_local_incr_overflow_says_what_the_segment_says(shm_dir: str, tmp_path: Any) -> None:
    """The store without a segment raises the Cache's own overflow message."""
    name = new_name()
    local = _open(str(tmp_path / "missing"), name, degraded="local")
    shared = Cache(name, "8MiB", directory=shm_dir)
    try:
        assert local.degraded and not shared.degraded
        messages = []
        for cache in (local, shared):
            cache.set("n", 2**63 - 1)
            with pytest.raises(OverflowError) as info:
                cache.incr("n")
            messages.append(str(info.value))
        assert messages == ["Cache.incr(): the counter 'n' would leave the signed 64-bit range"] * 2
    finally:
        shared.unlink()
        shared.close()
        local.close()
