"""The samples of ziggurat's metrics, whatever reports them: each metric's names, kind,
unit and labels (``Spec``), one cache's samples read from its ``stats()`` (``rows``), and
the caches a collector or a set of instruments reports (``Caches``). ``ziggurat.metrics``
hands them to Prometheus and OpenTelemetry.

>>> from ziggurat import Cache
>>> c = Cache("doc-samples", size="8MiB"); c.set("k", 1)
>>> [(spec.prom, value) for spec, labels, value in rows(c)][:2]
[('ziggurat_up', 1.0), ('ziggurat_degraded', 0.0)]
>>> c.unlink()
"""

from __future__ import annotations

import logging
import os
import threading
from collections.abc import Iterable
from dataclasses import dataclass

from ziggurat.cache import Cache

__all__ = ["SPECS", "Caches", "Row", "Spec", "rows"]

log = logging.getLogger("ziggurat")


@dataclass(frozen=True)
class Spec:
    """One metric, under its Prometheus and its OpenTelemetry name."""

    prom: str
    otel: str
    kind: str  # "counter" or "gauge"
    unit: str  # the OpenTelemetry unit
    labels: tuple[str, ...]
    help: str


_HOST = ("cache", "tier")
_PROC = ("cache", "pid", "tier")
_PROC_NO_TIER = ("cache", "pid")
_BATCHED = "; each process adds its own every 1024 lookups and when it reads stats() (a scrape)"

# The segment counters: stats()["host"][tier][key], tier "l2" (entries) or "negative_l2"
# (cached misses and load leases).
_HOST_SPECS: tuple[tuple[str, Spec], ...] = (
    ("hits", Spec(
        "ziggurat_hits_total", "ziggurat.hits", "counter", "{lookup}", _HOST,
        "Segment lookups by every process of the host that found a live record" + _BATCHED,
    )),
    ("misses", Spec(
        "ziggurat_misses_total", "ziggurat.misses", "counter", "{lookup}", _HOST,
        "Segment lookups by every process of the host that found no live record" + _BATCHED,
    )),
    ("sets", Spec(
        "ziggurat_sets_total", "ziggurat.sets", "counter", "{record}", _HOST,
        "Records written to the segment by every process of the host",
    )),
    ("deletes", Spec(
        "ziggurat_deletes_total", "ziggurat.deletes", "counter", "{record}", _HOST,
        "Deletes that removed a live record, by every process of the host",
    )),
    ("evictions", Spec(
        "ziggurat_evictions_total", "ziggurat.evictions", "counter", "{record}", _HOST,
        "Records removed to make room (index evictions included)",
    )),
    ("expirations", Spec(
        "ziggurat_expirations_total", "ziggurat.expirations", "counter", "{record}", _HOST,
        "Expired records reclaimed",
    )),
    ("promotions", Spec(
        "ziggurat_promotions_total", "ziggurat.promotions", "counter", "{record}", _HOST,
        "Records moved from the small (probation) ring to the main ring",
    )),
    ("reinsertions", Spec(
        "ziggurat_reinsertions_total", "ziggurat.reinsertions", "counter", "{record}", _HOST,
        "Main-ring records read since their last pass, kept for another",
    )),
    ("ghost_hits", Spec(
        "ziggurat_ghost_hits_total", "ziggurat.ghost_hits", "counter", "{record}", _HOST,
        "Records written straight to the main ring because their key was recently evicted",
    )),
    ("index_evictions", Spec(
        "ziggurat_index_evictions_total", "ziggurat.index_evictions", "counter", "{record}",
        _HOST, "Records dropped because their index bucket was full",
    )),
    ("lock_repairs", Spec(
        "ziggurat_lock_repairs_total", "ziggurat.lock_repairs", "counter", "{repair}", _HOST,
        "Shard locks recovered from a writer that died holding them",
    )),
    ("lock_timeouts", Spec(
        "ziggurat_lock_timeouts_total", "ziggurat.lock_timeouts", "counter", "{write}", _HOST,
        "Writes refused with LockTimeout",
    )),
    ("shard_resets", Spec(
        "ziggurat_shard_resets_total", "ziggurat.shard_resets", "counter", "{reset}", _HOST,
        "Shards emptied because they were found damaged",
    )),
    ("tag_invalidations", Spec(
        "ziggurat_tag_invalidations_total", "ziggurat.tag_invalidations", "counter",
        "{invalidation}", _HOST, "Tag versions raised (invalidate_tags, Namespace.clear)",
    )),
    ("clears", Spec(
        "ziggurat_clears_total", "ziggurat.clears", "counter", "{clear}", _HOST,
        "clear() calls",
    )),
    ("entries", Spec(
        "ziggurat_entries", "ziggurat.entries", "gauge", "{record}", _HOST,
        "Records the index points at now (expired ones until reclaimed)",
    )),
    ("bytes_used", Spec(
        "ziggurat_memory_used_bytes", "ziggurat.memory.used", "gauge", "By", _HOST,
        "Bytes of the rings holding records, reclaimable ones included",
    )),
    ("bytes_capacity", Spec(
        "ziggurat_memory_capacity_bytes", "ziggurat.memory.capacity", "gauge", "By", _HOST,
        "Bytes of the rings: what records can occupy",
    )),
    ("file_size", Spec(
        "ziggurat_file_size_bytes", "ziggurat.file.size", "gauge", "By", _HOST,
        "The segment file's size",
    )),
    ("max_value_size", Spec(
        "ziggurat_max_value_size_bytes", "ziggurat.max_value.size", "gauge", "By", _HOST,
        "The largest value the segment stores (the serialized value plus 13 bytes)",
    )),
    ("shards", Spec(
        "ziggurat_shards", "ziggurat.shards", "gauge", "{shard}", _HOST,
        "Shards of the segment, each with its own writer lock",
    )),
    ("index_slots", Spec(
        "ziggurat_index_slots", "ziggurat.index.slots", "gauge", "{slot}", _HOST,
        "Slots of the segment's index, all shards",
    )),
)  # fmt: skip


