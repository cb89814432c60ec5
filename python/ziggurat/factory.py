"""The one place where a cache's class is chosen: by how it runs (its segment opened or
not, a cluster tier or not), once, when it is built. The native part is made with the
segments; the Python attributes follow.

    >>> from ziggurat import Cache
    >>> o = Cache.options("doc-factory", "8MiB")
    >>> c = build(Cache, o, Host.open(o)); type(c) is Cache, c.get("k", 0)
    (True, 0)
    >>> c.unlink()
"""

from __future__ import annotations

from typing import Any, TypeVar, cast

from ziggurat._native import Cache as CacheCore
from ziggurat.binding import NativeView, variant
from ziggurat.clustered import Clustered
from ziggurat.degraded import Degraded
from ziggurat.host import Host
from ziggurat.loader import LoaderStats, Loads
from ziggurat.options import CacheOptions
from ziggurat.state import CacheState

__all__ = ["build"]

C = TypeVar("C", bound=CacheState)


def build(cls: type[C], o: CacheOptions, host: Host) -> C:
    """The cache of options ``o`` over ``host``: an instance of ``cls``, or of ``cls`` with
    the mixin of its mode (``Degraded`` without a segment, ``Clustered`` with a cluster
    tier)."""
    klass = cls
    if host.main is None:
        klass = variant(cls, Degraded)
    elif o.link is not None and o.secrets is not None:
        klass = variant(cls, Clustered)
    passthrough = host.main is None and o.degraded == "passthrough"
    loads = Loads(o.name, o.loader_timeout)
    new = cast(Any, CacheCore).__new__
    cache: C = new(
        klass,
        host.main,
        host.neg,
        0 if passthrough else o.l1_items,
        0 if passthrough else o.l1_negative_items,
        o.serializer.loads,
        o.serializer.dumps,
        (o.ttl, o.neg_ttl, o.stale_ttl, o.jitter, o.loader_timeout),
        o.copy,
        o.debug,
        refresh=loads.refresh,
        local=loads.local,
        refresh_ahead=o.refresh_ahead,
        on_write_error=host.write_failed,
        codec=getattr(o.serializer, "codec", None),
        degraded_ttl=o.degraded_ttl if host.main is None else None,
    )
    cache.name = o.name
    cache.ttl = o.ttl
    cache.neg_ttl = o.neg_ttl
    cache.stale_ttl = o.stale_ttl
    cache.jitter = o.jitter
    cache.refresh_ahead = o.refresh_ahead
    cache.loader_timeout = o.loader_timeout
    cache.serializer = o.serializer
    cache.copy = o.copy
    cache.debug = o.debug
    cache.version = o.version
    cache.degraded_mode = o.degraded
    cache.degraded_ttl = o.degraded_ttl
    cache.closed = False
    cache._core = cast(CacheCore, NativeView(cache))
    cache._host = host
    loads.core = cache
    cache._loads = loads
    cache.loader_stats = LoaderStats(cache)
    cache._tier = None
    cache._reader = None
    cache._join(o)
    return cache
