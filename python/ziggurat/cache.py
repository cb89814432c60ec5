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
import grp
import inspect
import logging
import math
import re
import threading
import warnings
from collections.abc import Callable, Iterable, Mapping
from typing import Any, TypeVar, cast

from ziggurat import _native
from ziggurat._native import Cache as CacheCore
from ziggurat._native import MutationError, Segment, SegmentError, ZigguratError
from ziggurat.cluster.link import Link
from ziggurat.cluster.reader import Reader
from ziggurat.cluster.signing import Signer, secrets_of
from ziggurat.cluster.tier import ClusterTier
from ziggurat.keys import call_key
from ziggurat.loader import LoaderStats, Loads, LoadTimeout, in_thread
from ziggurat.serializers import Serializer, resolve

__all__ = ["Cache", "LoadTimeout", "MutationError", "Namespace"]

log = logging.getLogger("ziggurat")

_MISS, _HIT, _NEG, _STALE = 0, 1, 2, 3
# The segment name rule, leaving room for the ".neg" suffix of the cached-miss segment.
_NAME = re.compile(r"[A-Za-z0-9_-][A-Za-z0-9._-]{0,79}")
_VERSION = re.compile(r"[A-Za-z0-9_-]{1,16}")
_DEGRADED = ("passthrough", "local", "raise")
# Marks "absent" where None is a valid cached value.
_MISSING: Any = object()
F = TypeVar("F", bound=Callable[..., Any])
TagsArg = Iterable[str] | Callable[..., Iterable[str]] | None


def _ttl(value: float | None, default: float | None, what: str, method: str) -> float | None:
    """A TTL argument by the cache's rule: seconds > 0, ``math.inf`` for never."""
    if value is None:
        return default
    if isinstance(value, bool) or not isinstance(value, (int, float)):
        raise TypeError(
            f"{method}(): {what} must be a number of seconds or None, not {type(value).__name__}"
        )
    if not (value > 0) or (value != math.inf and value > 100 * 365 * 86400):
        raise ValueError(
            f"{method}(): {what} must be a number of seconds > 0 (at most 100 years, or "
            f"math.inf for never), got {value!r}"
        )
    return float(value)


def _tags(tags: Iterable[str], method: str) -> tuple[str, ...]:
    if isinstance(tags, (str, bytes)):
        raise TypeError(f"{method}(): tags must be an iterable of str, not a single str")
    try:
        out = tuple(tags)
    except TypeError:
        raise TypeError(
            f"{method}(): tags must be an iterable of str, not {type(tags).__name__}"
        ) from None
    for t in out:
        if not isinstance(t, str):
            raise TypeError(f"{method}(): each tag must be a str, not {type(t).__name__}")
        if not t:
            raise ValueError(f"{method}(): a tag must not be empty")
    return out


# The key rule of the native methods, for the methods written here: one rule, one message.
_check_key = _native.check_key


def _cluster_args(
    redis: object, secret: object, timeout: float, stream_length: int, method: str
) -> tuple[Link | None, list[bytes] | None]:
    """The cluster tier's link and secrets, or (None, None) without ``redis``."""
    if redis is None:
        if secret is not None:
            raise ValueError(f"{method}(): secret is only used with redis=; give both or neither")
        return None, None
    if secret is None:
        raise ValueError(
            f"{method}(): secret is required with redis=: every value and event in Redis is "
            "authenticated with it (give the same secret, at least 16 bytes, on every host)"
        )
    secrets = secrets_of(secret, method)
    if (
        isinstance(timeout, bool)
        or not isinstance(timeout, (int, float))
        or not (0 < timeout <= 60)
    ):
        raise ValueError(f"{method}(): redis_timeout must be seconds in (0, 60], got {timeout!r}")
    if isinstance(stream_length, bool) or not isinstance(stream_length, int) or stream_length < 100:
        raise ValueError(f"{method}(): stream_length must be an int >= 100, got {stream_length!r}")
    return Link.of(redis, timeout=float(timeout), method=method), secrets


def _gid(group: str | int | None) -> int | None:
    """The gid of a ``group`` option: a group name or a gid."""
    if group is None:
        return None
    if isinstance(group, bool) or not isinstance(group, (str, int)):
        raise TypeError(f"Cache(): group must be a group name or a gid, not {type(group).__name__}")
    if isinstance(group, int):
        if not 0 <= group < 2**32:
            raise ValueError(f"Cache(): group must be a gid from 0 to 2**32-1, got {group}")
        return group
    try:
        return grp.getgrnam(group).gr_gid
    except KeyError:
        raise ValueError(f"Cache(): group {group!r} does not exist on this host") from None


