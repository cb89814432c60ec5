"""Loader coordination: one load per key per host at a time.

The first caller to miss a key takes its load lease: a cell in the header of the segment of
cached misses, holding the holder's pid and a deadline (``loader_timeout``), taken and given
back with a compare-and-set each. The other callers, threads of the same process or other
processes alike, sleep on the cell with a futex and wake when the holder releases it after
storing the value. A holder that dies is noticed (its pid is gone) and the lease is taken
over; a holder that is alive but slow holds the others at most ``loader_timeout``. The common
case (the lease free, no per-call options) runs entirely in the native core; this module
handles waits, take-overs, fail-safe, early refresh and asyncio. asyncio tasks of one event
loop also share a per-key future. Without a segment (degraded mode), threads of a process
share a per-key lock instead.

    >>> from ziggurat import Cache
    >>> c = Cache("doc-loader", size="8MiB"); c.fetch("k", lambda: 42), c.fetch("k", list)
    (42, 42)
    >>> c.unlink()
"""

from __future__ import annotations

import asyncio
import hashlib
import inspect
import logging
import os
import threading
import time
from collections.abc import Callable
from typing import TYPE_CHECKING, Any

from ziggurat._native import Cache as CacheCore
from ziggurat._native import Segment, ZigguratError

if TYPE_CHECKING:
    from ziggurat.cache import Cache

log = logging.getLogger("ziggurat")

_HIT, _NEG = 1, 2
_FOUND, _HELD, _WAIT = 1, 4, 5  # statuses of CacheCore.lease
# Marks "no stale value to fall back on" (None is a valid cached value).
_MISSING: Any = object()
_SLICE = 0.25  # seconds between liveness checks of a lease holder
# What a missed fetch stores: (tags, ttl, neg_ttl, stale_ttl, stale value or _MISSING).
Plan = tuple[tuple[str, ...], float, "float | None", "float | None", Any]

# The lease value names the holder's process; a forked child must not inherit its parent's.
_HOLDER = [str(os.getpid()).encode()]


def _reset_holder() -> None:
    _HOLDER[0] = str(os.getpid()).encode()


os.register_at_fork(after_in_child=_reset_holder)


class LoadTimeout(ZigguratError):
    """Another caller's loader for the key did not finish within ``loader_timeout``.

    >>> issubclass(LoadTimeout, ZigguratError)
    True
    """


class _LeaderCancelled(Exception):
    """The task loading a key was cancelled; a waiting task loads it instead."""


class LoaderStats:
    """Counters of the loader tier, for ``Cache.stats()``. Calls, errors and latency are
    kept by the native core (its ``fetch`` runs most loads); the rest here.

    >>> from ziggurat import Cache
    >>> c = Cache("doc-loader-stats", size="8MiB"); c.fetch("k", lambda: 1)
    1
    >>> c.loader_stats.calls, c.loader_stats.as_dict()["errors"]
    (1, 0)
    >>> c.unlink()
    """

    def __init__(self, core: CacheCore) -> None:
        self._core = core
        self.stale_served = 0
        self.waits = 0
        self.takeovers = 0
        self.refreshes = 0

    def record(self, seconds: float, *, ok: bool) -> None:
        """Counts one loader call."""
        self._core.record_load(seconds, ok)

    @property
    def calls(self) -> int:
        """Loader calls in this process."""
        return self._core.loader_counts()[0]

    @property
    def errors(self) -> int:
        """Loader calls that raised."""
        return self._core.loader_counts()[1]

    def as_dict(self) -> dict[str, Any]:
        """The counters as a dict, with the mean and max latency in seconds."""
        calls, errors, total_ns, max_ns = self._core.loader_counts()
        return {
            "calls": calls,
            "errors": errors,
            "mean_seconds": total_ns / calls / 1e9 if calls else 0.0,
            "max_seconds": max_ns / 1e9,
            "stale_served": self.stale_served,
            "waits": self.waits,
            "takeovers": self.takeovers,
            "refreshes": self.refreshes,
        }


def _pid_alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    return True


def _hidden(kind: bytes, key: str | bytes) -> bytes:
    raw = key.encode() if isinstance(key, str) else key
    if len(raw) > 3000:
        raw = b"#" + hashlib.blake2b(raw, digest_size=20).digest()
    return b"\x00" + kind + b":" + raw


