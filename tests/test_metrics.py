"""``ziggurat.metrics``: the Prometheus collector and the OpenTelemetry instruments.

- exact figures after known operations, names and types as prometheus_client's parser
  reads them, and every metric listed in docs/metrics.md;
- a closed or degraded cache never fails a scrape;
- the OpenTelemetry instruments, read with the SDK's in-memory reader;
- four gunicorn workers: any worker's scrape reports the whole host. Sets, deletes and
  entries are exact at once; hits and misses are exact once every worker has read its
  stats (a scrape), and never above the truth before.

``metrics_app`` is the app the multi-worker test runs (``gunicorn 'test_metrics:metrics_app()'``).
"""

from __future__ import annotations

import json
import os
import sys
import time
import urllib.request
import uuid
import warnings
from collections.abc import Iterator
from concurrent.futures import ThreadPoolExecutor
from typing import Any

import pytest
from http_servers import Server, free_port, serving
from prometheus_client import CollectorRegistry, generate_latest
from prometheus_client.parser import text_string_to_metric_families
from ziggurat import Cache, metrics

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(HERE)
WORKERS = 4

Samples = dict[tuple[str, tuple[tuple[str, str], ...]], float]


def parse(text: str) -> tuple[Samples, dict[str, str]]:
    """The samples of an exposition, by name and sorted labels, and each family's type."""
    samples: Samples = {}
    types: dict[str, str] = {}
    for fam in text_string_to_metric_families(text):
        types[fam.name] = fam.type
        for s in fam.samples:
            key = (s.name, tuple(sorted(s.labels.items())))
            assert key not in samples, f"duplicate series {key}"
            samples[key] = s.value
    return samples, types


def scrape(registry: CollectorRegistry) -> Samples:
    return parse(generate_latest(registry).decode())[0]


def val(samples: Samples, name: str, **labels: str) -> float:
    return samples[(name, tuple(sorted(labels.items())))]


def series(samples: Samples, name: str) -> dict[tuple[tuple[str, str], ...], float]:
    return {labels: v for (n, labels), v in samples.items() if n == name}


def proc_series(s: Samples) -> list[tuple[tuple[str, str], ...]]:
    """The label sets of a scrape's per-process series (one per worker and tier)."""
    return list(series(s, "ziggurat_process_hits_total"))


@pytest.fixture
def cache(shm_dir: str) -> Iterator[Cache]:
    c = Cache("metrics-" + uuid.uuid4().hex[:8], size="8MiB", directory=shm_dir)
    yield c
    c.unlink()


# -- Prometheus: exact values -------------------------------------------------------------


def _stamps_apart(cache: Cache, directory: str, first: str, n: int) -> list[str]:
    """``first`` and ``n`` other keys, none of which shares ``first``'s version stamp: a write
    of a key that shares it voids ``first``'s L1 copy (a false invalidation, by design)."""
    from format_reader import CacheReader

    with CacheReader(cache.name, directory) as reader:
        mine = reader.main.hash_key(first.encode()).stamp_index
        others = (f"k{j}" for j in range(1, 10_000))
        apart = [k for k in others if reader.main.hash_key(k.encode()).stamp_index != mine]
    return [first, *apart[:n]]


