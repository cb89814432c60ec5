"""The examples of the README and of the site's pages (docs/), run as the pages say.

The framework examples are taken from their pages by their headings and run as the page
says: written to ``app.py`` in a fresh directory and started with the command the section
gives, under the real servers (uvicorn with 2 workers, gunicorn with 4). Each reads
``CACHE_DIR`` (default ``/dev/shm``), so every test gets a private cache directory under
/dev/shm, removed afterwards. What is checked, for each:

- a write handled by one worker is what the next requests return on every worker;
- concurrent misses on one key, spread over every worker, run the loader once for the host;
- the HTTP response cache answers the second GET of a cacheable page (``Cache-Status``);
- with gunicorn ``--preload``, the cache was opened in the master before the fork.

Every other example of those pages is run too (the second half of this module), each by
its language: ```python blocks in a fresh interpreter, on a private directory (the default
``directory`` of ``Cache`` and ``Segment`` points there), followed by the checks this
module adds to some of them; ```pycon blocks as doctests, their outputs compared; the
``ziggurat``, ``make`` and ``pip install`` lines of ```sh blocks, the systemd units and the
Kubernetes manifest against the real command line, Makefile and extras; the PromQL
queries against a real scrape. A block in any other language fails the test that lists
them, until this module learns to check it.
"""

from __future__ import annotations

import configparser
import contextlib
import glob
import json
import os
import re
import shlex
import shutil
import sqlite3
import subprocess
import sys
import textwrap
import time
import uuid
from collections.abc import Callable, Iterator
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from typing import Any

import pytest
from http_servers import Resp, Server, free_port, server_log, serving

pytestmark = pytest.mark.timeout(180)

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
ASGI = ("docs/integrations/starlette.md", "# FastAPI and Starlette")
PRELOAD = ("docs/integrations/gunicorn.md", "# gunicorn --preload (any WSGI app)")
FLASK = ("docs/integrations/flask.md", "# Flask")
FENCE = re.compile(r"^```(\w*)\s*$")


def section(where: tuple[str, str]) -> str:
    """The text of page ``where[0]`` under heading ``where[1]``, up to the next heading of
    its level or above (lines inside code blocks are never taken for headings)."""
    page, heading = where
    level = len(heading) - len(heading.lstrip("#"))
    with open(os.path.join(ROOT, page), encoding="utf-8") as f:
        lines = f.read().splitlines()
    assert lines.count(heading) == 1, f"{page} has no single {heading!r} heading"
    out: list[str] = []
    fenced = False
    for line in lines[lines.index(heading) + 1 :]:
        if FENCE.match(line):
            fenced = not fenced
        elif not fenced and line.startswith("#"):
            hashes = len(line) - len(line.lstrip("#"))
            if hashes <= level and line[hashes : hashes + 1] == " ":
                break
        out.append(line)
    return "\n".join(out)


def fenced_blocks(text: str) -> list[tuple[str, str]]:
    """Every fenced block of ``text`` as (language, contents), in order."""
    blocks: list[tuple[str, str]] = []
    current: list[str] | None = None  # the open block's lines; None outside a block
    lang = ""
    for line in text.splitlines():
        m = FENCE.match(line)
        if m and current is None:
            current, lang = [], m.group(1)
        elif m and current is not None:
            blocks.append((lang, "\n".join(current) + "\n"))
            current = None
        elif current is not None:
            current.append(line)
    return blocks


def code_blocks(text: str, lang: str) -> list[str]:
    """The contents of the ```lang blocks of ``text``, in order."""
    return [code for kind, code in fenced_blocks(text) if kind == lang]


def command(text: str, program: str) -> list[str]:
    """The first command line of ``text`` that starts ``program``: a line of a ```sh block,
    or else inline code."""
    for block in code_blocks(text, "sh"):
        for line in block.splitlines():
            if line.split()[:1] == [program]:
                return shlex.split(line)
    m = re.search(rf"`({re.escape(program)} [^`]+)`", text)
    assert m is not None, f"no `{program} ...` command in the section"
    return shlex.split(m.group(1))


