"""The polyglot demo: the URL shortener served by Python workers and Node.js workers at once,
on one PostgreSQL database and one host cache.

Run it with ``make demo`` (after the blog and the Python shortener), or
``python -m examples.shortener.polyglot_demo`` from the repository root once ziggurat, the
demo requirements, the Node.js package (``make node-build``) and the Node.js app's own
dependencies (``npm ci`` in ``examples/shortener/node``) are installed. For each mode (no
cache, then ziggurat with its L1 over the shared segment) it

1. starts the Python app under uvicorn and the Node.js app (``examples/shortener/node``)
   under Node.js's ``cluster`` module, each with ``DEMO_WORKERS`` workers on a port of its
   own, both on one cache name and one link table;
2. measures each language's workers in turn with the Python demo's load (wrk, or the Python
   fallback, over the same Zipf mix of links, with a warm-up), the cache emptied before
   each language's turn so that both start alike;
3. changes links through one language and reads them at once through the other, round after
   round in both directions (``DEMO_ROUNDS``), each read on a new connection so that every
   worker answers, and counts the stale answers;
4. creates links in the database behind both apps' backs and asks for each of them through
   both languages at once: the workers' query counters say how many loads each key took;

then prints the figures and the checks, with PASS or FAIL, and stops every process and
removes every file it made. The exit code is 0 only if every check passed.

Settings (environment variables): those of :mod:`examples.shortener.demo` (``DEMO_SECONDS``,
``DEMO_WARMUP_SECONDS``, ``DEMO_CONNECTIONS``, ``DEMO_WORKERS``, ``DEMO_LINKS``,
``DEMO_ZIPF``, ``DEMO_LOADGEN``, ``DATABASE_URL``; ``DEMO_MODES`` takes ``none`` and
``l1+l2``), and ``DEMO_ROUNDS`` (cross-language changes, default 1000, half in each
direction), ``DEMO_KEYS`` (new links asked for by both languages at once, 50) and
``DEMO_CALLERS`` (concurrent requests per language for each of them, 8).

    $ python -m examples.shortener.polyglot_demo  # doctest: +SKIP
"""

from __future__ import annotations

import asyncio
import os
import shutil
import subprocess
import sys
import time
import uuid
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from rich.console import Console
from rich.table import Table

from . import db, loadgen, processes
from .demo import (
    HOST,
    MODE_TITLES,
    WRK_INSTALL_HINT,
    Demo,
    Server,
    Settings,
    cache_available,
    summed_delta,
)
from .loadgen import Connection, LoadResult, Reply

NODE_APP = Path(__file__).resolve().parent / "node"
MODES = ("none", "l1+l2")
LANGUAGES = ("python", "node")
LANGUAGE_TITLES = {"python": "Python", "node": "Node.js"}
SERVER_TITLES = {"python": "uvicorn", "node": "cluster"}
BUILD_HINT = "run `make demo` (or `make node-build` and `npm ci` in examples/shortener/node)"


# ---------------------------------------------------------------------------------------
# Settings


@dataclass
class PolyglotSettings:
    """The shortener demo's settings, and the cross-language checks' own."""

    base: Settings
    rounds: int = 1000
    keys: int = 50
    callers: int = 8

    @classmethod
    def from_env(cls) -> PolyglotSettings:
        base = Settings.from_env(default_modes=MODES)
        for mode in base.modes:
            if mode not in MODES:
                raise SystemExit(f"DEMO_MODES: the polyglot demo runs {' and '.join(MODES)}")
        env = os.environ
        settings = cls(
            base,
            rounds=int(env.get("DEMO_ROUNDS", cls.rounds)),
            keys=int(env.get("DEMO_KEYS", cls.keys)),
            callers=int(env.get("DEMO_CALLERS", cls.callers)),
        )
        for name, value in (
            ("DEMO_ROUNDS", settings.rounds),
            ("DEMO_KEYS", settings.keys),
            ("DEMO_CALLERS", settings.callers),
        ):
            if value < 1:
                raise SystemExit(f"{name} must be a whole number >= 1, got {value}")
        return settings


# ---------------------------------------------------------------------------------------
# The Node.js server