def test_exact_figures_after_known_operations(cache: Cache, shm_dir: str) -> None:
    registry = CollectorRegistry()
    metrics.register(cache, registry=registry)
    name, pid = cache.name, str(os.getpid())
    keys = _stamps_apart(cache, shm_dir, "k0", 4)
    for i, key in enumerate(keys):
        cache.set(key, {"i": i})
    assert cache.get("k0") == {"i": 0}  # this process's L1 (set filled it)
    assert cache.get("absent") is None  # L1 miss, L2 miss, cached-miss segment miss
    assert cache.delete(keys[4]) is True
    assert cache.delete(keys[4]) is False  # removed nothing: not counted
    assert cache.fetch("nothing", lambda: None) is None  # one load; its None cached as a miss
    # The cached miss: L1 miss, L2 miss, a hit in the cached-miss segment, now in L1 too.
    assert cache.fetch("nothing", lambda: 1 / 0) is None
    cache.invalidate_tags("t1", "t2")
    s = scrape(registry)

    host = {"cache": name, "tier": "l2"}
    neg = {"cache": name, "tier": "negative_l2"}
    assert val(s, "ziggurat_up", cache=name) == 1
    assert val(s, "ziggurat_degraded", cache=name, cause="") == 0
    assert val(s, "ziggurat_sets_total", **host) == 5
    assert val(s, "ziggurat_sets_total", **neg) == 1  # the cached miss of "nothing"
    assert val(s, "ziggurat_deletes_total", **host) == 1
    assert val(s, "ziggurat_entries", **host) == 4
    assert val(s, "ziggurat_entries", **neg) == 1
    # "absent" and the first "nothing" missed both segments, the second "nothing" found
    # the cached miss; k0 never left L1.
    assert val(s, "ziggurat_hits_total", **host) == 0
    assert val(s, "ziggurat_misses_total", **host) == 3
    assert val(s, "ziggurat_misses_total", **neg) == 2
    assert val(s, "ziggurat_hits_total", **neg) == 1
    assert val(s, "ziggurat_tag_invalidations_total", **host) == 2
    assert val(s, "ziggurat_evictions_total", **host) == 0
    assert val(s, "ziggurat_clears_total", **host) == 0
    st = cache.stats()["host"]["l2"]
    assert val(s, "ziggurat_file_size_bytes", **host) == st["file_size"] == 8 * 1024 * 1024
    assert val(s, "ziggurat_memory_capacity_bytes", **host) == st["bytes_capacity"]
    assert 0 < val(s, "ziggurat_memory_used_bytes", **host) == st["bytes_used"]
    assert val(s, "ziggurat_max_value_size_bytes", **host) == st["max_value_size"]
    assert val(s, "ziggurat_shards", **host) == st["shards"]
    assert val(s, "ziggurat_index_slots", **host) == st["index_slots"]

    def proc(name_: str, **labels: str) -> float:
        return val(s, name_, cache=name, pid=pid, **labels)

    assert proc("ziggurat_process_hits_total", tier="l1") == 1
    assert proc("ziggurat_process_misses_total", tier="l1") == 3
    assert proc("ziggurat_process_hits_total", tier="l2") == 0
    assert proc("ziggurat_process_misses_total", tier="l2") == 3
    assert proc("ziggurat_process_hits_total", tier="negative_l2") == 1
    assert proc("ziggurat_process_entries", tier="l1") == 4
    assert proc("ziggurat_process_entries", tier="negative_l1") == 1
    assert proc("ziggurat_process_loader_calls_total") == 1
    assert proc("ziggurat_process_loader_errors_total") == 0
    assert proc("ziggurat_process_loader_seconds_total") > 0
    assert proc("ziggurat_process_loader_max_seconds") > 0
    assert proc("ziggurat_process_write_errors_total") == 0

    # A second attachment of the segment counts its lookups apart, as another worker would,
    # and adds them to the segment when it reads stats() or closes: batched.
    other = Cache(name, size="8MiB", directory=shm_dir, l1_items=0)
    for i in range(3):
        assert other.get(f"k{i}") == {"i": i}
    assert other.get("k4") is None
    s = scrape(registry)
    assert val(s, "ziggurat_hits_total", **host) == 0
    assert val(s, "ziggurat_misses_total", **host) == 3
    # Writes are counted in the segment at once.
    other.set("k9", 9)
    assert val(scrape(registry), "ziggurat_sets_total", **host) == 6
    other.close()
    s = scrape(registry)
    assert val(s, "ziggurat_hits_total", **host) == 3
    assert val(s, "ziggurat_misses_total", **host) == 4
    # This process's own figures did not move: they are per process.
    assert proc("ziggurat_process_hits_total", tier="l1") == 1


