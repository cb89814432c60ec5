"""``ZigguratCache``: a Flask-Caching backend on a ziggurat ``Cache``.

In the Flask app's configuration::

    app.config.update(
        CACHE_TYPE="ziggurat.contrib.flask.ZigguratCache",
        CACHE_ZIGGURAT_NAME="myapp",        # the ziggurat cache's name (default "flask")
        CACHE_DEFAULT_TIMEOUT=300,          # 0: never expires
        CACHE_KEY_PREFIX="myapp_",          # prepended to every key; clear() clears it only
        CACHE_OPTIONS={"size": "256MiB", "l1_items": 50_000},
    )
    cache = flask_caching.Cache(app)

``CACHE_OPTIONS`` takes ``ziggurat.Cache``'s keyword options except ``ttl``
(``CACHE_DEFAULT_TIMEOUT`` is the default timeout). Every app and ``flask_caching.Cache`` of
a process naming the same cache and options uses one ``Cache``; every process of the host
naming the same cache (and ``directory``) shares its entries.

>>> backend = ZigguratCache("doc-flask", options={"size": "8MiB"})
>>> backend.set("greeting", {"text": "hello"}, timeout=60)
True
>>> backend.get("greeting")
{'text': 'hello'}
>>> backend.cache.unlink()
"""

from __future__ import annotations

import datetime as dt
import math
import pickle
from typing import Any

from flask import Flask
from flask_caching.backends.base import BaseCache

from ziggurat import Cache, LockTimeout
from ziggurat.contrib.shared import (
    CACHE_OPTIONS,
    MAX_KEY,
    MAX_TTL,
    fitting_key,
    shared_cache,
    with_fresh_objects,
)

__all__ = ["ZigguratCache"]

# Options Flask-Caching passes to every backend's factory besides CACHE_OPTIONS.
_FLASK_OPTIONS = frozenset({"default_timeout", "ignore_delete_many_errors"})
_MISSING: Any = object()


