"""``CacheAccess``: the reads and writes of a cache written in Python over the native
methods (several keys at once, asyncio, the checks of ``delete`` and ``clear``), shared by
every mode; a mode overrides the few it runs differently (``clustered``).

>>> from ziggurat import Cache
>>> c = Cache("doc-access", size="8MiB"); c.set_many({"a": 1}); "a" in c, c.get_many(["a"])
(True, {'a': 1})
>>> c.unlink()
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Mapping
from typing import Any

from ziggurat._native import ZigguratError
from ziggurat.args import check_key, items_arg, key_error, key_list, tags_arg, ttl_arg
from ziggurat.state import CacheState
from ziggurat.stats import stats_of

__all__ = ["CacheAccess"]

# Marks "absent" where None is a valid cached value.
_MISSING: Any = object()


class CacheAccess(CacheState):
    """The reads and writes ``Cache`` adds to the native ones; ``namespace.Namespace`` and
    ``cached`` are written against it.

    >>> from ziggurat import Cache
    >>> c = Cache("doc-cache-access", size="8MiB"); isinstance(c, CacheAccess)
    True
    >>> c.unlink()
    """

    def __contains__(self, key: str | bytes) -> bool:
        """Whether ``key`` holds a fresh value (a cached miss does not count).

        >>> from ziggurat import Cache
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

        >>> from ziggurat import Cache
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

        >>> from ziggurat import Cache
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

        >>> from ziggurat import Cache
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

        >>> from ziggurat import Cache
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

        >>> from ziggurat import Cache
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

        >>> from ziggurat import Cache
        >>> import asyncio
        >>> c = Cache("doc-asm", size="8MiB"); asyncio.run(c.aset_many({"k": 1})); c.get("k")
        1
        >>> c.unlink()
        """
        self._set_many(mapping, ttl, tags, "Cache.aset_many")

    def decr(self, key: str | bytes, delta: int = 1, *, default: int | None = None) -> int:
        """``incr`` by ``-delta``.

        >>> from ziggurat import Cache
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

        >>> from ziggurat import Cache
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

        >>> from ziggurat import Cache
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

        >>> from ziggurat import Cache
        >>> c = Cache("doc-tags", size="8MiB"); c.set("u1", 1, tags=["users"])
        >>> c.invalidate_tags("users"); c.get("u1")
        >>> c.unlink()
        """
        self._check_open()
        super().invalidate_tags(tags_arg(tags, "Cache.invalidate_tags"))

    def clear(self) -> None:
        """Empties the cache on this host (every process's L1 stops validating at once).

        >>> from ziggurat import Cache
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

        >>> from ziggurat import Cache
        >>> import asyncio
        >>> async def load(): return 7
        >>> c = Cache("doc-afetch", size="8MiB"); asyncio.run(c.afetch("k", load))
        7
        >>> c.unlink()
        """
        self._check_open()
        opts = {"ttl": ttl, "tags": tags, "neg_ttl": neg_ttl, "stale_ttl": stale_ttl}
        return await self._loads.afetch(key, loader, opts)

    def stats(self) -> dict[str, Any]:
        """Counters of this process's tiers (``"process"``) apart from the host's
        (``"host"``: read from the segment, the same in every worker). docs/api.md's stats
        table explains every counter.

        >>> from ziggurat import Cache
        >>> c = Cache("doc-stats", size="8MiB"); sorted(c.stats())
        ['cache', 'degraded', 'degraded_cause', 'degraded_mode', 'host', 'process']
        >>> c.unlink()
        """
        self._check_open()
        return stats_of(self, self._host)
