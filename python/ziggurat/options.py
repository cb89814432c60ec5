"""The options of ``Cache``, checked once, before any file is opened.

``CacheOptions.build`` takes the constructor's arguments (``Cache.options`` binds them to
``Cache``'s signature) and returns them checked and
resolved (sizes in bytes, the serializer object, the group's gid, the cluster tier's
connection), or raises the error the constructor raises for bad input.

>>> from ziggurat import Cache
>>> o = Cache.options("doc-options", "8MiB", ttl=60, version=3)
>>> o.size_bytes, o.ttl, o.segment_name
(8388608, 60.0, 'doc-options.ver-3')
"""

from __future__ import annotations

import grp
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from ziggurat import _native
from ziggurat._native import (
    CLUSTER_MAX_TIMEOUT_S,
    CLUSTER_MIN_SECRET,
    CLUSTER_MIN_STREAM_LENGTH,
    cluster_timeout_ok,
)
from ziggurat.args import ttl_arg
from ziggurat.cluster.link import Link
from ziggurat.cluster.signing import secrets_of
from ziggurat.rules import COPY_MODES, DEFAULTS, DEGRADED_MODES, HUGE_PAGES_MODES
from ziggurat.serializers import Serializer, resolve

__all__ = ["DEGRADED_MODES", "CacheOptions"]

_M = "Cache"


@dataclass(frozen=True)
class CacheOptions:
    """The checked options of one ``Cache`` (the option table of docs/api.md explains each).

    >>> from ziggurat import Cache
    >>> Cache.options("doc-options2", l1_items=100).l1_negative_items
    10
    >>> Cache.options("doc-options2", jitter=2)
    Traceback (most recent call last):
    ValueError: Cache(): jitter must be in [0, 1), got 2.0
    """

    name: str
    size_bytes: int | None
    neg_bytes: int | None
    l1_items: int
    l1_negative_items: int
    ttl: float
    neg_ttl: float | None
    stale_ttl: float | None
    jitter: float
    refresh_ahead: float
    loader_timeout: float
    serializer: Serializer
    copy: str
    debug: bool
    directory: str
    avg_item_size: int
    lock_timeout: float
    recreate: bool
    version: int | str | None
    degraded: str
    degraded_ttl: float
    gid: int | None
    link: Link | None
    secrets: list[bytes] | None
    stream_length: int
    cluster_single_flight: bool
    huge_pages: str

    @property
    def segment_name(self) -> str:
        """The main segment's name: each version is a segment of its own, so entries
        written by another version (an older deploy, values of another shape) are never
        read."""
        return _native.segment_name(self.name, None if self.version is None else str(self.version))

    @classmethod
    def build(cls, arguments: Mapping[str, Any]) -> CacheOptions:
        """Checks every argument of ``Cache(...)``, bound to its signature (every option
        present: ``Cache.options`` binds them), and returns them resolved; raises
        ``TypeError``/``ValueError`` naming ``Cache()`` and the option. The segment
        options (``directory``, ``avg_item_size``, ``lock_timeout``, ``recreate``) are
        checked where the segment is opened."""
        a = arguments
        # The cluster tier's arguments are checked first: bad input creates no file.
        link, secrets = _cluster(a["redis"], a["secret"], a["redis_timeout"], a["stream_length"])
        single_flight = a["cluster_single_flight"]
        if not isinstance(single_flight, bool):
            raise TypeError(f"{_M}(): cluster_single_flight must be True or False")
        if single_flight and a["redis"] is None:
            raise ValueError(f"{_M}(): cluster_single_flight needs redis= (a cluster tier)")
        name = a["name"]
        if not isinstance(name, str):
            raise TypeError(f"{_M}(): name must be a str, not {type(name).__name__}")
        l1_items, l1_negative_items = a["l1_items"], a["l1_negative_items"]
        if isinstance(l1_items, bool) or not isinstance(l1_items, int) or l1_items < 0:
            raise ValueError(f"{_M}(): l1_items must be an int >= 0, got {l1_items!r}")
        if l1_negative_items is None:
            l1_negative_items = l1_items // DEFAULTS.l1_negative_share
        if not isinstance(l1_negative_items, int) or l1_negative_items < 0:
            raise ValueError(
                f"{_M}(): l1_negative_items must be an int >= 0, got {l1_negative_items!r}"
            )
        ttl = ttl_arg(a["ttl"], None, "ttl", _M)
        if ttl is None:
            raise ValueError(f"{_M}(): ttl must be a number of seconds > 0 or math.inf")
        for what in ("jitter", "refresh_ahead"):
            if isinstance(a[what], bool) or not isinstance(a[what], (int, float)):
                raise ValueError(f"{_M}(): {what} must be in [0, 1), got {a[what]!r}")
        copy, degraded, version, huge_pages = (
            a["copy"],
            a["degraded"],
            a["version"],
            a["huge_pages"],
        )
        if copy not in COPY_MODES:
            raise ValueError(f"{_M}(): copy must be 'shared', 'copy' or 'decode', got {copy!r}")
        if degraded not in DEGRADED_MODES:
            raise ValueError(
                f"{_M}(): degraded must be 'passthrough', 'local' or 'raise', got {degraded!r}"
            )
        degraded_ttl = ttl_arg(a["degraded_ttl"], None, "degraded_ttl", _M)
        assert degraded_ttl is not None  # it has a default
        if version is not None and (
            isinstance(version, bool)
            or not isinstance(version, (int, str))
            or (isinstance(version, int) and version < 0)
        ):
            raise ValueError(
                f"{_M}(): version must be None, an int >= 0 or 1-{_native.MAX_VERSION} "
                f"characters of A-Z a-z 0-9 _ -, got {version!r}"
            )
        neg_ttl = ttl_arg(a["neg_ttl"], None, "neg_ttl", _M)
        stale_ttl = ttl_arg(a["stale_ttl"], None, "stale_ttl", _M)
        loader_timeout = ttl_arg(a["loader_timeout"], None, "loader_timeout", _M)
        loader_timeout = loader_timeout or DEFAULTS.loader_timeout
        try:
            _native.segment_name(name, None if version is None else str(version))
            _native.check_defaults(
                (ttl, neg_ttl, stale_ttl, float(a["jitter"]), loader_timeout),
                float(a["refresh_ahead"]),
                degraded_ttl,
            )
        except ValueError as e:
            raise ValueError(f"{_M}(): {e}") from None
        if huge_pages not in HUGE_PAGES_MODES:
            raise ValueError(
                f"{_M}(): huge_pages must be 'auto', 'require' or 'off', got {huge_pages!r}"
            )
        size, neg_size = a["size"], a["neg_size"]
        return cls(
            name=name,
            # None: the default size, fitted to the directory's free space where it opens.
            size_bytes=None if size is None else _native.parse_size(size),
            neg_bytes=None if neg_size is None else _native.parse_size(neg_size),
            l1_items=l1_items,
            l1_negative_items=l1_negative_items,
            ttl=ttl,
            neg_ttl=neg_ttl,
            stale_ttl=stale_ttl,
            jitter=float(a["jitter"]),
            refresh_ahead=float(a["refresh_ahead"]),
            loader_timeout=loader_timeout,
            serializer=resolve(a["serializer"]),
            copy=copy,
            debug=a["debug"],
            directory=a["directory"],
            avg_item_size=a["avg_item_size"],
            lock_timeout=a["lock_timeout"],
            recreate=a["recreate"],
            version=version,
            degraded=degraded,
            degraded_ttl=degraded_ttl,
            gid=_gid(a["group"]),
            link=link,
            secrets=secrets,
            stream_length=a["stream_length"],
            cluster_single_flight=single_flight,
            huge_pages=huge_pages,
        )

    def segment_args(self) -> dict[str, Any]:
        """The keyword arguments both segments are opened with."""
        return {
            "directory": self.directory,
            "recreate": self.recreate,
            "lock_timeout": self.lock_timeout,
            "group": self.gid,
            "huge_pages": self.huge_pages,
        }


