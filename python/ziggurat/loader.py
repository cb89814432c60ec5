"""What of a miss must run in Python: calling or awaiting the loader, background refreshes,
and sharing one load among threads when there is no segment.

The miss itself is a state machine in the native core (steps HIT, LOAD, WAIT, LOCAL; see
``StepKind``): one caller per key per host holds the key's load lease (a cell in the shared
segment's header naming its process), the others sleep on it and wake when the value lands,
a dead holder is replaced at once by one waiter, and a slow one holds the others at most
``loader_timeout``. ``Cache.fetch`` drives the steps natively; ``Cache.afetch`` drives the same
steps from here, awaiting the loader, and asyncio tasks of one event loop also share a
per-key future.

    >>> from ziggurat import Cache
    >>> c = Cache("doc-loader", size="8MiB"); c.fetch("k", lambda: 42), c.fetch("k", list)
    (42, 42)
    >>> c.unlink()
"""

from __future__ import annotations

import asyncio
import enum
import inspect
import logging
import threading
import time
from collections.abc import Callable
from typing import Any

from ziggurat import _native
from ziggurat._native import Cache as CacheCore
from ziggurat._native import LoadTimeout, Step
from ziggurat.load_context import CURRENT, LoadContext

__all__ = ["Found", "LoadTimeout", "LoaderStats", "Loads", "StepKind", "in_thread"]

log = logging.getLogger("ziggurat")


class StepKind(enum.IntEnum):
    """Steps of a miss, as the native core reports them.

    >>> StepKind.LOAD.name
    'LOAD'
    """

    HIT = _native.STEP_HIT  #: a value (or a cached miss, None): done
    LOAD = _native.STEP_LOAD  #: this process holds the lease: run the loader
    WAIT = _native.STEP_WAIT  #: another caller loads: wait, then take the next step
    LOCAL = _native.STEP_LOCAL  #: no segment: one load per key among this process's threads


class Found(enum.IntEnum):
    """What a read below L1 found (``found`` of the core's ``peek``).

    >>> Found.STALE > Found.HIT
    True
    """

    MISS = _native.FOUND_MISS
    HIT = _native.FOUND_HIT
    NEGATIVE = _native.FOUND_NEGATIVE
    STALE = _native.FOUND_STALE


class LoaderStats:
    """Counters of the loader tier in this process, for ``Cache.stats()``.

    >>> from ziggurat import Cache
    >>> c = Cache("doc-loader-stats", size="8MiB"); c.fetch("k", lambda: 1)
    1
    >>> c.loader_stats.calls, c.loader_stats.as_dict()["errors"]
    (1, 0)
    >>> c.unlink()
    """

    def __init__(self, core: CacheCore) -> None:
        self._core = core

    def _get(self, name: str) -> int:
        return int(self._core.loader_counts()[name])

    @property
    def calls(self) -> int:
        """Loader calls in this process."""
        return self._get("calls")

    @property
    def errors(self) -> int:
        """Loader calls that raised."""
        return self._get("errors")

    @property
    def stale_served(self) -> int:
        """Loader failures answered with a stale value (fail-safe)."""
        return self._get("stale_served")

    @property
    def waits(self) -> int:
        """Sleeps on another caller's load."""
        return self._get("waits")

    @property
    def takeovers(self) -> int:
        """Leases taken from a holder whose process was gone."""
        return self._get("takeovers")

    @property
    def refreshes(self) -> int:
        """Early refreshes started by this process."""
        return self._get("refreshes")

    def as_dict(self) -> dict[str, Any]:
        """The counters as a dict, with the mean and max latency in seconds."""
        c = self._core.loader_counts()
        calls = c["calls"]
        return {
            "calls": calls,
            "errors": c["errors"],
            "mean_seconds": c["total_ns"] / calls / 1e9 if calls else 0.0,
            "max_seconds": c["max_ns"] / 1e9,
            "stale_served": c["stale_served"],
            "waits": c["waits"],
            "takeovers": c["takeovers"],
            "refreshes": c["refreshes"],
        }


