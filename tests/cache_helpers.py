"""Shared helpers and fixtures of the ``ziggurat.Cache`` tests (tests/test_cache_*.py).

Test modules import the fixtures they use explicitly::

    import cache_helpers

    make_cache = cache_helpers.make_cache  # a pytest fixture

Every test gets its own directory ``/dev/shm/zigcache-<uuid>`` (removed afterwards) and
caches with unique names inside it; every cache made through ``make_cache`` is unlinked at
the end of the test.  Multi-process tests use the "fork" start method: a child either opens
its own ``Cache`` with the same name and directory (as a separate worker process would) or
uses one its parent opened before the fork (as preloaded gunicorn workers do).
"""

from __future__ import annotations

import collections
import contextlib
import multiprocessing
import multiprocessing.connection
import os
import signal
import time
import traceback
import uuid
from collections.abc import Callable, Iterator
from typing import Any

import pytest
from ziggurat import Cache

__all__ = [
    "CTX",
    "CallLog",
    "MiB",
    "Worker",
    "cache_dir",
    "make_cache",
    "new_name",
    "open_like",
    "wait_until",
]

MiB = 1024 * 1024

#: Every multi-process test forks (closures work, and a child can inherit an open Cache).
CTX = multiprocessing.get_context("fork")

#: Long runs (``make stress``) are selected with ``-m stress`` and enabled by this variable.
STRESS = os.environ.get("ZIGGURAT_STRESS") == "1"


def new_name(prefix: str = "c") -> str:
    """A cache name unique to this run (valid segment name, room for the ".neg" suffix)."""
    return f"{prefix}-{uuid.uuid4().hex[:16]}"


@pytest.fixture
def cache_dir(shm_dir: str) -> str:
    """A fresh private directory under /dev/shm, removed with everything in it (the suite's
    ``shm_dir`` fixture from conftest.py)."""
    return shm_dir


@pytest.fixture
def make_cache(cache_dir: str) -> Iterator[Callable[..., Cache]]:
    """Factory ``make_cache(name=None, size="8MiB", **kwargs)``; every cache is unlinked.

    Passing the ``name`` of an earlier cache opens a second handle on the same segments
    (its own L1), as another worker process on the host would.
    """
    made: list[Cache] = []

    def make(name: str | None = None, size: int | str = "8MiB", **kwargs: Any) -> Cache:
        kwargs.setdefault("directory", cache_dir)
        cache = Cache(name or new_name(), size, **kwargs)
        made.append(cache)
        return cache

    yield make
    for cache in reversed(made):
        with contextlib.suppress(Exception):
            cache.unlink()


def open_like(cache: Cache, size: int | str = "8MiB", **kwargs: Any) -> Cache:
    """Another handle (own L1) on the segments of ``cache``; the caller closes it."""
    seg = cache._segment
    directory = os.path.dirname(seg.path) if seg is not None else "/nonexistent"
    kwargs.setdefault("directory", directory)
    return Cache(cache.name, size, **kwargs)


def wait_until(cond: Callable[[], bool], timeout: float, step: float = 0.005) -> bool:
    """Polls ``cond`` until it is true or ``timeout`` seconds pass; returns its last value."""
    deadline = time.monotonic() + timeout
    while True:
        if cond():
            return True
        if time.monotonic() > deadline:
            return False
        time.sleep(step)


class CallLog:
    """A cross-process record of loader calls: one line per call, appended with O_APPEND.

    Appends of one short line are atomic, so any number of processes and threads can record
    concurrently and ``counts()`` sees every call exactly once.
    """

    def __init__(self, directory: str) -> None:
        self.path = os.path.join(directory, f"calls-{uuid.uuid4().hex}.log")
        open(self.path, "ab").close()

    def record(self, what: str) -> None:
        """Appends one line naming the call (a key, usually)."""
        fd = os.open(self.path, os.O_WRONLY | os.O_APPEND | os.O_CREAT, 0o600)
        try:
            os.write(fd, f"{what}\t{os.getpid()}\n".encode())
        finally:
            os.close(fd)

    def lines(self) -> list[tuple[str, int]]:
        """(what, pid) of every recorded call, in order."""
        with open(self.path, "rb") as f:
            out = []
            for line in f.read().decode().splitlines():
                what, pid = line.split("\t")
                out.append((what, int(pid)))
            return out

    def counts(self) -> collections.Counter[str]:
        """How many calls were recorded per name."""
        return collections.Counter(what for what, _ in self.lines())


def _child_main(
    conn: multiprocessing.connection.Connection, fn: Callable[..., Any], args: Any, kwargs: Any
) -> None:
    try:
        result = fn(*args, **kwargs)
    except BaseException:
        conn.send(("err", traceback.format_exc()))
    else:
        conn.send(("ok", result))
    conn.close()


class Worker:
    """``fn(*args, **kwargs)`` in a forked child; ``result()`` returns what it returned.

    An exception in the child is re-raised in the parent as an AssertionError carrying the
    child's traceback; a child that dies (or outlives ``timeout``) fails the test too.
    """

    def __init__(self, fn: Callable[..., Any], *args: Any, **kwargs: Any) -> None:
        self._recv, send = CTX.Pipe(duplex=False)
        self.proc = CTX.Process(target=_child_main, args=(send, fn, args, kwargs), daemon=True)
        self.proc.start()
        send.close()

    @property
    def pid(self) -> int:
        assert self.proc.pid is not None
        return self.proc.pid

    def result(self, timeout: float = 30.0) -> Any:
        """The child's return value; fails if it raised, died or took longer than ``timeout``."""
        try:
            if not self._recv.poll(timeout):
                raise AssertionError(f"worker {self.pid} gave no result within {timeout} s")
            try:
                status, payload = self._recv.recv()
            except EOFError:
                self.proc.join(5)
                raise AssertionError(
                    f"worker {self.pid} died without a result (exit code {self.proc.exitcode})"
                ) from None
            if status != "ok":
                raise AssertionError(f"worker {self.pid} raised:\n{payload}")
            return payload
        finally:
            self.stop()

    def stop(self) -> None:
        """Reaps the child, killing it first if it is still running."""
        self.proc.join(5)
        if self.proc.is_alive():
            with contextlib.suppress(ProcessLookupError):
                os.kill(self.pid, signal.SIGKILL)
            self.proc.join(5)
        self._recv.close()
