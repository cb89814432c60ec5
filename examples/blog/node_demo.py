"""The blog in Node.js under load, in four modes, and what each shows after a change.

The blog of ``examples/blog/node/`` (node:http, mustache, PostgreSQL; the Python blog's pages,
groups and purges) runs under ``cluster`` with four workers, once per mode, each on a freshly
seeded database of a private PostgreSQL server:

* **no cache**: every request renders its page;
* **per-worker memory**: the design this blog's kind started from, a response store in each
  worker's memory, cleared by group in the worker that made the change: it can only run
  coherently as one process, and with four it serves the stale pages counted here;
* **Redis page cache**: pages in Valkey keyed by URL, purged by group with Redis sets;
* **ziggurat**: ``ziggurat/http``, one cache shared by the four workers.

Each mode is driven by wrk (or the Python load generator) over the Python demo's mix of
URLs, with requests/s, p50 and p99, CPU seconds per 1,000 requests and the requests that
reached the blog. Then, through one worker at a time, a comment, a new post and an edit, each
read at once through every worker: the pages that must change (the post, the lists, the
archive and feed, the tag pages) and the others, which a cache must still hold.

    $ python -m examples.blog.node_demo    # doctest: +SKIP
"""

from __future__ import annotations

import os
import re
import sys
import time
import uuid
from collections.abc import Sequence
from pathlib import Path

from rich.console import Console

from examples.blog import demo
from examples.blog.demo import (
    HOST,
    BlogServer,
    Check,
    Settings,
    Site,
    _parallel,
    check_coherence,
    children,
    free_port,
    get,
    post_form,
)
from examples.blog.store import seed
from examples.shortener import loadgen, processes

NODE_DIR = demo.ROOT / "examples" / "blog" / "node"
MODES = ("none", "memory", "redis", "ziggurat")
TITLES = {
    "none": "no cache",
    "memory": "per-worker memory",
    "redis": "Redis page cache",
    "ziggurat": "ziggurat",
}


class NodeBlogServer(BlogServer):
    """The Node.js blog under cluster (``server.mjs``), in its own process group."""

    def start(self, timeout: float = 60) -> None:
        seed(self.db, fresh=True)
        self.port = free_port()
        env = {
            **os.environ,
            "BLOG_DB": self.db,
            "BLOG_CACHE": f"blogdemo-node-{uuid.uuid4().hex[:8]}",
            "BLOG_CACHE_DIR": str(self.shm),
            "BLOG_ADMIN_TOKEN": self.token,
            "BLOG_PAGE_CACHE": self.mode,
            "BLOG_COUNT_FILE": str(self.count_file),
            "BLOG_REDIS_URL": self.redis_url,
            "BLOG_WORKERS": str(self.workers),
            "PORT": str(self.port),
        }
        cmd = ["node", str(NODE_DIR / "server.mjs")]
        self.proc = processes.start(cmd, self.dir / "server.log", cwd=demo.ROOT, env=env)
        deadline = time.monotonic() + timeout
        while True:
            if self.proc.poll() is not None:
                raise RuntimeError(f"the Node.js blog exited:\n{self.log_tail()}")
            try:
                ready = (
                    len(self.worker_pids()) >= self.workers and get(self.port, "/about")[0] == 200
                )
            except OSError:
                ready = False
            if ready:
                return
            if time.monotonic() > deadline:
                raise RuntimeError(f"the Node.js blog was not ready:\n{self.log_tail()}")
            time.sleep(0.1)

    def worker_pids(self) -> list[int]:
        return children(self.proc.pid) if self.proc else []


