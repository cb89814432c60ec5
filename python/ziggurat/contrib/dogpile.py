"""``ZigguratBackend``: a dogpile.cache backend on a ziggurat ``Cache``, named ``"ziggurat"``.

::

    from dogpile.cache import make_region

    region = make_region().configure(
        "ziggurat",
        expiration_time=300,                       # the region's: values older are recreated
        arguments={"name": "myapp", "size": "256MiB", "l1_items": 50_000},
    )

    @region.cache_on_arguments()
    def load_user(user_id): ...

The backend is registered under ``"ziggurat"`` when this module is imported and by the
package's ``dogpile.cache`` entry point, so ``configure("ziggurat")`` works without an
import. ``arguments``: ``name`` (the cache's name, default ``"dogpile"``),
``expiration_time`` (how long the segment keeps an entry, default ``math.inf``: until
evicted; the region's own ``expiration_time`` decides freshness), ``mutex_ttl`` (seconds a
creation lock lasts if its holder dies, default 30), and ``ziggurat.Cache``'s keyword
options except ``ttl``. Every region of a process naming the same cache and options uses
one ``Cache``; every process of the host naming the same cache (and ``directory``) shares
its entries and its creation locks.

>>> from dogpile.cache import make_region
>>> region = make_region().configure("ziggurat", arguments={"name": "doc-dogpile",
...                                                          "size": "8MiB"})
>>> region.get_or_create("answer", lambda: 42)
42
>>> region.backend.cache.unlink()
"""

from __future__ import annotations

import hashlib
import itertools
import math
import os
import threading
import time
import warnings
from collections.abc import Iterable, Mapping, Sequence
from typing import Any

from dogpile.cache import register_backend
from dogpile.cache.api import (
    NO_VALUE,
    BackendFormatted,
    BackendSetType,
    CacheBackend,
    CachedValue,
    CacheMutex,
    KeyType,
)

from ziggurat import Cache, LockTimeout
from ziggurat.contrib.shared import CACHE_OPTIONS, MAX_KEY, MAX_TTL, fitting_key, shared_cache

__all__ = ["ZigguratBackend", "ZigguratMutex"]

# dogpile's register_backend carries no annotations.
register_backend("ziggurat", "ziggurat.contrib.dogpile", "ZigguratBackend")  # type: ignore[no-untyped-call]

_OWN_ARGUMENTS = frozenset({"name", "expiration_time", "mutex_ttl"})
# Creation locks live beside the values, under keys no dogpile key produced by a region
# can equal by accident.
_LOCK_PREFIX = "\x00dogpile-mutex:"

_tokens = itertools.count()


def _seconds(arguments: Mapping[str, Any], what: str, default: float) -> float:
    value = arguments.get(what, default)
    if isinstance(value, bool) or not isinstance(value, (int, float)):
        raise TypeError(
            f"ZigguratBackend(): the argument {what} must be a number of seconds, not "
            f"{type(value).__name__}"
        )
    if not value > 0:
        raise ValueError(
            f"ZigguratBackend(): the argument {what} must be a number of seconds > 0 "
            f"(math.inf: never), got {value!r}"
        )
    return math.inf if value > MAX_TTL else float(value)


def _made_key(key: Any, method: str) -> str | bytes:
    if not isinstance(key, str):
        raise TypeError(
            f"ZigguratBackend.{method}(): key must be a str, not {type(key).__name__}; "
            f"a region's key_mangler must return str"
        )
    if not key:
        raise ValueError(f"ZigguratBackend.{method}(): key must not be empty")
    raw = key.encode("utf-8", "surrogatepass")
    # A key the segment cannot hold (over 4096 bytes) is replaced by a digest of it, so
    # every key a region makes works, with the same meaning.
    if len(raw) > MAX_KEY:
        return fitting_key(raw)
    return key


