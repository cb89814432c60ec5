"""The blog in Node.js (``examples/blog/node/``, ``make demo``'s second part): its demo in a
short run, and a real browser posting a comment.

- The demo runs the blog under ``cluster`` with four workers in four modes; after a comment,
  a new post and an edit, each read at once through every worker, ziggurat's mode passes every
  check, and the per-worker memory store (the design the blog's kind started from) serves
  stale pages, counted.
- Chromium (Debian's, driven by puppeteer-core: no browser is downloaded) posts a comment
  through the post page's form, then reloads the page through several workers: each shows it.
"""

from __future__ import annotations

import json
import os
import re
import shutil
import subprocess
import sys
import time
import urllib.request
import uuid
from collections.abc import Iterator

import pytest
from demo_runs import make, run_demo
from http_servers import free_port

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
CHROMIUM = "/usr/bin/chromium"

pytestmark = [
    pytest.mark.timeout(1500),  # the first run builds the Node.js addon
    pytest.mark.skipif(shutil.which("node") is None, reason="Node.js is not installed"),
]


@pytest.fixture(scope="module")
def node_blog() -> None:
    """The Node.js package built and the blog's packages installed, as `make demo` does."""
    make("node-build", "examples/blog/node/node_modules/.installed")


def test_short_node_demo_ziggurat_is_coherent_and_per_worker_stores_are_not(
    node_blog: None,
) -> None:
    proc = run_demo("examples.blog.node_demo", DEMO_SECONDS="1", DEMO_WARMUP_SECONDS="0")
    out = proc.stdout + proc.stderr
    assert proc.returncode == 0, out[-5000:]
    for mode in ("no cache", "per-worker memory", "Redis page cache", "ziggurat"):
        row = re.search(rf"│ {re.escape(mode)}\s*│\s*([\d,]+)\s*│", out)
        assert row is not None and int(row.group(1).replace(",", "")) > 0, (mode, out[-5000:])
    assert "Coherence, ziggurat: PASS" in out, out[-5000:]
    stale = re.search(r"Coherence, per-worker memory: (\d+) stale or unshared replies", out)
    assert stale is not None and int(stale.group(1)) > 0, out[-5000:]
    # Every check of ziggurat's mode, the new post and the edit included, is right.
    section = out.split("Coherence: a comment", 1)[1].split("│ ziggurat ", 1)[1].split("└", 1)[0]
    assert "BAD" not in section and "stale" not in section, section
    assert "new post: feed lists it" in section and "edit: the post page" in section


def _wait_ready(port: int, proc: subprocess.Popen[bytes], timeout: float = 60) -> None:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        assert proc.poll() is None, "the Node.js blog exited"
        try:
            with urllib.request.urlopen(f"http://127.0.0.1:{port}/about", timeout=5) as r:
                if r.status == 200:
                    return
        except OSError:
            pass
        time.sleep(0.1)
    raise AssertionError("the Node.js blog was not ready")


@pytest.fixture
def blog_server(node_blog: None) -> Iterator[int]:
    sys.path.insert(0, ROOT)
    from examples.blog.store import seed
    from examples.shortener.local_postgres import LocalPostgres

    with LocalPostgres() as pg:
        pg.create_database("blog")
        url = pg.url("blog")
        seed(url, fresh=True)
        port = free_port()
        base = f"/dev/shm/zignodeblog-{uuid.uuid4().hex}"
        os.mkdir(base, 0o700)
        env = dict(
            os.environ,
            BLOG_DB=url,
            PORT=str(port),
            BLOG_PAGE_CACHE="ziggurat",
            BLOG_CACHE="blog-" + uuid.uuid4().hex[:8],
            BLOG_CACHE_DIR=base,
            BLOG_ADMIN_TOKEN="browser-admin-token-0123456789",
        )
        proc = subprocess.Popen(
            ["node", os.path.join(ROOT, "examples", "blog", "node", "server.mjs")],
            env=env,
            stdout=subprocess.DEVNULL,
        )
        try:
            _wait_ready(port, proc)
            yield port
        finally:
            proc.terminate()
            proc.wait(20)
            shutil.rmtree(base, ignore_errors=True)


def test_a_comment_posted_in_chromium_is_seen_through_every_worker(blog_server: int) -> None:
    if not os.access(CHROMIUM, os.X_OK):
        # CI installs Chromium: there its absence is a failure, never a silent skip.
        if os.environ.get("CI"):
            pytest.fail(f"the browser test cannot run in CI: {CHROMIUM} is not installed")
        pytest.skip(f"{CHROMIUM} is not installed (apt-get install chromium)")
    proc = subprocess.run(
        [
            "node",
            os.path.join(ROOT, "examples", "blog", "node", "browser.mjs"),
            f"http://127.0.0.1:{blog_server}",
            CHROMIUM,
        ],
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert proc.returncode == 0, proc.stdout + proc.stderr
    seen = json.loads(proc.stdout.strip().splitlines()[-1])
    assert seen["before"].startswith("0 comments"), seen
    assert len(set(seen["workers"]) - {None}) >= 2, seen
    assert all(s.startswith("ziggurat;") for s in seen["statuses"]), seen
    assert any(s.startswith("ziggurat; hit") for s in seen["statuses"]), seen