def _proc(name: str, kind: str, unit: str, labels: tuple[str, ...], help: str) -> Spec:
    suffix = "_total" if kind == "counter" else ""
    return Spec(
        f"ziggurat_process_{name}{suffix}", f"ziggurat.process.{name}", kind, unit, labels, help
    )


_P_HITS = _proc("hits", "counter", "{lookup}", _PROC, "Lookups this process answered, by tier")
_P_MISSES = _proc(
    "misses", "counter", "{lookup}", _PROC, "Lookups this process's tier did not answer"
)
_P_ENTRIES = _proc("entries", "gauge", "{entry}", _PROC, "Entries held in this process's L1")
_P_EVICTIONS = _proc(
    "evictions", "counter", "{entry}", _PROC, "L1 entries dropped to stay within l1_items"
)
_P_STALE_DROPS = _proc(
    "stale_drops", "counter", "{entry}", _PROC, "L1 entries found expired or invalidated"
)
_P_STALE_READS = _proc(
    "stale_reads", "counter", "{read}", _PROC, "Expired values read by fetch as a fallback"
)
# (key in stats()["process"]["l2"], spec)
_P_L2_ERRORS: tuple[tuple[str, Spec], ...] = tuple(
    (key, _proc(key, "counter", unit, _PROC_NO_TIER, help))
    for key, unit, help in (
        ("decode_errors", "{value}", "Values this process could not decode (each a miss)"),
        ("write_errors", "{write}", "Writes the segment refused, store_failures included"),
        ("store_failures", "{value}", "Values loaded by fetch that could not be stored"),
    )
)
# (key in stats()["process"]["loader"], spec)
_P_LOADER: tuple[tuple[str, Spec], ...] = tuple(
    (key, _proc("loader_" + key, "counter", unit, _PROC_NO_TIER, help))
    for key, unit, help in (
        ("calls", "{call}", "Loader calls in this process, failed ones included"),
        ("errors", "{call}", "Loader calls that raised"),
        ("stale_served", "{call}", "Failed loads answered with a stale value"),
        ("waits", "{wait}", "Sleeps on another caller's load"),
        ("takeovers", "{lease}", "Load leases taken over from a dead process"),
        ("refreshes", "{load}", "Background reloads started by refresh_ahead"),
    )
)
_P_LOADER_SECONDS = _proc(
    "loader_seconds", "counter", "s", _PROC_NO_TIER, "Time spent in loader calls"
)
_P_LOADER_MAX = _proc("loader_max_seconds", "gauge", "s", _PROC_NO_TIER, "The longest loader call")
_UP = Spec(
    "ziggurat_up", "ziggurat.up", "gauge", "1", ("cache",),
    "1 when the cache is open and its counters were read, 0 when closed or unreadable",
)  # fmt: skip
_DEGRADED = Spec(
    "ziggurat_degraded", "ziggurat.degraded", "gauge", "1", ("cache", "cause"),
    "1 when the answering process runs the cache without its shared segment",
)  # fmt: skip

SPECS: tuple[Spec, ...] = (
    _UP,
    _DEGRADED,
    *(s for _, s in _HOST_SPECS),
    _P_HITS,
    _P_MISSES,
    _P_ENTRIES,
    _P_EVICTIONS,
    _P_STALE_DROPS,
    _P_STALE_READS,
    *(s for _, s in _P_L2_ERRORS),
    *(s for _, s in _P_LOADER),
    _P_LOADER_SECONDS,
    _P_LOADER_MAX,
)

