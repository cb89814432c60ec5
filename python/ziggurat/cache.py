"""``Cache``: the multi-level cache applications use.

>>> cache = Cache("doc-cache", size="8MiB", ttl=60)
>>> cache.fetch("answer", lambda: 42)
42
>>> cache.get("answer")
42
>>> cache.unlink()

A subclass of the native cache, whose methods it serves as they are (``binding``); what
differs by mode is a mixin chosen once (``factory``; ``closed.Closed`` on ``close()``).
"""

from __future__ import annotations

import inspect
from collections.abc import Callable, Iterable, Mapping
from typing import Any

from ziggurat import _native
from ziggurat._native import Cache as CacheCore
from ziggurat._native import MutationError, ZigguratError
from ziggurat.args import check_key, items_arg, key_error, key_list, tags_arg, ttl_arg
from ziggurat.binding import install_native, native_method, variant
from ziggurat.closed import Closed, closed_error
from ziggurat.cluster.reader import Reader
from ziggurat.cluster.tier import ClusterTier
from ziggurat.decorator import F, TagsArg, cached
from ziggurat.factory import build
from ziggurat.host import Host
from ziggurat.loader import LoaderStats, Loads, LoadTimeout
from ziggurat.namespace import Namespace
from ziggurat.options import CacheOptions
from ziggurat.rules import DEFAULTS
from ziggurat.serializers import Serializer
from ziggurat.stats import stats_of

__all__ = ["Cache", "LoadTimeout", "MutationError", "Namespace"]

# Marks "absent" where None is a valid cached value.
_MISSING: Any = object()

#: The examples of the native methods' documentation (``native_method``), run by doctest.
__test__: dict[str, str] = {}