def test_names_types_and_labels_follow_prometheus_conventions(cache: Cache) -> None:
    registry = CollectorRegistry()
    metrics.register(cache, registry=registry)
    cache.set("k", 1)
    text = generate_latest(registry).decode()
    samples, types = parse(text)
    assert types, "no family"
    for fam in text_string_to_metric_families(text):
        assert fam.name.startswith("ziggurat_")
        assert fam.documentation
        assert fam.samples, f"{fam.name} has no sample"
        for s in fam.samples:
            assert s.labels["cache"] == cache.name
            if fam.type == "counter":
                assert s.name == fam.name + "_total"
            else:
                assert fam.type == "gauge"
                assert not s.name.endswith("_total")
            is_proc = fam.name.startswith("ziggurat_process_")
            assert ("pid" in s.labels) == is_proc, s
            if is_proc:
                assert s.labels["pid"] == str(os.getpid())
            elif "tier" in s.labels:
                assert s.labels["tier"] in ("l2", "negative_l2")
            if "bytes" in fam.name:
                assert fam.name.endswith("_bytes") and fam.type == "gauge"
    assert types["ziggurat_hits"] == "counter"
    assert types["ziggurat_entries"] == "gauge"
    assert types["ziggurat_process_entries"] == "gauge"
    proc_tiers = {dict(lab)["tier"] for lab in series(samples, "ziggurat_process_hits_total")}
    assert proc_tiers == {"l1", "l2", "negative_l2"}
    entry_tiers = {dict(lab)["tier"] for lab in series(samples, "ziggurat_process_entries")}
    assert entry_tiers == {"l1", "negative_l1"}


def test_only_per_process_families_add_up_over_processes() -> None:
    from ziggurat.metric_samples import SPECS

    for spec in SPECS:
        own = spec.prom.startswith("ziggurat_process_")
        assert spec.scope == ("process" if own else "host"), spec.prom
        assert ("pid" in spec.labels) == own, spec.prom


def test_every_metric_is_in_the_docs(cache: Cache) -> None:
    with open(os.path.join(ROOT, "docs", "metrics.md"), encoding="utf-8") as f:
        doc = f.read()
    names = {f.name for f in metrics.ZigguratCollector().describe()}
    fams = list(metrics.ZigguratCollector(cache).collect())
    assert names == {f.name for f in fams}
    for fam in fams:
        shown = fam.name + ("_total" if fam.type == "counter" else "")
        assert f"`{shown}`" in doc, f"{shown} is not in docs/metrics.md"
    reader, meter = _otel()
    metrics.instrument(cache, meter=meter)
    for m in _otel_metrics(reader):
        assert f"`{m.name}`" in doc, f"{m.name} is not in docs/metrics.md"


def test_several_caches_one_collector(shm_dir: str) -> None:
    a = Cache("metrics-a-" + uuid.uuid4().hex[:6], size="8MiB", directory=shm_dir)
    b = Cache("metrics-b-" + uuid.uuid4().hex[:6], size="8MiB", directory=shm_dir)
    try:
        registry = CollectorRegistry()
        coll = metrics.register(a, registry=registry)
        assert metrics.register(b, registry=registry) is coll
        assert coll.caches == [a, b]
        a.set("x", 1)
        b.set("x", 1)
        b.set("y", 2)
        s = scrape(registry)
        assert val(s, "ziggurat_sets_total", cache=a.name, tier="l2") == 1
        assert val(s, "ziggurat_sets_total", cache=b.name, tier="l2") == 2
        # Registering again is harmless; a second collector in the same registry clashes
        # on the names, which describe() lets the registry see.
        assert metrics.register(a, registry=registry) is coll
        assert coll.caches == [a, b]
        with pytest.raises(ValueError, match="Duplicated timeseries"):
            registry.register(metrics.ZigguratCollector(a))
        coll.remove(b)
        assert {dict(lab)["cache"] for lab in series(scrape(registry), "ziggurat_up")} == {a.name}
        with pytest.raises(ValueError, match=r"ZigguratCollector\.remove\(\): the cache"):
            coll.remove(b)
    finally:
        a.unlink()
        b.unlink()