class ZigguratCache(BaseCache):
    """A Flask-Caching backend storing in a ziggurat ``Cache`` (per-process L1 over the
    host's shared-memory L2): a write in any worker is seen by every worker of the host.

    Flask-Caching's semantics: ``timeout=None`` is the default timeout, ``0`` never
    expires, a negative timeout stores nothing (and deletes the key); ``add`` and
    ``inc``/``dec`` are atomic across the host's processes; ``key_prefix`` is prepended to
    every key and ``clear()`` voids only that prefix's entries (the whole cache when the
    prefix is empty).

    >>> backend = ZigguratCache("doc-flask-cls", key_prefix="p_", options={"size": "8MiB"})
    >>> backend.add("hits", 0), backend.inc("hits"), backend.dec("hits", 5)
    (True, 1, -4)
    >>> backend.cache.get("p_hits")
    -4
    >>> backend.cache.unlink()
    """

    def __init__(
        self,
        name: str = "flask",
        default_timeout: int | float | dt.timedelta = 300,
        key_prefix: str = "",
        ignore_delete_many_errors: bool = False,
        options: dict[str, Any] | None = None,
    ) -> None:
        default = self._seconds(default_timeout, "", "default_timeout")
        if default < 0:
            raise ValueError(
                f"ZigguratCache(): default_timeout must be >= 0 seconds (0: never expires), "
                f"got {default_timeout!r}"
            )
        # Whole seconds, as Flask-Caching rounds them (a fraction rounds up, never to 0).
        super().__init__(
            default_timeout=math.ceil(default),
            ignore_delete_many_errors=ignore_delete_many_errors,
        )
        if not isinstance(name, str) or not name:
            raise ValueError(f"ZigguratCache(): name must be a non-empty str, got {name!r}")
        if not isinstance(key_prefix, str):
            raise TypeError(
                f"ZigguratCache(): key_prefix must be a str, not {type(key_prefix).__name__}"
            )
        options = dict(options or {})
        if "ttl" in options:
            raise ValueError(
                "ZigguratCache(): options must not set 'ttl'; default_timeout "
                "(CACHE_DEFAULT_TIMEOUT) is the default timeout"
            )
        unknown = sorted(set(options) - CACHE_OPTIONS)
        if unknown:
            raise ValueError(
                f"ZigguratCache(): unknown options {', '.join(map(repr, unknown))}; "
                f"CACHE_OPTIONS takes ziggurat.Cache's options: "
                f"{', '.join(sorted(CACHE_OPTIONS))}"
            )
        self.key_prefix = key_prefix
        # Entries written under a prefix carry a hidden tag, so clear() voids that prefix
        # alone, in every process at once, as the Redis backend clears its prefix only.
        self._tags: tuple[str, ...] = ("\x00flask:" + key_prefix,) if key_prefix else ()
        self._cache = shared_cache(
            name, with_fresh_objects(options), lambda m: ValueError(f"ZigguratCache(): {m}")
        )

    @classmethod
    def factory(
        cls, app: Flask, config: dict[str, Any], args: list[Any], kwargs: dict[str, Any]
    ) -> ZigguratCache:
        """Builds the backend from a Flask app's configuration; Flask-Caching calls it for
        ``CACHE_TYPE = "ziggurat.contrib.flask.ZigguratCache"``. ``kwargs`` holds
        ``default_timeout``, ``ignore_delete_many_errors`` and the items of
        ``CACHE_OPTIONS``, which go to ``ziggurat.Cache``.

        >>> from flask import Flask
        >>> backend = ZigguratCache.factory(
        ...     Flask("doc"), {"CACHE_ZIGGURAT_NAME": "doc-flask-factory"}, [],
        ...     {"default_timeout": 0, "size": "8MiB"})
        >>> backend.default_timeout, backend.cache.name
        (0, 'doc-flask-factory')
        >>> backend.cache.unlink()
        """
        if args:
            raise ValueError(
                "ZigguratCache.factory(): CACHE_ARGS is not used; name the cache with "
                f"CACHE_ZIGGURAT_NAME and give its options in CACHE_OPTIONS, got {args!r}"
            )
        options = {k: v for k, v in kwargs.items() if k not in _FLASK_OPTIONS}
        return cls(
            name=config.get("CACHE_ZIGGURAT_NAME") or "flask",
            default_timeout=kwargs.get("default_timeout", 300),
            key_prefix=config.get("CACHE_KEY_PREFIX") or "",
            ignore_delete_many_errors=bool(kwargs.get("ignore_delete_many_errors", False)),
            options=options,
        )

    @property
    def cache(self) -> Cache:
        """The ``ziggurat.Cache`` underneath, for what Flask-Caching's API lacks
        (``stats()``, ``fetch``, tags). Its keys carry the prefix.

        >>> backend = ZigguratCache("doc-flask-prop", key_prefix="x_", options={"size": "8MiB"})
        >>> backend.set("k", 1)
        True
        >>> backend.cache.get("x_k")
        1
        >>> backend.cache.unlink()
        """
        return self._cache

    # -- keys and timeouts ------------------------------------------------------------------

    def _key(self, key: Any, method: str) -> str | bytes:
        if isinstance(key, str):
            text = self.key_prefix + key
            made: str | bytes = text
            raw = text.encode("utf-8", "surrogatepass")
        elif isinstance(key, bytes):
            made = raw = self.key_prefix.encode("utf-8", "surrogatepass") + key
        else:
            raise TypeError(
                f"ZigguratCache.{method}(): key must be str or bytes, not {type(key).__name__}"
            )
        if not key:
            raise ValueError(f"ZigguratCache.{method}(): key must not be empty")
        # A key the segment cannot hold (over 4096 bytes) is replaced by a digest of it, so
        # long memoize keys work, with the same meaning.
        if len(raw) > MAX_KEY:
            return fitting_key(raw)
        return made

    @staticmethod
    def _seconds(timeout: Any, method: str, what: str = "timeout") -> float:
        where = f"ZigguratCache.{method}()" if method else "ZigguratCache()"
        if isinstance(timeout, dt.timedelta):
            return timeout.total_seconds()
        if isinstance(timeout, bool) or not isinstance(timeout, (int, float)):
            # A call's timeout may be None (the default timeout); the default may not.
            accepted = ", a datetime.timedelta or None" if method else " or a datetime.timedelta"
            raise TypeError(
                f"{where}: {what} must be a number of seconds{accepted}, "
                f"not {type(timeout).__name__}"
            )
        if math.isnan(timeout):
            raise ValueError(f"{where}: {what} must be a number, got nan")
        return timeout

    def _ttl(self, timeout: Any, method: str) -> float | None:
        """The Cache TTL for a Flask-Caching timeout; ``None`` when nothing is stored."""
        seconds = self._seconds(self.default_timeout if timeout is None else timeout, method)
        if seconds == 0 or seconds > MAX_TTL:
            return math.inf
        if seconds < 0:
            return None
        return float(seconds)

    @staticmethod
    def _delta(delta: Any, method: str) -> int:
        if isinstance(delta, bool) or not isinstance(delta, int):
            raise TypeError(
                f"ZigguratCache.{method}(): delta must be an int, not {type(delta).__name__}"
            )
        return delta

    # -- reads ------------------------------------------------------------------------------

    def get(self, key: str) -> Any:
        """The value of ``key``, or ``None`` when absent.

        >>> backend = ZigguratCache("doc-flask-get", options={"size": "8MiB"})
        >>> backend.set("k", [1, 2]), backend.get("k"), backend.get("other")
        (True, [1, 2], None)
        >>> backend.cache.unlink()
        """
        return self._cache.get(self._key(key, "get"))

    def get_many(self, *keys: str) -> list[Any]:
        """The values of ``keys``, in order, ``None`` for each absent one.

        >>> backend = ZigguratCache("doc-flask-gm", options={"size": "8MiB"})
        >>> backend.set("a", 1)
        True
        >>> backend.get_many("a", "b")
        [1, None]
        >>> backend.cache.unlink()
        """
        made = [self._key(k, "get_many") for k in keys]
        found = self._cache.get_many(made)
        return [found.get(k) for k in made]

    def has(self, key: str) -> bool:
        """Whether ``key`` holds a fresh value (a stored ``None`` counts).

        >>> backend = ZigguratCache("doc-flask-has", options={"size": "8MiB"})
        >>> backend.set("k", None)
        True
        >>> backend.has("k"), backend.has("other")
        (True, False)
        >>> backend.cache.unlink()
        """
        return self._key(key, "has") in self._cache

    # -- writes -----------------------------------------------------------------------------

    def _store(self, method: str, key: str | bytes, value: Any, ttl: float, add: bool) -> bool:
        try:
            if add:
                return self._cache.add(key, value, ttl=ttl, tags=self._tags)
            self._cache.set(key, value, ttl=ttl, tags=self._tags)
            return True
        except LockTimeout:
            # Flask-Caching's contract: False for a backend error (the Cache logs it).
            return False
        except TypeError as e:
            # Flask-Caching raises the pickling error itself for an unpicklable value.
            if isinstance(e.__cause__, pickle.PickleError):
                raise pickle.PicklingError(
                    f"ZigguratCache.{method}(): cannot pickle the value of {key!r}: {e.__cause__}"
                ) from e
            raise

    def set(self, key: str, value: Any, timeout: int | dt.timedelta | None = None) -> bool:
        """Stores ``value`` for ``timeout`` seconds (``None``: the default timeout; ``0``:
        never expires; negative: deletes the key instead). Returns ``False`` when the write
        could not be made (its shard lock was not obtained in ``lock_timeout``).

        >>> backend = ZigguratCache("doc-flask-set", options={"size": "8MiB"})
        >>> backend.set("k", 1, timeout=0), backend.get("k")
        (True, 1)
        >>> backend.cache.unlink()
        """
        k = self._key(key, "set")
        ttl = self._ttl(timeout, "set")
        if ttl is None:
            self._cache.delete(k)
            return True
        return self._store("set", k, value, ttl, add=False)

    def add(self, key: str, value: Any, timeout: int | dt.timedelta | None = None) -> bool:
        """Stores ``value`` only if ``key`` is absent; returns whether it did. Of several
        processes of the host adding one key at once, exactly one gets ``True``. With a
        negative timeout nothing is stored and the result says whether the key was absent.

        >>> backend = ZigguratCache("doc-flask-add", options={"size": "8MiB"})
        >>> backend.add("k", 1), backend.add("k", 2), backend.get("k")
        (True, False, 1)
        >>> backend.cache.unlink()
        """
        k = self._key(key, "add")
        ttl = self._ttl(timeout, "add")
        if ttl is None:
            return k not in self._cache
        return self._store("add", k, value, ttl, add=True)

    def set_many(
        self, mapping: dict[str, Any], timeout: int | dt.timedelta | None = None
    ) -> list[Any]:
        """Stores every item of ``mapping``; returns the keys stored (all of them, unless a
        shard lock was not obtained in ``lock_timeout``).

        >>> backend = ZigguratCache("doc-flask-sm", options={"size": "8MiB"})
        >>> backend.set_many({"a": 1, "b": 2}), backend.get("b")
        (['a', 'b'], 2)
        >>> backend.cache.unlink()
        """
        if not hasattr(mapping, "items"):
            raise TypeError(
                f"ZigguratCache.set_many(): mapping must be a mapping, not {type(mapping).__name__}"
            )
        items = [(self._key(k, "set_many"), k, v) for k, v in mapping.items()]
        ttl = self._ttl(timeout, "set_many")
        if ttl is None:
            self._cache.delete_many([made for made, _, _ in items])
            return [k for _, k, _ in items]
        return [k for made, k, v in items if self._store("set_many", made, v, ttl, add=False)]

    def delete(self, key: str) -> bool:
        """Removes ``key`` from every process of the host; returns whether it was present.

        >>> backend = ZigguratCache("doc-flask-del", options={"size": "8MiB"})
        >>> backend.set("k", 1)
        True
        >>> backend.delete("k"), backend.delete("k")
        (True, False)
        >>> backend.cache.unlink()
        """
        return self._cache.delete(self._key(key, "delete"))

    def delete_many(self, *keys: str) -> list[Any]:
        """Removes every key of ``keys``; returns those now absent (every key, unless a
        shard lock was not obtained in ``lock_timeout``: then ``RuntimeError`` is raised,
        or with ``ignore_delete_many_errors`` the key is left out).

        >>> backend = ZigguratCache("doc-flask-dm", options={"size": "8MiB"})
        >>> backend.set_many({"a": 1})
        ['a']
        >>> backend.delete_many("a", "b"), backend.get("a")
        (['a', 'b'], None)
        >>> backend.cache.unlink()
        """
        made = [(self._key(k, "delete_many"), k) for k in keys]
        deleted, failed = [], []
        for k, key in made:
            try:
                self._cache.delete(k)
                deleted.append(key)
            except LockTimeout:
                failed.append(key)
        if failed and not self.ignore_delete_many_errors:
            raise RuntimeError(f"ZigguratCache.delete_many(): failed to delete keys: {failed}")
        return deleted

    def inc(self, key: str, delta: int = 1) -> int | None:
        """Adds ``delta`` to the integer under ``key`` and returns the result, atomically
        for every process of the host; an absent key starts from 0 (with the default
        timeout). Returns ``None`` when the write could not be made (its shard lock was not
        obtained in ``lock_timeout``). Raises ``TypeError`` when the value is not an int in
        the signed 64-bit range, ``OverflowError`` when the result leaves that range.

        >>> backend = ZigguratCache("doc-flask-inc", options={"size": "8MiB"})
        >>> backend.inc("n"), backend.inc("n", 41), backend.get("n")
        (1, 42, 42)
        >>> backend.cache.unlink()
        """
        return self._incr(key, self._delta(delta, "inc"), "inc")

    def dec(self, key: str, delta: int = 1) -> int | None:
        """``inc`` by ``-delta``: an absent key starts from 0.

        >>> backend = ZigguratCache("doc-flask-dec", options={"size": "8MiB"})
        >>> backend.dec("n"), backend.dec("n", 2)
        (-1, -3)
        >>> backend.cache.unlink()
        """
        return self._incr(key, -self._delta(delta, "dec"), "dec")

    def _incr(self, key: str, delta: int, method: str) -> int | None:
        k = self._key(key, method)
        ttl = self._ttl(None, method) or math.inf
        try:
            if k not in self._cache:
                # Created through `add` so the counter has the default timeout and carries
                # the prefix's tag; a lost race only means another process created it first.
                self._cache.add(k, 0, ttl=ttl, tags=self._tags)
            return self._cache.incr(k, delta, default=0)
        except LockTimeout:
            # Flask-Caching's contract: None for a backend error (the Cache logs it).
            return None
        except TypeError:
            raise TypeError(
                f"ZigguratCache.{method}(): the value of {key!r} is not an integer; only "
                f"values stored as an int (or created by inc/dec) can be changed"
            ) from None
        except OverflowError:
            raise OverflowError(
                f"ZigguratCache.{method}(): the counter {key!r} would leave the signed 64-bit range"
            ) from None

    def clear(self) -> bool:
        """Voids every entry of this backend's ``key_prefix`` in every process of the host
        (with an empty prefix: the whole cache, every prefix included). Returns ``True``.

        >>> backend = ZigguratCache("doc-flask-clear", key_prefix="a_", options={"size": "8MiB"})
        >>> backend.cache.set("other", 1); backend.set("k", 1)
        True
        >>> backend.clear(), backend.get("k"), backend.cache.get("other")
        (True, None, 1)
        >>> backend.cache.unlink()
        """
        if self._tags:
            self._cache.invalidate_tags(*self._tags)
        else:
            self._cache.clear()
        return True

    def close(self) -> None:
        """Does nothing: the ``Cache`` stays open for the process's next requests, and
        other backends of the process may share it.

        >>> backend = ZigguratCache("doc-flask-close", options={"size": "8MiB"})
        >>> backend.close(); backend.set("k", 1)
        True
        >>> backend.cache.unlink()
        """