class Flight:
    """Single-flight loading for one ``Cache``."""

    def __init__(self, cache: Cache) -> None:
        self.cache = cache
        self._guard = threading.Lock()
        self._locks: dict[str | bytes, list[Any]] = {}
        self._futures: dict[tuple[int, str | bytes], asyncio.Future[Any]] = {}
        self._refreshing: set[str | bytes] = set()
        self._tasks: set[asyncio.Task[Any]] = set()

    # -- shared pieces ---------------------------------------------------------------------

    def _seg(self) -> Segment | None:
        # Leases live in the cached-miss segment: their writes bump that segment's stamps,
        # never the stamps that real entries' L1 copies are validated against.
        if self.cache._segment is None:
            return None
        return self.cache._neg or self.cache._segment

    def _lookup(self, key: str | bytes) -> tuple[bool, Any]:
        kind, value = self.cache._core.lookup(key)[:2]
        if kind == _HIT:
            return True, value
        if kind == _NEG:
            return True, None
        return False, None

    def _lease(self, key: str | bytes, stamps: int | None) -> tuple[int, Any, int, int]:
        st: tuple[int, Any, int, int] = self.cache._core.lease(
            key, stamps, self.cache.loader_timeout
        )
        return st

    def _release(self, key: str | bytes) -> None:
        self.cache._core.release(key)

    def _try_lease(self, seg: Segment, lk: bytes) -> bool:
        try:
            return seg.add(lk, _HOLDER[0], ttl=self.cache.loader_timeout)
        except ZigguratError as e:
            log.warning("ziggurat: cannot take a lease (%s); going on without one", e)
            return True

    def _drop_lease(self, seg: Segment, lk: bytes) -> None:
        try:
            seg.delete(lk)
        except ZigguratError as e:  # the lease then expires after loader_timeout
            log.warning("ziggurat: cannot release a lease: %s", e)

    def _take_over(self, key: str | bytes, holder: int) -> bool:
        """Takes the lease from a holder whose process is gone; whether this caller now
        holds it. Compare-and-set on the holder seen, so of several waiters that see the
        same dead holder exactly one takes over."""
        if _pid_alive(holder & 0xFFFFFFFF):
            return False
        return self.cache._core.take_over(key, holder, self.cache.loader_timeout)

    def _waited(self, deadline: float, key: str | bytes) -> float:
        """Counts a wait; the seconds left before ``loader_timeout`` (raises past it)."""
        self.cache.loader_stats.waits += 1
        left = deadline - time.monotonic()
        if left <= 0:
            raise LoadTimeout(
                f"another caller's load of {key!r} did not finish within loader_timeout"
            )
        return min(_SLICE, left)

    def _run(self, key: str | bytes, loader: Callable[[], Any], plan: Plan, stamp: int) -> Any:
        t0 = time.perf_counter()
        try:
            value = loader()
        except Exception:
            if self._failed(key, t0, plan):
                return plan[4]
            raise
        if inspect.isawaitable(value):
            if inspect.iscoroutine(value):
                value.close()  # never awaited, and never will be: no warning
            self.cache.loader_stats.record(time.perf_counter() - t0, ok=False)
            raise TypeError(
                "Cache.fetch(): loader returned an awaitable; use afetch() for async loaders"
            )
        return self._loaded(key, value, plan, stamp, t0)

    def _failed(self, key: str | bytes, t0: float, plan: Plan) -> bool:
        """Counts a failed load; whether a stale value may answer instead (fail-safe)."""
        self.cache.loader_stats.record(time.perf_counter() - t0, ok=False)
        if plan[4] is _MISSING:
            return False
        self.cache.loader_stats.stale_served += 1
        log.warning("ziggurat: loader for %r failed; serving the stale value", key)
        return True

    def _loaded(self, key: str | bytes, value: Any, plan: Plan, stamp: int, t0: float) -> Any:
        """Counts a successful load and stores its result."""
        self.cache.loader_stats.record(time.perf_counter() - t0, ok=True)
        self.cache._store_loaded(key, value, plan, stamp)
        return value

    # -- threads and processes -------------------------------------------------------------

    def load(
        self, key: str | bytes, loader: Callable[[], Any], plan: Plan, stamps: int | None
    ) -> Any:
        """Loads ``key`` once per host, or waits for the caller already loading it.
        ``stamps`` comes from the lookup that missed. (The uncontended case usually never
        gets here: the native ``fetch`` runs it.)"""
        if self.cache._segment is None:
            return self._load_local(key, loader, plan)
        deadline = time.monotonic() + self.cache.loader_timeout
        while True:
            status, got, seen, stamp = self._lease(key, stamps)
            if status == _FOUND:
                return got
            if status == _HELD:
                try:
                    return self._run(key, loader, plan, stamp)
                finally:
                    self._release(key)
            if self._take_over(key, got):
                self.cache.loader_stats.takeovers += 1
                try:
                    found, value = self._lookup(key)
                    if found:
                        return value
                    return self._run(key, loader, plan, self.cache._core.stamp(key))
                finally:
                    self._release(key)
            self.cache._core.wait_lease(key, seen, self._waited(deadline, key))
            stamps = None

    def _load_local(self, key: str | bytes, loader: Callable[[], Any], plan: Plan) -> Any:
        """Degraded mode: no segment to hold leases. The threads of this process that miss
        a key together share one load: the first runs the loader, the others wait for its
        result (nothing may be cached to read it back from)."""
        with self._guard:
            slot = self._locks.get(key)
            leader = slot is None
            if slot is None:
                slot = self._locks[key] = [threading.Event(), None, None]
        done: threading.Event = slot[0]
        if not leader:
            if not done.wait(self.cache.loader_timeout):
                raise LoadTimeout(f"the load of {key!r} did not finish within loader_timeout")
            if slot[2] is not None:
                raise slot[2]
            return slot[1]
        try:
            slot[1] = self._run(key, loader, plan, 0)
            return slot[1]
        except BaseException as e:
            slot[2] = e
            raise
        finally:
            with self._guard:
                self._locks.pop(key, None)
            done.set()

    def refresh(self, key: str | bytes, loader: Callable[[], Any], plan: Plan) -> None:
        """Starts one background reload of ``key`` per host (early refresh)."""
        seg = self._seg()
        rk = _hidden(b"refresh", key)
        with self._guard:
            if key in self._refreshing:
                return
            if seg is not None and not self._try_lease(seg, rk):
                return
            self._refreshing.add(key)
        self.cache.loader_stats.refreshes += 1
        plan = (*plan[:4], _MISSING)

        def work() -> None:
            try:
                self._run(key, loader, plan, self.cache._core.stamp(key))
            except Exception as e:
                log.warning("ziggurat: background refresh of %r failed: %s", key, e)
            finally:
                with self._guard:
                    self._refreshing.discard(key)
                if seg is not None:
                    self._drop_lease(seg, rk)

        threading.Thread(target=work, name="ziggurat-refresh", daemon=True).start()

    # -- asyncio ---------------------------------------------------------------------------

    async def _arun(
        self, key: str | bytes, loader: Callable[[], Any], plan: Plan, stamp: int
    ) -> Any:
        t0 = time.perf_counter()
        try:
            value = loader()
            if inspect.isawaitable(value):
                value = await value
        except Exception:
            if self._failed(key, t0, plan):
                return plan[4]
            raise
        return self._loaded(key, value, plan, stamp, t0)

    async def aload(
        self,
        key: str | bytes,
        loader: Callable[[], Any],
        plan: Plan,
        stamps: int | None,
    ) -> Any:
        """``load`` for asyncio: one task per key per event loop, one load per host."""
        loop = asyncio.get_running_loop()
        fk = (id(loop), key)
        while True:
            fut = self._futures.get(fk)
            if fut is None:
                break
            try:
                return await asyncio.shield(fut)
            except _LeaderCancelled:
                stamps = None  # the task loading it was cancelled: load it here instead
        fut = loop.create_future()
        self._futures[fk] = fut
        try:
            value = await self._aload_host(key, loader, plan, stamps)
        except asyncio.CancelledError:
            # This caller was cancelled; the others waiting for the key were not.
            fut.set_exception(_LeaderCancelled())
            fut.exception()
            raise
        except BaseException as e:
            fut.set_exception(e)
            fut.exception()  # retrieved: waiters re-raise it, nobody else must
            raise
        else:
            fut.set_result(value)
            return value
        finally:
            self._futures.pop(fk, None)

    async def _aload_host(
        self,
        key: str | bytes,
        loader: Callable[[], Any],
        plan: Plan,
        stamps: int | None,
    ) -> Any:
        if self.cache._segment is None:
            return await self._arun(key, loader, plan, 0)
        deadline = time.monotonic() + self.cache.loader_timeout
        loop = asyncio.get_running_loop()
        while True:
            status, got, seen, stamp = self._lease(key, stamps)
            if status == _FOUND:
                return got
            if status == _HELD:
                try:
                    return await self._arun(key, loader, plan, stamp)
                finally:
                    self._release(key)
            if self._take_over(key, got):
                self.cache.loader_stats.takeovers += 1
                try:
                    found, value = self._lookup(key)
                    if found:
                        return value
                    return await self._arun(key, loader, plan, self.cache._core.stamp(key))
                finally:
                    self._release(key)
            left = self._waited(deadline, key)
            await loop.run_in_executor(None, self.cache._core.wait_lease, key, seen, left)
            stamps = None

    def arefresh(self, key: str | bytes, loader: Callable[[], Any], plan: Plan) -> None:
        """Starts one background reload of ``key`` per host, as an asyncio task."""
        seg = self._seg()
        rk = _hidden(b"refresh", key)
        if key in self._refreshing:
            return
        if seg is not None and not self._try_lease(seg, rk):
            return
        self._refreshing.add(key)
        self.cache.loader_stats.refreshes += 1
        plan = (*plan[:4], _MISSING)

        async def work() -> None:
            try:
                await self._arun(key, loader, plan, self.cache._core.stamp(key))
            except Exception as e:
                log.warning("ziggurat: background refresh of %r failed: %s", key, e)
            finally:
                self._refreshing.discard(key)
                if seg is not None:
                    self._drop_lease(seg, rk)

        task = asyncio.get_running_loop().create_task(work())
        self._tasks.add(task)
        task.add_done_callback(self._tasks.discard)