def test_a_closed_or_degraded_cache_never_fails_a_scrape(cache: Cache, shm_dir: str) -> None:
    missing = os.path.join(shm_dir, "no-such-directory")
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", RuntimeWarning)
        down = Cache("metrics-down", size="8MiB", directory=missing)
    assert down.degraded
    registry = CollectorRegistry()
    metrics.register(cache, down, registry=registry)
    cache.set("k", 1)
    down.set("k", 1)
    s = scrape(registry)
    assert val(s, "ziggurat_up", cache="metrics-down") == 1
    assert val(s, "ziggurat_degraded", cache="metrics-down", cause="missing_directory") == 1
    assert val(s, "ziggurat_degraded", cache=cache.name, cause="") == 0
    # No segment: no host-wide series for it, but its process series are there.
    assert {dict(lab)["cache"] for lab in series(s, "ziggurat_sets_total")} == {cache.name}
    pid = str(os.getpid())
    assert val(s, "ziggurat_process_misses_total", cache="metrics-down", pid=pid, tier="l1") == 0

    cache.close()
    down.close()
    s = scrape(registry)  # must not raise
    assert val(s, "ziggurat_up", cache=cache.name) == 0
    assert val(s, "ziggurat_up", cache="metrics-down") == 0
    assert all(dict(lab)["cache"] != cache.name for (n, lab) in s if n != "ziggurat_up")

    # A closed cache is replaced by a new one of the same name; two open ones are refused.
    again = Cache(cache.name, size="8MiB", directory=shm_dir)
    coll = metrics.register(again, registry=registry)
    assert again in coll.caches and cache not in coll.caches
    assert val(scrape(registry), "ziggurat_entries", cache=cache.name, tier="l2") == 1
    twin = Cache(cache.name, size="8MiB", directory=shm_dir)
    with pytest.raises(ValueError, match=r"ZigguratCollector.add\(\): a cache named .* is alr"):
        coll.add(twin)
    with pytest.raises(ValueError, match=r"register\(\): a cache named"):
        metrics.register(twin, registry=registry)
    assert twin not in coll.caches
    twin.close()
    again.close()


def test_bad_arguments_name_the_function() -> None:
    with pytest.raises(TypeError, match=r"register\(\): each cache must be a ziggurat.Cache"):
        metrics.register("api", registry=CollectorRegistry())  # type: ignore[arg-type]
    with pytest.raises(TypeError, match=r"register\(\): registry must be a prometheus_client"):
        metrics.register(registry={})  # type: ignore[arg-type]
    with pytest.raises(TypeError, match=r"ZigguratCollector\(\): each cache must be"):
        metrics.ZigguratCollector(object())  # type: ignore[arg-type]
    with pytest.raises(TypeError, match=r"instrument\(\): each cache must be"):
        metrics.instrument(42)  # type: ignore[arg-type]
    with pytest.raises(TypeError, match=r"instrument\(\): meter must be an OpenTelemetry"):
        metrics.instrument(meter="m")  # type: ignore[arg-type]


def test_missing_packages_name_the_extra(monkeypatch: pytest.MonkeyPatch, cache: Cache) -> None:
    for mod in [m for m in sys.modules if m.startswith("prometheus_client")]:
        monkeypatch.setitem(sys.modules, mod, None)
    with pytest.raises(ImportError, match=r"pip install 'ziggurat\[prometheus\]'"):
        metrics.register(cache, registry=CollectorRegistry())
    with pytest.raises(ImportError, match=r"ZigguratCollector needs the prometheus_client"):
        list(metrics.ZigguratCollector(cache).collect())
    for mod in [m for m in sys.modules if m.startswith("opentelemetry")]:
        monkeypatch.setitem(sys.modules, mod, None)
    with pytest.raises(ImportError, match=r"pip install 'ziggurat\[otel\]'"):
        metrics.instrument(cache)


def test_start_http_server_serves_the_collector(cache: Cache) -> None:
    from prometheus_client import start_http_server

    registry = CollectorRegistry()
    metrics.register(cache, registry=registry)
    cache.set("k", 1)
    port = free_port()
    server, thread = start_http_server(port, addr="127.0.0.1", registry=registry)
    try:
        with urllib.request.urlopen(f"http://127.0.0.1:{port}/metrics", timeout=10) as r:
            s, _ = parse(r.read().decode())
        assert val(s, "ziggurat_sets_total", cache=cache.name, tier="l2") == 1
    finally:
        server.shutdown()
        server.server_close()
        thread.join(10)