class Cache(CacheCore):
    """A cache with a per-process L1 over a per-host shared-memory L2.

    Every option, with its default and unit, is in the option table of docs/api.md. The
    most used: ``size`` (L2 bytes), ``l1_items``, ``ttl`` (seconds, ``math.inf`` for
    never), ``neg_ttl``, ``stale_ttl``, ``serializer``, ``copy``, ``version`` and
    ``degraded`` (what happens when the shared segment cannot be used: "passthrough",
    "local" or "raise"). Without ``size``, the default (64 MiB) is fitted to the
    directory's free space when it does not fit (a container's 64 MB /dev/shm), with a
    warning; ``huge_pages`` ("auto", "require", "off") chooses huge pages for the segment
    (docs/deployment.md).

    >>> c = Cache("doc-args", size="8MiB", l1_items=1000, ttl=5)
    >>> c.set("k", [1, 2]); c.get("k")
    [1, 2]
    >>> c.unlink()
    """

    name: str
    ttl: float
    neg_ttl: float | None
    stale_ttl: float | None
    jitter: float
    refresh_ahead: float
    loader_timeout: float
    serializer: Serializer
    copy: str
    debug: bool
    version: int | str | None
    degraded_mode: str
    degraded_ttl: float
    closed: bool
    loader_stats: LoaderStats
    _core: CacheCore
    _host: Host
    _loads: Loads
    _tier: ClusterTier | None
    _reader: Reader | None

    def __new__(cls, *args: Any, **kwargs: Any) -> Cache:
        # The arguments are bound to __init__'s signature, written once there.
        return build(cls, (o := cls.options(*args, **kwargs)), Host.open(o, stacklevel=2))

    @classmethod
    def options(cls, *args: Any, **kwargs: Any) -> CacheOptions:
        """The checked options ``Cache(*args, **kwargs)`` would run with, opening nothing:
        a configuration can be checked before a deploy. Raises what ``Cache()`` raises for
        bad input (``TypeError``/``ValueError`` naming ``Cache()`` and the option).

        >>> Cache.options("doc-options", "8MiB", ttl=60).size_bytes
        8388608
        >>> Cache.options("doc-options", colour="red")
        Traceback (most recent call last):
        TypeError: Cache(): got an unexpected keyword argument 'colour'
        """
        try:
            bound = _SIGNATURE.bind(None, *args, **kwargs)
        except TypeError as e:
            raise TypeError(f"Cache(): {e}") from None
        bound.apply_defaults()
        arguments = dict(bound.arguments)
        del arguments["self"]
        return CacheOptions.build(arguments)

    def __init__(
        self,
        name: str,
        size: int | str | None = None,
        *,
        l1_items: int = DEFAULTS.l1_items,
        l1_negative_items: int | None = None,
        ttl: float = DEFAULTS.ttl,
        neg_ttl: float | None = DEFAULTS.neg_ttl,
        stale_ttl: float | None = None,
        jitter: float = DEFAULTS.jitter,
        refresh_ahead: float = DEFAULTS.refresh_ahead,
        loader_timeout: float = DEFAULTS.loader_timeout,
        serializer: str | Serializer = DEFAULTS.serializer,
        copy: str = DEFAULTS.copy,
        debug: bool = False,
        neg_size: int | str | None = None,
        directory: str = DEFAULTS.directory,
        avg_item_size: int = DEFAULTS.avg_item_size,
        lock_timeout: float = DEFAULTS.lock_timeout,
        recreate: bool = False,
        version: int | str | None = None,
        degraded: str = DEFAULTS.degraded,
        degraded_ttl: float = DEFAULTS.degraded_ttl,
        group: str | int | None = None,
        redis: object = None,
        secret: str | bytes | list[str | bytes] | None = None,
        redis_timeout: float = DEFAULTS.redis_timeout,
        stream_length: int = DEFAULTS.stream_length,
        cluster_single_flight: bool = False,
        huge_pages: str = DEFAULTS.huge_pages,
    ) -> None:
        pass  # the one signature of Cache(): __new__ binds the arguments to it

    def _join(self, o: CacheOptions) -> None:
        """What the cache's mode adds once the cache is built (a cluster tier)."""

    def _detach(self) -> None:
        """What the cache's mode stops when the cache is closed."""

    def __init_subclass__(cls, **kwargs: Any) -> None:
        super().__init_subclass__(**kwargs)
        install_native(cls, __test__)

    def __bool__(self) -> bool:
        return True  # a cache is never false, however empty its L1

    # -- the native methods -----------------------------------------------------------------

    @native_method
    def get(self, key: str | bytes, default: Any = None) -> Any:
        """The cached value of ``key``, or ``default``.

        Raises ``TypeError``/``ValueError`` for a key that is not 1 to 4096 bytes of str
        or bytes, and ``ZigguratError`` once the cache is closed.

        >>> c = Cache("doc-get", size="8MiB"); c.get("nope", 0)
        0
        >>> c.unlink()
        """

    @native_method
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
        value expired less than ``stale_ttl`` ago, that value is returned instead. A value
        that cannot be stored (too large, not serializable) is still returned; the failure
        is logged once per key and counted in ``stats()``. An async loader raises
        ``TypeError``: use ``afetch``.

        >>> c = Cache("doc-fetch", size="8MiB"); c.fetch("k", lambda: "loaded")
        'loaded'
        >>> c.fetch("k", lambda: "not called")
        'loaded'
        >>> c.unlink()
        """

    @native_method
    def set(  # type: ignore[override]
        self, key: str | bytes, value: Any, *, ttl: float | None = None, tags: Iterable[str] = ()
    ) -> None:
        """Stores ``value`` under ``key`` for ``ttl`` seconds (default: the cache's ``ttl``;
        ``math.inf``: until evicted).

        Once it returns, no process on this host returns the previous value. Raises
        ``TypeError``/``ValueError`` for bad input (nothing is written), ``ValueError``
        for a value above ``stats()["host"]["l2"]["max_value_size"]``, ``LockTimeout``
        when the write could not be made in ``lock_timeout``.

        >>> c = Cache("doc-set", size="8MiB"); c.set("k", {"a": 1}, ttl=10, tags=["t"])
        >>> c.get("k")
        {'a': 1}
        >>> c.unlink()
        """

    @native_method
    def add(  # type: ignore[override,empty-body]
        self, key: str | bytes, value: Any, *, ttl: float | None = None, tags: Iterable[str] = ()
    ) -> bool:
        """Stores ``value`` only if ``key`` holds no fresh value; returns whether it did.

        Of several processes of the host adding one key at once, exactly one gets True.

        >>> c = Cache("doc-add", size="8MiB"); c.add("k", 1), c.add("k", 2), c.get("k")
        (True, False, 1)
        >>> c.unlink()
        """

    @native_method
    def incr(  # type: ignore[override,empty-body]
        self,
        key: str | bytes,
        delta: int = 1,
        *,
        default: int | None = None,
        tags: Iterable[str] = (),
    ) -> int:
        """Adds ``delta`` to the integer under ``key`` and returns the result, atomically
        for every process of the host (the counter lives in the segment).

        Raises ``KeyError`` when the key holds no value and ``default`` is None (with a
        ``default``, the counter starts from it, with the cache's TTL and ``tags``; an
        existing counter keeps its own), ``TypeError`` when the value is not an int,
        ``OverflowError`` outside the signed 64-bit range.

        >>> c = Cache("doc-incr", size="8MiB"); c.set("n", 1); c.incr("n"), c.incr("n", 5)
        (2, 7)
        >>> c.incr("fresh", default=0)
        1
        >>> c.unlink()
        """

    @native_method
    def touch(self, key: str | bytes, ttl: float | None = None) -> bool:  # type: ignore[empty-body]
        """Gives the value under ``key`` a new TTL from now (default: the cache's);
        returns whether the key held a fresh value.

        >>> c = Cache("doc-touch", size="8MiB"); c.set("k", 1, ttl=1); c.touch("k", 60)
        True
        >>> c.unlink()
        """

    # -- reads and writes beyond the native methods -------------------------------------------

    def __contains__(self, key: str | bytes) -> bool:
        """Whether ``key`` holds a fresh value (a cached miss does not count).

        >>> c = Cache("doc-in", size="8MiB"); c.set("a", 1); "a" in c, "b" in c
        (True, False)
        >>> c.unlink()
        """
        try:
            return self.get(key, _MISSING) is not _MISSING
        except (TypeError, ValueError):
            key_error(key, "Cache.__contains__")

    def get_many(self, keys: Iterable[str | bytes]) -> dict[str | bytes, Any]:
        """The cached values of ``keys`` that are present.

        >>> c = Cache("doc-gm", size="8MiB"); c.set("a", 1)
        >>> c.get_many(["a", "b"])
        {'a': 1}
        >>> c.unlink()
        """
        keys = self._key_list(keys, "Cache.get_many")
        out: dict[str | bytes, Any] = {}
        get = self.get
        for k in keys:
            v = get(k, _MISSING)
            if v is not _MISSING:
                out[k] = v
        return out

    async def aget(self, key: str | bytes, default: Any = None) -> Any:
        """``get`` for asyncio code. Reads never wait for another process; with a cluster
        tier, a miss in this host's tiers reads Redis in the event loop's default executor.

        >>> import asyncio
        >>> c = Cache("doc-aget", size="8MiB"); asyncio.run(c.aget("x", 1))
        1
        >>> c.unlink()
        """
        try:
            return self.get(key, default)
        except (TypeError, ValueError):
            key_error(key, "Cache.aget")

    async def aget_many(self, keys: Iterable[str | bytes]) -> dict[str | bytes, Any]:
        """``get_many`` for asyncio code (Redis read in the default executor, as ``aget``).

        >>> import asyncio
        >>> c = Cache("doc-agm", size="8MiB"); c.set("a", 1); asyncio.run(c.aget_many(["a"]))
        {'a': 1}
        >>> c.unlink()
        """
        keys = self._key_list(keys, "Cache.aget_many")
        get = self.get
        return {k: v for k in keys if (v := get(k, _MISSING)) is not _MISSING}

    def set_many(
        self,
        mapping: Mapping[str | bytes, Any],
        *,
        ttl: float | None = None,
        tags: Iterable[str] = (),
    ) -> None:
        """Stores every item of ``mapping``; bad input anywhere writes nothing.

        >>> c = Cache("doc-sm", size="8MiB"); c.set_many({"a": 1, "b": 2}); c.get("b")
        2
        >>> c.unlink()
        """
        self._set_many(mapping, ttl, tags, "Cache.set_many")

    def _set_many(
        self, mapping: Mapping[str | bytes, Any], ttl: float | None, tags: Iterable[str], m: str
    ) -> None:
        """``set_many``, its errors naming the public method ``m``."""
        ttl_arg(ttl, self.ttl, "ttl", m)
        tg = tags_arg(tags, m)
        items = items_arg(mapping, m, self.serializer.dumps)
        put = self.set
        for k, v in items:
            put(k, v, ttl=ttl, tags=tg)

    async def aset(
        self, key: str | bytes, value: Any, *, ttl: float | None = None, tags: Iterable[str] = ()
    ) -> None:
        """``set`` for asyncio code. With a cluster tier, the write (a Redis round trip) runs
        in the event loop's default executor; a cancelled caller does not stop it.

        >>> import asyncio
        >>> c = Cache("doc-aset", size="8MiB"); asyncio.run(c.aset("k", 1)); c.get("k")
        1
        >>> c.unlink()
        """
        try:
            self.set(key, value, ttl=ttl, tags=tags)
        except (TypeError, ValueError):
            key_error(key, "Cache.aset")

    async def aset_many(
        self,
        mapping: Mapping[str | bytes, Any],
        *,
        ttl: float | None = None,
        tags: Iterable[str] = (),
    ) -> None:
        """``set_many`` for asyncio code (in the default executor with a cluster tier, as
        ``aset``).

        >>> import asyncio
        >>> c = Cache("doc-asm", size="8MiB"); asyncio.run(c.aset_many({"k": 1})); c.get("k")
        1
        >>> c.unlink()
        """
        self._set_many(mapping, ttl, tags, "Cache.aset_many")

    def decr(self, key: str | bytes, delta: int = 1, *, default: int | None = None) -> int:
        """``incr`` by ``-delta``.

        >>> c = Cache("doc-decr", size="8MiB"); c.set("n", 5); c.decr("n", 2)
        3
        >>> c.unlink()
        """
        if isinstance(delta, bool) or not isinstance(delta, int):
            raise TypeError(f"Cache.decr(): delta must be an int, not {type(delta).__name__}")
        check_key(key, "Cache.decr")
        return self.incr(key, -delta, default=default)

    def delete(self, key: str | bytes) -> bool:
        """Removes ``key`` from every tier on this host; returns whether L2 held it.

        >>> c = Cache("doc-del", size="8MiB"); c.set("k", 1); c.delete("k"), c.get("k")
        (True, None)
        >>> c.unlink()
        """
        self._check_open()
        try:
            return bool(super().delete(key))
        except ZigguratError as e:
            self._host.write_failed("delete", key, e)
            raise

    def delete_many(self, keys: Iterable[str | bytes]) -> int:
        """Removes every key of ``keys``; returns how many L2 held. Bad input anywhere
        deletes nothing.

        >>> c = Cache("doc-dm", size="8MiB"); c.set_many({"a": 1, "b": 2})
        >>> c.delete_many(["a", "b", "c"])
        2
        >>> c.unlink()
        """
        keys = self._key_list(keys, "Cache.delete_many")
        return sum(self.delete(k) for k in keys)

    def _key_list(self, keys: Iterable[str | bytes], method: str) -> list[str | bytes]:
        self._check_open()
        return key_list(keys, method)

    def invalidate_tags(self, *tags: str) -> None:  # type: ignore[override]
        """Voids every entry carrying any of ``tags``, in every process, at once.

        >>> c = Cache("doc-tags", size="8MiB"); c.set("u1", 1, tags=["users"])
        >>> c.invalidate_tags("users"); c.get("u1")
        >>> c.unlink()
        """
        self._check_open()
        super().invalidate_tags(tags_arg(tags, "Cache.invalidate_tags"))

    def clear(self) -> None:
        """Empties the cache on this host (every process's L1 stops validating at once).

        >>> c = Cache("doc-clear", size="8MiB"); c.set("k", 1); c.clear(); c.get("k")
        >>> c.unlink()
        """
        self._check_open()
        try:
            super().clear()
        except ZigguratError as e:
            self._host.write_failed("clear", "*", e)
            raise

    async def afetch(
        self,
        key: str | bytes,
        loader: Callable[[], Any],
        *,
        ttl: float | None = None,
        tags: Iterable[str] = (),
        neg_ttl: float | None = None,
        stale_ttl: float | None = None,
    ) -> Any:
        """``fetch`` for asyncio: ``loader`` may be async or not; one load per key per host.

        >>> import asyncio
        >>> async def load(): return 7
        >>> c = Cache("doc-afetch", size="8MiB"); asyncio.run(c.afetch("k", load))
        7
        >>> c.unlink()
        """
        self._check_open()
        opts = {"ttl": ttl, "tags": tags, "neg_ttl": neg_ttl, "stale_ttl": stale_ttl}
        return await self._loads.afetch(key, loader, opts)

    def cached(
        self,
        ttl: float | None = None,
        tags: TagsArg = None,
        *,
        key: Callable[..., str] | None = None,
        neg_ttl: float | None = None,
        stale_ttl: float | None = None,
    ) -> Callable[[F], F]:
        """Decorator: cache a function's results, keyed by its name and a digest of its
        arguments bound to its signature (``f(2)`` and ``f(x=2)`` are one key, the same in
        every process and after a restart). An argument without a stable encoding (an
        arbitrary object) raises ``TypeError`` naming it, unless ``key`` builds the key.

        ``tags`` is a list of tags or a function of the same arguments returning one. The
        wrapper has ``.key(*args, **kwargs)`` and ``.invalidate(*args, **kwargs)``.

        >>> c = Cache("doc-cached", size="8MiB")
        >>> @c.cached(ttl=60, tags=lambda user_id: [f"user:{user_id}"])
        ... def load_user(user_id):
        ...     return {"id": user_id}
        >>> load_user(5)
        {'id': 5}
        >>> load_user.key(5) == load_user.key(user_id=5)
        True
        >>> load_user.invalidate(5)
        True
        >>> c.unlink()
        """
        return cached(self, ttl, tags, key=key, neg_ttl=neg_ttl, stale_ttl=stale_ttl)

    # -- namespaces, stats, lifecycle --------------------------------------------------------

    def namespace(self, name: str) -> Namespace:
        """A view whose keys are prefixed with ``name`` and which can be cleared alone.

        >>> c = Cache("doc-ns", size="8MiB"); posts = c.namespace("posts")
        >>> posts.set("1", "hello"); posts.get("1")
        'hello'
        >>> posts.clear(); posts.get("1")
        >>> c.unlink()
        """
        return Namespace.of(self, name)

    @property
    def degraded(self) -> bool:
        """Whether the cache runs without its shared segment (see ``degraded_reason``):
        it could not be opened, or an operation stopped on data it could not handle
        (a damaged file, ``degraded_cause`` "damaged"), after which reads miss and writes
        raise ``SegmentError``.

        >>> c = Cache("doc-degraded", size="8MiB"); c.degraded
        False
        >>> c.unlink()
        """
        return self._host.main is None or self._host.failure(2) is not None

    @property
    def degraded_reason(self) -> str | None:
        """Why the shared segment cannot be used (None while it can)."""
        return self._host.reason

    @property
    def degraded_cause(self) -> str | None:
        """``degraded_reason`` as a short name: missing_directory, not_writable, other_owner,
        no_space, damaged, incompatible, locked or io."""
        return self._host.cause

    @property
    def _segment(self) -> _native.Segment | None:
        return self._host.main

    def stats(self) -> dict[str, Any]:
        """Counters of this process's tiers (``"process"``) apart from the host's
        (``"host"``: read from the segment, the same in every worker). docs/api.md's stats
        table explains every counter.

        >>> c = Cache("doc-stats", size="8MiB"); sorted(c.stats())
        ['cache', 'degraded', 'degraded_cause', 'degraded_mode', 'host', 'process']
        >>> c.unlink()
        """
        self._check_open()
        return stats_of(self)

    def _check_open(self) -> None:
        if self.closed:
            raise closed_error(self.name)

    def close(self) -> None:
        """Detaches this process; the data stays for the others. Every later call raises
        ``ZigguratError``. Closing twice is allowed.

        >>> c = Cache("doc-close", size="8MiB"); c.close(); c
        <ziggurat.Cache 'doc-close' closed>
        >>> Cache("doc-close", size="8MiB").unlink()
        """
        if self.closed:
            return
        self.closed = True
        self._detach()
        self.clear_l1()
        self._host.close()
        self.__class__ = variant(type(self), Closed)

    def __enter__(self) -> Cache:
        return self

    def __exit__(self, *_exc: object) -> None:
        self.close()

    def unlink(self) -> None:
        """Closes and removes the segment files (for tests and tear-down scripts).

        >>> Cache("doc-unlink", size="8MiB").unlink()
        """
        self._host.unlink()
        self.close()

    def __repr__(self) -> str:
        state = "closed" if self.closed else "degraded" if self.degraded else "ok"
        return f"<ziggurat.Cache {self.name!r} {state}>"


install_native(Cache, __test__)


_SIGNATURE = inspect.signature(Cache.__init__)
# help(Cache) and inspect.signature(Cache) show __init__'s options, not __new__'s *args.
_PARAMETERS = list(_SIGNATURE.parameters.values())[1:]
Cache.__signature__ = _SIGNATURE.replace(parameters=_PARAMETERS)  # type: ignore[attr-defined]