@dataclass
class App:
    srv: Server
    directory: str
    workers: int

    def get(self, path: str) -> Resp:
        return self.srv.request(path, timeout=60)

    def json(self, path: str, method: str = "GET", body: Any = None) -> Any:
        data = None if body is None else (body if isinstance(body, bytes) else json.dumps(body))
        r = self.srv.request(
            path,
            method=method,
            headers={"Content-Type": "application/json"} if body is not None else None,
            body=data.encode() if isinstance(data, str) else data,
            timeout=60,
        )
        assert r.status == 200, (method, path, r.status, r.body[:300], server_log(self.srv)[-3000:])
        return json.loads(r.body)

    def every_worker(self, path: str, check: Callable[[Any], None]) -> set[int]:
        """Requests ``path`` until every worker has answered (``served_by``), checking every
        answer; returns the workers' pids."""
        pids: set[int] = set()
        deadline = time.monotonic() + 60
        with ThreadPoolExecutor(8) as ex:
            while len(pids) < self.workers:
                assert time.monotonic() < deadline, f"only workers {pids} answered {path}"
                for doc in ex.map(lambda i: self.json(f"{path}?spread={i}"), range(16)):
                    check(doc)
                    pids.add(doc["served_by"])
        assert len(pids) == self.workers, pids
        return pids


@contextlib.contextmanager
def serve(
    code: str, cmd: list[str], env: Callable[[str], dict[str, str]] | None = None
) -> Iterator[App]:
    """Writes ``code`` to ``app.py`` in a private directory and runs ``cmd`` there, bound
    to a free 127.0.0.1 port; waits until the app answers. ``env(directory)`` gives more
    environment variables."""
    base = f"/dev/shm/zigreadme-{uuid.uuid4().hex}"
    os.mkdir(base, 0o700)
    with open(os.path.join(base, "app.py"), "w", encoding="utf-8") as f:
        f.write(code)
    port = free_port()
    program, args = cmd[0], cmd[1:]
    if program == "uvicorn":
        args += ["--host", "127.0.0.1", "--port", str(port)]
        workers = int(args[args.index("--workers") + 1])
    else:
        args += ["-b", f"127.0.0.1:{port}"]
        workers = int(args[args.index("-w") + 1])
    full_env = dict(os.environ)
    full_env.update(env(base) if env else {})
    full_env.update(
        CACHE_DIR=base,
        SHOP_DB=os.path.join(base, "shop.sqlite3"),
        PYTHONPATH=os.path.join(ROOT, "python") + os.pathsep + os.environ.get("PYTHONPATH", ""),
    )
    cmd = [sys.executable, "-m", program, *args]
    with serving(program, cmd, port, base, cwd=base, env=full_env) as srv:
        yield App(srv, base, workers)


def _hit(r: Resp) -> bool:
    return r.cache_status.startswith("ziggurat; hit")


def _concurrent(app: App, paths: list[str]) -> list[Any]:
    with ThreadPoolExecutor(len(paths)) as ex:
        return list(ex.map(app.json, paths))


# -- FastAPI and Starlette under uvicorn --workers 2 -------------------------------------------


def test_the_section_has_a_fastapi_and_a_starlette_app() -> None:
    apps = code_blocks(section(ASGI), "python")
    assert len(apps) == 2
    assert "from fastapi import" in apps[0] and "from starlette" in apps[1]
    cmd = command(section(ASGI), "uvicorn")
    assert cmd[:2] == ["uvicorn", "app:app"] and "--workers" in cmd, cmd


@pytest.fixture(scope="module", params=["fastapi", "starlette"])
def shop(request: pytest.FixtureRequest) -> Iterator[App]:
    text = section(ASGI)
    code = code_blocks(text, "python")[["fastapi", "starlette"].index(request.param)]
    with serve(code, command(text, "uvicorn")) as app:
        yield app