class ZigguratMutex(CacheMutex):
    """A creation lock for one key, held across the processes of the host: an entry made
    with ``Cache.add`` (exactly one process or thread of the host succeeds) that lasts
    ``ttl`` seconds at most, so a holder that dies frees it. Not reentrant: a second
    ``acquire`` waits (or fails without ``wait``) even in the holding thread.

    ``release`` deletes the entry only if it is still this holder's: a holder that kept it
    past ``ttl`` (its lock expired and maybe went to another) deletes nothing.

    >>> backend = ZigguratBackend({"name": "doc-dogpile-mutex", "size": "8MiB"})
    >>> m = backend.get_mutex("k")
    >>> m.acquire(), m.locked(), backend.get_mutex("k").acquire(False)
    (True, True, False)
    >>> m.release(); m.locked()
    False
    >>> backend.cache.unlink()
    """

    def __init__(self, cache: Cache, key: str | bytes, ttl: float) -> None:
        raw = key if isinstance(key, bytes) else key.encode("utf-8", "surrogatepass")
        self._key = _LOCK_PREFIX.encode() + raw
        if len(self._key) > MAX_KEY:
            self._key = (_LOCK_PREFIX + hashlib.blake2b(raw, digest_size=32).hexdigest()).encode()
        self._cache = cache
        self._ttl = ttl
        self._token: str | None = None

    def acquire(self, wait: bool = True) -> bool:
        """Takes the lock; with ``wait`` (the default) waits for it, polling every 1 to 50
        ms, else returns at once. Returns whether the lock was taken.

        >>> backend = ZigguratBackend({"name": "doc-dogpile-acq", "size": "8MiB"})
        >>> m = backend.get_mutex("k"); m.acquire(wait=False), m.acquire(wait=False)
        (True, False)
        >>> m.release(); backend.cache.unlink()
        """
        if not isinstance(wait, bool):
            raise TypeError(
                f"ZigguratMutex.acquire(): wait must be a bool, not {type(wait).__name__}"
            )
        token = f"{os.getpid()}:{threading.get_ident()}:{next(_tokens)}"
        pause = 0.001
        while True:
            try:
                if self._cache.add(self._key, token, ttl=self._ttl):
                    self._token = token
                    return True
            except LockTimeout:
                pass  # a stopped process holds the shard's lock: as if the mutex were held
            if not wait:
                return False
            time.sleep(pause)
            pause = min(pause * 2, 0.05)

    def release(self) -> None:
        """Gives the lock back (deletes its entry if it is still this holder's).

        >>> backend = ZigguratBackend({"name": "doc-dogpile-rel", "size": "8MiB"})
        >>> m = backend.get_mutex("k"); m.acquire()
        True
        >>> m.release(); backend.get_mutex("k").acquire(False)
        True
        >>> backend.cache.unlink()
        """
        token, self._token = self._token, None
        if token is not None and self._cache.get(self._key) == token:
            self._cache.delete(self._key)

    def locked(self) -> bool:
        """Whether any process or thread of the host holds the lock.

        >>> backend = ZigguratBackend({"name": "doc-dogpile-locked", "size": "8MiB"})
        >>> backend.get_mutex("k").locked()
        False
        >>> backend.cache.unlink()
        """
        return self._key in self._cache