class NodeServer(Server):
    """The Node.js app under ``cluster`` (``examples/shortener/node/server.mjs``), started
    and watched as :class:`Server` starts uvicorn: same environment, same stats files."""

    def command(self) -> list[str]:
        node = shutil.which("node") or "node"
        return [
            node,
            str(NODE_APP / "server.mjs"),
            "--host",
            HOST,
            "--port",
            str(self.port),
            "--workers",
            str(self.workers),
        ]


def node_problem() -> str | None:
    """``None`` if the Node.js app can start here, else what is missing and how to get it."""
    node = shutil.which("node")
    if node is None:
        return "Node.js is not installed (Node.js 20 or later is needed)"
    version = subprocess.run(
        [node, "-p", "process.versions.node"], capture_output=True, text=True, check=False
    ).stdout.strip()
    if not version or int(version.split(".")[0]) < 20:
        return f"Node.js {version or '?'} is too old (20 or later is needed)"
    probe = subprocess.run(
        [node, "-e", "import('pg').then(() => import('ziggurat'))"],
        cwd=NODE_APP,
        capture_output=True,
        text=True,
        check=False,
    )
    if probe.returncode != 0:
        last = (probe.stderr.strip().splitlines() or ["?"])[-1]
        return f"the Node.js app's packages cannot be loaded ({last}): {BUILD_HINT}"
    return None


# ---------------------------------------------------------------------------------------
# The checks


@dataclass
class Direction:
    """Links changed through ``writer`` and read at once through ``reader``.

    >>> d = Direction("python", "node", rounds=1, reads=4)
    >>> d.title, d.passed
    ('Python writes, Node.js reads', True)
    """

    writer: str
    reader: str
    rounds: int = 0
    reads: int = 0  # reads after a change returned
    stale: int = 0  # of those, the ones that did not serve the change
    wrong_before: int = 0  # reads before a change that did not serve the link as it was
    failed_writes: int = 0
    created: int = 0  # rounds that created a link the reader had just cached as unknown
    workers: set[str] = field(default_factory=set)

    @property
    def title(self) -> str:
        return f"{LANGUAGE_TITLES[self.writer]} writes, {LANGUAGE_TITLES[self.reader]} reads"

    @property
    def passed(self) -> bool:
        bad = self.stale + self.wrong_before + self.failed_writes
        return self.rounds > 0 and self.reads > 0 and bad == 0


@dataclass
class SingleFlight:
    """New links asked for through both languages at once, and the loads they took.

    >>> SingleFlight(keys=2, requests=8, right=8, loads={"python": 1, "node": 1}).total_loads
    2
    """

    keys: int = 0
    requests: int = 0
    right: int = 0
    loads: dict[str, int] = field(default_factory=dict)  # database reads, by language

    @property
    def total_loads(self) -> int:
        return sum(self.loads.values())


async def _gets(port: int, path: str, count: int) -> list[Reply]:
    """``count`` GETs of ``path`` at once, each on a new connection, so that the server's
    workers share them."""

    async def one() -> Reply:
        async with Connection(HOST, port) as conn:
            return await conn.request("GET", path)

    return list(await asyncio.gather(*(one() for _ in range(count))))


def _serves(reply: Reply, target: str | None) -> bool:
    if target is None:
        return reply.status == 404
    return reply.status == 302 and reply.headers.get("location") == target