def _cluster(
    redis: object, secret: object, timeout: object, stream_length: object
) -> tuple[Link | None, list[bytes] | None]:
    """The cluster tier's link and secrets, or (None, None) without ``redis``."""
    if redis is None:
        if secret is not None:
            raise ValueError(f"{_M}(): secret is only used with redis=; give both or neither")
        return None, None
    if secret is None:
        raise ValueError(
            f"{_M}(): secret is required with redis=: every value and event in Redis is "
            f"authenticated with it (give the same secret, at least {CLUSTER_MIN_SECRET} bytes, "
            "on every host)"
        )
    secrets = secrets_of(secret, _M)
    # The bounds are the crate's (ziggurat-cluster's limits), as Node.js reads them too.
    if (
        isinstance(timeout, bool)
        or not isinstance(timeout, (int, float))
        or not cluster_timeout_ok(float(timeout))
    ):
        raise ValueError(
            f"{_M}(): redis_timeout must be seconds in (0, {CLUSTER_MAX_TIMEOUT_S:g}], "
            f"got {timeout!r}"
        )
    if (
        isinstance(stream_length, bool)
        or not isinstance(stream_length, int)
        or stream_length < CLUSTER_MIN_STREAM_LENGTH
    ):
        raise ValueError(
            f"{_M}(): stream_length must be an int >= {CLUSTER_MIN_STREAM_LENGTH}, "
            f"got {stream_length!r}"
        )
    return Link.of(redis, timeout=float(timeout), method=_M), secrets


def _gid(group: str | int | None) -> int | None:
    """The gid of a ``group`` option: a group name or a gid."""
    if group is None:
        return None
    if isinstance(group, bool) or not isinstance(group, (str, int)):
        raise TypeError(f"{_M}(): group must be a group name or a gid, not {type(group).__name__}")
    if isinstance(group, int):
        if not 0 <= group < 2**32:
            raise ValueError(f"{_M}(): group must be a gid from 0 to 2**32-1, got {group}")
        return group
    try:
        return grp.getgrnam(group).gr_gid
    except KeyError:
        raise ValueError(f"{_M}(): group {group!r} does not exist on this host") from None
