"""The asyncio methods of a cache whose tiers are all on this host: a read or a write never
waits on the network, so they run in the event loop; ``afetch`` awaits the loader, one load
per key per host. (With a cluster tier, ``clustered.Clustered`` moves the Redis round trips
to the loop's default executor.)

    >>> import asyncio
    >>> from ziggurat import Cache
    >>> c = Cache("doc-aio", size="8MiB"); asyncio.run(c.aset("k", 1)); asyncio.run(c.aget("k"))
    1
    >>> c.unlink()
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Mapping
from typing import TYPE_CHECKING, Any

from ziggurat._native import Cache as CacheCore
from ziggurat.args import key_error

if TYPE_CHECKING:
    from ziggurat.loader import Loads

__all__ = ["AsyncMethods"]

# Marks "absent" where None is a valid cached value.
_MISSING: Any = object()


class AsyncMethods(CacheCore):
    """``aget``, ``aget_many``, ``aset``, ``aset_many`` and ``afetch`` of ``Cache``."""

    if TYPE_CHECKING:
        _loads: Loads

        def _check_open(self) -> None: ...
        def _key_list(self, keys: Iterable[str | bytes], method: str) -> list[str | bytes]: ...
        def _set_many(
            self,
            mapping: Mapping[str | bytes, Any],
            ttl: float | None,
            tags: Iterable[str],
            m: str,
        ) -> None: ...

    async def aget(self, key: str | bytes, default: Any = None) -> Any:
        """``get`` for asyncio code. Reads never wait for another process; with a cluster
        tier, a miss in this host's tiers reads Redis in the event loop's default executor.

        >>> import asyncio
        >>> from ziggurat import Cache
        >>> c = Cache("doc-aget", size="8MiB"); asyncio.run(c.aget("x", 1))
        1
        >>> c.unlink()
        """
        try:
            return self.get(key, default)
        except (TypeError, ValueError):
            bad = key_error(key, "Cache.aget")
            if bad is None:
                raise
            raise bad from None

    async def aget_many(self, keys: Iterable[str | bytes]) -> dict[str | bytes, Any]:
        """``get_many`` for asyncio code (Redis read in the default executor, as ``aget``).

        >>> import asyncio
        >>> from ziggurat import Cache
        >>> c = Cache("doc-agm", size="8MiB"); c.set("a", 1); asyncio.run(c.aget_many(["a"]))
        {'a': 1}
        >>> c.unlink()
        """
        keys = self._key_list(keys, "Cache.aget_many")
        get = self.get
        return {k: v for k in keys if (v := get(k, _MISSING)) is not _MISSING}

    async def aset(
        self, key: str | bytes, value: Any, *, ttl: float | None = None, tags: Iterable[str] = ()
    ) -> None:
        """``set`` for asyncio code. With a cluster tier, the write (a Redis round trip) runs
        in the event loop's default executor; a cancelled caller does not stop it.

        >>> import asyncio
        >>> from ziggurat import Cache
        >>> c = Cache("doc-aset", size="8MiB"); asyncio.run(c.aset("k", 1)); c.get("k")
        1
        >>> c.unlink()
        """
        try:
            self.set(key, value, ttl=ttl, tags=tags)
        except (TypeError, ValueError):
            bad = key_error(key, "Cache.aset")
            if bad is None:
                raise
            raise bad from None

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
        >>> from ziggurat import Cache
        >>> c = Cache("doc-asm", size="8MiB"); asyncio.run(c.aset_many({"k": 1})); c.get("k")
        1
        >>> c.unlink()
        """
        self._set_many(mapping, ttl, tags, "Cache.aset_many")

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
        >>> from ziggurat import Cache
        >>> c = Cache("doc-afetch", size="8MiB"); asyncio.run(c.afetch("k", load))
        7
        >>> c.unlink()
        """
        self._check_open()
        opts = {"ttl": ttl, "tags": tags, "neg_ttl": neg_ttl, "stale_ttl": stale_ttl}
        return await self._loads.afetch(key, loader, opts)