async def cross_rounds(
    servers: dict[str, Server], slugs: Sequence[str], targets: dict[str, str], rounds: int
) -> list[Direction]:
    """``rounds`` changes, alternating Python → Node.js and Node.js → Python. Each round reads
    a link through the reader (so its workers hold it in L1), changes it through the writer,
    and as soon as the writer answers reads it through the reader again: every read must
    serve the change. Two rounds in ten (one each way) create a link instead, one the reader
    was just asked for and answered 404 (a miss it cached)."""
    token = uuid.uuid4().hex[:8]
    reads = 4
    directions = [Direction("python", "node"), Direction("node", "python")]
    apis = {lang: Connection(HOST, servers[lang].port) for lang in LANGUAGES}
    try:
        for n in range(rounds):
            d = directions[n % 2]
            reader, writer = servers[d.reader], apis[d.writer]
            d.rounds += 1
            if n % 10 >= 8:
                slug = f"pg-{token}-{n}"
                before: str | None = None
                target = f"https://example.org/polyglot/{token}/new/{n}"
                method, path, body = "POST", "/links", {"slug": slug, "target": target}
                expect_status = 201
                d.created += 1
            else:
                slug = slugs[(n // 2) % len(slugs)]
                before = targets[slug]
                target = f"https://example.org/polyglot/{token}/{n}"
                method, path, body = "PUT", f"/links/{slug}", {"target": target}
                expect_status = 200
            for reply in await _gets(reader.port, f"/{slug}", reads):
                d.wrong_before += not _serves(reply, before)
            answer = await writer.request(method, path, body)
            if answer.status != expect_status:
                d.failed_writes += 1
                continue
            targets[slug] = target
            for reply in await _gets(reader.port, f"/{slug}", reads):
                d.reads += 1
                d.stale += not _serves(reply, target)
                d.workers.add(reply.headers.get("x-served-by", ""))
    finally:
        for api in apis.values():
            await api.close()
    for d in directions:
        d.workers.discard("")
    return directions


async def _ask_everywhere(
    servers: dict[str, Server], slug: str, target: str, callers: int
) -> tuple[int, int]:
    """``callers`` GETs of ``slug`` through each language, all at once: (requests, right)."""
    batches = await asyncio.gather(
        *(_gets(servers[lang].port, f"/{slug}", callers) for lang in LANGUAGES)
    )
    replies = [r for batch in batches for r in batch]
    return len(replies), sum(_serves(r, target) for r in replies)


# ---------------------------------------------------------------------------------------
# Figures


@dataclass
class LanguageResult:
    language: str
    mode: str
    load: LoadResult
    lookups: int
    db_reads: int
    l1: tuple[int, int] | None

    @property
    def saved(self) -> float | None:
        return None if self.lookups == 0 else 1.0 - self.db_reads / self.lookups


@dataclass
class ModeRun:
    mode: str
    languages: list[LanguageResult]
    directions: list[Direction]
    flight: SingleFlight
    unreadable: int | None  # entries the Node.js workers could not read (None: no cache)

    @property
    def flight_passed(self) -> bool:
        f = self.flight
        return f.keys > 0 and f.right == f.requests and f.total_loads == f.keys


def l1_counts(stats: Any) -> tuple[int, int] | None:
    """(hits, lookups) of a worker's own L1 in its cache's ``stats()``, in either language's
    shape: Python's ``stats()["process"]["l1"]``, Node.js's ``stats().l1``.

    >>> l1_counts({"process": {"l1": {"hits": 9, "misses": 1}}})
    (9, 10)
    >>> l1_counts({"l1": {"hits": 3, "misses": 1}})
    (3, 4)
    >>> l1_counts(None) is None
    True
    """
    if not isinstance(stats, dict):
        return None
    part = stats.get("process", stats)
    counts = part.get("l1") if isinstance(part, dict) else None
    if not isinstance(counts, dict):
        return None
    hits, misses = counts.get("hits"), counts.get("misses")
    if not isinstance(hits, int) or not isinstance(misses, int):
        return None
    return hits, hits + misses


def l1_delta(before: dict[int, dict[str, Any]], after: dict[int, dict[str, Any]]) -> Any:
    hits = lookups = 0
    for pid, doc in after.items():
        now = l1_counts(doc.get("cache"))
        if now is None:
            return None
        then = l1_counts(before.get(pid, {}).get("cache")) or (0, 0)
        hits += now[0] - then[0]
        lookups += now[1] - then[1]
    return hits, lookups


# ---------------------------------------------------------------------------------------
# The run


class PolyglotDemo(Demo):
    def __init__(self, settings: PolyglotSettings, console: Console) -> None:
        super().__init__(settings.base, console, "postgresql")
        self.polyglot = settings

    def run_polyglot(self) -> list[ModeRun]:
        with self.progress:
            database_url, _, paths, ranked = self.prepare()
            return [
                self.run_languages(mode, database_url, paths, ranked)
                for mode in self.settings.modes
            ]

    def run_languages(
        self, mode: str, database_url: str, paths: Sequence[str], ranked: Sequence[str]
    ) -> ModeRun:
        s, p = self.settings, self.polyglot
        title = MODE_TITLES[mode] if mode == "none" else "ziggurat"
        cache_name = f"shortener-polyglot-{self.run_id}-{mode.replace('+', '')}"
        servers: dict[str, Server] = {
            "python": Server(mode, database_url, s.workers, self.workdir, cache_name, label="py"),
            "node": NodeServer(mode, database_url, s.workers, self.workdir, cache_name, label="js"),
        }
        results = []
        try:
            for lang, server in servers.items():
                self.servers.append(server)
                what = f"{s.workers} {LANGUAGE_TITLES[lang]} workers ({SERVER_TITLES[lang]})"
                with self.step(f"{title}: starting {what}"):
                    server.start()
                pids = sorted(server.snapshot())
                self.log(
                    f"{title}: {LANGUAGE_TITLES[lang]} on port {server.port}, "
                    f"workers {', '.join(map(str, pids))}, cache {cache_name}"
                )
            for lang, server in servers.items():
                results.append(self.measure(mode, title, lang, server, paths))

            slugs = list(ranked[: max(1, min(64, len(ranked)))])
            targets = current_targets(database_url, slugs)
            rounds = f"{title}: {p.rounds:,} links changed through one language, read by the other"
            with self.step(rounds):
                directions = asyncio.run(cross_rounds(servers, slugs, targets, p.rounds))
            with self.step(f"{title}: {p.keys} new links asked for by both languages at once"):
                flight = self.single_flight(servers, database_url)
            unreadable = None if mode == "none" else node_unreadable(servers["node"].snapshot())
        finally:
            with self.step(f"{title}: stopping the servers"):
                for server in servers.values():
                    server.stop()
                    if server in self.servers:
                        self.servers.remove(server)

        run = ModeRun(mode, results, directions, flight, unreadable)
        for d in directions:
            verdict = "[green]PASS[/]" if d.passed else "[red]FAIL[/]"
            self.log(
                f"{title}: {d.title}: {d.stale} stale of {d.reads:,} reads over {d.rounds} rounds "
                f"{verdict}"
            )
        self.log(
            f"{title}: {flight.keys} new links, {flight.requests:,} requests from both languages: "
            f"{flight.total_loads:,} database loads"
        )
        return run

    def measure(
        self, mode: str, title: str, lang: str, server: Server, paths: Sequence[str]
    ) -> LanguageResult:
        s = self.settings
        name = LANGUAGE_TITLES[lang]
        if mode != "none":
            # Each language's run starts from an empty cache (the other's run filled it).
            clear_cache(server.cache_name)
        if s.warmup > 0:
            with self.step(f"{title}, {name}: warming up", total=s.warmup) as tick:
                self.load(server, paths, s.warmup, tick)
        before = server.snapshot()
        with self.step(
            f"{title}, {name}: load, {s.connections} connections for {s.seconds:g} s",
            total=s.seconds,
        ) as tick:
            load = self.load(server, paths, s.seconds, tick)
        after = server.snapshot()
        result = LanguageResult(
            lang,
            mode,
            load,
            lookups=summed_delta(before, after, "lookups"),
            db_reads=summed_delta(before, after, "db_reads"),
            l1=l1_delta(before, after) if mode != "none" else None,
        )
        self.log(
            f"[bold]{title}, {name}[/]: {load.rps:,.0f} req/s, p99 {load.p99:.2f} ms, "
            f"{result.db_reads:,} DB queries for {result.lookups:,} lookups"
        )
        return result

    def single_flight(self, servers: dict[str, Server], database_url: str) -> SingleFlight:
        """New links, written to the database behind both apps' backs (so no cache holds
        them), each asked for by both languages at once; the loads are the database reads
        that every worker of both counted meanwhile."""
        p = self.polyglot
        token = uuid.uuid4().hex[:8]
        news = [(f"sf-{token}-{i}", f"https://example.org/one/{token}/{i}") for i in range(p.keys)]
        writer = db.Database(database_url)
        try:
            for slug, target in news:
                writer.create(slug, target)
        finally:
            writer.close()
        before = {lang: server.snapshot() for lang, server in servers.items()}
        flight = SingleFlight(keys=len(news))
        for slug, target in news:
            requests, right = asyncio.run(_ask_everywhere(servers, slug, target, p.callers))
            flight.requests += requests
            flight.right += right
        for lang, server in servers.items():
            flight.loads[lang] = summed_delta(before[lang], server.snapshot(), "db_reads")
        return flight


def node_unreadable(docs: dict[int, dict[str, Any]]) -> int:
    """Entries the Node.js workers found but could not read, summed over the workers: values
    stored as pickles (``foreign``) or as JSON text that did not parse (``decodeErrors``).
    The Python app's entries are strings, which it stores as JSON text: 0.

    >>> node_unreadable({1: {"cache": {"foreign": 0, "decodeErrors": 0}}, 2: {"cache": {}}})
    0
    """
    total = 0
    for doc in docs.values():
        stats = doc.get("cache") or {}
        total += int(stats.get("foreign", 0)) + int(stats.get("decodeErrors", 0))
    return total


def current_targets(database_url: str, slugs: Sequence[str]) -> dict[str, str]:
    reader = db.Database(database_url)
    try:
        return {slug: reader.get_target(slug) or "" for slug in slugs}
    finally:
        reader.close()


def clear_cache(cache_name: str) -> None:
    """Empty the cache ``cache_name`` for every process of the host (both languages)."""
    from ziggurat import Cache

    cache = Cache(cache_name)
    try:
        cache.clear()
    finally:
        cache.close()


# ---------------------------------------------------------------------------------------
# The report


def _pct(part: tuple[int, int] | None) -> str:
    if part is None:
        return "-"
    hits, lookups = part
    return f"{hits / lookups:.1%}" if lookups else "-"


def _workers(n: int) -> str:
    return f"{n} worker" if n == 1 else f"{n} workers"


def _mode_title(mode: str) -> str:
    return MODE_TITLES[mode] if mode == "none" else "ziggurat (L1 + L2)"


def report(console: Console, settings: PolyglotSettings, runs: Sequence[ModeRun]) -> bool:
    s = settings.base
    generator = runs[0].languages[0].load.generator if runs and runs[0].languages else "-"
    table = Table(
        title=(
            f"URL shortener in two languages, {s.workers} workers each, {s.links:,} links in "
            f"PostgreSQL, Zipf s={s.zipf}, {s.connections} connections, {s.seconds:g} s per "
            f"run ({generator})"
        ),
        title_justify="left",
    )
    for name, right in (
        ("mode", False),
        ("workers", False),
        ("req/s", True),
        ("p50 ms", True),
        ("p90 ms", True),
        ("p99 ms", True),
        ("L1 hits", True),
        ("DB queries", True),
        ("saved", True),
    ):
        table.add_column(name, justify="right" if right else "left")
    for run in runs:
        for i, r in enumerate(run.languages):
            saved = r.saved
            table.add_row(
                _mode_title(run.mode) if i == 0 else "",
                f"{LANGUAGE_TITLES[r.language]} ({SERVER_TITLES[r.language]})",
                f"{r.load.rps:,.0f}",
                f"{r.load.p50:.2f}",
                f"{r.load.p90:.2f}",
                f"{r.load.p99:.2f}",
                _pct(r.l1),
                f"{r.db_reads:,}",
                "-" if saved is None or run.mode == "none" else f"{saved:.1%}",
                end_section=i == len(run.languages) - 1,
            )
    console.print(table)
    console.print(
        "Each language's workers were measured alone, the other's idle, both attached to one "
        "cache, emptied before each run. L1 hits: lookups answered by the worker's own L1. "
        "DB queries: lookups that reached the database; saved: the share that did not."
    )

    checks = Table(
        title="Across languages: a write through one, then reads at once through the other",
        title_justify="left",
    )
    for name in ("mode", "writes, then reads", "rounds", "created", "reads", "stale", "workers"):
        checks.add_column(
            name, justify="left" if name in ("mode", "writes, then reads") else "right"
        )
    checks.add_column("")
    passed = True
    for run in runs:
        for i, d in enumerate(run.directions):
            passed &= d.passed
            bad = []
            if d.wrong_before:
                bad.append(f"{d.wrong_before} wrong before the change")
            if d.failed_writes:
                bad.append(f"{d.failed_writes} writes failed")
            checks.add_row(
                _mode_title(run.mode) if i == 0 else "",
                f"{LANGUAGE_TITLES[d.writer]} → {LANGUAGE_TITLES[d.reader]}",
                f"{d.rounds:,}",
                f"{d.created:,}",
                f"{d.reads:,}",
                f"{d.stale:,}",
                str(len(d.workers)),
                ("[green]PASS[/]" if d.passed else "[bold red]FAIL[/]")
                + (f" {', '.join(bad)}" if bad else ""),
                end_section=i == len(run.directions) - 1,
            )

    flights = Table(
        title="One load per key: new links asked for through both languages at once",
        title_justify="left",
    )
    for name in ("mode", "links", "requests", "wrong", "DB loads", "by Python", "by Node.js"):
        flights.add_column(name, justify="left" if name == "mode" else "right")
    flights.add_column("")
    for run in runs:
        f = run.flight
        judged = run.mode != "none"  # without a cache every request queries the database
        if judged:
            passed &= run.flight_passed
        verdict = ("[green]PASS[/]" if run.flight_passed else "[bold red]FAIL[/]") if judged else ""
        flights.add_row(
            _mode_title(run.mode),
            f"{f.keys:,}",
            f"{f.requests:,}",
            f"{f.requests - f.right:,}",
            f"{f.total_loads:,}",
            f"{f.loads.get('python', 0):,}",
            f"{f.loads.get('node', 0):,}",
            verdict,
        )
    console.print()
    console.print(checks)
    console.print(
        "Each round reads a link through the reading side, changes it through the writing side "
        "and reads it again through the reading side as soon as the write returns, each read on "
        "a new connection; stale: a read after the write that did not serve it."
    )
    console.print()
    console.print(flights)
    for run in runs:
        name = _mode_title(run.mode)
        for d in run.directions:
            verdict = "[green]PASS[/]" if d.passed else "[bold red]FAIL[/]"
            console.print(
                f"{d.title} at once, {name}: {verdict} ({d.stale} stale of {d.reads:,} reads "
                f"by {_workers(len(d.workers))}, {d.rounds:,} rounds)"
            )
        if run.unreadable is not None:
            passed &= run.unreadable == 0
            verdict = "[green]PASS[/]" if run.unreadable == 0 else "[bold red]FAIL[/]"
            console.print(
                f"Node.js workers read every entry Python wrote, {name}: {verdict} "
                f"({run.unreadable} unreadable: pickled or undecodable)"
            )
        if run.mode != "none":
            f = run.flight
            verdict = "[green]PASS[/]" if run.flight_passed else "[bold red]FAIL[/]"
            console.print(
                f"One load per key across Python and Node.js, {name}: {verdict} "
                f"({f.total_loads:,} DB loads for {f.keys} keys, {f.requests:,} requests)"
            )
    errors = sum(r.load.error_count for run in runs for r in run.languages)
    if errors:
        console.print(f"\n[red]{errors:,} requests failed under load[/]")
    return passed and errors == 0


def main(argv: Sequence[str] | None = None) -> int:
    console = Console(log_path=False)
    if not console.is_terminal:
        console = Console(width=120, log_path=False)  # a log file or a pipe: room for the table
    settings = PolyglotSettings.from_env()
    processes.end_on_signals()

    problem = node_problem()
    if problem is None and any(m != "none" for m in settings.base.modes):
        missing = cache_available()
        if missing is not None:
            problem = f"ziggurat.Cache cannot be imported ({missing}): run `make build`"
    if problem is not None:
        console.print(f"[red]The polyglot demo cannot run: {problem}.[/]")
        return 2

    try:
        demo = PolyglotDemo(settings, console)
    except ValueError as exc:  # a DATABASE_URL that is not PostgreSQL's
        console.print(f"[red]{exc}[/]")
        return 2
    if settings.base.loadgen != "python":
        demo.wrk = loadgen.find_wrk()
        if demo.wrk is None:
            if settings.base.loadgen == "wrk":
                console.print("[red]DEMO_LOADGEN=wrk, but wrk is not installed.[/]")
                return 2
            console.print(f"[yellow]{WRK_INSTALL_HINT}[/]")

    started = time.monotonic()
    try:
        runs = demo.run_polyglot()
        passed = report(console, settings, runs)
    except KeyboardInterrupt:
        console.print("[yellow]Interrupted: stopping the servers and removing the files.[/]")
        return 130
    finally:
        demo.close()
    console.print(f"\nDone in {time.monotonic() - started:.0f} s.")
    return 0 if passed else 1


if __name__ == "__main__":
    sys.exit(main())
