"""``ZigguratCache``: a Django cache backend on a ziggurat ``Cache``.

In ``settings.py``::

    CACHES = {
        "default": {
            "BACKEND": "ziggurat.contrib.django.ZigguratCache",
            "LOCATION": "myapp",                  # the ziggurat cache's name
            "TIMEOUT": 300,                       # None: never expires
            "OPTIONS": {"size": "256MiB", "l1_items": 50_000},
        }
    }

``LOCATION`` names the cache (its segment files; default ``"django"``), ``OPTIONS`` takes
``ziggurat.Cache``'s keyword options except ``ttl`` (``TIMEOUT`` is the default timeout).
Every alias, thread and backend instance of a process naming the same ``LOCATION`` and
``OPTIONS`` uses one ``Cache``; every process of the host naming the same ``LOCATION``
(and ``directory``) shares its entries.

>>> backend = ZigguratCache("doc-django", {"OPTIONS": {"size": "8MiB"}})
>>> backend.set("greeting", {"text": "hello"}, timeout=60)
>>> backend.get("greeting")
{'text': 'hello'}
>>> backend.cache.unlink()
"""

from __future__ import annotations

import hashlib
import math
import pickle
from collections.abc import Iterable
from typing import Any

from django.core.cache.backends.base import DEFAULT_TIMEOUT, BaseCache
from django.core.exceptions import ImproperlyConfigured

from ziggurat import Cache, LockTimeout
from ziggurat.contrib.shared import (
    CACHE_OPTIONS,
    MAX_KEY,
    MAX_TTL,
    shared_cache,
    with_fresh_objects,
)

__all__ = ["ZigguratCache"]

# Django's own settings for its culling backends; eviction here is the segment's own.
_IGNORED_OPTIONS = frozenset({"MAX_ENTRIES", "CULL_FREQUENCY"})
_MISSING: Any = object()


