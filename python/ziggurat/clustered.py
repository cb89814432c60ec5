"""How a cache with a cluster tier (``redis=``) runs: writes go to Redis first, then to
this host (Python methods: a network round trip dwarfs the frame); reads stay native,
asking Redis only after a miss in this host's tiers. The tier itself (signing, the event
stream, the follower) lives in ``ziggurat.cluster``.
"""

from __future__ import annotations

import functools
from collections.abc import Iterable, Mapping
from typing import TYPE_CHECKING, Any

from ziggurat._native import Cache as CacheCore
from ziggurat._native import ZigguratError
from ziggurat.args import check_key, int_arg, tags_arg, ttl_arg
from ziggurat.cluster.reader import Reader
from ziggurat.cluster.signing import Signer
from ziggurat.cluster.tier import ClusterTier
from ziggurat.loader import in_thread

if TYPE_CHECKING:
    from ziggurat.access import CacheAccess
    from ziggurat.options import CacheOptions
    from ziggurat.state import CacheState

    _Base = CacheAccess
else:
    _Base = object

__all__ = ["Clustered", "dedicated_reader", "quiet"]

# Marks "absent" where None is a valid cached value.
_MISSING: Any = object()


class Clustered(_Base):
    """The methods of a cache with a cluster tier that differ from the native ones."""

    _tier: ClusterTier
    _reader: Reader

    def _join(self, o: CacheOptions) -> None:
        assert o.link is not None and o.secrets is not None  # the factory's choice
        tier = ClusterTier(
            self._core,
            o.segment_name,
            o.link,
            Signer(o.segment_name, o.secrets),
            o.serializer.loads,
            o.serializer.dumps,
            stream_length=o.stream_length,
            loader_timeout=o.loader_timeout,
            single_flight=o.cluster_single_flight,
        )
        CacheCore.join_below(self, tier.ask, tier.tell)
        self._tier = tier
        self._loads.off_loop = True
        self._reader = Reader(tier)
        self._reader.start()

    def _detach(self) -> None:
        # The tier's connections close with their threads and with the tier.
        self._reader.stop()

    def set(
        self,
        key: str | bytes,
        value: Any,
        *,
        ttl: float | None = None,
        tags: Iterable[str] = (),  # type: ignore[override]
    ) -> None:
        m = "Cache.set"
        self._check_open()
        check_key(key, m)
        t = ttl_arg(ttl, self.ttl, "ttl", m)
        assert t is not None  # it has a default
        tg = tags_arg(tags, m)
        try:
            self._tier.set(key, value, t, tg)
        except TypeError as e:
            raise TypeError(f"{m}(): cannot serialize the value for this cache: {e}") from e

    def add(
        self,
        key: str | bytes,
        value: Any,
        *,
        ttl: float | None = None,
        tags: Iterable[str] = (),  # type: ignore[override]
    ) -> bool:
        m = "Cache.add"
        self._check_open()
        check_key(key, m)
        t = ttl_arg(ttl, self.ttl, "ttl", m)
        assert t is not None  # it has a default
        return self._tier.add(key, value, t, tags_arg(tags, m))

    def incr(
        self,
        key: str | bytes,
        delta: int = 1,
        *,
        default: int | None = None,
        tags: Iterable[str] = (),  # type: ignore[override]
    ) -> int:
        m = "Cache.incr"
        self._check_open()
        check_key(key, m)
        int_arg(delta, "delta", m, bits=54)
        if default is not None:
            int_arg(default, "default", m, bits=54)
        return self._tier.incr(key, delta, default, self.ttl, tags_arg(tags, m))

    def touch(self, key: str | bytes, ttl: float | None = None) -> bool:
        m = "Cache.touch"
        self._check_open()
        check_key(key, m)
        t = ttl_arg(ttl, self.ttl, "ttl", m)
        assert t is not None  # it has a default
        return self._tier.touch(key, t)

    def delete(self, key: str | bytes) -> bool:
        self._check_open()
        check_key(key, "Cache.delete")
        try:
            return self._tier.delete(key)
        except ZigguratError as e:
            self._host.write_failed("delete", key, e)
            raise

    def invalidate_tags(self, *tags: str) -> None:  # type: ignore[override]
        self._check_open()
        self._tier.invalidate_tags(tags_arg(tags, "Cache.invalidate_tags"))

    def clear(self) -> None:
        self._check_open()
        try:
            self._tier.clear()
        except ZigguratError as e:
            self._host.write_failed("clear", "*", e)
            raise

    async def aget(self, key: str | bytes, default: Any = None) -> Any:
        self._check_open()
        check_key(key, "Cache.aget")
        v = CacheCore.get_local(self, key, default, _MISSING)
        if v is _MISSING:
            return await in_thread(CacheCore.get_below, self, key, default)
        return v

    async def aget_many(self, keys: Iterable[str | bytes]) -> dict[str | bytes, Any]:
        keys = self._key_list(keys, "Cache.aget_many")
        out: dict[str | bytes, Any] = {}
        for k in keys:
            v = await self.aget(k, _MISSING)
            if v is not _MISSING:
                out[k] = v
        return out

    async def aset(
        self, key: str | bytes, value: Any, *, ttl: float | None = None, tags: Iterable[str] = ()
    ) -> None:
        check_key(key, "Cache.aset")
        await in_thread(functools.partial(self.set, key, value, ttl=ttl, tags=tags))

    async def aset_many(
        self,
        mapping: Mapping[str | bytes, Any],
        *,
        ttl: float | None = None,
        tags: Iterable[str] = (),
    ) -> None:
        await in_thread(self._set_many, mapping, ttl, tags, "Cache.aset_many")

    def stats(self) -> dict[str, Any]:
        out = super().stats()
        out["l3"] = self._tier.stats()
        return out


def quiet(cache: CacheState) -> None:
    """Stops the stream reader a cache with a cluster tier runs in the background (no-op
    without one): for a process that only writes, such as ``ziggurat purge``, or that
    follows the stream itself (``dedicated_reader``). Given a Redis server::

        cache = Cache("api", redis="redis://10.0.0.5:6379/0", secret=s)
        quiet(cache)
    """
    reader = cache._reader
    if reader is not None:
        reader.stop()


def dedicated_reader(cache: CacheState) -> Reader:
    """A reader of ``cache``'s event stream that follows it for the whole host, as
    ``ziggurat follow`` does; the cache's own background reader is stopped first.
    ``cache`` must have a cluster tier (``ValueError`` otherwise). Given a Redis server::

        reader = dedicated_reader(Cache("api", redis="redis://10.0.0.5:6379/0", secret=s))
        reader.claim() or reader.run()
    """
    tier = cache._tier
    if tier is None:
        raise ValueError(f"cache {cache.name!r} has no cluster tier (redis=) to follow")
    quiet(cache)
    return Reader(tier, dedicated=True)
