"""Metrics of ziggurat caches for Prometheus and OpenTelemetry.

The host-wide counters live in the cache's shared segment, so any one worker reads the
figures of the whole host: one scrape of whichever worker answers reports every process's
sets, deletes, evictions and lookups, without prometheus_client's multiprocess directory.
Each worker also reports its own L1, loader and error counters, in families named
``ziggurat_process_...`` that carry a ``pid`` label. ``docs/metrics.md`` lists every metric.

>>> from prometheus_client import CollectorRegistry, generate_latest
>>> from ziggurat import Cache
>>> cache = Cache("doc-metrics", size="8MiB")
>>> registry = CollectorRegistry()
>>> collector = register(cache, registry=registry)
>>> cache.set("k", 1)
>>> text = generate_latest(registry).decode()
>>> 'ziggurat_sets_total{cache="doc-metrics",tier="l2"} 1.0' in text
True
>>> cache.unlink()
"""

from __future__ import annotations

import logging
import os
import threading
import weakref
from collections.abc import Callable, Iterable, Iterator
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, NoReturn

from ziggurat.cache import Cache

if TYPE_CHECKING:
    from opentelemetry.metrics import CallbackOptions, Meter, Observation
    from prometheus_client.metrics_core import Metric
    from prometheus_client.registry import CollectorRegistry

__all__ = ["ZigguratCollector", "ZigguratInstruments", "instrument", "register"]

log = logging.getLogger("ziggurat")


@dataclass(frozen=True)
class _Spec:
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
_HOST_SPECS: tuple[tuple[str, _Spec], ...] = (
    ("hits", _Spec(
        "ziggurat_hits_total", "ziggurat.hits", "counter", "{lookup}", _HOST,
        "Segment lookups by every process of the host that found a live record" + _BATCHED,
    )),
    ("misses", _Spec(
        "ziggurat_misses_total", "ziggurat.misses", "counter", "{lookup}", _HOST,
        "Segment lookups by every process of the host that found no live record" + _BATCHED,
    )),
    ("sets", _Spec(
        "ziggurat_sets_total", "ziggurat.sets", "counter", "{record}", _HOST,
        "Records written to the segment by every process of the host",
    )),
    ("deletes", _Spec(
        "ziggurat_deletes_total", "ziggurat.deletes", "counter", "{record}", _HOST,
        "Deletes that removed a live record, by every process of the host",
    )),
    ("evictions", _Spec(
        "ziggurat_evictions_total", "ziggurat.evictions", "counter", "{record}", _HOST,
        "Records removed to make room (index evictions included)",
    )),
    ("expirations", _Spec(
        "ziggurat_expirations_total", "ziggurat.expirations", "counter", "{record}", _HOST,
        "Expired records reclaimed",
    )),
    ("promotions", _Spec(
        "ziggurat_promotions_total", "ziggurat.promotions", "counter", "{record}", _HOST,
        "Records moved from the small (probation) ring to the main ring",
    )),
    ("reinsertions", _Spec(
        "ziggurat_reinsertions_total", "ziggurat.reinsertions", "counter", "{record}", _HOST,
        "Main-ring records read since their last pass, kept for another",
    )),
    ("ghost_hits", _Spec(
        "ziggurat_ghost_hits_total", "ziggurat.ghost_hits", "counter", "{record}", _HOST,
        "Records written straight to the main ring because their key was recently evicted",
    )),
    ("index_evictions", _Spec(
        "ziggurat_index_evictions_total", "ziggurat.index_evictions", "counter", "{record}",
        _HOST, "Records dropped because their index bucket was full",
    )),
    ("lock_repairs", _Spec(
        "ziggurat_lock_repairs_total", "ziggurat.lock_repairs", "counter", "{repair}", _HOST,
        "Shard locks recovered from a writer that died holding them",
    )),
    ("lock_timeouts", _Spec(
        "ziggurat_lock_timeouts_total", "ziggurat.lock_timeouts", "counter", "{write}", _HOST,
        "Writes refused with LockTimeout",
    )),
    ("shard_resets", _Spec(
        "ziggurat_shard_resets_total", "ziggurat.shard_resets", "counter", "{reset}", _HOST,
        "Shards emptied because they were found damaged",
    )),
    ("tag_invalidations", _Spec(
        "ziggurat_tag_invalidations_total", "ziggurat.tag_invalidations", "counter",
        "{invalidation}", _HOST, "Tag versions raised (invalidate_tags, Namespace.clear)",
    )),
    ("clears", _Spec(
        "ziggurat_clears_total", "ziggurat.clears", "counter", "{clear}", _HOST,
        "clear() calls",
    )),
    ("entries", _Spec(
        "ziggurat_entries", "ziggurat.entries", "gauge", "{record}", _HOST,
        "Records the index points at now (expired ones until reclaimed)",
    )),
    ("bytes_used", _Spec(
        "ziggurat_memory_used_bytes", "ziggurat.memory.used", "gauge", "By", _HOST,
        "Bytes of the rings holding records, reclaimable ones included",
    )),
    ("bytes_capacity", _Spec(
        "ziggurat_memory_capacity_bytes", "ziggurat.memory.capacity", "gauge", "By", _HOST,
        "Bytes of the rings: what records can occupy",
    )),
    ("file_size", _Spec(
        "ziggurat_file_size_bytes", "ziggurat.file.size", "gauge", "By", _HOST,
        "The segment file's size",
    )),
    ("max_value_size", _Spec(
        "ziggurat_max_value_size_bytes", "ziggurat.max_value.size", "gauge", "By", _HOST,
        "The largest value the segment stores (the serialized value plus 13 bytes)",
    )),
    ("shards", _Spec(
        "ziggurat_shards", "ziggurat.shards", "gauge", "{shard}", _HOST,
        "Shards of the segment, each with its own writer lock",
    )),
    ("index_slots", _Spec(
        "ziggurat_index_slots", "ziggurat.index.slots", "gauge", "{slot}", _HOST,
        "Slots of the segment's index, all shards",
    )),
)  # fmt: skip