def test_asgi_write_in_one_worker_is_read_by_every_worker(shop: App) -> None:
    pid = 100 + shop.srv.seq[0]
    shop.srv.seq[0] += 1
    shop.json(f"/products/{pid}", "PUT", {"name": "apple", "price": 1.25})
    # Every worker now holds the product in its L1 too.
    workers = shop.every_worker(f"/products/{pid}", lambda d: None)
    put = shop.json(f"/products/{pid}", "PUT", {"name": "apple", "price": 2.5})
    assert put["price"] == 2.5

    def new_price(doc: Any) -> None:
        assert (doc["name"], doc["price"]) == ("apple", 2.5), doc

    assert shop.every_worker(f"/products/{pid}", new_price) == workers
    r = shop.srv.request(f"/products/{pid}", method="DELETE")
    assert r.status == 204, r.body
    with ThreadPoolExecutor(8) as ex:
        gone = list(ex.map(lambda i: shop.get(f"/products/{pid}?spread={i}"), range(40)))
    assert [r.status for r in gone] == [404] * 40


def test_asgi_loader_runs_once_per_key_for_the_host(shop: App) -> None:
    db = os.path.join(shop.directory, "shop.sqlite3")
    for attempt in range(5):
        pid = 1000 + 10 * attempt + shop.srv.seq[0]
        shop.srv.seq[0] += 1
        with contextlib.closing(sqlite3.connect(db)) as con, con:
            con.execute("INSERT INTO product VALUES (?, 'pear', 3.0)", (pid,))
        # Distinct URLs, so the HTTP cache does not coalesce them: only afetch can.
        started = time.monotonic()
        docs = _concurrent(shop, [f"/products/{pid}?n={i}" for i in range(16)])
        elapsed = time.monotonic() - started
        assert {(d["name"], d["price"]) for d in docs} == {("pear", 3.0)}
        assert len({d["loaded_at"] for d in docs}) == 1, docs
        assert elapsed < 5, elapsed  # one 0.5 s load, not one per request
        if len({d["served_by"] for d in docs}) == shop.workers:
            return
    pytest.fail("the concurrent requests never reached both workers")


def test_asgi_http_cache_answers_the_second_get_and_a_write_purges_it(shop: App) -> None:
    pid = 5000 + shop.srv.seq[0]
    shop.srv.seq[0] += 1
    shop.json(f"/products/{pid}", "PUT", {"name": "plum", "price": 0.5})
    first = shop.get("/catalog")
    assert first.status == 200 and not _hit(first), first.cache_status
    assert "stored" in first.cache_status, first.cache_status
    with ThreadPoolExecutor(8) as ex:
        again = list(ex.map(lambda _: shop.get("/catalog"), range(24)))
    assert all(_hit(r) for r in again), [r.cache_status for r in again]
    assert {r.body for r in again} == {first.body}
    assert first.h("cache-tag") is None  # the middleware keeps the tags to itself
    shop.json(f"/products/{pid}", "PUT", {"name": "plum", "price": 0.75})
    after = shop.get("/catalog")
    assert not _hit(after), after.cache_status
    prices = {p["id"]: p["price"] for p in json.loads(after.body)}
    assert prices[pid] == 0.75


# -- gunicorn --preload -w 4 ------------------------------------------------------------------


@pytest.fixture(scope="module")
def preloaded() -> Iterator[App]:
    text = section(PRELOAD)
    (code,) = code_blocks(text, "python")
    cmd = command(text, "gunicorn")
    assert "--preload" in cmd, cmd
    with serve(code, cmd) as app:
        yield app


def _children(pid: int) -> set[int]:
    with open(f"/proc/{pid}/task/{pid}/children") as f:
        return {int(p) for p in f.read().split()}


def _workers_up(pid: int, n: int, within: float = 30.0) -> int:
    """How many workers the server ``pid`` has once ``n`` are up (the last may still be
    booting on a loaded machine when the first answers), or at the deadline."""
    deadline = time.monotonic() + within
    while len(_children(pid)) < n and time.monotonic() < deadline:
        time.sleep(0.05)
    return len(_children(pid))