# -- OpenTelemetry ------------------------------------------------------------------------


def _otel() -> tuple[Any, Any]:
    from opentelemetry.sdk.metrics import MeterProvider
    from opentelemetry.sdk.metrics.export import InMemoryMetricReader

    reader = InMemoryMetricReader()
    provider = MeterProvider(metric_readers=[reader])
    return reader, provider.get_meter("test-" + uuid.uuid4().hex[:6])


def _otel_metrics(reader: Any) -> list[Any]:
    data = reader.get_metrics_data()
    return [m for rm in data.resource_metrics for sm in rm.scope_metrics for m in sm.metrics]


def _points(reader: Any) -> dict[str, dict[tuple[tuple[str, Any], ...], Any]]:
    out: dict[str, dict[tuple[tuple[str, Any], ...], Any]] = {}
    for m in _otel_metrics(reader):
        for p in m.data.data_points:
            out.setdefault(m.name, {})[tuple(sorted(p.attributes.items()))] = p.value
    return out


def test_opentelemetry_instruments_in_memory(cache: Cache, shm_dir: str) -> None:
    from opentelemetry.sdk.metrics.export import Gauge, Sum

    reader, meter = _otel()
    inst = metrics.instrument(cache, meter=meter)
    assert metrics.instrument(cache, meter=meter) is inst
    for i in range(4):
        cache.set(f"k{i}", i)
    cache.get("k0")
    cache.get("absent")
    cache.delete("k3")

    by_name = {m.name: m for m in _otel_metrics(reader)}
    hits = by_name["ziggurat.hits"]
    assert isinstance(hits.data, Sum) and hits.data.is_monotonic
    assert isinstance(by_name["ziggurat.entries"].data, Gauge)
    assert by_name["ziggurat.memory.used"].unit == "By"
    assert by_name["ziggurat.process.loader_seconds"].unit == "s"

    pts = _points(reader)
    name, pid = cache.name, os.getpid()
    host = (("cache", name), ("tier", "l2"))
    assert pts["ziggurat.sets"][host] == 4
    assert pts["ziggurat.deletes"][host] == 1
    assert pts["ziggurat.entries"][host] == 3
    assert pts["ziggurat.misses"][host] == 1
    assert pts["ziggurat.up"][(("cache", name),)] == 1
    assert pts["ziggurat.degraded"][(("cache", name),)] == 0

    def proc(tier: str) -> tuple[tuple[str, Any], ...]:
        return (("cache", name), ("process.pid", pid), ("tier", tier))

    assert pts["ziggurat.process.hits"][proc("l1")] == 1
    assert pts["ziggurat.process.misses"][proc("l1")] == 1
    assert pts["ziggurat.process.entries"][proc("l1")] == 3

    # A second collection sees what happened since; a second cache is reported beside.
    other = Cache("metrics-otel-" + uuid.uuid4().hex[:6], size="8MiB", directory=shm_dir)
    try:
        metrics.instrument(other, meter=meter)
        cache.set("k9", 9)
        other.set("x", 1)
        pts = _points(reader)
        assert pts["ziggurat.sets"][host] == 5
        assert pts["ziggurat.sets"][(("cache", other.name), ("tier", "l2"))] == 1
        other.close()
        pts = _points(reader)  # a closed cache does not fail the collection
        assert pts["ziggurat.up"][(("cache", other.name),)] == 0
        assert pts["ziggurat.sets"][host] == 5
        inst.remove(other)
        assert inst.caches == [cache]
        assert (("cache", other.name),) not in _points(reader)["ziggurat.up"]
        with pytest.raises(ValueError, match=r"ZigguratInstruments.remove\(\): the cache"):
            inst.remove(other)
    finally:
        other.unlink()


# -- many workers -------------------------------------------------------------------------

_ABSENT = object()