def _proc(name: str, kind: str, unit: str, labels: tuple[str, ...], help: str) -> _Spec:
    suffix = "_total" if kind == "counter" else ""
    return _Spec(
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
_P_L2_ERRORS: tuple[tuple[str, _Spec], ...] = tuple(
    (key, _proc(key, "counter", unit, _PROC_NO_TIER, help))
    for key, unit, help in (
        ("decode_errors", "{value}", "Values this process could not decode (each a miss)"),
        ("write_errors", "{write}", "Writes the segment refused, store_failures included"),
        ("store_failures", "{value}", "Values loaded by fetch that could not be stored"),
    )
)
# (key in stats()["process"]["loader"], spec)
_P_LOADER: tuple[tuple[str, _Spec], ...] = tuple(
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
_UP = _Spec(
    "ziggurat_up", "ziggurat.up", "gauge", "1", ("cache",),
    "1 when the cache is open and its counters were read, 0 when closed or unreadable",
)  # fmt: skip
_DEGRADED = _Spec(
    "ziggurat_degraded", "ziggurat.degraded", "gauge", "1", ("cache", "cause"),
    "1 when the answering process runs the cache without its shared segment",
)  # fmt: skip

_SPECS: tuple[_Spec, ...] = (
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

_Row = tuple[_Spec, dict[str, str], float]
_failed: set[tuple[str, str]] = set()


def _rows(cache: Cache) -> list[_Row]:
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
    rows: list[_Row] = [
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


class _Caches:
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

    def rows(self) -> list[_Row]:
        return [row for c in self.snapshot() for row in _rows(c)]


def _need(module: str, extra: str, caller: str) -> NoReturn:
    raise ImportError(
        f"{caller} needs the {module} package; install it with: pip install 'ziggurat[{extra}]'"
    )


class ZigguratCollector:
    """A prometheus_client collector of ziggurat caches (register it in a registry).

    Every scrape reads each cache's ``stats()``: the host-wide segment counters (the same
    whichever worker answers) and this process's L1, loader and error counters (families
    ``ziggurat_process_...`` with a ``pid`` label). A closed or unreadable cache is reported
    with ``ziggurat_up`` 0 and never fails the scrape. Add caches with ``add``; two open
    caches of one name are refused (``ValueError``).

    >>> from prometheus_client import CollectorRegistry, generate_latest
    >>> from ziggurat import Cache
    >>> a, b = Cache("doc-coll-a", size="8MiB"), Cache("doc-coll-b", size="8MiB")
    >>> registry = CollectorRegistry()
    >>> registry.register(ZigguratCollector(a, b))
    >>> b.close()
    >>> [l for l in generate_latest(registry).decode().splitlines() if "ziggurat_up{" in l]
    ['ziggurat_up{cache="doc-coll-a"} 1.0', 'ziggurat_up{cache="doc-coll-b"} 0.0']
    >>> a.unlink(); Cache("doc-coll-b", size="8MiB").unlink()
    """

    def __init__(self, *caches: Cache) -> None:
        self._caches = _Caches(caches, "ZigguratCollector")

    def add(self, cache: Cache) -> None:
        """Reports ``cache`` too (replacing a closed cache of the same name).

        >>> from ziggurat import Cache
        >>> c = Cache("doc-coll-add", size="8MiB"); coll = ZigguratCollector(); coll.add(c)
        >>> coll.caches
        [<ziggurat.Cache 'doc-coll-add' ok>]
        >>> c.unlink()
        """
        self._caches.add(cache, "ZigguratCollector.add")

    def remove(self, cache: Cache) -> None:
        """Stops reporting ``cache``.

        >>> from ziggurat import Cache
        >>> c = Cache("doc-coll-rm", size="8MiB"); coll = ZigguratCollector(c)
        >>> coll.remove(c); coll.caches
        []
        >>> c.unlink()
        """
        self._caches.remove(cache)

    @property
    def caches(self) -> list[Cache]:
        """The caches reported, in the order they were added.

        >>> ZigguratCollector().caches
        []
        """
        return self._caches.snapshot()

    def describe(self) -> Iterator[Metric]:
        """The metric families without samples, so a registry can refuse a name clash.

        >>> sorted(f.name for f in ZigguratCollector().describe())[:2]
        ['ziggurat_clears', 'ziggurat_degraded']
        """
        yield from self._families([])

    def collect(self) -> Iterator[Metric]:
        """The metric families with one sample per cache, tier and label set.

        >>> from ziggurat import Cache
        >>> c = Cache("doc-coll-collect", size="8MiB"); c.set("k", 1)
        >>> fams = {f.name: f for f in ZigguratCollector(c).collect()}
        >>> [(s.labels["tier"], s.value) for s in fams["ziggurat_entries"].samples]
        [('l2', 1.0), ('negative_l2', 0.0)]
        >>> c.unlink()
        """
        yield from self._families(self._caches.rows())

    @staticmethod
    def _families(rows: list[_Row]) -> Iterator[Metric]:
        try:
            from prometheus_client.core import CounterMetricFamily, GaugeMetricFamily
        except ImportError:
            _need("prometheus_client", "prometheus", "ZigguratCollector")
        by_spec: dict[str, list[_Row]] = {}
        for row in rows:
            by_spec.setdefault(row[0].prom, []).append(row)
        for spec in _SPECS:
            fam: CounterMetricFamily | GaugeMetricFamily
            if spec.kind == "counter":
                fam = CounterMetricFamily(spec.prom, spec.help, labels=spec.labels)
            else:
                fam = GaugeMetricFamily(spec.prom, spec.help, labels=spec.labels)
            for _, labels, value in by_spec.get(spec.prom, []):
                fam.add_metric([labels[k] for k in spec.labels], value)
            yield fam


# One collector per registry, so registering several caches in one registry adds them to
# the same collector instead of clashing on the metric names.
_registered: weakref.WeakKeyDictionary[Any, ZigguratCollector] = weakref.WeakKeyDictionary()
_registered_lock = threading.Lock()


def register(*caches: Cache, registry: CollectorRegistry | None = None) -> ZigguratCollector:
    """Reports ``caches`` in ``registry`` (default: prometheus_client's global ``REGISTRY``)
    and returns the registry's ziggurat collector: the first call registers a new one,
    later calls add their caches to it.

    >>> from prometheus_client import CollectorRegistry
    >>> from ziggurat import Cache
    >>> a, b = Cache("doc-reg-a", size="8MiB"), Cache("doc-reg-b", size="8MiB")
    >>> registry = CollectorRegistry()
    >>> register(a, registry=registry) is register(b, registry=registry)
    True
    >>> a.unlink(); b.unlink()
    """
    try:
        from prometheus_client import REGISTRY
    except ImportError:
        _need("prometheus_client", "prometheus", "ziggurat.metrics.register()")
    reg = REGISTRY if registry is None else registry
    if not hasattr(reg, "register"):
        raise TypeError(
            "ziggurat.metrics.register(): registry must be a prometheus_client "
            f"CollectorRegistry, not {type(reg).__name__}"
        )
    for c in caches:
        if not isinstance(c, Cache):
            raise TypeError(
                "ziggurat.metrics.register(): each cache must be a ziggurat.Cache, not "
                f"{type(c).__name__}"
            )
    with _registered_lock:
        collector = _registered.get(reg) or ZigguratCollector()
        for c in caches:
            collector._caches.add(c, "ziggurat.metrics.register")
        if reg not in _registered:
            reg.register(collector)
            _registered[reg] = collector
    return collector


class ZigguratInstruments:
    """OpenTelemetry observable instruments reporting ziggurat caches (made by
    ``instrument``): the same figures as the Prometheus collector, named with dots
    (``ziggurat.hits``, ``ziggurat.process.hits``) with attributes ``cache``, ``tier`` and,
    on per-process ones, ``process.pid``.

    >>> from opentelemetry.sdk.metrics import MeterProvider
    >>> from opentelemetry.sdk.metrics.export import InMemoryMetricReader
    >>> from ziggurat import Cache
    >>> reader = InMemoryMetricReader()
    >>> meter = MeterProvider(metric_readers=[reader]).get_meter("app")
    >>> c = Cache("doc-otel", size="8MiB"); c.set("k", 1)
    >>> inst = instrument(c, meter=meter)
    >>> data = reader.get_metrics_data().resource_metrics[0].scope_metrics[0].metrics
    >>> [(p.attributes["tier"], p.value) for m in data if m.name == "ziggurat.sets"
    ...  for p in m.data.data_points]
    [('l2', 1), ('negative_l2', 0)]
    >>> c.unlink()
    """

    def __init__(self, meter: Meter, *caches: Cache) -> None:
        self._caches = _Caches(caches, "ZigguratInstruments")
        self.meter = meter
        for spec in _SPECS:
            make = (
                meter.create_observable_counter
                if spec.kind == "counter"
                else meter.create_observable_gauge
            )
            make(spec.otel, callbacks=[self._callback(spec)], unit=spec.unit, description=spec.help)

    def add(self, cache: Cache) -> None:
        """Reports ``cache`` too (replacing a closed cache of the same name).

        >>> from opentelemetry.sdk.metrics import MeterProvider
        >>> from ziggurat import Cache
        >>> inst = instrument(meter=MeterProvider().get_meter("doc-add"))
        >>> c = Cache("doc-inst-add", size="8MiB"); inst.add(c); inst.caches
        [<ziggurat.Cache 'doc-inst-add' ok>]
        >>> c.unlink()
        """
        self._caches.add(cache, "ZigguratInstruments.add")

    def remove(self, cache: Cache) -> None:
        """Stops reporting ``cache``.

        >>> from opentelemetry.sdk.metrics import MeterProvider
        >>> from ziggurat import Cache
        >>> c = Cache("doc-inst-rm", size="8MiB")
        >>> inst = instrument(c, meter=MeterProvider().get_meter("doc-rm"))
        >>> inst.remove(c); inst.caches
        []
        >>> c.unlink()
        """
        self._caches.remove(cache)

    @property
    def caches(self) -> list[Cache]:
        """The caches reported, in the order they were added.

        >>> from opentelemetry.sdk.metrics import MeterProvider
        >>> instrument(meter=MeterProvider().get_meter("doc-caches")).caches
        []
        """
        return self._caches.snapshot()

    def _callback(self, spec: _Spec) -> Callable[[CallbackOptions], Iterable[Observation]]:
        from opentelemetry.metrics import Observation

        def observe(_options: CallbackOptions) -> Iterable[Observation]:
            out: list[Observation] = []
            for c in self._caches.snapshot():
                for s, labels, value in _rows(c):
                    if s is not spec:
                        continue
                    attrs: dict[str, str | int] = {}
                    for k, v in labels.items():
                        if k == "pid":
                            attrs["process.pid"] = int(v)
                        elif v:  # an empty cause means none: no attribute
                            attrs[k] = v
                    number = value if spec.unit == "s" else int(value)
                    out.append(Observation(number, attrs))
            return out

        return observe


_instrumented: weakref.WeakKeyDictionary[Any, ZigguratInstruments] = weakref.WeakKeyDictionary()


def instrument(*caches: Cache, meter: Meter | None = None) -> ZigguratInstruments:
    """Reports ``caches`` through OpenTelemetry observable instruments of ``meter``
    (default: ``opentelemetry.metrics.get_meter("ziggurat")``) and returns them: the first
    call for a meter creates the instruments, later calls add their caches to them.
    Needs ``opentelemetry-api`` (``pip install 'ziggurat[otel]'``).

    >>> from opentelemetry.sdk.metrics import MeterProvider
    >>> from ziggurat import Cache
    >>> meter = MeterProvider().get_meter("app")
    >>> a, b = Cache("doc-inst-a", size="8MiB"), Cache("doc-inst-b", size="8MiB")
    >>> instrument(a, meter=meter) is instrument(b, meter=meter)
    True
    >>> a.unlink(); b.unlink()
    """
    try:
        from opentelemetry import metrics
    except ImportError:
        _need("opentelemetry-api", "otel", "ziggurat.metrics.instrument()")
    for c in caches:
        if not isinstance(c, Cache):
            raise TypeError(
                "ziggurat.metrics.instrument(): each cache must be a ziggurat.Cache, not "
                f"{type(c).__name__}"
            )
    if meter is None:
        from ziggurat import __version__

        meter = metrics.get_meter("ziggurat", __version__)
    if not hasattr(meter, "create_observable_counter"):
        raise TypeError(
            "ziggurat.metrics.instrument(): meter must be an OpenTelemetry Meter, not "
            f"{type(meter).__name__}"
        )
    with _registered_lock:
        inst = _instrumented.get(meter)
        if inst is None:
            inst = _instrumented[meter] = ZigguratInstruments(meter)
        for c in caches:
            inst._caches.add(c, "ziggurat.metrics.instrument")
    return inst