def _mapping(path: str) -> set[int]:
    """The processes that map the file ``path`` (matched by device and inode, as the maps
    may not name it as it was opened)."""
    st = os.stat(path)
    dev = f"{os.major(st.st_dev):02x}:{os.minor(st.st_dev):02x}"
    pids = set()
    for entry in os.listdir("/proc"):
        if not entry.isdigit():
            continue
        with contextlib.suppress(OSError), open(f"/proc/{entry}/maps") as f:
            for line in f:
                parts = line.split(maxsplit=5)
                if len(parts) >= 5 and parts[3] == dev and parts[4] == str(st.st_ino):
                    pids.add(int(entry))
                    break
    return pids


def test_preload_opens_the_cache_in_the_master_before_the_fork(preloaded: App) -> None:
    master = preloaded.srv.proc.pid
    segment = os.path.join(preloaded.directory, "ziggurat.myapp.v2")
    assert os.path.exists(segment)
    assert master in _mapping(segment), "the master has not mapped the cache's segment"
    workers = preloaded.every_worker("/motd", lambda d: None)
    assert workers == _children(master)
    assert master not in workers
    assert _mapping(segment) == workers | {master}


def test_preload_write_in_one_worker_is_read_by_every_worker(preloaded: App) -> None:
    text = f"maintenance at {uuid.uuid4().hex[:8]}"
    r = preloaded.srv.request("/motd", method="PUT", body=text.encode())
    assert r.status == 204, r.body

    def is_new(doc: Any) -> None:
        assert doc["motd"] == text, doc

    preloaded.every_worker("/motd", is_new)
    assert preloaded.srv.request("/motd", method="DELETE").status == 204

    def is_gone(doc: Any) -> None:
        assert doc["motd"] is None, doc

    preloaded.every_worker("/motd", is_gone)


def test_preload_loader_runs_once_per_key_for_the_host(preloaded: App) -> None:
    name = "r" + uuid.uuid4().hex[:8]
    # Sync workers take one request each at a time: 16 concurrent ones reach every one, and
    # the others wait for the one that loads.
    started = time.monotonic()
    docs = _concurrent(preloaded, [f"/reports/{name}?n={i}" for i in range(16)])
    elapsed = time.monotonic() - started
    assert len({(d["loaded_by"], d["loaded_at"]) for d in docs}) == 1, docs
    assert {d["served_by"] for d in docs} == _children(preloaded.srv.proc.pid)
    assert elapsed < 5, elapsed
    later = preloaded.every_worker(f"/reports/{name}", lambda d: None)
    assert len(later) == preloaded.workers


def test_preload_http_cache_answers_the_second_get(preloaded: App) -> None:
    first = preloaded.get("/")
    # The readiness probe may have stored it already.
    assert first.status == 200 and first.cache_status.startswith("ziggurat;")
    with ThreadPoolExecutor(8) as ex:
        again = list(ex.map(lambda _: preloaded.get("/"), range(24)))
    assert all(_hit(r) for r in again), [r.cache_status for r in again]
    assert {r.body for r in again} == {b"<h1>Welcome</h1>"}


# -- Flask (Flask-Caching) under gunicorn -w 4 ----------------------------------------------


@pytest.fixture(scope="module")
def flask_app() -> Iterator[App]:
    text = section(FLASK)
    (code,) = code_blocks(text, "python")
    cmd = command(text, "gunicorn")

    def env(base: str) -> dict[str, str]:
        # The example reads FLASK_-prefixed settings (app.config.from_prefixed_env()).
        options = {"size": "64MiB", "directory": base}
        return {"FLASK_CACHE_ZIGGURAT_NAME": "readme", "FLASK_CACHE_OPTIONS": json.dumps(options)}

    with serve(code, cmd, env) as app:
        yield app


def test_flask_put_in_one_worker_is_read_by_every_worker(flask_app: App) -> None:
    segment = os.path.join(flask_app.directory, "ziggurat.readme.v2")
    for n in range(3):
        text = f"hello {n} {uuid.uuid4().hex[:8]}"
        r = flask_app.srv.request("/motd", method="PUT", body=text.encode())
        assert r.status == 204, r.body
        with ThreadPoolExecutor(8) as ex:
            got = list(ex.map(lambda i: flask_app.get(f"/motd?spread={i}"), range(40)))
        assert {x.body.decode() for x in got} == {text}
    assert os.path.exists(segment)
    assert _workers_up(flask_app.srv.proc.pid, flask_app.workers) == flask_app.workers