def metrics_app() -> Any:
    """A Flask app for gunicorn: ``/work`` sets, gets or deletes ``n`` keys of a prefix and
    says what it found; ``/metrics`` is the registry's exposition. ``?meet=<group>&of=<n>``
    holds a request until ``n`` of its group have arrived: a sync worker serves one request
    at a time, so the ``n`` requests of a group are served by ``n`` different workers."""
    from flask import Flask, Response, request
    from prometheus_client import CONTENT_TYPE_LATEST

    cache = Cache(
        os.environ["ZIG_METRICS_CACHE"], size="16MiB", directory=os.environ["ZIG_METRICS_DIR"]
    )
    registry = CollectorRegistry()
    metrics.register(cache, registry=registry)
    meet_dir = os.environ["ZIG_METRICS_MEET"]
    app = Flask(__name__)

    def meet() -> None:
        group = request.args.get("meet")
        if not group:
            return
        # Files, not cache counters, so the meeting does not change the figures measured.
        d = os.path.join(meet_dir, group)
        os.makedirs(d, exist_ok=True)
        open(os.path.join(d, str(os.getpid())), "w").close()
        deadline = time.monotonic() + 30
        while len(os.listdir(d)) < int(request.args["of"]):
            if time.monotonic() > deadline:
                raise RuntimeError(f"meet {group}: the other requests never arrived")
            time.sleep(0.002)

    @app.get("/work")
    def work() -> dict[str, Any]:
        meet()
        op, prefix = request.args["op"], request.args["prefix"]
        keys = [f"{prefix}:{i}" for i in range(int(request.args["n"]))]
        out: dict[str, Any] = {"pid": os.getpid(), "op": op}
        if op == "set":
            for i, k in enumerate(keys):
                cache.set(k, {"i": i, "prefix": prefix})
            out["set"] = len(keys)
        elif op == "get":
            found = sum(cache.get(k, _ABSENT) is not _ABSENT for k in keys)
            out.update(found=found, absent=len(keys) - found)
        else:
            out["deleted"] = sum(cache.delete(k) for k in keys)
            out["calls"] = len(keys)
        return out

    @app.get("/metrics")
    def scrape() -> Response:
        meet()
        return Response(generate_latest(registry), content_type=CONTENT_TYPE_LATEST)

    return app


@pytest.fixture
def workers() -> Iterator[Server]:
    base = f"/dev/shm/zigmetrics-{uuid.uuid4().hex}"
    os.mkdir(base, 0o700)
    os.mkdir(os.path.join(base, "meet"))
    port = free_port()
    env = dict(os.environ)
    env.update(
        ZIG_METRICS_CACHE="metrics-" + uuid.uuid4().hex[:8],
        ZIG_METRICS_DIR=base,
        ZIG_METRICS_MEET=os.path.join(base, "meet"),
        PYTHONPATH=HERE + os.pathsep + env.get("PYTHONPATH", ""),
    )
    cmd = [sys.executable, "-m", "gunicorn", "-w", str(WORKERS), "-b", f"127.0.0.1:{port}"]
    cmd += ["--log-level", "warning", "--timeout", "60", "test_metrics:metrics_app()"]
    with serving("wsgi", cmd, port, base, cwd=HERE, env=env, ready="/metrics") as srv:
        yield srv