class ZigguratCache(BaseCache):
    """A Django cache backend storing in a ziggurat ``Cache`` (per-process L1 over the
    host's shared-memory L2): a write in any worker is seen by every worker of the host.

    Django's semantics: ``timeout=None`` never expires, ``timeout <= 0`` stores nothing
    (and deletes the key), ``add`` and ``incr``/``decr`` are atomic across the host's
    processes, ``close()`` costs nothing and keeps the cache open. ``KEY_PREFIX``,
    ``VERSION`` and ``KEY_FUNCTION`` apply as in every Django backend.

    >>> backend = ZigguratCache("doc-django-cls", {"OPTIONS": {"size": "8MiB"}})
    >>> backend.add("hits", 0), backend.incr("hits"), backend.incr("hits", 5)
    (True, 1, 6)
    >>> backend.set("gone", "x", timeout=0); backend.get("gone", "absent")
    'absent'
    >>> backend.cache.unlink()
    """

    def __init__(self, location: str, params: dict[str, Any]) -> None:
        options = dict(params.get("OPTIONS") or {})
        super().__init__(params)
        for name in _IGNORED_OPTIONS:
            options.pop(name, None)
        if "ttl" in options:
            raise ImproperlyConfigured(
                "ZigguratCache: OPTIONS must not set 'ttl'; the cache's TIMEOUT setting is "
                "the default timeout"
            )
        unknown = sorted(set(options) - CACHE_OPTIONS)
        if unknown:
            raise ImproperlyConfigured(
                f"ZigguratCache: unknown OPTIONS {', '.join(map(repr, unknown))}; OPTIONS "
                f"takes ziggurat.Cache's options: {', '.join(sorted(CACHE_OPTIONS))}"
            )
        if not isinstance(location, str):
            raise ImproperlyConfigured(
                f"ZigguratCache: LOCATION must be a str naming the cache, not "
                f"{type(location).__name__}"
            )
        self._cache = shared_cache(
            location or "django",
            with_fresh_objects(options),
            lambda m: ImproperlyConfigured(f"ZigguratCache: LOCATION={location!r}: {m}"),
        )

    @property
    def cache(self) -> Cache:
        """The ``ziggurat.Cache`` underneath, for what Django's API lacks (``stats()``,
        ``fetch``, tags). Its keys are the made keys (``":1:k"`` by default).

        >>> backend = ZigguratCache("doc-django-prop", {"OPTIONS": {"size": "8MiB"}})
        >>> backend.set("k", 1); backend.cache.get(backend.make_key("k"))
        1
        >>> backend.cache.unlink()
        """
        return self._cache

    # -- keys and timeouts ------------------------------------------------------------------

    def _key(self, key: Any, version: int | None) -> str:
        made = self.make_and_validate_key(key, version=version)
        # A key the segment cannot hold (over 4096 bytes) is replaced by a digest of it, so
        # every key Django accepts works, with the same meaning.
        if isinstance(made, str) and len(made) > MAX_KEY // 4:
            raw = made.encode("utf-8", "surrogatepass")
            if len(raw) > MAX_KEY:
                return f"{made[:256]}#{hashlib.blake2b(raw, digest_size=32).hexdigest()}"
        return made

    def _ttl(self, timeout: Any, method: str) -> float | None:
        """The Cache TTL for a Django timeout; ``None`` when nothing is to be stored."""
        if timeout is DEFAULT_TIMEOUT:
            timeout = self.default_timeout
        if timeout is None:
            return math.inf
        if isinstance(timeout, bool) or not isinstance(timeout, (int, float)):
            raise TypeError(
                f"ZigguratCache.{method}(): timeout must be a number of seconds or None, "
                f"not {type(timeout).__name__}"
            )
        if math.isnan(timeout):
            raise ValueError(f"ZigguratCache.{method}(): timeout must be a number, got nan")
        if timeout <= 0:
            return None
        return math.inf if timeout > MAX_TTL else float(timeout)

    @staticmethod
    def _delta(delta: Any, method: str) -> int:
        if isinstance(delta, bool) or not isinstance(delta, int):
            raise TypeError(
                f"ZigguratCache.{method}(): delta must be an int, not {type(delta).__name__}"
            )
        return delta

    # -- reads ------------------------------------------------------------------------------

    def get(self, key: Any, default: Any | None = None, version: int | None = None) -> Any:
        """The value of ``key``, or ``default`` when absent (a stored ``None`` is returned).

        >>> backend = ZigguratCache("doc-django-get", {"OPTIONS": {"size": "8MiB"}})
        >>> backend.set("k", None); backend.get("k", "d"), backend.get("other", "d")
        (None, 'd')
        >>> backend.cache.unlink()
        """
        return self._cache.get(self._key(key, version), default)

    def get_many(self, keys: Iterable[Any], version: int | None = None) -> dict[Any, Any]:
        """``{key: value}`` for the keys present, keys as given.

        >>> backend = ZigguratCache("doc-django-gm", {"OPTIONS": {"size": "8MiB"}})
        >>> backend.set("a", 1); backend.get_many(["a", "b"])
        {'a': 1}
        >>> backend.cache.unlink()
        """
        made: dict[str | bytes, Any] = {self._key(k, version): k for k in keys}
        found = self._cache.get_many(list(made))
        return {made[k]: v for k, v in found.items()}

    def has_key(self, key: Any, version: int | None = None) -> bool:
        """Whether ``key`` holds a fresh value (a stored ``None`` counts).

        >>> backend = ZigguratCache("doc-django-has", {"OPTIONS": {"size": "8MiB"}})
        >>> backend.set("k", None); backend.has_key("k"), "other" in backend
        (True, False)
        >>> backend.cache.unlink()
        """
        return self._key(key, version) in self._cache

    # -- writes -----------------------------------------------------------------------------

    def _store(self, method: str, key: str, value: Any, ttl: float, add: bool = False) -> Any:
        try:
            if add:
                return self._cache.add(key, value, ttl=ttl)
            return self._cache.set(key, value, ttl=ttl)
        except TypeError as e:
            # Django's backends raise the pickling error itself for an unpicklable value;
            # callers (and Django's own tests) catch pickle.PickleError.
            if isinstance(e.__cause__, pickle.PickleError):
                raise pickle.PicklingError(
                    f"ZigguratCache.{method}(): cannot pickle the value of {key!r}: {e.__cause__}"
                ) from e
            raise

    def set(
        self,
        key: Any,
        value: Any,
        timeout: float | None = DEFAULT_TIMEOUT,
        version: int | None = None,
    ) -> None:
        """Stores ``value`` for ``timeout`` seconds (``None``: never expires; ``0`` or less:
        deletes the key instead).

        >>> backend = ZigguratCache("doc-django-set", {"OPTIONS": {"size": "8MiB"}})
        >>> backend.set("k", 1, timeout=None); backend.get("k")
        1
        >>> backend.cache.unlink()
        """
        k = self._key(key, version)
        ttl = self._ttl(timeout, "set")
        if ttl is None:
            self._cache.delete(k)
            return
        self._store("set", k, value, ttl)

    def add(
        self,
        key: Any,
        value: Any,
        timeout: float | None = DEFAULT_TIMEOUT,
        version: int | None = None,
    ) -> bool:
        """Stores ``value`` only if ``key`` is absent; returns whether it did. Of several
        processes of the host adding one key at once, exactly one gets ``True``. With
        ``timeout <= 0`` nothing is stored and the result says whether the key was absent.

        >>> backend = ZigguratCache("doc-django-add", {"OPTIONS": {"size": "8MiB"}})
        >>> backend.add("k", 1), backend.add("k", 2), backend.get("k")
        (True, False, 1)
        >>> backend.cache.unlink()
        """
        k = self._key(key, version)
        ttl = self._ttl(timeout, "add")
        if ttl is None:
            return k not in self._cache
        return bool(self._store("add", k, value, ttl, add=True))

    def set_many(
        self,
        data: dict[Any, Any],
        timeout: float | None = DEFAULT_TIMEOUT,
        version: int | None = None,
    ) -> list[Any]:
        """Stores every item of ``data``; returns the keys whose write could not be made
        (their shard lock was not obtained in ``lock_timeout``), ``[]`` when all were.

        >>> backend = ZigguratCache("doc-django-sm", {"OPTIONS": {"size": "8MiB"}})
        >>> backend.set_many({"a": 1, "b": 2}), backend.get("b")
        ([], 2)
        >>> backend.cache.unlink()
        """
        items = [(self._key(k, version), k, v) for k, v in data.items()]
        ttl = self._ttl(timeout, "set_many")
        if ttl is None:
            self._cache.delete_many([made for made, _, _ in items])
            return []
        failed = []
        for made, k, v in items:
            try:
                self._store("set_many", made, v, ttl)
            except LockTimeout:
                failed.append(k)
        return failed

    def touch(
        self, key: Any, timeout: float | None = DEFAULT_TIMEOUT, version: int | None = None
    ) -> bool:
        """Gives ``key`` a new timeout from now (``0`` or less deletes it); returns whether
        the key held a value.

        >>> backend = ZigguratCache("doc-django-touch", {"OPTIONS": {"size": "8MiB"}})
        >>> backend.set("k", 1, timeout=5); backend.touch("k", None), backend.touch("x")
        (True, False)
        >>> backend.cache.unlink()
        """
        k = self._key(key, version)
        ttl = self._ttl(timeout, "touch")
        if ttl is None:
            return self._cache.delete(k)
        return self._cache.touch(k, ttl)

    def delete(self, key: Any, version: int | None = None) -> bool:
        """Removes ``key`` from every process of the host; returns whether it was present.

        >>> backend = ZigguratCache("doc-django-del", {"OPTIONS": {"size": "8MiB"}})
        >>> backend.set("k", 1); backend.delete("k"), backend.delete("k")
        (True, False)
        >>> backend.cache.unlink()
        """
        return self._cache.delete(self._key(key, version))

    def delete_many(self, keys: Iterable[Any], version: int | None = None) -> None:
        """Removes every key of ``keys``.

        >>> backend = ZigguratCache("doc-django-dm", {"OPTIONS": {"size": "8MiB"}})
        >>> backend.set_many({"a": 1, "b": 2})
        []
        >>> backend.delete_many(["a", "b"]); backend.get_many(["a", "b"])
        {}
        >>> backend.cache.unlink()
        """
        self._cache.delete_many([self._key(k, version) for k in keys])

    def incr(self, key: Any, delta: int = 1, version: int | None = None) -> int:
        """Adds ``delta`` to the integer under ``key`` and returns the result, atomically
        for every process of the host. Raises ``ValueError`` when the key is absent,
        ``TypeError`` when its value is not an int stored in the signed 64-bit range,
        ``OverflowError`` when the result leaves that range.

        >>> backend = ZigguratCache("doc-django-incr", {"OPTIONS": {"size": "8MiB"}})
        >>> backend.set("n", 41); backend.incr("n"), backend.decr("n", 2)
        (42, 40)
        >>> backend.cache.unlink()
        """
        k = self._key(key, version)
        d = self._delta(delta, "incr")
        try:
            return self._cache.incr(k, d)
        except KeyError:
            raise ValueError(f"Key '{key}' not found") from None

    def decr(self, key: Any, delta: int = 1, version: int | None = None) -> int:
        """``incr`` by ``-delta``.

        >>> backend = ZigguratCache("doc-django-decr", {"OPTIONS": {"size": "8MiB"}})
        >>> backend.set("n", 5); backend.decr("n")
        4
        >>> backend.cache.unlink()
        """
        return self.incr(key, -self._delta(delta, "decr"), version=version)

    def clear(self) -> None:
        """Empties the cache on this host: every alias sharing its ``LOCATION`` (other
        prefixes and versions included), in every process.

        >>> backend = ZigguratCache("doc-django-clear", {"OPTIONS": {"size": "8MiB"}})
        >>> backend.set("k", 1); backend.clear(); backend.get("k")
        >>> backend.cache.unlink()
        """
        self._cache.clear()

    def close(self, **kwargs: Any) -> None:
        """Does nothing: Django calls it after every request, and the ``Cache`` stays open
        for the process's next requests.

        >>> backend = ZigguratCache("doc-django-close", {"OPTIONS": {"size": "8MiB"}})
        >>> backend.close(); backend.set("k", 1); backend.get("k")
        1
        >>> backend.cache.unlink()
        """

    # -- asyncio: direct calls. Reads never wait; a write waits at most lock_timeout for
    # its shard lock, as ziggurat's own aset does, rather than paying a thread hop. -------

    async def aget(self, key: Any, default: Any | None = None, version: int | None = None) -> Any:
        """``get`` for asyncio code.

        >>> import asyncio
        >>> backend = ZigguratCache("doc-django-aget", {"OPTIONS": {"size": "8MiB"}})
        >>> asyncio.run(backend.aget("k", "absent"))
        'absent'
        >>> backend.cache.unlink()
        """
        return self.get(key, default, version)

    async def aget_many(self, keys: Iterable[Any], version: int | None = None) -> dict[Any, Any]:
        """``get_many`` for asyncio code.

        >>> import asyncio
        >>> backend = ZigguratCache("doc-django-agetmany", {"OPTIONS": {"size": "8MiB"}})
        >>> backend.set("a", 1); asyncio.run(backend.aget_many(["a", "b"]))
        {'a': 1}
        >>> backend.cache.unlink()
        """
        return self.get_many(keys, version)

    async def ahas_key(self, key: Any, version: int | None = None) -> bool:
        """``has_key`` for asyncio code.

        >>> import asyncio
        >>> backend = ZigguratCache("doc-django-ahaskey", {"OPTIONS": {"size": "8MiB"}})
        >>> asyncio.run(backend.ahas_key("k"))
        False
        >>> backend.cache.unlink()
        """
        return self.has_key(key, version)

    async def aset(
        self,
        key: Any,
        value: Any,
        timeout: float | None = DEFAULT_TIMEOUT,
        version: int | None = None,
    ) -> None:
        """``set`` for asyncio code.

        >>> import asyncio
        >>> backend = ZigguratCache("doc-django-aset", {"OPTIONS": {"size": "8MiB"}})
        >>> asyncio.run(backend.aset("k", 1)); backend.get("k")
        1
        >>> backend.cache.unlink()
        """
        self.set(key, value, timeout, version)

    async def aadd(
        self,
        key: Any,
        value: Any,
        timeout: float | None = DEFAULT_TIMEOUT,
        version: int | None = None,
    ) -> bool:
        """``add`` for asyncio code.

        >>> import asyncio
        >>> backend = ZigguratCache("doc-django-aadd", {"OPTIONS": {"size": "8MiB"}})
        >>> asyncio.run(backend.aadd("k", 1)), asyncio.run(backend.aadd("k", 2))
        (True, False)
        >>> backend.cache.unlink()
        """
        return self.add(key, value, timeout, version)

    async def aset_many(
        self,
        data: dict[Any, Any],
        timeout: float | None = DEFAULT_TIMEOUT,
        version: int | None = None,
    ) -> list[Any]:
        """``set_many`` for asyncio code.

        >>> import asyncio
        >>> backend = ZigguratCache("doc-django-asetmany", {"OPTIONS": {"size": "8MiB"}})
        >>> asyncio.run(backend.aset_many({"a": 1}))
        []
        >>> backend.cache.unlink()
        """
        return self.set_many(data, timeout, version)

    async def atouch(
        self, key: Any, timeout: float | None = DEFAULT_TIMEOUT, version: int | None = None
    ) -> bool:
        """``touch`` for asyncio code.

        >>> import asyncio
        >>> backend = ZigguratCache("doc-django-atouch", {"OPTIONS": {"size": "8MiB"}})
        >>> backend.set("k", 1); asyncio.run(backend.atouch("k", None))
        True
        >>> backend.cache.unlink()
        """
        return self.touch(key, timeout, version)

    async def adelete(self, key: Any, version: int | None = None) -> bool:
        """``delete`` for asyncio code.

        >>> import asyncio
        >>> backend = ZigguratCache("doc-django-adelete", {"OPTIONS": {"size": "8MiB"}})
        >>> backend.set("k", 1); asyncio.run(backend.adelete("k"))
        True
        >>> backend.cache.unlink()
        """
        return self.delete(key, version)

    async def adelete_many(self, keys: Iterable[Any], version: int | None = None) -> None:
        """``delete_many`` for asyncio code.

        >>> import asyncio
        >>> backend = ZigguratCache("doc-django-adeletemany", {"OPTIONS": {"size": "8MiB"}})
        >>> backend.set("k", 1); asyncio.run(backend.adelete_many(["k"])); backend.get("k", 0)
        0
        >>> backend.cache.unlink()
        """
        self.delete_many(keys, version)

    async def aincr(self, key: Any, delta: int = 1, version: int | None = None) -> int:
        """``incr`` for asyncio code (atomic across the host's processes).

        >>> import asyncio
        >>> backend = ZigguratCache("doc-django-aincr", {"OPTIONS": {"size": "8MiB"}})
        >>> backend.set("n", 1); asyncio.run(backend.aincr("n"))
        2
        >>> backend.cache.unlink()
        """
        return self.incr(key, delta, version)

    async def adecr(self, key: Any, delta: int = 1, version: int | None = None) -> int:
        """``decr`` for asyncio code.

        >>> import asyncio
        >>> backend = ZigguratCache("doc-django-adecr", {"OPTIONS": {"size": "8MiB"}})
        >>> backend.set("n", 1); asyncio.run(backend.adecr("n"))
        0
        >>> backend.cache.unlink()
        """
        return self.decr(key, delta, version)

    async def aclear(self) -> None:
        """``clear`` for asyncio code.

        >>> import asyncio
        >>> backend = ZigguratCache("doc-django-aclear", {"OPTIONS": {"size": "8MiB"}})
        >>> backend.set("k", 1); asyncio.run(backend.aclear()); backend.get("k", 0)
        0
        >>> backend.cache.unlink()
        """
        self.clear()

    async def aclose(self, **kwargs: Any) -> None:
        """``close`` for asyncio code: does nothing.

        >>> import asyncio
        >>> backend = ZigguratCache("doc-django-aclose", {"OPTIONS": {"size": "8MiB"}})
        >>> asyncio.run(backend.aclose()); backend.cache.closed
        False
        >>> backend.cache.unlink()
        """