def test_flask_report_renders_once_for_every_worker(flask_app: App) -> None:
    # Flask-Caching's @cached does not coalesce misses: the first request renders alone.
    first = flask_app.json("/report")
    assert first["renders"] == 1
    docs = _concurrent(flask_app, ["/report"] * 16) + _concurrent(flask_app, ["/report"] * 16)
    assert all(d == first for d in docs), docs


# -- every other example of the pages --------------------------------------------------------

#: Pages this module does not run: their examples are checked where their subject is
#: tested (the reader of the format, the metrics, the HTTP cache, the command line and the
#: deployment page have test modules of their own), or they hold none.
ELSEWHERE = {
    "docs/benchmarks.md",
    "docs/cli.md",
    "docs/deployment.md",
    "docs/design.md",
    "docs/format.md",
    "docs/guarantees.md",
    "docs/http.md",
    "docs/metrics.md",
    "docs/node.md",
    "docs/packaging.md",
    "docs/security.md",
}
PAGES = sorted(
    ["README.md"]
    + [
        os.path.relpath(p, ROOT)
        for p in glob.glob(os.path.join(ROOT, "docs", "**", "*.md"), recursive=True)
        if os.path.relpath(p, ROOT) not in ELSEWHERE
    ]
)
#: The examples run under real servers by the tests above: (page, index among its
#: ```python blocks).
SERVED = {(ASGI[0], 0), (ASGI[0], 1), (PRELOAD[0], 0), (FLASK[0], 0)}
#: Languages that are read, not run here: ```js blocks are run, twice, by the Node.js
#: package's tests (node/test/docs.test.mjs), which have the addon built.
SHOWN = {"mermaid", "js"}


def page_blocks(page: str) -> list[tuple[str, str]]:
    with open(os.path.join(ROOT, page), encoding="utf-8") as f:
        return fenced_blocks(f.read())


def python_examples() -> list[tuple[str, int, str]]:
    """(page, index, code) of every ```python block the servers do not run."""
    out = []
    for page in PAGES:
        pythons = [code for lang, code in page_blocks(page) if lang == "python"]
        out += [(page, i, c) for i, c in enumerate(pythons) if (page, i) not in SERVED]
    return out


def all_blocks(lang: str) -> list[tuple[str, str]]:
    return [(page, code) for page in PAGES for kind, code in page_blocks(page) if kind == lang]


#: Checks run after an example, in its namespace, keyed by a line of the example that
#: identifies it. Each must match exactly one example.
CHECKS: dict[str, str] = {
    # The README's and the site's front-page example (it asserts on its own too).
    "user = cache.fetch(": """
assert cache.fetch("user:7", lambda: 1 / 0) == {"id": 7, "name": "Ada L."}
""",
    # Caching whole responses: the middleware answers, and stores, a cacheable page.
    "wsgi = WSGICacheMiddleware(wsgi_app": """
from ziggurat.http import CacheMiddleware, WSGICacheMiddleware
assert isinstance(app, CacheMiddleware) and isinstance(wsgi, WSGICacheMiddleware)
""",
    # The Segment alone: the snippet ends with clear(), so the key is gone, and a new
    # add wins.
    'seg.delete(b"key"); seg.invalidate_tag': """
counts = seg.stats()
assert (counts["sets"], counts["deletes"], counts["clears"]) == (1, 1, 1), counts
assert counts["tag_invalidations"] == 1 and counts["entries"] == 0, counts
assert seg.add(b"key", b"v") is True and seg.get(b"key") == b"v"
assert seg.verify(repair=False)["ok"]
""",
    # Django's CACHES: a backend made from it stores and reads.
    '"BACKEND": "ziggurat.contrib.django.ZigguratCache"': """
import django
from django.conf import settings
settings.configure(CACHES=CACHES)
django.setup()
from django.core.cache import caches
c = caches["default"]
c.set("greeting", {"text": "hello"})
assert c.get("greeting") == {"text": "hello"}
assert c.cache.name == "myapp"
""",
    # dogpile: the region is on the ziggurat backend and caches.
    "region = make_region().configure(": """
from ziggurat.contrib.dogpile import ZigguratBackend
assert isinstance(region.backend, ZigguratBackend) and region.backend.cache.name == "myapp"
region.set("k", {"a": 1})
assert region.get("k") == {"a": 1}
""",
    # Metrics: the app's /metrics route reports the cache.
    "register(cache, registry=registry)": """
body = app.test_client().get("/metrics").get_data(as_text=True)
assert 'ziggurat_up{cache="myapp"} 1.0' in body, body[:2000]
assert 'ziggurat_sets_total{cache="myapp",tier="l2"}' in body, body[:2000]
""",
    # The cluster tier: another host (another directory) reads the value through Redis.
    'redis="redis://10.0.0.5:6379/0"': """
other = Cache("shop", size="16MiB", directory=OTHER_HOST, redis=REDIS_URL,
              secret=os.environ["CACHE_SECRET"])
assert other.get("user:1") == u, other.get("user:1")
cache.delete("user:1")
assert other.get("user:1") is None
""",
}