@pytest.mark.timeout(180)
def test_one_scrape_of_any_worker_reports_the_whole_host(workers: Server) -> None:
    srv = workers
    rounds = [0]

    def together(paths: list[str]) -> list[Any]:
        """Sends ``paths`` at once, each to a different worker (they meet)."""
        rounds[0] += 1
        group = f"g{rounds[0]}"
        sep = ["&" if "?" in p else "?" for p in paths]
        urls = [f"{p}{s}meet={group}&of={len(paths)}" for p, s in zip(paths, sep, strict=True)]
        with ThreadPoolExecutor(len(urls)) as ex:
            rs = list(ex.map(lambda u: srv.request(u, timeout=60), urls))
        for r in rs:
            assert r.status == 200, r.text
        return [r.body for r in rs]

    def work(paths: list[str]) -> list[dict[str, Any]]:
        out = []
        for i in range(0, len(paths), WORKERS):
            out += [json.loads(b) for b in together(paths[i : i + WORKERS])]
        return out

    def scrapes() -> list[Samples]:
        return [parse(b.decode())[0] for b in together(["/metrics"] * WORKERS)]

    name = srv.request("/metrics").text.split('ziggurat_up{cache="')[1].split('"')[0]
    host = {"cache": name, "tier": "l2"}
    neg = {"cache": name, "tier": "negative_l2"}

    prefixes = [f"p{i}" for i in range(40)]
    sets = work([f"/work?op=set&prefix={p}&n=10" for p in prefixes])
    # 15 keys of a prefix of 10: 10 found, 5 absent; each prefix read twice.
    gets = work([f"/work?op=get&prefix={prefixes[i % 40]}&n=15" for i in range(80)])
    dels = work([f"/work?op=delete&prefix={p}&n=10" for p in prefixes[:4] * 2])
    pids = {r["pid"] for r in sets + gets + dels}
    assert len(pids) == WORKERS, "the work did not reach every worker"
    n_set = sum(r["set"] for r in sets)
    found = sum(r["found"] for r in gets)
    absent = sum(r["absent"] for r in gets)
    deleted = sum(r["deleted"] for r in dels)
    assert (n_set, found, absent, deleted) == (400, 800, 400, 40)

    # One scrape of whichever worker answers: writes are counted in the segment at once,
    # whichever worker made them.
    first = parse(srv.request("/metrics").text)[0]
    assert val(first, "ziggurat_sets_total", **host) == n_set
    assert val(first, "ziggurat_deletes_total", **host) == deleted
    assert val(first, "ziggurat_entries", **host) == n_set - deleted
    assert val(first, "ziggurat_evictions_total", **host) == 0
    # Lookups are batched: a worker adds its own when it reads stats() (a scrape), or every
    # 1024. Each worker made 100 misses and at most 200 segment hits, so the first scrape
    # shows exactly the answering worker's own lookups, none of the others' yet.
    (answering,) = {dict(lab)["pid"] for lab in proc_series(first)}
    own = {"cache": name, "pid": answering, "tier": "l2"}
    assert val(first, "ziggurat_process_misses_total", **own) == absent / WORKERS
    assert val(first, "ziggurat_misses_total", **host) == absent / WORKERS
    assert val(first, "ziggurat_hits_total", **host) == val(
        first, "ziggurat_process_hits_total", **own
    )

    # Every worker reads its stats once (a scrape each): from then on every scrape, of any
    # worker, gives the exact host figures.
    assert {int(dict(lab)["pid"]) for s in scrapes() for lab in proc_series(s)} == pids
    final = scrapes()
    assert {int(dict(lab)["pid"]) for s in final for lab in proc_series(s)} == pids

    def proc_sum(metric: str, tier: str) -> float:
        total = 0.0
        for s in final:  # one scrape per worker: each reports its own process series
            mine = [
                v
                for lab, v in series(s, metric).items()
                if dict(lab)["tier"] == tier and dict(lab)["cache"] == name
            ]
            assert len(mine) == 1
            total += mine[0]
        return total

    l1_hits = proc_sum("ziggurat_process_hits_total", "l1")
    l2_hits = proc_sum("ziggurat_process_hits_total", "l2")
    l1_misses = proc_sum("ziggurat_process_misses_total", "l1")
    l2_misses = proc_sum("ziggurat_process_misses_total", "l2")
    # Every found key came from some worker's L1 or the segment; absent keys missed both.
    assert l1_hits + l2_hits == found
    assert l2_misses == absent
    assert l1_misses == l2_hits + l2_misses
    assert l2_hits > 0, "no worker read another worker's key from the segment"
    for s in final:
        assert val(s, "ziggurat_sets_total", **host) == n_set
        assert val(s, "ziggurat_deletes_total", **host) == deleted
        assert val(s, "ziggurat_entries", **host) == n_set - deleted
        assert val(s, "ziggurat_hits_total", **host) == l2_hits
        assert val(s, "ziggurat_misses_total", **host) == absent
        assert val(s, "ziggurat_misses_total", **neg) == absent
        assert val(s, "ziggurat_hits_total", **neg) == 0
        assert val(s, "ziggurat_up", cache=name) == 1