def _everywhere(
    server: BlogServer, paths: Sequence[str], what: str, good: re.Pattern[str]
) -> Check:
    """``paths`` read at once through every worker (new connections until each answered):
    a reply is right when its body matches ``good``."""
    check = Check(what)
    all_workers = {str(p) for p in server.worker_pids()}
    for _ in range(8):
        for _path, st, hdrs, body in _parallel(server.port, list(paths) * 8):
            check.total += 1
            check.workers.add(hdrs.get("x-served-by", ""))
            check.good += st == 200 and bool(good.search(body))
        if all_workers <= check.workers:
            break
    check.workers.discard("")
    check.note = f"{len(check.workers & all_workers)} of {len(all_workers)} workers"
    return check


def check_changes(server: BlogServer, site: Site, mode: str) -> list[Check]:
    """A comment (the Python demo's checks), then a new post and an edit, each read at once
    through every worker."""
    checks = check_coherence(server, site, mode)
    port = server.port
    for p in ["/", "/archive", "/feed.atom", *site.tags]:
        for _ in range(8):
            get(port, p)  # every worker holds them, where a cache does
    title = f"Seen everywhere {uuid.uuid4().hex[:6]}"
    form = {"title": title, "body": "New.", "tags": "http", "token": server.token}
    status, headers = post_form(port, "/admin/posts", form)
    if status != 303:
        return [*checks, Check("POST a new post", 0, 1, note=f"HTTP {status}")]
    new = re.escape(title)
    for path, what in [("/", "home page"), ("/archive", "archive"), ("/feed.atom", "feed")]:
        checks.append(_everywhere(server, [path], f"new post: {what} lists it", re.compile(new)))
    checks.append(
        _everywhere(server, ["/tags/http"], "new post: its tag page lists it", re.compile(new))
    )
    # The edit: the oldest post gets a new title, read through every worker.
    feed = get(port, "/feed.atom")[2]
    ids = re.findall(
        r"urn:ziggurat-blog:post:(\d+)</id>\s*<link href=\"(/posts/[a-z0-9-]+)\"", feed
    )
    if not ids:
        return [*checks, Check("find a post to edit", 0, 1)]
    post_id, path = ids[-1]
    get(port, path)
    edited = f"Edited {uuid.uuid4().hex[:6]}"
    status, headers = post_form(
        port, f"/admin/posts/{post_id}", {"title": edited, "token": server.token}
    )
    if status != 303:
        return [*checks, Check("POST an edit", 0, 1, note=f"HTTP {status}")]
    location = headers.get("location", path)
    checks.append(
        _everywhere(server, [location], "edit: the post page", re.compile(re.escape(edited)))
    )
    return checks


class NodeDemo(demo.Demo):
    modes = MODES
    titles = TITLES

    def server(
        self, mode: str, workers: int, workdir: Path, shm: Path, db_url: str, redis_url: str
    ) -> BlogServer:
        return NodeBlogServer(mode, workers, workdir, shm, db_url, redis_url)

    def checks(self, server: BlogServer, site: Site, mode: str) -> list[Check]:
        return check_changes(server, site, mode)


def main(argv: Sequence[str] | None = None) -> int:
    console = Console(log_path=False)
    if not console.is_terminal:
        console = Console(width=120, log_path=False)
    settings = Settings.from_env()
    processes.end_on_signals()
    d = NodeDemo(settings, console, "postgresql")
    if settings.loadgen != "python":
        d.wrk = loadgen.find_wrk()
    console.print(f"Load generator: {'wrk (' + d.wrk + ')' if d.wrk else 'Python'}.")
    started = time.monotonic()
    try:
        results = d.run()
        passed = demo.report(
            console,
            settings,
            results,
            d.database.kind,
            titles=TITLES,
            server="Node.js cluster",
            expect_stale=("memory",),
        )
    except KeyboardInterrupt:
        console.print("[yellow]Interrupted: stopping the servers and removing the files.[/]")
        return 130
    finally:
        d.close()
    console.print(f"\nNode.js blog demo done in {time.monotonic() - started:.0f} s ({HOST}).")
    return 0 if passed else 1


if __name__ == "__main__":
    sys.exit(main())