Row = tuple[Spec, dict[str, str], float]
_failed: set[tuple[str, str]] = set()


def rows(cache: Cache) -> list[Row]:
    """Every sample of one cache; never raises (a cache that cannot be read is ``up`` 0)."""
    name = cache.name
    if cache.closed:
        return [(_UP, {"cache": name}, 0.0)]
    try:
        stats = cache.stats()
    except Exception as e:
        # A scrape must not fail because one cache cannot be read: report it down, and
        # log the cause once per cache and error.
        key = (name, type(e).__name__)
        if key not in _failed:
            _failed.add(key)
            log.warning("ziggurat metrics: cannot read the stats of cache %r: %s", name, e)
        return [(_UP, {"cache": name}, 0.0)]
    cause = stats["degraded_cause"] or ""
    rows: list[Row] = [
        (_UP, {"cache": name}, 1.0),
        (_DEGRADED, {"cache": name, "cause": cause}, 1.0 if stats["degraded"] else 0.0),
    ]
    for tier in ("l2", "negative_l2"):
        seg = stats["host"].get(tier) or {}
        if not seg:
            continue  # degraded: no segment, no host-wide figures
        labels = {"cache": name, "tier": tier}
        rows.extend((spec, labels, float(seg[key])) for key, spec in _HOST_SPECS)
    proc = stats["process"]
    pid = str(os.getpid())
    l1, l2, loader = proc["l1"], proc["l2"], proc["loader"]

    def at(tier: str) -> dict[str, str]:
        return {"cache": name, "pid": pid, "tier": tier}

    bare = {"cache": name, "pid": pid}
    rows += [
        (_P_HITS, at("l1"), float(l1["hits"])),
        (_P_HITS, at("l2"), float(l2["hits"])),
        (_P_HITS, at("negative_l2"), float(l2["negative_hits"])),
        (_P_MISSES, at("l1"), float(l1["misses"])),
        (_P_MISSES, at("l2"), float(l2["misses"])),
        (_P_ENTRIES, at("l1"), float(l1["items"])),
        (_P_ENTRIES, at("negative_l1"), float(l1["negative_items"])),
        (_P_EVICTIONS, at("l1"), float(l1["evictions"])),
        (_P_STALE_DROPS, at("l1"), float(l1["stale_drops"])),
        (_P_STALE_READS, at("l2"), float(l2["stale_reads"])),
    ]
    rows.extend((spec, bare, float(l2[key])) for key, spec in _P_L2_ERRORS)
    rows.extend((spec, bare, float(loader[key])) for key, spec in _P_LOADER)
    rows.append((_P_LOADER_SECONDS, bare, loader["mean_seconds"] * loader["calls"]))
    rows.append((_P_LOADER_MAX, bare, float(loader["max_seconds"])))
    return rows


class Caches:
    """The caches a collector or a set of instruments reports, one per name."""

    def __init__(self, caches: Iterable[Cache], owner: str) -> None:
        self._owner = owner
        self._lock = threading.Lock()
        self._caches: list[Cache] = []
        for c in caches:
            self.add(c, owner)

    def add(self, cache: Cache, method: str) -> None:
        """Reports ``cache`` too; a closed cache of the same name is replaced by it."""
        if not isinstance(cache, Cache):
            raise TypeError(
                f"{method}(): each cache must be a ziggurat.Cache, not "
                f"{type(cache).__name__} (pass the Cache itself: a Namespace's .cache, a "
                "Django or Flask backend's Cache, a dogpile backend's .cache)"
            )
        with self._lock:
            for i, have in enumerate(self._caches):
                if have is cache:
                    return
                if have.name == cache.name:
                    if not have.closed:
                        raise ValueError(
                            f"{method}(): a cache named {cache.name!r} is already "
                            "reported, and two open caches of one name would give the same "
                            "series; close the other one first or report only one of them"
                        )
                    self._caches[i] = cache
                    return
            self._caches.append(cache)

    def remove(self, cache: Cache) -> None:
        """Stops reporting ``cache``; ``ValueError`` when it is not reported."""
        with self._lock:
            for i, have in enumerate(self._caches):
                if have is cache:
                    del self._caches[i]
                    return
        raise ValueError(f"{self._owner}.remove(): the cache {cache.name!r} is not reported")

    def snapshot(self) -> list[Cache]:
        with self._lock:
            return list(self._caches)

    def rows(self) -> list[Row]:
        return [row for c in self.snapshot() for row in rows(c)]
