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
import threading
import weakref
from collections.abc import Callable, Iterable, Iterator
from typing import TYPE_CHECKING, Any, NoReturn

from ziggurat.cache import Cache
from ziggurat.metric_samples import SPECS, Caches, Row, Spec, rows

if TYPE_CHECKING:
    from opentelemetry.metrics import CallbackOptions, Meter, Observation
    from prometheus_client.metrics_core import Metric
    from prometheus_client.registry import CollectorRegistry

__all__ = ["ZigguratCollector", "ZigguratInstruments", "instrument", "register"]

log = logging.getLogger("ziggurat")


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
        self._caches = Caches(caches, "ZigguratCollector")

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
    def _families(rows: list[Row]) -> Iterator[Metric]:
        try:
            from prometheus_client.core import CounterMetricFamily, GaugeMetricFamily
        except ImportError:
            _need("prometheus_client", "prometheus", "ZigguratCollector")
        by_spec: dict[str, list[Row]] = {}
        for row in rows:
            by_spec.setdefault(row[0].prom, []).append(row)
        for spec in SPECS:
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
        self._caches = Caches(caches, "ZigguratInstruments")
        self.meter = meter
        for spec in SPECS:
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

    def _callback(self, spec: Spec) -> Callable[[CallbackOptions], Iterable[Observation]]:
        from opentelemetry.metrics import Observation

        def observe(_options: CallbackOptions) -> Iterable[Observation]:
            out: list[Observation] = []
            for c in self._caches.snapshot():
                for s, labels, value in rows(c):
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
