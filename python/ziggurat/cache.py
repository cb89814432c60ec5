"""``Cache``: the multi-level cache applications use.

>>> cache = Cache("doc-cache", size="8MiB", ttl=60)
>>> cache.fetch("answer", lambda: 42)
42
>>> cache.get("answer")
42
>>> cache.unlink()

A subclass of the native cache, whose methods it serves as they are (``binding``); what
differs by mode is a mixin chosen once (``factory``; ``closed.Closed`` on ``close()``).
What every mode shares sits below, in ``state.CacheState`` (the attributes, the hooks of a
mode) and ``access.CacheAccess`` (the reads and writes written in Python): the modes and
helpers are written against those, and this module only assembles them.
"""

from __future__ import annotations

import inspect
from collections.abc import Callable, Iterable
from typing import Any

from ziggurat._native import MutationError
from ziggurat.access import CacheAccess
from ziggurat.binding import install_native, native_method, variant
from ziggurat.closed import Closed
from ziggurat.decorator import F, TagsArg, cached
from ziggurat.factory import build
from ziggurat.host import Host
from ziggurat.loader import LoadTimeout
from ziggurat.namespace import Namespace
from ziggurat.options import CacheOptions
from ziggurat.serializers import Serializer

__all__ = ["Cache", "LoadTimeout", "MutationError", "Namespace"]

#: The examples of the native methods' documentation (``native_method``), run by doctest.
__test__: dict[str, str] = {}


class Cache(CacheAccess):
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
        version: int | str | None = None,
        degraded: str = "passthrough",
        degraded_ttl: float = 1.0,
        group: str | int | None = None,
        redis: object = None,
        secret: str | bytes | list[str | bytes] | None = None,
        redis_timeout: float = 0.1,
        stream_length: int = 100_000,
        cluster_single_flight: bool = False,
        huge_pages: str = "auto",
    ) -> None:
        pass  # the one signature of Cache(): __new__ binds the arguments to it

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

    # -- namespaces, lifecycle ---------------------------------------------------------------

    def namespace(self, name: str) -> Namespace:
        """A view whose keys are prefixed with ``name`` and which can be cleared alone.

        >>> c = Cache("doc-ns", size="8MiB"); posts = c.namespace("posts")
        >>> posts.set("1", "hello"); posts.get("1")
        'hello'
        >>> posts.clear(); posts.get("1")
        >>> c.unlink()
        """
        return Namespace.of(self, name)

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
