"""``Cache``: the multi-level cache applications use.

>>> cache = Cache("doc-cache", size="8MiB", ttl=60)
>>> cache.fetch("answer", lambda: 42)
42
>>> cache.get("answer")
42
>>> cache.unlink()
"""

from __future__ import annotations

import functools
import inspect
import logging
import random
import re
import warnings
from collections.abc import Awaitable, Callable, Iterable, Mapping
from typing import Any, TypeVar, cast

from ziggurat import _native
from ziggurat._native import CacheCore, MutationError, Segment, ZigguratError
from ziggurat.loader import _MISSING, Flight, LoaderStats, LoadTimeout, Plan
from ziggurat.serializers import Serializer, resolve

__all__ = ["Cache", "LoadTimeout", "MutationError", "Namespace"]

log = logging.getLogger("ziggurat")

_MISS, _HIT, _NEG, _STALE = 0, 1, 2, 3
# The segment name rule, leaving room for the ".neg" suffix of the cached-miss segment.
_NAME = re.compile(r"[A-Za-z0-9_-][A-Za-z0-9._-]{0,95}")
F = TypeVar("F", bound=Callable[..., Any])
TagsArg = Iterable[str] | Callable[..., Iterable[str]] | None


def _ttl(value: float | None, default: float | None, what: str) -> float | None:
    if value is None:
        return default
    if isinstance(value, bool) or not isinstance(value, (int, float)):
        raise TypeError(f"{what} must be a number of seconds or None, not {type(value).__name__}")
    if not (value > 0 and value < float("inf")):
        raise ValueError(f"{what} must be a finite number of seconds > 0, got {value!r}")
    return float(value)


def _tags(tags: Iterable[str]) -> tuple[str, ...]:
    if isinstance(tags, (str, bytes)):
        raise TypeError("tags must be an iterable of str, not a single str")
    out = tuple(tags)
    for t in out:
        if not isinstance(t, str):
            raise TypeError(f"each tag must be a str, not {type(t).__name__}")
        if not t:
            raise ValueError("a tag must not be empty")
    return out


def _check_key(key: Any) -> None:
    if not isinstance(key, (str, bytes)):
        raise TypeError(f"key must be str or bytes, not {type(key).__name__}")
    if not key:
        raise ValueError("key must not be empty")


