"""The README's framework examples, taken from README.md by their headings and run as the
README says: written to ``app.py`` in a fresh directory and started with the command the
section gives, under the real servers (uvicorn with 2 workers, gunicorn with 4).

Each example reads ``CACHE_DIR`` (default ``/dev/shm``), so every test gets a private
cache directory under /dev/shm, removed afterwards. What is checked, for each:

- a write handled by one worker is what the next requests return on every worker;
- concurrent misses on one key, spread over every worker, run the loader once for the host;
- the HTTP response cache answers the second GET of a cacheable page (``Cache-Status``);
- with gunicorn ``--preload``, the cache was opened in the master before the fork.
"""

from __future__ import annotations

import contextlib
import json
import os
import re
import shlex
import sqlite3
import sys
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
README = os.path.join(ROOT, "README.md")
ASGI = "### FastAPI and Starlette"
PRELOAD = "### gunicorn --preload (any WSGI app)"
FLASK = "### Flask"
FENCE = re.compile(r"^```(\w*)\s*$")


def section(heading: str) -> str:
    """The README's text under ``heading``, up to the next heading of its level or above
    (lines inside code blocks are never taken for headings)."""
    level = len(heading) - len(heading.lstrip("#"))
    with open(README, encoding="utf-8") as f:
        lines = f.read().splitlines()
    assert lines.count(heading) == 1, f"README.md has no single {heading!r} heading"
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


def code_blocks(text: str, lang: str) -> list[str]:
    """The contents of the ```lang blocks of ``text``, in order."""
    blocks: list[str] = []
    current: list[str] | None = None  # the open block's lines; None outside a block
    keep = False
    for line in text.splitlines():
        m = FENCE.match(line)
        if m and current is None:
            current, keep = [], m.group(1) == lang
        elif m and current is not None:
            if keep:
                blocks.append("\n".join(current) + "\n")
            current = None
        elif current is not None:
            current.append(line)
    return blocks


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