class ZigguratBackend(CacheBackend):
    """A dogpile.cache backend storing in a ziggurat ``Cache`` (per-process L1 over the
    host's shared-memory L2): a value made in any process is seen by every process of the
    host, and ``get_mutex`` gives a creation lock for the whole host, so one process
    creates a missing value while the others wait for it (``ZigguratMutex``).

    Values are stored as dogpile hands them over: ``CachedValue`` objects (serialized by
    the ``Cache``'s own serializer, which keeps their type) or, for a region with a
    ``serializer``, the region's bytes.

    >>> backend = ZigguratBackend({"name": "doc-dogpile-cls", "size": "8MiB"})
    >>> from dogpile.cache.api import CachedValue
    >>> backend.set("k", CachedValue("v", {"ct": 0.0, "v": 2}))
    >>> backend.get("k").payload, backend.get("other")
    ('v', <dogpile.cache.api.NoValue object>)
    >>> backend.cache.unlink()
    """

    # Python objects go to the backend; the Cache serializes them itself.
    key_mangler = None
    serializer = None
    deserializer = None

    def __init__(self, arguments: Mapping[str, Any]) -> None:
        if not isinstance(arguments, Mapping):
            raise TypeError(
                f"ZigguratBackend(): arguments must be a mapping, not {type(arguments).__name__}"
            )
        if "ttl" in arguments:
            raise ValueError(
                "ZigguratBackend(): the argument 'ttl' is not taken; expiration_time is how "
                "long the segment keeps an entry (the region's expiration_time decides "
                "freshness)"
            )
        name = arguments.get("name", "dogpile")
        if not isinstance(name, str):
            raise TypeError(
                f"ZigguratBackend(): the argument name must be a str, not {type(name).__name__}"
            )
        unknown = sorted(set(arguments) - CACHE_OPTIONS - _OWN_ARGUMENTS)
        if unknown:
            # dogpile hands a backend every argument of a configuration, as its own
            # backends do; an unknown one is most likely a typo, so it is not silent.
            warnings.warn(
                f"ZigguratBackend(): ignoring unknown arguments {', '.join(map(repr, unknown))};"
                f" it takes name, expiration_time, mutex_ttl and ziggurat.Cache's options",
                stacklevel=2,
            )
        self.expiration_time = _seconds(arguments, "expiration_time", math.inf)
        self.mutex_ttl = _seconds(arguments, "mutex_ttl", 30.0)
        options = {k: v for k, v in arguments.items() if k in CACHE_OPTIONS}
        self._cache = shared_cache(name, options, lambda m: ValueError(f"ZigguratBackend(): {m}"))

    @property
    def cache(self) -> Cache:
        """The ``ziggurat.Cache`` underneath, for what dogpile's API lacks (``stats()``,
        tags, ``clear()``).

        >>> ZigguratBackend({"name": "doc-dogpile-prop", "size": "8MiB"}).cache.unlink()
        """
        return self._cache

    def has_lock_timeout(self) -> bool:
        """``True``: a creation lock lapses after ``mutex_ttl`` seconds.

        >>> b = ZigguratBackend({"name": "doc-dogpile-hlt", "size": "8MiB"})
        >>> b.has_lock_timeout(); b.cache.unlink()
        True
        """
        return True

    def get_mutex(self, key: KeyType) -> ZigguratMutex:
        """The creation lock of ``key`` for the whole host (see ``ZigguratMutex``).

        >>> b = ZigguratBackend({"name": "doc-dogpile-gm", "size": "8MiB"})
        >>> b.get_mutex("k").acquire(False), b.get_mutex("k").acquire(False)
        (True, False)
        >>> b.cache.unlink()
        """
        return ZigguratMutex(self._cache, _made_key(key, "get_mutex"), self.mutex_ttl)

    @staticmethod
    def _in(value: BackendSetType) -> Any:
        # A CachedValue is stored as a plain (payload, metadata) pair: every serializer of
        # the Cache can write that (orjson and msgpack refuse, or flatten, the named tuple),
        # and pickle need not name dogpile's class in each entry.
        return value if isinstance(value, bytes) else (value.payload, value.metadata)

    @staticmethod
    def _out(value: Any) -> BackendFormatted:
        # A region's bytes come back as they went; a pair (a list, through the plain-data
        # serializers) becomes the CachedValue again.
        if value is NO_VALUE or isinstance(value, (bytes, CachedValue)):
            return value
        payload, metadata = value
        return CachedValue(payload, metadata)

    def get(self, key: KeyType) -> BackendFormatted:
        """The stored ``CachedValue`` (or bytes) of ``key``, or ``NO_VALUE``.

        >>> b = ZigguratBackend({"name": "doc-dogpile-get", "size": "8MiB"})
        >>> b.set_serialized("k", b"raw"); b.get("k"), b.get("x")
        (b'raw', <dogpile.cache.api.NoValue object>)
        >>> b.cache.unlink()
        """
        return self._out(self._cache.get(_made_key(key, "get"), NO_VALUE))

    def get_multi(self, keys: Iterable[KeyType]) -> Sequence[BackendFormatted]:
        """``get`` of each key, in order.

        >>> b = ZigguratBackend({"name": "doc-dogpile-getm", "size": "8MiB"})
        >>> b.set_multi({"a": b"1"}); b.get_multi(["a", "b"])
        [b'1', <dogpile.cache.api.NoValue object>]
        >>> b.cache.unlink()
        """
        made = [_made_key(k, "get_multi") for k in keys]
        found = self._cache.get_many(made)
        return [self._out(found.get(k, NO_VALUE)) for k in made]

    def set(self, key: KeyType, value: BackendSetType) -> None:
        """Stores ``value`` (a ``CachedValue``, or a region's bytes) for
        ``expiration_time``.

        >>> b = ZigguratBackend({"name": "doc-dogpile-set", "size": "8MiB"})
        >>> b.set("k", b"v"); b.get("k")
        b'v'
        >>> b.cache.unlink()
        """
        if not isinstance(value, (bytes, CachedValue)):
            raise TypeError(
                f"ZigguratBackend.set(): value must be a CachedValue or bytes (as a region "
                f"passes them), not {type(value).__name__}"
            )
        self._cache.set(_made_key(key, "set"), self._in(value), ttl=self.expiration_time)

    def set_multi(self, mapping: Mapping[KeyType, BackendSetType]) -> None:
        """``set`` of each item; every key and value is checked before any is stored.

        >>> b = ZigguratBackend({"name": "doc-dogpile-setm", "size": "8MiB"})
        >>> b.set_multi({"a": b"1", "b": b"2"}); b.get("b")
        b'2'
        >>> b.cache.unlink()
        """
        for value in mapping.values():
            if not isinstance(value, (bytes, CachedValue)):
                raise TypeError(
                    f"ZigguratBackend.set_multi(): each value must be a CachedValue or "
                    f"bytes, not {type(value).__name__}"
                )
        made = {_made_key(k, "set_multi"): self._in(v) for k, v in mapping.items()}
        if made:
            self._cache.set_many(made, ttl=self.expiration_time)

    def delete(self, key: KeyType) -> None:
        """Removes ``key`` from every process of the host (absent: nothing happens).

        >>> b = ZigguratBackend({"name": "doc-dogpile-del", "size": "8MiB"})
        >>> b.set("k", b"v"); b.delete("k"); b.delete("k"); b.get("k")
        <dogpile.cache.api.NoValue object>
        >>> b.cache.unlink()
        """
        self._cache.delete(_made_key(key, "delete"))

    def delete_multi(self, keys: Iterable[KeyType]) -> None:
        """``delete`` of each key.

        >>> b = ZigguratBackend({"name": "doc-dogpile-delm", "size": "8MiB"})
        >>> b.set("k", b"v"); b.delete_multi(["k", "x"]); b.get("k")
        <dogpile.cache.api.NoValue object>
        >>> b.cache.unlink()
        """
        self._cache.delete_many([_made_key(k, "delete_multi") for k in keys])
