"""The numbers ``Cache.stats()`` returns: this process's tiers, read from the native
cache, apart from the host's, read from the segments.

    >>> from ziggurat import Cache
    >>> c = Cache("doc-stats-of", size="8MiB"); c.set("k", 1); c.get("k")
    1
    >>> c.stats()["process"]["l1"]["hits"]  # stats_of(c, its host)
    1
    >>> c.unlink()
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from ziggurat._native import Cache as CacheCore

if TYPE_CHECKING:
    from ziggurat.host import Host
    from ziggurat.state import CacheState

__all__ = ["stats_of"]


def stats_of(cache: CacheState, host: Host) -> dict[str, Any]:
    """``cache.stats()``, with ``host`` the cache's segments (docs/api.md's stats table
    explains every counter)."""
    host.failure(3)
    core = CacheCore.stats(cache)
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
            "write_errors": host.write_errors,
            "store_failures": host.store_failures,
        },
        "loader": cache.loader_stats.as_dict(),
    }
    return {
        "cache": cache.name,
        "degraded": host.reason,
        "degraded_cause": host.cause,
        "degraded_mode": cache.degraded_mode,
        "process": process,
        "host": host.stats(),
    }
