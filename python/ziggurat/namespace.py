"""``Namespace``: keys under a prefix of one cache, cleared together.

>>> from ziggurat import Cache
>>> c = Cache("doc-namespace", size="8MiB"); users = c.namespace("users")
>>> users.set("1", "ada"); c.get("users:1")
'ada'
>>> c.unlink()
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Mapping
from typing import TYPE_CHECKING, Any

from ziggurat import _native
from ziggurat.args import check_key, key_list, tags_arg

if TYPE_CHECKING:
    from ziggurat.access import CacheAccess

__all__ = ["Namespace"]


class Namespace:
    """Keys under a prefix, cleared together without touching the rest of the cache.

    A key ``k`` of namespace ``n`` is the cache key ``"n:k"`` (bytes keys: ``b"n:" + k``).
    Every entry written through the namespace carries the hidden tag ``"\\x00ns:n"``, so
    ``clear()`` is one atomic increment, seen by every process at once.

    >>> from ziggurat import Cache
    >>> c = Cache("doc-ns2", size="8MiB"); ns = c.namespace("a"); ns.set("x", 1)
    >>> c.get("a:x")
    1
    >>> c.unlink()
    """

    @classmethod
    def of(cls, cache: CacheAccess, name: str) -> Namespace:
        """The namespace ``name`` of ``cache`` (what ``Cache.namespace`` returns), its key
        prefix and hidden tag by the native rule every front end shares; ``ValueError``
        unless ``name`` is a non-empty str without ``:``.

        >>> from ziggurat import Cache
        >>> c = Cache("doc-ns-of", size="8MiB"); Namespace.of(c, "a").name
        'a'
        >>> c.unlink()
        """
        if not isinstance(name, str):
            raise ValueError(
                f"Cache.namespace(): name must be a non-empty str without ':', got {name!r}"
            )
        try:
            key_prefix, tag = _native.namespace_parts(name)
        except ValueError as e:
            raise ValueError(f"Cache.namespace(): {e}") from None
        return cls(cache, name, key_prefix, tag)

    def __init__(self, cache: CacheAccess, name: str, key_prefix: str, tag: str) -> None:
        # The key prefix and tag come from the native rule (``Cache.namespace`` asks it),
        # which every front end shares.
        self.cache = cache
        self.name = name
        self._prefix = key_prefix
        self._tag = tag

    def _k(self, key: str | bytes, method: str = "Namespace") -> str | bytes:
        check_key(key, method)
        if isinstance(key, bytes):
            return self._prefix.encode() + key
        return self._prefix + key

    def _t(self, tags: Iterable[str], method: str) -> tuple[str, ...]:
        return (*tags_arg(tags, method), self._tag)

    def _full_keys(
        self, keys: Iterable[str | bytes], method: str
    ) -> dict[str | bytes, str | bytes]:
        """Each key's name in the cache, mapped to the key as given."""
        return {self._k(k, method): k for k in key_list(keys, method)}

    def _entries(self, mapping: Mapping[str | bytes, Any], method: str) -> dict[str | bytes, Any]:
        """``mapping`` with each key's name in the cache."""
        if not isinstance(mapping, Mapping):
            raise TypeError(f"{method}(): mapping must be a mapping, not {type(mapping).__name__}")
        return {self._k(k, method): v for k, v in mapping.items()}

    def get(self, key: str | bytes, default: Any = None) -> Any:
        """``Cache.get`` within the namespace."""
        return self.cache.get(self._k(key, "Namespace.get"), default)

    def __contains__(self, key: str | bytes) -> bool:
        """``key in cache`` within the namespace."""
        return self._k(key, "Namespace.__contains__") in self.cache

    def get_many(self, keys: Iterable[str | bytes]) -> dict[str | bytes, Any]:
        """``Cache.get_many`` within the namespace (keys come back without the prefix)."""
        full = self._full_keys(keys, "Namespace.get_many")
        return {full[k]: v for k, v in self.cache.get_many(full).items()}

    async def aget(self, key: str | bytes, default: Any = None) -> Any:
        """``Cache.aget`` within the namespace."""
        return await self.cache.aget(self._k(key, "Namespace.aget"), default)

    async def aget_many(self, keys: Iterable[str | bytes]) -> dict[str | bytes, Any]:
        """``Cache.aget_many`` within the namespace."""
        full = self._full_keys(keys, "Namespace.aget_many")
        return {full[k]: v for k, v in (await self.cache.aget_many(full)).items()}

    def set(
        self, key: str | bytes, value: Any, *, ttl: float | None = None, tags: Iterable[str] = ()
    ) -> None:
        """``Cache.set`` within the namespace."""
        m = "Namespace.set"
        self.cache.set(self._k(key, m), value, ttl=ttl, tags=self._t(tags, m))

    def set_many(
        self,
        mapping: Mapping[str | bytes, Any],
        *,
        ttl: float | None = None,
        tags: Iterable[str] = (),
    ) -> None:
        """``Cache.set_many`` within the namespace."""
        m = "Namespace.set_many"
        self.cache.set_many(self._entries(mapping, m), ttl=ttl, tags=self._t(tags, m))

    async def aset(
        self, key: str | bytes, value: Any, *, ttl: float | None = None, tags: Iterable[str] = ()
    ) -> None:
        """``Cache.aset`` within the namespace."""
        m = "Namespace.aset"
        await self.cache.aset(self._k(key, m), value, ttl=ttl, tags=self._t(tags, m))

    async def aset_many(
        self,
        mapping: Mapping[str | bytes, Any],
        *,
        ttl: float | None = None,
        tags: Iterable[str] = (),
    ) -> None:
        """``Cache.aset_many`` within the namespace."""
        m = "Namespace.aset_many"
        await self.cache.aset_many(self._entries(mapping, m), ttl=ttl, tags=self._t(tags, m))

    def add(
        self, key: str | bytes, value: Any, *, ttl: float | None = None, tags: Iterable[str] = ()
    ) -> bool:
        """``Cache.add`` within the namespace."""
        m = "Namespace.add"
        return self.cache.add(self._k(key, m), value, ttl=ttl, tags=self._t(tags, m))

    def incr(self, key: str | bytes, delta: int = 1, *, default: int | None = None) -> int:
        """``Cache.incr`` within the namespace (a counter it creates carries the
        namespace's tag, so ``clear()`` voids it)."""
        k = self._k(key, "Namespace.incr")
        return self.cache.incr(k, delta, default=default, tags=(self._tag,))

    def decr(self, key: str | bytes, delta: int = 1, *, default: int | None = None) -> int:
        """``Cache.decr`` within the namespace."""
        if isinstance(delta, bool) or not isinstance(delta, int):
            raise TypeError(f"Namespace.decr(): delta must be an int, not {type(delta).__name__}")
        k = self._k(key, "Namespace.decr")
        return self.cache.incr(k, -delta, default=default, tags=(self._tag,))

    def touch(self, key: str | bytes, ttl: float | None = None) -> bool:
        """``Cache.touch`` within the namespace."""
        return self.cache.touch(self._k(key, "Namespace.touch"), ttl)

    def delete(self, key: str | bytes) -> bool:
        """``Cache.delete`` within the namespace."""
        return self.cache.delete(self._k(key, "Namespace.delete"))

    def delete_many(self, keys: Iterable[str | bytes]) -> int:
        """``Cache.delete_many`` within the namespace."""
        keys = key_list(keys, "Namespace.delete_many")
        return self.cache.delete_many([self._k(k) for k in keys])

    def fetch(self, key: str | bytes, loader: Callable[[], Any], **kw: Any) -> Any:
        """``Cache.fetch`` within the namespace."""
        m = "Namespace.fetch"
        tags = self._t(kw.pop("tags", ()), m)
        return self.cache.fetch(self._k(key, m), loader, tags=tags, **kw)

    async def afetch(self, key: str | bytes, loader: Callable[[], Any], **kw: Any) -> Any:
        """``Cache.afetch`` within the namespace."""
        m = "Namespace.afetch"
        tags = self._t(kw.pop("tags", ()), m)
        return await self.cache.afetch(self._k(key, m), loader, tags=tags, **kw)

    def clear(self) -> None:
        """Voids every entry of this namespace in every process."""
        self.cache.invalidate_tags(self._tag)