class Loads:
    """The Python half of one cache's miss path: loaders run here, the state machine in
    the core. It reaches nothing of the ``Cache`` but the core it is given."""

    def __init__(self, name: str, loader_timeout: float) -> None:
        self.name = name
        self.loader_timeout = loader_timeout
        self.core: CacheCore | None = None
        self._guard = threading.Lock()
        self._inflight: dict[Any, list[Any]] = {}
        self._futures: dict[tuple[int, Any], asyncio.Future[Any]] = {}
        self._tasks: set[asyncio.Task[Any]] = set()
        #: Set when a cluster tier is joined: ``afetch``'s steps that may wait on Redis (the
        #: read below, the store of the loaded value) then run in the event loop's default
        #: executor, so a slow or stopped server holds up one task, not the loop.
        self.off_loop = False

    def _core(self) -> CacheCore:
        assert self.core is not None
        return self.core

    # -- sync: hooks the native fetch calls ----------------------------------------------

    def refresh(self, step: Step, loader: Callable[[], Any]) -> None:
        """Runs an early refresh (this process holds its refresh lease) in a thread."""
        threading.Thread(
            target=self._refresh, args=(step, loader), name="ziggurat-refresh", daemon=True
        ).start()

    def _refresh(self, step: Step, loader: Callable[[], Any]) -> None:
        try:
            self._core().fetch_run(step, loader)
        except Exception as e:
            log.warning(
                "ziggurat cache %r: background refresh of %r failed: %s", self.name, step.key, e
            )

    def local(self, step: Step, loader: Callable[[], Any]) -> Any:
        """A miss without a segment: the threads of this process that miss a key together
        share one load (the first runs it, the others wait for its result)."""
        key = step.key
        with self._guard:
            slot = self._inflight.get(key)
            leader = slot is None
            if slot is None:
                slot = self._inflight[key] = [threading.Event(), None, None]
        done: threading.Event = slot[0]
        if not leader:
            if not done.wait(self.loader_timeout):
                raise LoadTimeout(f"the load of {key!r} did not finish within loader_timeout")
            if slot[2] is not None:
                raise slot[2]
            return slot[1]
        try:
            slot[1] = self._core().fetch_run(step, loader)
            return slot[1]
        except BaseException as e:
            slot[2] = e
            raise
        finally:
            with self._guard:
                self._inflight.pop(key, None)
            done.set()

    # -- asyncio ---------------------------------------------------------------------------

    async def afetch(self, key: Any, loader: Callable[[], Any], opts: dict[str, Any]) -> Any:
        """``Cache.afetch``: the core's steps, the loader awaited; tasks of one event loop
        share a per-key future, so one of them drives the steps for all."""
        step = self._core().fetch_begin(key, **opts)
        if step.kind == StepKind.HIT:
            return self._hit(step, loader)
        loop = asyncio.get_running_loop()
        fk = (id(loop), key)
        while True:
            fut = self._futures.get(fk)
            if fut is None:
                break
            self._core().fetch_abandon(step)  # another task of this loop drives the key
            try:
                return await asyncio.shield(fut)
            except _LeaderCancelled:
                step = self._core().fetch_begin(key, **opts)  # load it here instead
                if step.kind == StepKind.HIT:
                    return self._hit(step, loader)
        fut = loop.create_future()
        self._futures[fk] = fut
        try:
            value = await self._drive(step, loader)
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

    def _hit(self, step: Step, loader: Callable[[], Any]) -> Any:
        r = self._core().fetch_refresh(step)
        if r is not None:
            task = asyncio.get_running_loop().create_task(self._arefresh(r, loader))
            self._tasks.add(task)
            task.add_done_callback(self._tasks.discard)
        return step.value

    async def _drive(self, step: Step, loader: Callable[[], Any]) -> Any:
        """Follows the core's steps for an awaited loader: every decision (lease, wait,
        the tier below, fail-safe) is the core's; this only awaits what may block."""
        core = self._core()
        loop = asyncio.get_running_loop()
        while True:
            if step.kind == StepKind.HIT:
                return self._hit(step, loader)
            if step.kind == StepKind.WAIT:
                await loop.run_in_executor(None, core.fetch_wait, step)
                step = core.fetch_next(step)
                continue
            # The cluster tier's copy, if one is joined. Cancelled meanwhile, the read still
            # ends in its thread; a step that found nothing then gives its lease back.
            if self.off_loop:

                def unclaimed(found: tuple[Any] | None, step: Step = step) -> None:
                    if found is None:
                        core.fetch_abandon(step)

                below = await in_thread(core.fetch_below, step, cancelled=unclaimed)
            else:
                below = core.fetch_below(step)
            if below is not None:
                return below[0]
            return await self._load(step, loader)

    async def _load(self, step: Step, loader: Callable[[], Any]) -> Any:
        """Awaits the loader of a LOAD step; the core ends the step with what it returned or
        raised (stored, or a stale value fail-safe answers a failure with, or the error),
        in a thread when the store may wait on Redis (a cancelled task does not stop it)."""
        core = self._core()
        t0 = time.perf_counter()
        value, error = None, None
        # The loader's context (load_context()), this task's while the loader runs.
        ctx = LoadContext()
        token = CURRENT.set(ctx)
        try:
            value = loader()
            if inspect.isawaitable(value):
                value = await value
        except Exception as e:
            error = e
        except BaseException:
            core.fetch_abandon(step)
            raise
        finally:
            CURRENT.reset(token)
        seconds = time.perf_counter() - t0
        if self.off_loop:
            return await in_thread(core.fetch_end, step, value, error, seconds, ctx)
        return core.fetch_end(step, value, error, seconds, ctx)

    async def _arefresh(self, step: Step, loader: Callable[[], Any]) -> None:
        try:
            await self._load(step, loader)
        except Exception as e:
            log.warning(
                "ziggurat cache %r: background refresh of %r failed: %s", self.name, step.key, e
            )


async def in_thread(
    fn: Callable[..., Any], *args: Any, cancelled: Callable[[Any], Any] | None = None
) -> Any:
    """``fn(*args)`` in the running loop's default executor. The call always runs to its end:
    a cancelled caller is released at once, and ``cancelled(result)`` runs once the call
    has returned (not if it raised).

    >>> import asyncio
    >>> asyncio.run(in_thread(sum, [1, 2]))
    3
    """
    fut = asyncio.get_running_loop().run_in_executor(None, fn, *args)
    try:
        return await asyncio.shield(fut)
    except asyncio.CancelledError:
        if cancelled is not None:
            after = cancelled

            def finish(f: asyncio.Future[Any]) -> None:
                if not f.cancelled() and f.exception() is None:
                    after(f.result())

            fut.add_done_callback(finish)
        raise


class _LeaderCancelled(Exception):
    """The task loading a key was cancelled; a waiting task loads it instead."""