#: Directories whose start-up notice (``Segment.directory_notice``) was given.
_NOTICED_DIRECTORIES: set[str] = set()
# The directories where a default size was fitted to the free space (said once too).
_FITTED_DIRECTORIES: set[str] = set()


def _closed(name: str) -> Callable[..., Any]:
    def closed(*_args: Any, **_kwargs: Any) -> Any:
        raise ZigguratError(f"the cache {name!r} is closed; open a new Cache to use it again")

    return closed


class Cache:
    """A cache with a per-process L1 over a per-host shared-memory L2.

    Every option, with its default and unit, is in the README's option table. The
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
        m = "Cache"
        # The cluster tier's arguments are checked first: bad input creates no file.
        link, secrets = _cluster_args(redis, secret, redis_timeout, stream_length, m)
        if not isinstance(cluster_single_flight, bool):
            raise TypeError(f"{m}(): cluster_single_flight must be True or False")
        if cluster_single_flight and redis is None:
            raise ValueError(f"{m}(): cluster_single_flight needs redis= (a cluster tier)")
        if not isinstance(name, str):
            raise TypeError(f"{m}(): name must be a str, not {type(name).__name__}")
        if not _NAME.fullmatch(name):
            raise ValueError(
                f"{m}(): name must be 1-80 characters of A-Z a-z 0-9 . _ - not starting "
                f"with '.', got {name!r}"
            )
        if isinstance(l1_items, bool) or not isinstance(l1_items, int) or l1_items < 0:
            raise ValueError(f"{m}(): l1_items must be an int >= 0, got {l1_items!r}")
        if l1_negative_items is None:
            l1_negative_items = l1_items // 10
        if not isinstance(l1_negative_items, int) or l1_negative_items < 0:
            raise ValueError(
                f"{m}(): l1_negative_items must be an int >= 0, got {l1_negative_items!r}"
            )
        default_ttl = _ttl(ttl, None, "ttl", m)
        if default_ttl is None:
            raise ValueError(f"{m}(): ttl must be a number of seconds > 0 or math.inf")
        self.ttl: float = default_ttl
        self.neg_ttl = _ttl(neg_ttl, None, "neg_ttl", m)
        self.stale_ttl = _ttl(stale_ttl, None, "stale_ttl", m)
        if not isinstance(jitter, (int, float)) or not (0.0 <= jitter < 1.0):
            raise ValueError(f"{m}(): jitter must be in [0, 1), got {jitter!r}")
        if not isinstance(refresh_ahead, (int, float)) or not (0.0 <= refresh_ahead < 1.0):
            raise ValueError(f"{m}(): refresh_ahead must be in [0, 1), got {refresh_ahead!r}")
        self.jitter = float(jitter)
        self.refresh_ahead = float(refresh_ahead)
        self.loader_timeout = _ttl(loader_timeout, None, "loader_timeout", m) or 10.0
        self.serializer = resolve(serializer)
        if copy not in ("shared", "copy", "decode"):
            raise ValueError(f"{m}(): copy must be 'shared', 'copy' or 'decode', got {copy!r}")
        if degraded not in _DEGRADED:
            raise ValueError(
                f"{m}(): degraded must be 'passthrough', 'local' or 'raise', got {degraded!r}"
            )
        self.degraded_ttl = cast(float, _ttl(degraded_ttl, None, "degraded_ttl", m))
        if version is not None and (
            isinstance(version, bool)
            or not isinstance(version, (int, str))
            or (isinstance(version, int) and version < 0)
            or not _VERSION.fullmatch(str(version))
        ):
            raise ValueError(
                f"{m}(): version must be None, an int >= 0 or 1-16 characters of "
                f"A-Z a-z 0-9 _ -, got {version!r}"
            )
        self.name = name
        self.version = version
        self.degraded_mode = degraded
        if huge_pages not in ("auto", "require", "off"):
            raise ValueError(
                f"{m}(): huge_pages must be 'auto', 'require' or 'off', got {huge_pages!r}"
            )
        # Checked before any file is made; None: the default size, fitted to the directory.
        size_bytes = None if size is None else _native.parse_size(size)
        neg_bytes = None if neg_size is None else _native.parse_size(neg_size)
        # Each version is a segment of its own: entries written by another version (an
        # older deploy, values of another shape) are never read.
        seg_name = name if version is None else f"{name}.ver-{version}"
        self.degraded_reason: str | None = None
        #: Why the segment cannot be used, as a short name (the segment error's ``cause``:
        #: missing_directory, not_writable, other_owner, no_space, damaged, incompatible,
        #: locked, io).
        self.degraded_cause: str | None = None
        self._segment: Segment | None = None
        self._neg: Segment | None = None
        seg_args: dict[str, Any] = {
            "directory": directory,
            "recreate": recreate,
            "lock_timeout": lock_timeout,
            "group": _gid(group),
            "huge_pages": huge_pages,
        }
        fit_notice: str | None = None
        try:
            # Both files or neither; the default size takes what fits the directory.
            self._segment, self._neg, fit_notice = _native.open_pair(
                seg_name, size_bytes, neg_bytes, avg_item_size=avg_item_size, **seg_args
            )
        except (ZigguratError, OSError) as e:
            if self._segment is not None:
                self._segment.close()
            self._segment = self._neg = None
            cause = getattr(e, "cause", None) or "io"
            if degraded == "raise":
                err = SegmentError(f"{m}({name!r}): the shared segment cannot be used: {e}")
                err.cause = cause  # type: ignore[attr-defined]
                raise err from e
            self.degraded_reason = str(e)
            self.degraded_cause = cause
            msg = f"ziggurat cache {name!r} runs without its shared segment ({e}); " + (
                "degraded='passthrough': nothing is cached until the cause is fixed "
                "and the process restarts"
                if degraded == "passthrough"
                else f"degraded='local': each process caches alone, entries live at "
                f"most degraded_ttl={self.degraded_ttl:g} s"
            )
            log.warning(msg)
            warnings.warn(msg, RuntimeWarning, stacklevel=2)
        if fit_notice is not None and directory not in _FITTED_DIRECTORIES:
            _FITTED_DIRECTORIES.add(directory)
            log.warning(fit_notice)
            warnings.warn(fit_notice, RuntimeWarning, stacklevel=2)
        notice = self._segment.directory_notice if self._segment is not None else None
        if notice is not None and directory not in _NOTICED_DIRECTORIES:
            # Once per directory and process: every cache there shares the risk.
            _NOTICED_DIRECTORIES.add(directory)
            msg = f"ziggurat cache {name!r}: {notice}"
            log.warning(msg)
            warnings.warn(msg, RuntimeWarning, stacklevel=2)
        if self._segment is not None and self._segment.size != self._segment.requested_size:
            msg = (
                f"ziggurat cache {name!r}: the segment at {self._segment.path} was created "
                f"with other parameters (a {self._segment.size}-byte file, where size="
                f"{size_bytes or 'the default'} and avg_item_size={avg_item_size} make a "
                f"{self._segment.requested_size}-byte one); it is used as it is, and "
                "stats() shows its real size. To use the new parameters, remove the old "
                "files once no process uses them (Cache.unlink()), or open the cache under "
                "a new version="
            )
            log.warning(msg)
            warnings.warn(msg, RuntimeWarning, stacklevel=2)
        passthrough = self._segment is None and degraded == "passthrough"
        self._loads = Loads(name, self.loader_timeout)
        self._core = CacheCore(
            self._segment,
            self._neg,
            0 if passthrough else l1_items,
            0 if passthrough else l1_negative_items,
            self.serializer.loads,
            self.serializer.dumps,
            (self.ttl, self.neg_ttl, self.stale_ttl, self.jitter, self.loader_timeout),
            copy,
            debug,
            refresh=self._loads.refresh,
            local=self._loads.local,
            refresh_ahead=self.refresh_ahead,
            on_write_error=self._write_failed,
            codec=getattr(self.serializer, "codec", None),
            degraded_ttl=self.degraded_ttl if self._segment is None else None,
        )
        self.copy = copy
        self.debug = debug
        self.closed = False
        # The hot paths: `cache.get`, `cache.set` and an L1 hit of `cache.fetch` are
        # native methods called directly, no Python frame.
        self.get = self._core.bound_get()  # type: ignore[method-assign]
        self.fetch = self._core.bound_fetch()  # type: ignore[method-assign]
        self.set = self._core.set  # type: ignore[method-assign]
        if self._segment is not None:
            # With a segment, incr is one native call too (degraded, it is per process).
            self.incr = self._core.incr  # type: ignore[method-assign]
            self.add = self._core.add  # type: ignore[method-assign]
            self.touch = self._core.touch  # type: ignore[method-assign]
        self._loads.core = self._core
        self.loader_stats = LoaderStats(self._core)
        self._tier: ClusterTier | None = None
        self._reader: Reader | None = None
        if link is not None and secrets is not None:
            self._join_cluster(link, secrets, seg_name, stream_length, cluster_single_flight)
        self._write_errors = 0
        self._store_failures = 0
        self._logged: set[tuple[str, Any]] = set()
        self._local = threading.Lock()

    def _join_cluster(
        self,
        link: Link,
        secrets: list[bytes],
        seg_name: str,
        stream_length: int,
        single_flight: bool,
    ) -> None:
        if self._segment is None:
            log.warning(
                "ziggurat cache %r: no shared segment, so no cluster tier either (%s)",
                self.name,
                self.degraded_reason,
            )
            return
        tier = ClusterTier(
            self._core,
            seg_name,
            link,
            Signer(seg_name, secrets),
            self.serializer.loads,
            self.serializer.dumps,
            stream_length=stream_length,
            tombstone_ttl=min(max(self.loader_timeout, 1.0), 60.0),
            loader_timeout=self.loader_timeout,
            single_flight=bool(single_flight),
        )
        self._core.join_below(tier.below, tier.above)
        self._tier = tier
        self._loads.off_loop = True
        # Writes go to Redis first, then to this host: Python methods (a network round
        # trip dwarfs the frame); reads stay native, asking Redis only after an L2 miss.
        self.set = self._cluster_set  # type: ignore[method-assign]
        self.add = self._cluster_add  # type: ignore[method-assign]
        self.incr = self._cluster_incr  # type: ignore[method-assign]
        self.touch = self._cluster_touch  # type: ignore[method-assign]
        self._reader = Reader(tier)
        self._reader.start()

    def _cluster_set(
        self, key: str | bytes, value: Any, *, ttl: float | None = None, tags: Iterable[str] = ()
    ) -> None:
        m = "Cache.set"
        self._check_open()
        _check_key(key, m)
        t = cast(float, _ttl(ttl, self.ttl, "ttl", m))
        tg = _tags(tags, m)
        assert self._tier is not None
        try:
            self._tier.set(key, value, t, tg)
        except TypeError as e:
            raise TypeError(f"{m}(): cannot serialize the value for this cache: {e}") from e

    def _cluster_add(
        self, key: str | bytes, value: Any, *, ttl: float | None = None, tags: Iterable[str] = ()
    ) -> bool:
        m = "Cache.add"
        self._check_open()
        _check_key(key, m)
        t = cast(float, _ttl(ttl, self.ttl, "ttl", m))
        tg = _tags(tags, m)
        assert self._tier is not None
        return self._tier.add(key, value, t, tg)

    def _cluster_incr(
        self,
        key: str | bytes,
        delta: int = 1,
        *,
        default: int | None = None,
        tags: Iterable[str] = (),
    ) -> int:
        m = "Cache.incr"
        self._check_open()
        _check_key(key, m)
        for what, v in (("delta", delta), ("default", default)):
            if v is None and what == "default":
                continue
            if isinstance(v, bool) or not isinstance(v, int):
                raise TypeError(f"{m}(): {what} must be an int, not {type(v).__name__}")
            if not -(2**53) < v < 2**53:
                raise OverflowError(
                    f"{m}(): {what} must be within ±2**53 with a cluster tier (Redis "
                    "scripts count exactly in that range)"
                )
        tg = _tags(tags, m)
        assert self._tier is not None
        return self._tier.incr(key, delta, default, self.ttl, tg)

    def _cluster_touch(self, key: str | bytes, ttl: float | None = None) -> bool:
        m = "Cache.touch"
        self._check_open()
        _check_key(key, m)
        t = cast(float, _ttl(ttl, self.ttl, "ttl", m))
        assert self._tier is not None
        return self._tier.touch(key, t)

    # -- reads ------------------------------------------------------------------------------

    def get(self, key: str | bytes, default: Any = None) -> Any:  # replaced per instance
        """The cached value of ``key``, or ``default``.

        Raises ``TypeError``/``ValueError`` for a key that is not 1 to 4096 bytes of str
        or bytes, and ``ZigguratError`` once the cache is closed.

        >>> c = Cache("doc-get", size="8MiB"); c.get("nope", 0)
        0
        >>> c.unlink()
        """
        return self._core.get(key, default)

    def __contains__(self, key: str | bytes) -> bool:
        """Whether ``key`` holds a fresh value (a cached miss does not count).

        >>> c = Cache("doc-in", size="8MiB"); c.set("a", 1); "a" in c, "b" in c
        (True, False)
        >>> c.unlink()
        """
        return self.get(key, _MISSING) is not _MISSING

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
        if self._tier is None:
            return self.get(key, default)
        self._check_open()
        v = self._core.get_local(key, default, _MISSING)
        if v is _MISSING:
            return await in_thread(self._core.get_below, key, default)
        return v

    async def aget_many(self, keys: Iterable[str | bytes]) -> dict[str | bytes, Any]:
        """``get_many`` for asyncio code (Redis read in the default executor, as ``aget``).

        >>> import asyncio
        >>> c = Cache("doc-agm", size="8MiB"); c.set("a", 1); asyncio.run(c.aget_many(["a"]))
        {'a': 1}
        >>> c.unlink()
        """
        if self._tier is None:
            return self.get_many(keys)
        keys = self._key_list(keys, "Cache.get_many")
        out: dict[str | bytes, Any] = {}
        for k in keys:
            v = await self.aget(k, _MISSING)
            if v is not _MISSING:
                out[k] = v
        return out

    # -- writes -----------------------------------------------------------------------------

    def _write_failed(self, what: str, key: Any, e: BaseException) -> None:
        # Called by the native core too. A failed `set` is raised to its caller as well; a
        # failed store of a loaded value is not (the value is still returned). Each kind
        # of failure is logged once per key, so a hot key cannot flood the log.
        if what == "decode":
            tag = "undecodable value"
        elif what == "stale":
            tag = "loader failed, stale value served instead"
        else:
            self._segment_failure()
            self._write_errors += 1
            if what == "store":
                self._store_failures += 1
            tag = f"failed {what}"
        if len(self._logged) < 10_000 and (what, key) not in self._logged:
            self._logged.add((what, key))
            log.warning("ziggurat cache %r: %s of key %r: %s", self.name, tag, key, e)

    def set(
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
        # Replaced per instance by the native method (no Python frame); it checks key,
        # ttl and tags before writing anything, and reports a failed write like this.
        self._core.set(key, value, ttl=ttl, tags=tags)

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
        m = "Cache.set_many"
        _ttl(ttl, self.ttl, "ttl", m)
        tg = _tags(tags, m)
        if not isinstance(mapping, Mapping):
            raise TypeError(f"{m}(): mapping must be a mapping, not {type(mapping).__name__}")
        items = list(mapping.items())
        # Check everything before writing anything: a bad key or a value that cannot be
        # encoded leaves the cache unchanged.
        for k, v in items:
            _check_key(k, m)
            try:
                self.serializer.dumps(v)
            except Exception as e:
                raise TypeError(f"{m}(): cannot serialize the value of {k!r}: {e}") from e
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
        if self._tier is not None:
            await in_thread(functools.partial(self.set, key, value, ttl=ttl, tags=tags))
            return
        self.set(key, value, ttl=ttl, tags=tags)

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
        if self._tier is not None:
            await in_thread(functools.partial(self.set_many, mapping, ttl=ttl, tags=tags))
            return
        self.set_many(mapping, ttl=ttl, tags=tags)

    def add(
        self, key: str | bytes, value: Any, *, ttl: float | None = None, tags: Iterable[str] = ()
    ) -> bool:
        """Stores ``value`` only if ``key`` holds no fresh value; returns whether it did.

        Of several processes of the host adding one key at once, exactly one gets True.

        >>> c = Cache("doc-add", size="8MiB"); c.add("k", 1), c.add("k", 2), c.get("k")
        (True, False, 1)
        >>> c.unlink()
        """
        self._check_open()
        if self._segment is None:
            _check_key(key, "Cache.add")
            with self._local:
                if self.get(key, _MISSING) is not _MISSING:
                    return False
                self.set(key, value, ttl=ttl, tags=tags)
                return True
        return bool(self._core.add(key, value, ttl=ttl, tags=tags))

    def incr(
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
        existing counter keeps its own), ``TypeError`` when
        the value is not an int, ``OverflowError`` outside the signed 64-bit range.

        >>> c = Cache("doc-incr", size="8MiB"); c.set("n", 1); c.incr("n"), c.incr("n", 5)
        (2, 7)
        >>> c.incr("fresh", default=0)
        1
        >>> c.unlink()
        """
        self._check_open()
        m = "Cache.incr"
        for what, v in (("delta", delta), ("default", default)):
            if v is None and what == "default":
                continue
            if isinstance(v, bool) or not isinstance(v, int):
                raise TypeError(f"{m}(): {what} must be an int, not {type(v).__name__}")
            if not -(2**63) <= v < 2**63:
                raise OverflowError(f"{m}(): {what} must fit in a signed 64-bit integer")
        tg = _tags(tags, m)
        if self._segment is None:
            return self._incr_local(key, delta, default, tg)
        return self._core.incr(key, delta, default=default, tags=tg)

    def decr(self, key: str | bytes, delta: int = 1, *, default: int | None = None) -> int:
        """``incr`` by ``-delta``.

        >>> c = Cache("doc-decr", size="8MiB"); c.set("n", 5); c.decr("n", 2)
        3
        >>> c.unlink()
        """
        if isinstance(delta, bool) or not isinstance(delta, int):
            raise TypeError(f"Cache.decr(): delta must be an int, not {type(delta).__name__}")
        return self.incr(key, -delta, default=default)

    def _incr_local(
        self, key: str | bytes, delta: int, default: int | None, tags: tuple[str, ...]
    ) -> int:
        """``incr`` without a segment: within this process only, as the degraded mode says."""
        _check_key(key, "Cache.incr")
        with self._local:
            cur = self.get(key, _MISSING)
            created = cur is _MISSING
            if created:
                if default is None:
                    raise KeyError(key)
                cur = default
            if isinstance(cur, bool) or not isinstance(cur, int):
                raise TypeError(f"Cache.incr(): the value of {key!r} is not an integer")
            n = cur + delta
            if not -(2**63) <= n < 2**63:
                raise OverflowError(f"Cache.incr(): the counter {key!r} would leave 64 bits")
            self.set(key, n, tags=tags if created else ())
            return n

    def touch(self, key: str | bytes, ttl: float | None = None) -> bool:
        """Gives the value under ``key`` a new TTL from now (default: the cache's);
        returns whether the key held a fresh value.

        >>> c = Cache("doc-touch", size="8MiB"); c.set("k", 1, ttl=1); c.touch("k", 60)
        True
        >>> c.unlink()
        """
        self._check_open()
        t = _ttl(ttl, self.ttl, "ttl", "Cache.touch")
        if self._segment is None:
            _check_key(key, "Cache.touch")
            with self._local:
                cur = self.get(key, _MISSING)
                if cur is _MISSING:
                    return False
                self.set(key, cur, ttl=t)
                return True
        return bool(self._core.touch(key, t))

    def delete(self, key: str | bytes) -> bool:
        """Removes ``key`` from every tier on this host; returns whether L2 held it.

        >>> c = Cache("doc-del", size="8MiB"); c.set("k", 1); c.delete("k"), c.get("k")
        (True, None)
        >>> c.unlink()
        """
        self._check_open()
        try:
            if self._tier is not None:
                _check_key(key, "Cache.delete")
                return self._tier.delete(key)
            return bool(self._core.delete(key))
        except ZigguratError as e:
            self._write_failed("delete", key, e)
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
        if isinstance(keys, (str, bytes)):
            raise TypeError(f"{method}(): keys must be an iterable of keys, not a single key")
        try:
            out = list(keys)
        except TypeError:
            raise TypeError(
                f"{method}(): keys must be an iterable of keys, not {type(keys).__name__}"
            ) from None
        for k in out:
            _check_key(k, method)
        return out

    def invalidate_tags(self, *tags: str) -> None:
        """Voids every entry carrying any of ``tags``, in every process, at once.

        >>> c = Cache("doc-tags", size="8MiB"); c.set("u1", 1, tags=["users"])
        >>> c.invalidate_tags("users"); c.get("u1")
        >>> c.unlink()
        """
        self._check_open()
        tg = _tags(tags, "Cache.invalidate_tags")
        if self._tier is not None:
            self._tier.invalidate_tags(tg)
            return
        self._core.invalidate_tags(tg)

    def clear(self) -> None:
        """Empties the cache on this host (every process's L1 stops validating at once).

        >>> c = Cache("doc-clear", size="8MiB"); c.set("k", 1); c.clear(); c.get("k")
        >>> c.unlink()
        """
        self._check_open()
        try:
            if self._tier is not None:
                self._tier.clear()
                return
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
        return self._core.fetch(
            key, loader, ttl=ttl, tags=tags, neg_ttl=neg_ttl, stale_ttl=stale_ttl
        )

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
        m = "Cache.cached"
        _ttl(ttl, self.ttl, "ttl", m)
        _ttl(neg_ttl, None, "neg_ttl", m)
        _ttl(stale_ttl, None, "stale_ttl", m)
        if key is not None and not callable(key):
            raise TypeError(f"{m}(): key must be a function of the arguments returning a str")
        if tags is not None and not callable(tags):
            tags = _tags(tags, m)

        def decorate(fn: F) -> F:
            prefix = f"{fn.__module__}.{fn.__qualname__}:"

            def make_key(args: tuple[Any, ...], kwargs: dict[str, Any]) -> str:
                if key is not None:
                    k = key(*args, **kwargs)
                    if not isinstance(k, str):
                        raise TypeError(f"{m}(): key function returned {type(k).__name__}, not str")
                    return prefix + k
                return call_key(fn, args, kwargs)

            def make_tags(args: tuple[Any, ...], kwargs: dict[str, Any]) -> tuple[str, ...]:
                if tags is None:
                    return ()
                if callable(tags):
                    return _tags(tags(*args, **kwargs), m)
                return tags

            def key_of(*args: Any, **kwargs: Any) -> str:
                return make_key(args, kwargs)

            def invalidate(*args: Any, **kwargs: Any) -> bool:
                return self.delete(make_key(args, kwargs))

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

                awrapper.key = key_of  # type: ignore[attr-defined]
                awrapper.invalidate = invalidate  # type: ignore[attr-defined]
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

            wrapper.key = key_of  # type: ignore[attr-defined]
            wrapper.invalidate = invalidate  # type: ignore[attr-defined]
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
            raise ValueError(
                f"Cache.namespace(): name must be a non-empty str without ':', got {name!r}"
            )
        return Namespace(self, name)

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
        return self._segment is None or self._segment_failure() is not None

    def _segment_failure(self) -> str | None:
        # A segment that stopped while in use (it contained a panic of the engine) is
        # noted once, as an open that failed is: reason, cause and a warning.
        if self.degraded_reason is not None:
            return self.degraded_reason
        for seg in (self._segment, self._neg):
            why = seg.failure if seg is not None else None
            if why is not None and seg is not None:
                self.degraded_reason = f"segment file {seg.path}: {why}"
                self.degraded_cause = "damaged"
                msg = (
                    f"ziggurat cache {self.name!r} stopped using its shared segment "
                    f"({self.degraded_reason}): reads miss and writes fail until the file is "
                    "removed once no process uses it (Cache.unlink(), or `ziggurat rm`) and "
                    "the processes restart"
                )
                log.warning(msg)
                warnings.warn(msg, RuntimeWarning, stacklevel=3)
                return self.degraded_reason
        return None

    def stats(self) -> dict[str, Any]:
        """Counters of this process's tiers (``"process"``) apart from the host's
        (``"host"``: read from the segment, the same in every worker). The README's stats
        table explains every counter.

        >>> c = Cache("doc-stats", size="8MiB"); sorted(c.stats())
        ['cache', 'degraded', 'degraded_cause', 'degraded_mode', 'host', 'process']
        >>> c.unlink()
        """
        self._check_open()
        self._segment_failure()
        core = self._core.stats()
        l1_total = core["l1_hits"] + core["l1_misses"]
        l2_total = core["l2_hits"] + core["l2_misses"]
        process = {
            "l1": {
                "hits": core["l1_hits"],
                "misses": core["l1_misses"],
                "hit_ratio": core["l1_hits"] / l1_total if l1_total else 0.0,
                "items": core["l1_items"],
                "negative_items": core["l1_negative_items"],
                "evictions": core["l1_evictions"],
                "stale_drops": core["l1_stale_drops"],
            },
            "l2": {
                "hits": core["l2_hits"],
                "misses": core["l2_misses"],
                "hit_ratio": core["l2_hits"] / l2_total if l2_total else 0.0,
                "stale_reads": core["l2_stale_reads"],
                "negative_hits": core["negative_hits"],
                "decode_errors": core["decode_errors"],
                "write_errors": self._write_errors,
                "store_failures": self._store_failures,
            },
            "loader": self.loader_stats.as_dict(),
        }
        host: dict[str, Any] = {"l2": {}, "negative_l2": {}}
        if self._segment is not None and self._neg is not None:
            l2: dict[str, Any] = dict(self._segment.stats())
            total = l2["hits"] + l2["misses"]
            l2["hit_ratio"] = l2["hits"] / total if total else 0.0
            host = {
                "l2": l2,
                "negative_l2": self._neg.stats(),
                "huge_pages": self._segment.huge_pages(),
            }
        out = {
            "cache": self.name,
            "degraded": self.degraded_reason,
            "degraded_cause": self.degraded_cause,
            "degraded_mode": self.degraded_mode,
            "process": process,
            "host": host,
        }
        if self._tier is not None:
            out["l3"] = self._tier.stats()
        return out

    def _check_open(self) -> None:
        if self.closed:
            _closed(self.name)()

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
        refuse = _closed(self.name)
        self.get = self.set = self.fetch = refuse  # type: ignore[method-assign]
        self.incr = self.add = self.touch = refuse  # type: ignore[method-assign]
        if self._reader is not None:
            self._reader.stop()
        if self._tier is not None:
            self._tier.link.close()
        self._core.clear_l1()
        for s in (self._segment, self._neg):
            if s is not None:
                s.close()

    def __enter__(self) -> Cache:
        return self

    def __exit__(self, *_exc: object) -> None:
        self.close()

    def unlink(self) -> None:
        """Closes and removes the segment files (for tests and tear-down scripts).

        >>> Cache("doc-unlink", size="8MiB").unlink()
        """
        for s in (self._segment, self._neg):
            if s is not None and not s.closed:
                s.unlink()
        self.close()

    def __repr__(self) -> str:
        state = "closed" if self.closed else "degraded" if self.degraded else "ok"
        return f"<ziggurat.Cache {self.name!r} {state}>"


