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

from ziggurat import _native
from ziggurat.cache import Cache
from ziggurat.rules import RULES

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
    #: "host": one figure for the host, whichever process reports it (a tool gathering
    #: several processes' series takes it once); "process": this process's own, summed.
    scope: str


# The labels and the tier label's values are the engine's too.
_HOST: tuple[str, ...] = RULES["metrics.host_labels"]
_PROC: tuple[str, ...] = RULES["metrics.process_labels"]
_PROC_NO_TIER: tuple[str, ...] = RULES["metrics.process_untiered_labels"]
_L1, _NEG_L1, _L2, _NEG_L2 = RULES["metrics.tiers"]

# Every family comes from the engine's table, so that the Node.js package publishes the
# same names and help; only the labels and where each value is read are Python's.
_TABLE = {(f["group"], f["key"]): f for f in _native.metric_families()}


def _spec(group: str, key: str, labels: tuple[str, ...]) -> Spec:
    f = _TABLE[group, key]
    return Spec(f["prom"], f["otel"], f["kind"], f["unit"], labels, f["help"], f["scope"])


# The segment figures: stats()["host"][tier][key], tier "l2" (entries) or "negative_l2"
# (cached misses and load leases).
_HOST_SPECS: tuple[tuple[str, Spec], ...] = tuple(
    (key, _spec(group, key, _HOST)) for group, key in _TABLE if group == "host"
)
_P_HITS = _spec("process", "hits", _PROC)
_P_MISSES = _spec("process", "misses", _PROC)
_P_ENTRIES = _spec("process", "entries", _PROC)
_P_EVICTIONS = _spec("process", "evictions", _PROC)
_P_STALE_DROPS = _spec("process", "stale_drops", _PROC)
_P_STALE_READS = _spec("process", "stale_reads", _PROC)
# (key in stats()["process"]["l2"], spec)
_P_L2_ERRORS: tuple[tuple[str, Spec], ...] = tuple(
    (key, _spec("process", key, _PROC_NO_TIER))
    for key in ("decode_errors", "write_errors", "store_failures")
)
# (key in stats()["process"]["loader"], spec)
_P_LOADER: tuple[tuple[str, Spec], ...] = tuple(
    (key, _spec("process", "loader_" + key, _PROC_NO_TIER))
    for key in ("calls", "errors", "stale_served", "waits", "takeovers", "refreshes")
)
_P_LOADER_SECONDS = _spec("process", "loader_seconds", _PROC_NO_TIER)
_P_LOADER_MAX = _spec("process", "loader_max_seconds", _PROC_NO_TIER)
_UP = _spec("cache", "up", RULES["metrics.up_labels"])
_DEGRADED = _spec("cache", "degraded", RULES["metrics.degraded_labels"])

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
    for tier in (_L2, _NEG_L2):
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
        (_P_HITS, at(_L1), float(l1["hits"])),
        (_P_HITS, at(_L2), float(l2["hits"])),
        (_P_HITS, at(_NEG_L2), float(l2["negative_hits"])),
        (_P_MISSES, at(_L1), float(l1["misses"])),
        (_P_MISSES, at(_L2), float(l2["misses"])),
        (_P_ENTRIES, at(_L1), float(l1["items"])),
        (_P_ENTRIES, at(_NEG_L1), float(l1["negative_items"])),
        (_P_EVICTIONS, at(_L1), float(l1["evictions"])),
        (_P_STALE_DROPS, at(_L1), float(l1["stale_drops"])),
        (_P_STALE_READS, at(_L2), float(l2["stale_reads"])),
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