class Cache:
    """A cache with a per-process L1 over a per-host shared-memory L2.

    Arguments (defaults in brackets):

    - ``name``: segment name shared by every process of the app on this host.
    - ``size`` ["64MiB"]: L2 byte budget (int bytes or "64MiB").
    - ``l1_items`` [10_000]: objects kept per process (0 disables L1).
    - ``l1_negative_items`` [l1_items // 10]: cached misses kept per process.
    - ``ttl`` [300]: default seconds an entry is fresh.
    - ``neg_ttl`` [30]: seconds a loader's ``None`` is cached as a miss.
    - ``stale_ttl`` [None]: seconds past ``ttl`` a value may still be served when the loader
      raises (fail-safe); None disables.
    - ``jitter`` [0.1]: ``fetch`` shortens each TTL by a random fraction up to this.
    - ``refresh_ahead`` [0.0]: fraction of the TTL at its end in which a ``fetch`` hit starts
      one background refresh per host (0 disables).
    - ``loader_timeout`` [10]: seconds callers wait for another caller's loader.
    - ``serializer`` ["auto"]: "auto" (JSON-shaped values by orjson, the rest by pickle),
      "pickle", "msgpack", "orjson" or an object with dumps/loads.
    - ``copy`` ["shared"]: what ``get`` returns: "shared" (the cached object itself, fastest;
      do not mutate it), "copy" (shallow copy of dict/list/set), "decode" (fresh object).
    - ``debug`` [False]: raise ``MutationError`` when a shared cached object was mutated.
    - ``neg_size`` [size / 16, at least 1 MiB]: L2 budget of cached misses, kept apart so
      junk keys cannot evict real entries.
    - ``directory`` ["/dev/shm"], ``avg_item_size`` [256], ``lock_timeout`` [0.5],
      ``recreate`` [False]: passed to ``Segment``.

    >>> c = Cache("doc-args", size="8MiB", l1_items=1000, ttl=5)
    >>> c.set("k", [1, 2]); c.get("k")
    [1, 2]
    >>> c.unlink()
    """

    def __init__(
        self,
        name: str,
        size: int | str = "64MiB",
        *,
        l1_items: int = 10_000,
        l1_negative_items: int | None = None,
        ttl: float = 300,
        neg_ttl: float | None = 30,
        stale_ttl: float | None = None,
        jitter: float = 0.1,
        refresh_ahead: float = 0.0,
        loader_timeout: float = 10.0,
        serializer: str | Serializer = "auto",
        copy: str = "shared",
        debug: bool = False,
        neg_size: int | str | None = None,
        directory: str = "/dev/shm",
        avg_item_size: int = 256,
        lock_timeout: float = 0.5,
        recreate: bool = False,
    ) -> None:
        if not isinstance(name, str):
            raise TypeError(f"name must be a str, not {type(name).__name__}")
        if not _NAME.fullmatch(name):
            raise ValueError(
                "name must be 1-96 characters of A-Z a-z 0-9 . _ - not starting with '.', "
                f"got {name!r}"
            )
        if isinstance(l1_items, bool) or not isinstance(l1_items, int) or l1_items < 0:
            raise ValueError(f"l1_items must be an int >= 0, got {l1_items!r}")
        if l1_negative_items is None:
            l1_negative_items = l1_items // 10
        if not isinstance(l1_negative_items, int) or l1_negative_items < 0:
            raise ValueError(f"l1_negative_items must be an int >= 0, got {l1_negative_items!r}")
        default_ttl = _ttl(ttl, None, "ttl")
        if default_ttl is None:
            raise ValueError("ttl must be a finite number of seconds > 0")
        self.ttl: float = default_ttl
        self.neg_ttl = _ttl(neg_ttl, None, "neg_ttl")
        self.stale_ttl = _ttl(stale_ttl, None, "stale_ttl")
        if not (0.0 <= jitter < 1.0):
            raise ValueError(f"jitter must be in [0, 1), got {jitter!r}")
        if not (0.0 <= refresh_ahead < 1.0):
            raise ValueError(f"refresh_ahead must be in [0, 1), got {refresh_ahead!r}")
        self.jitter = float(jitter)
        self.refresh_ahead = float(refresh_ahead)
        self.loader_timeout = _ttl(loader_timeout, None, "loader_timeout") or 10.0
        self.serializer = resolve(serializer)
        if copy not in ("shared", "copy", "decode"):
            raise ValueError(f"copy must be 'shared', 'copy' or 'decode', got {copy!r}")
        self.name = name
        size_bytes = _native.parse_size(size)
        neg_bytes = (
            _native.parse_size(neg_size) if neg_size is not None else max(size_bytes // 16, 1 << 20)
        )
        self.degraded_reason: str | None = None
        self._segment: Segment | None = None
        self._neg: Segment | None = None
        seg_args: dict[str, Any] = {
            "directory": directory,
            "recreate": recreate,
            "lock_timeout": lock_timeout,
        }
        try:
            self._segment = Segment(name, size_bytes, avg_item_size=avg_item_size, **seg_args)
            self._neg = Segment(name + ".neg", neg_bytes, avg_item_size=64, **seg_args)
        except (ZigguratError, OSError, ValueError) as e:
            if isinstance(e, ValueError) and "must be" in str(e):
                raise
            self.degraded_reason = str(e)
            if self._segment is not None:
                self._segment.close()
            self._segment = self._neg = None
            msg = (
                f"ziggurat cache {name!r} runs without its shared segment (L1 and loader only): {e}"
            )
            log.warning(msg)
            warnings.warn(msg, RuntimeWarning, stacklevel=2)
        self._core = CacheCore(
            self._segment,
            self._neg,
            l1_items,
            l1_negative_items,
            self.serializer.loads,
            self.serializer.dumps,
            copy,
            debug,
            miss=self._fetch_slow,
            refresh_ahead=self.refresh_ahead,
            fetch_defaults=(
                self.ttl,
                self.neg_ttl,
                self.stale_ttl,
                self.jitter,
                self.loader_timeout,
            ),
            on_write_error=self._write_failed,
            codec=getattr(self.serializer, "codec", None),
        )
        self.copy = copy
        self.debug = debug
        # The hot paths: `cache.get`, `cache.set` and an L1 hit of `cache.fetch` are
        # native methods called directly, no Python frame.
        self.get = self._core.get  # type: ignore[method-assign]
        self.fetch = self._core.fetch  # type: ignore[method-assign]
        self.set = self._core.put  # type: ignore[method-assign]
        self._flight = Flight(self)
        self.loader_stats = LoaderStats(self._core)
        self._write_errors = 0

    # -- reads ------------------------------------------------------------------------------

    def get(self, key: str | bytes, default: Any = None) -> Any:  # replaced per instance
        """The cached value of ``key``, or ``default``.

        >>> c = Cache("doc-get", size="8MiB"); c.get("nope", 0)
        0
        >>> c.unlink()
        """
        return self._core.get(key, default)

    def get_many(self, keys: Iterable[str | bytes]) -> dict[str | bytes, Any]:
        """The cached values of ``keys`` that are present.

        >>> c = Cache("doc-gm", size="8MiB"); c.set("a", 1)
        >>> c.get_many(["a", "b"])
        {'a': 1}
        >>> c.unlink()
        """
        out: dict[str | bytes, Any] = {}
        get = self._core.get
        for k in keys:
            v = get(k, _MISSING)
            if v is not _MISSING:
                out[k] = v
        return out

    async def aget(self, key: str | bytes, default: Any = None) -> Any:
        """``get`` for asyncio code (reads never block).

        >>> import asyncio
        >>> c = Cache("doc-aget", size="8MiB"); asyncio.run(c.aget("x", 1))
        1
        >>> c.unlink()
        """
        return self._core.get(key, default)

    # -- writes -----------------------------------------------------------------------------

    def _write_failed(self, what: str, key: Any, e: Exception) -> None:
        # A write that did not happen is raised, not swallowed: the previous value may still
        # be served until its TTL, and the caller must know (LockTimeout, SegmentError).
        self._write_errors += 1
        log.warning("ziggurat %s of %r on cache %r failed: %s", what, key, self.name, e)

    def set(
        self, key: str | bytes, value: Any, *, ttl: float | None = None, tags: Iterable[str] = ()
    ) -> None:
        """Stores ``value`` under ``key`` for ``ttl`` seconds (default: the cache's ``ttl``).

        Once it returns, no process on this host returns the previous value.

        >>> c = Cache("doc-set", size="8MiB"); c.set("k", {"a": 1}, ttl=10, tags=["t"])
        >>> c.get("k")
        {'a': 1}
        >>> c.unlink()
        """
        # Replaced per instance by the native method (no Python frame); it checks key,
        # ttl and tags before writing anything, and reports a failed write like this.
        self._core.put(key, value, ttl=ttl, tags=tags)

    def set_many(
        self,
        mapping: Mapping[str | bytes, Any],
        *,
        ttl: float | None = None,
        tags: Iterable[str] = (),
    ) -> None:
        """Stores every item of ``mapping``.

        >>> c = Cache("doc-sm", size="8MiB"); c.set_many({"a": 1, "b": 2}); c.get("b")
        2
        >>> c.unlink()
        """
        t = _ttl(ttl, self.ttl, "ttl") or self.ttl
        tg = _tags(tags)
        items = list(mapping.items())
        # Check everything before writing anything: a bad key or a value that cannot be
        # encoded leaves the cache unchanged.
        for k, v in items:
            _check_key(k)
            self.serializer.dumps(v)
        for k, v in items:
            try:
                self._core.set(k, v, t, tg, self.stale_ttl)
            except ZigguratError as e:
                self._write_failed("set", k, e)
                raise

    async def aset(
        self, key: str | bytes, value: Any, *, ttl: float | None = None, tags: Iterable[str] = ()
    ) -> None:
        """``set`` for asyncio code.

        >>> import asyncio
        >>> c = Cache("doc-aset", size="8MiB"); asyncio.run(c.aset("k", 1)); c.get("k")
        1
        >>> c.unlink()
        """
        self.set(key, value, ttl=ttl, tags=tags)

    def delete(self, key: str | bytes) -> bool:
        """Removes ``key`` from every tier on this host; returns whether L2 held it.

        >>> c = Cache("doc-del", size="8MiB"); c.set("k", 1); c.delete("k"), c.get("k")
        (True, None)
        >>> c.unlink()
        """
        _check_key(key)
        try:
            return self._core.delete(key)
        except ZigguratError as e:
            self._write_failed("delete", key, e)
            raise

    def invalidate_tags(self, *tags: str) -> None:
        """Voids every entry carrying any of ``tags``, in every process, at once.

        >>> c = Cache("doc-tags", size="8MiB"); c.set("u1", 1, tags=["users"])
        >>> c.invalidate_tags("users"); c.get("u1")
        >>> c.unlink()
        """
        tg = _tags(tags)
        self._core.invalidate_tags(tg)

    def clear(self) -> None:
        """Empties the cache on this host (every process's L1 stops validating at once).

        >>> c = Cache("doc-clear", size="8MiB"); c.set("k", 1); c.clear(); c.get("k")
        >>> c.unlink()
        """
        try:
            self._core.clear()
        except ZigguratError as e:
            self._write_failed("clear", "*", e)
            raise

    # -- loading ----------------------------------------------------------------------------

    def fetch(
        self,
        key: str | bytes,
        loader: Callable[[], Any],
        *,
        ttl: float | None = None,
        tags: Iterable[str] = (),
        neg_ttl: float | None = None,
        stale_ttl: float | None = None,
    ) -> Any:
        """The value of ``key``, calling ``loader()`` on a miss (once per key per host).

        A loader result of None is cached as a miss for ``neg_ttl``. If the loader raises and a
        value expired less than ``stale_ttl`` ago, that value is returned instead.

        >>> c = Cache("doc-fetch", size="8MiB"); c.fetch("k", lambda: "loaded")
        'loaded'
        >>> c.fetch("k", lambda: "not called")
        'loaded'
        >>> c.unlink()
        """
        return self._core.fetch(
            key, loader, ttl=ttl, tags=tags, neg_ttl=neg_ttl, stale_ttl=stale_ttl
        )

    def _fetch_slow(
        self,
        key: str | bytes,
        loader: Callable[[], Any],
        ttl: float | None,
        tags: Iterable[str],
        neg_ttl: float | None,
        stale_ttl: float | None,
    ) -> Any:
        """``fetch`` past an L1 hit (the native ``fetch`` answers those): L2, the cached
        misses, early refresh, then the loader."""
        # The native lookup checks the key; the rest is checked on a miss.
        kind, value, left, ttl_s, stamps = self._core.lookup(key)
        if kind == _HIT:
            if self.refresh_ahead and left < self.refresh_ahead * ttl_s:
                plan = self._plan(_MISS, None, 0.0, tags, ttl, neg_ttl, stale_ttl)
                self._flight.refresh(key, loader, plan)
            return value
        if kind == _NEG:
            return None
        if not callable(loader):
            raise TypeError("loader must be callable")
        plan = self._plan(kind, value, left, tags, ttl, neg_ttl, stale_ttl)
        return self._flight.load(key, loader, plan, stamps)

    async def afetch(
        self,
        key: str | bytes,
        loader: Callable[[], Awaitable[Any]],
        *,
        ttl: float | None = None,
        tags: Iterable[str] = (),
        neg_ttl: float | None = None,
        stale_ttl: float | None = None,
    ) -> Any:
        """``fetch`` for asyncio: ``loader`` is an async function; one load per key per host.

        >>> import asyncio
        >>> async def load(): return 7
        >>> c = Cache("doc-afetch", size="8MiB"); asyncio.run(c.afetch("k", load))
        7
        >>> c.unlink()
        """
        kind, value, left, ttl_s, stamps = self._core.lookup(key)
        if kind == _HIT:
            if self.refresh_ahead and left < self.refresh_ahead * ttl_s:
                plan = self._plan(_MISS, None, 0.0, tags, ttl, neg_ttl, stale_ttl)
                self._flight.arefresh(key, loader, plan)
            return value
        if kind == _NEG:
            return None
        if not callable(loader):
            raise TypeError("loader must be an async callable")
        plan = self._plan(kind, value, left, tags, ttl, neg_ttl, stale_ttl)
        return await self._flight.aload(key, loader, plan, stamps)

    def _plan(
        self,
        kind: int,
        value: Any,
        left: float,
        tags: Iterable[str],
        ttl: float | None,
        neg_ttl: float | None,
        stale_ttl: float | None,
    ) -> Plan:
        """Checks a missed fetch's arguments (the native lookup has checked the key) before
        any loader runs, and resolves what its result is stored with: (tags, ttl, neg_ttl,
        stale_ttl, the stale value the load may fall back on)."""
        tg = _tags(tags) if tags else ()
        t = self.ttl if ttl is None else cast(float, _ttl(ttl, None, "ttl"))
        nt = self.neg_ttl if neg_ttl is None else _ttl(neg_ttl, None, "neg_ttl")
        st = self.stale_ttl if stale_ttl is None else _ttl(stale_ttl, None, "stale_ttl")
        fresh_enough = kind == _STALE and -left < (st or 0)
        return tg, t, nt, st, value if fresh_enough else _MISSING

    def _store_loaded(self, key: str | bytes, value: Any, plan: Plan, stamp: int) -> None:
        """Stores a loader's result: a value, or a cached miss valid while ``stamp`` holds."""
        tags, ttl, neg_ttl, stale_ttl, _ = plan
        try:
            if value is None:
                if neg_ttl:
                    self._core.set_negative(key, neg_ttl, stamp, tags)
            else:
                if self.jitter:
                    ttl *= 1.0 - self.jitter * random.random()
                self._core.set(key, value, ttl, tags, stale_ttl)
        except (ZigguratError, ValueError, TypeError) as e:
            # The loaded value is still returned; it just is not cached (too large for the
            # segment, or not serializable).
            self._write_failed("store", key, e)

    def cached(
        self,
        ttl: float | None = None,
        tags: TagsArg = None,
        *,
        key: Callable[..., str] | None = None,
        neg_ttl: float | None = None,
        stale_ttl: float | None = None,
    ) -> Callable[[F], F]:
        """Decorator: cache a function's results, keyed by its name and arguments.

        ``tags`` is a list of tags or a function of the same arguments returning one.

        >>> c = Cache("doc-cached", size="8MiB")
        >>> @c.cached(ttl=60, tags=lambda user_id: [f"user:{user_id}"])
        ... def load_user(user_id):
        ...     return {"id": user_id}
        >>> load_user(5)
        {'id': 5}
        >>> c.invalidate_tags("user:5")
        >>> c.unlink()
        """
        _ttl(ttl, self.ttl, "ttl")

        def decorate(fn: F) -> F:
            prefix = f"{fn.__module__}.{fn.__qualname__}:"

            def make_key(args: tuple[Any, ...], kwargs: dict[str, Any]) -> str:
                if key is not None:
                    return prefix + key(*args, **kwargs)
                parts = [repr(a) for a in args]
                parts += [f"{k}={v!r}" for k, v in sorted(kwargs.items())]
                return prefix + ",".join(parts)

            def make_tags(args: tuple[Any, ...], kwargs: dict[str, Any]) -> tuple[str, ...]:
                if tags is None:
                    return ()
                if callable(tags):
                    return _tags(tags(*args, **kwargs))
                return _tags(tags)

            if inspect.iscoroutinefunction(fn):

                @functools.wraps(fn)
                async def awrapper(*args: Any, **kwargs: Any) -> Any:
                    return await self.afetch(
                        make_key(args, kwargs),
                        lambda: fn(*args, **kwargs),
                        ttl=ttl,
                        tags=make_tags(args, kwargs),
                        neg_ttl=neg_ttl,
                        stale_ttl=stale_ttl,
                    )

                return cast(F, awrapper)

            @functools.wraps(fn)
            def wrapper(*args: Any, **kwargs: Any) -> Any:
                return self.fetch(
                    make_key(args, kwargs),
                    lambda: fn(*args, **kwargs),
                    ttl=ttl,
                    tags=make_tags(args, kwargs),
                    neg_ttl=neg_ttl,
                    stale_ttl=stale_ttl,
                )

            return cast(F, wrapper)

        return decorate

    # -- namespaces, stats, lifecycle --------------------------------------------------------

    def namespace(self, name: str) -> Namespace:
        """A view whose keys are prefixed with ``name`` and which can be cleared alone.

        >>> c = Cache("doc-ns", size="8MiB"); posts = c.namespace("posts")
        >>> posts.set("1", "hello"); posts.get("1")
        'hello'
        >>> posts.clear(); posts.get("1")
        >>> c.unlink()
        """
        if not isinstance(name, str) or not name or ":" in name:
            raise ValueError("a namespace name must be a non-empty str without ':'")
        return Namespace(self, name)

    @property
    def degraded(self) -> bool:
        """Whether the cache runs without its shared segment (see ``degraded_reason``)."""
        return self._segment is None

    def stats(self) -> dict[str, Any]:
        """Counters per tier: L1 for this process, L2 for the whole host, and the loader.

        >>> c = Cache("doc-stats", size="8MiB"); sorted(c.stats())
        ['degraded', 'l1', 'l2', 'loader', 'negative_l2']
        >>> c.unlink()
        """
        core = self._core.stats()
        l1_total = core["l1_hits"] + core["l1_misses"]
        l1 = {
            "hits": core["l1_hits"],
            "misses": core["l1_misses"],
            "hit_ratio": core["l1_hits"] / l1_total if l1_total else 0.0,
            "items": core["l1_items"],
            "negative_items": core["l1_negative_items"],
            "evictions": core["l1_evictions"],
            "stale_drops": core["l1_stale_drops"],
        }
        l2: dict[str, Any] = {
            "process_hits": core["l2_hits"],
            "process_misses": core["l2_misses"],
            "stale_reads": core["l2_stale_reads"],
            "negative_hits": core["negative_hits"],
            "decode_errors": core["decode_errors"],
            "write_errors": self._write_errors,
        }
        if self._segment is not None:
            host = self._segment.stats()
            total = host["hits"] + host["misses"]
            l2.update(host)
            l2["hit_ratio"] = host["hits"] / total if total else 0.0
        return {
            "degraded": self.degraded_reason,
            "l1": l1,
            "l2": l2,
            "negative_l2": self._neg.stats() if self._neg is not None else {},
            "loader": self.loader_stats.as_dict(),
        }

    def close(self) -> None:
        """Detaches this process; the data stays for the others.

        >>> c = Cache("doc-close", size="8MiB"); c.close(); c.unlink()
        """
        self._core.clear_l1()
        for s in (self._segment, self._neg):
            if s is not None:
                s.close()

    def unlink(self) -> None:
        """Closes and removes the segment files (for tests and tear-down scripts).

        >>> Cache("doc-unlink", size="8MiB").unlink()
        """
        for s in (self._segment, self._neg):
            if s is not None:
                s.unlink()
        self.close()

    def __repr__(self) -> str:
        state = "degraded" if self.degraded else "ok"
        return f"<ziggurat.Cache {self.name!r} {state}>"


class Namespace:
    """Keys under a prefix, cleared together without touching the rest of the cache.

    Every entry written through the namespace carries a hidden tag, so ``clear()`` is one
    atomic increment, seen by every process at once.

    >>> c = Cache("doc-ns2", size="8MiB"); ns = c.namespace("a"); ns.set("x", 1)
    >>> c.get("a:x")
    1
    >>> c.unlink()
    """

    def __init__(self, cache: Cache, name: str) -> None:
        self.cache = cache
        self.name = name
        self._prefix = name + ":"
        self._tag = "\x00ns:" + name

    def _k(self, key: str | bytes) -> str | bytes:
        _check_key(key)
        if isinstance(key, bytes):
            return self._prefix.encode() + key
        return self._prefix + key

    def get(self, key: str | bytes, default: Any = None) -> Any:
        """``Cache.get`` within the namespace."""
        return self.cache.get(self._k(key), default)

    def set(
        self, key: str | bytes, value: Any, *, ttl: float | None = None, tags: Iterable[str] = ()
    ) -> None:
        """``Cache.set`` within the namespace."""
        self.cache.set(self._k(key), value, ttl=ttl, tags=(*_tags(tags), self._tag))

    def delete(self, key: str | bytes) -> bool:
        """``Cache.delete`` within the namespace."""
        return self.cache.delete(self._k(key))

    def fetch(self, key: str | bytes, loader: Callable[[], Any], **kw: Any) -> Any:
        """``Cache.fetch`` within the namespace."""
        tags = (*_tags(kw.pop("tags", ())), self._tag)
        return self.cache.fetch(self._k(key), loader, tags=tags, **kw)

    async def afetch(
        self, key: str | bytes, loader: Callable[[], Awaitable[Any]], **kw: Any
    ) -> Any:
        """``Cache.afetch`` within the namespace."""
        tags = (*_tags(kw.pop("tags", ())), self._tag)
        return await self.cache.afetch(self._k(key), loader, tags=tags, **kw)

    def clear(self) -> None:
        """Voids every entry of this namespace in every process."""
        self.cache.invalidate_tags(self._tag)