class Namespace:
    """Keys under a prefix, cleared together without touching the rest of the cache.

    A key ``k`` of namespace ``n`` is the cache key ``"n:k"`` (bytes keys: ``b"n:" + k``).
    Every entry written through the namespace carries the hidden tag ``"\\x00ns:n"``, so
    ``clear()`` is one atomic increment, seen by every process at once.

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

    def _k(self, key: str | bytes, method: str = "Namespace") -> str | bytes:
        _check_key(key, method)
        if isinstance(key, bytes):
            return self._prefix.encode() + key
        return self._prefix + key

    def _t(self, tags: Iterable[str], method: str) -> tuple[str, ...]:
        return (*_tags(tags, method), self._tag)

    def _full_keys(
        self, keys: Iterable[str | bytes], method: str
    ) -> dict[str | bytes, str | bytes]:
        """Each key's name in the cache, mapped to the key as given."""
        return {self._k(k, method): k for k in self.cache._key_list(keys, method)}

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
        return await self.cache.aget(self._k(key, "Namespace.get"), default)

    async def aget_many(self, keys: Iterable[str | bytes]) -> dict[str | bytes, Any]:
        """``Cache.aget_many`` within the namespace."""
        full = self._full_keys(keys, "Namespace.get_many")
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
        m = "Namespace.set"
        await self.cache.aset(self._k(key, m), value, ttl=ttl, tags=self._t(tags, m))

    async def aset_many(
        self,
        mapping: Mapping[str | bytes, Any],
        *,
        ttl: float | None = None,
        tags: Iterable[str] = (),
    ) -> None:
        """``Cache.aset_many`` within the namespace."""
        m = "Namespace.set_many"
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
        return self.incr(key, -delta, default=default)

    def touch(self, key: str | bytes, ttl: float | None = None) -> bool:
        """``Cache.touch`` within the namespace."""
        return self.cache.touch(self._k(key, "Namespace.touch"), ttl)

    def delete(self, key: str | bytes) -> bool:
        """``Cache.delete`` within the namespace."""
        return self.cache.delete(self._k(key, "Namespace.delete"))

    def delete_many(self, keys: Iterable[str | bytes]) -> int:
        """``Cache.delete_many`` within the namespace."""
        keys = self.cache._key_list(keys, "Namespace.delete_many")
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