#: Runs first in the example's interpreter: caches and segments default to the test's
#: private directory, as CACHE_DIR does for the apps above.
PRELUDE = """
import os, ziggurat, ziggurat.cache
BASE = os.environ["DOCS_EXAMPLE_DIR"]
_sig = ziggurat.cache._SIGNATURE  # the one signature Cache() binds its arguments to
ziggurat.cache._SIGNATURE = _sig.replace(parameters=[
    p.replace(default=BASE) if p.name == "directory" else p for p in _sig.parameters.values()
])
_native_segment = ziggurat.Segment
def _segment(name, *args, **kwargs):
    kwargs.setdefault("directory", BASE)
    return _native_segment(name, *args, **kwargs)
ziggurat.Segment = _segment
"""


def _run(script: str, base: str, env: dict[str, str] | None = None) -> None:
    full = dict(os.environ, DOCS_EXAMPLE_DIR=base, **(env or {}))
    full["PYTHONPATH"] = os.path.join(ROOT, "python") + os.pathsep + full.get("PYTHONPATH", "")
    proc = subprocess.run(
        [sys.executable, "-c", script],
        cwd=base,
        env=full,
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert proc.returncode == 0, proc.stdout[-3000:] + proc.stderr[-5000:]


@pytest.fixture
def example_dir() -> Iterator[str]:
    base = f"/dev/shm/zigdocs-{uuid.uuid4().hex}"
    os.mkdir(base, 0o700)
    try:
        yield base
    finally:
        shutil.rmtree(base, ignore_errors=True)


def test_every_block_of_the_pages_is_checked() -> None:
    handled = {"python", "pycon", "sh", "ini", "yaml", "promql"} | SHOWN
    unknown = [
        (page, lang or "(none)")
        for page in PAGES
        for lang, _ in page_blocks(page)
        if lang not in handled
    ]
    assert not unknown, f"blocks no test checks: {unknown}"
    assert len(python_examples()) >= 8
    for marker in CHECKS:
        found = [(p, i) for p, i, code in python_examples() if marker in code]
        assert len(found) >= 1, f"no example has {marker!r}: was it changed?"
        if marker != "user = cache.fetch(":  # the README's example is the front page's
            assert len(found) == 1, (marker, found)


@pytest.mark.parametrize(
    "page,index,code", python_examples(), ids=[f"{p}:{i}" for p, i, _ in python_examples()]
)
def test_python_example_runs(page: str, index: int, code: str, example_dir: str) -> None:
    checks = [c for marker, c in CHECKS.items() if marker in code]
    env: dict[str, str] = {}
    if "redis=" in code:
        from redis_servers import Server as RedisServer

        srv = RedisServer("redis", example_dir).start()
        other = os.path.join(example_dir, "other-host")
        os.mkdir(other, 0o700)
        code = code.replace("redis://10.0.0.5:6379/0", srv.url)
        env = {"CACHE_SECRET": "s" * 32}
        # The fragment's loader and value, and where the other host keeps its cache.
        prelude = f"REDIS_URL = {srv.url!r}\nOTHER_HOST = {other!r}\n"
        prelude += "import os\nfrom ziggurat import Cache\n"
        prelude += "def load_user():\n    return {'id': 1}\nu = {'id': 1, 'name': 'Ada'}\n"
        try:
            _run(PRELUDE + prelude + code + "".join(checks), example_dir, env)
        finally:
            srv.stop()
        return
    _run(PRELUDE + code + "".join(checks), example_dir, env)


def test_pycon_sessions_print_what_the_pages_show(example_dir: str) -> None:
    sessions = all_blocks("pycon")
    assert sessions, "no pycon block"
    for page, session in sessions:
        script = PRELUDE + textwrap.dedent(
            f"""
            import doctest, sys
            test = doctest.DocTestParser().get_doctest(
                {session!r}, {{"__name__": "__main__"}}, {page!r}, {page!r}, 0
            )
            flags = doctest.ELLIPSIS | doctest.NORMALIZE_WHITESPACE
            runner = doctest.DocTestRunner(optionflags=flags)
            runner.run(test)
            assert runner.tries > 5, runner.tries
            sys.exit(1 if runner.failures else 0)
            """
        )
        _run(script, example_dir)


def _command_lines(text: str, program: str) -> list[tuple[list[str], dict[str, str]]]:
    """The command lines of ``text`` that run ``program``, each with the environment it
    shows: its ``VAR=value`` prefixes, and a variable its comment names
    (``$ZIGGURAT_REDIS_URL``) as set."""
    found = []
    for line in text.splitlines():
        words = shlex.split(line, comments=True)
        env = {v: "redis://127.0.0.1:6379/0" for v in re.findall(r"\$(ZIGGURAT_[A-Z_]+)", line)}
        while words and re.fullmatch(r"[A-Z_]+=.*", words[0]):
            var, _, value = words.pop(0).partition("=")
            env[var] = value
        if words and os.path.basename(words[0]) == program:
            found.append((words, env))
    return found


def _parses(argv: list[str], env: dict[str, str]) -> None:
    """``ziggurat argv`` is accepted by the command line, in environment ``env`` alone."""
    from ziggurat.cli.parser import build

    saved = {k: os.environ.pop(k) for k in list(os.environ) if k.startswith("ZIGGURAT_")}
    os.environ.update(env)
    try:
        build().parse_args(argv)
    except SystemExit as e:
        pytest.fail(f"ziggurat {' '.join(argv)} ({env}): refused by the command line ({e})")
    finally:
        for k in env:
            os.environ.pop(k, None)
        os.environ.update(saved)


def test_the_ziggurat_commands_shown_exist() -> None:
    shown = [cmd for _, code in all_blocks("sh") for cmd in _command_lines(code, "ziggurat")]
    assert len(shown) >= 8, shown
    for words, env in shown:
        _parses(words[1:], env)


def test_the_make_targets_and_extras_shown_exist() -> None:
    with open(os.path.join(ROOT, "Makefile"), encoding="utf-8") as f:
        targets = set(re.findall(r"^([a-z][a-z-]*):", f.read(), re.M))
    from importlib.metadata import metadata

    extras = set(metadata("ziggurat").get_all("Provides-Extra") or [])
    makes = [w for _, code in all_blocks("sh") for w, _ in _command_lines(code, "make")]
    assert {"demo", "test"} <= {w[1] for w in makes}, makes
    for words in makes:
        assert words[1] in targets, f"make {words[1]}: no such target"
    pips = [w for _, code in all_blocks("sh") for w, _ in _command_lines(code, "pip")]
    assert pips
    for words in pips:
        for spec in words[2:]:
            m = re.fullmatch(r"ziggurat\[([a-z,]+)\]", spec)
            if m:
                assert set(m.group(1).split(",")) <= extras, (spec, extras)


def _units() -> dict[str, configparser.ConfigParser]:
    units = {}
    for _, code in all_blocks("ini"):
        name = code.splitlines()[0].removeprefix("# ").strip()
        unit = configparser.ConfigParser(interpolation=None, strict=False)
        unit.optionxform = str  # type: ignore[assignment,method-assign]
        unit.read_string(code)
        units[os.path.basename(name)] = unit
    return units


def test_the_systemd_units_share_the_cache_directory() -> None:
    units = _units()
    assert set(units) == {"shop.service", "shop-follow.service"}, set(units)
    app, follow = units["shop.service"]["Service"], units["shop-follow.service"]["Service"]
    directory = f"/run/{app['RuntimeDirectory']}"
    assert app["Environment"] == f"CACHE_DIR={directory}"
    assert follow["RuntimeDirectory"] == app["RuntimeDirectory"]
    assert follow["RuntimeDirectoryPreserve"] == app["RuntimeDirectoryPreserve"] == "yes"
    assert follow["User"] == app["User"]
    ((argv, _),) = _command_lines(follow["ExecStart"].replace("%d", "/run/creds"), "ziggurat")
    var, _, url = follow["Environment"].partition("=")
    _parses(argv[1:], {var: url})
    assert argv[argv.index("--directory") + 1] == directory
    assert "ZIGGURAT_SECRET" not in follow.get("Environment", "")  # the secret is a file


def test_the_kubernetes_sidecar_shares_directory_pids_and_user() -> None:
    import yaml

    (manifest,) = [yaml.safe_load(code) for _, code in all_blocks("yaml")]
    pod = manifest["spec"]["template"]["spec"]
    assert pod["shareProcessNamespace"] is True
    assert "runAsUser" in pod["securityContext"]
    assert not any("securityContext" in c for c in pod["containers"])  # none runs apart
    (volume,) = [v for v in pod["volumes"] if "emptyDir" in v]
    assert volume["emptyDir"]["medium"] == "Memory"
    app, follow = pod["containers"]
    assert app["image"] == follow["image"]
    mounts = {
        c["name"]: {m["name"]: m["mountPath"] for m in c["volumeMounts"]} for c in (app, follow)
    }
    directory = mounts[app["name"]][volume["name"]]
    assert mounts[follow["name"]][volume["name"]] == directory
    assert {"name": "CACHE_DIR", "value": directory} in app["env"]
    argv = follow["command"]
    assert argv[0] == "ziggurat"
    _parses(argv[1:], {e["name"]: e["value"] for e in follow["env"] if "value" in e})
    assert argv[argv.index("--directory") + 1] == directory
    secret = argv[argv.index("--secret-file") + 1]
    assert any(secret.startswith(m["mountPath"] + "/") for m in follow["volumeMounts"])
    assert not any(e["name"] == "ZIGGURAT_SECRET" for e in follow["env"])


def test_the_promql_queries_name_metrics_a_scrape_has(example_dir: str) -> None:
    from prometheus_client import CollectorRegistry, generate_latest
    from ziggurat import Cache
    from ziggurat.metrics import register

    cache = Cache("promql", size="8MiB", directory=example_dir)
    try:
        registry = CollectorRegistry()
        register(cache, registry=registry)
        text = generate_latest(registry).decode()
    finally:
        cache.unlink()
    exported = {line.split("{")[0].split()[0] for line in text.splitlines() if line[:1].isalpha()}
    queries = "".join(code for _, code in all_blocks("promql"))
    used = set(re.findall(r"\bziggurat_[a-z0-9_]+", queries))
    assert len(used) >= 10, used
    assert used <= exported, used - exported
    # The Grafana dashboard operations.md offers: its queries, and the variables they use.
    with open(os.path.join(ROOT, "docs", "dashboards", "ziggurat.json"), encoding="utf-8") as f:
        dashboard = json.load(f)
    variables = {v["name"] for v in dashboard["templating"]["list"]}
    exprs = [t["expr"] for p in dashboard["panels"] for t in p["targets"]]
    assert len(exprs) >= 10
    in_dashboard = {n for e in exprs for n in re.findall(r"\bziggurat_[a-z0-9_]+", e)}
    assert in_dashboard <= exported, in_dashboard - exported
    assert used <= in_dashboard, used - in_dashboard  # the page's panels are the dashboard's
    for e in exprs:
        assert set(re.findall(r"\$(\w+)", e)) <= variables, e
