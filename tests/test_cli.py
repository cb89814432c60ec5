"""The ``ziggurat`` command, run as operators run it: ``python -m ziggurat ...`` in a
subprocess, against caches that real ``Cache`` objects wrote in a private directory under
/dev/shm. ``--json`` output is parsed and compared exactly; errors are checked for their
exit code, a single line on stderr and no traceback; ``top`` is also run on a terminal.
"""

from __future__ import annotations

import contextlib
import errno
import fcntl
import gc
import hashlib
import json
import os
import pickle
import pty
import pwd
import re
import select
import struct
import subprocess
import sys
import termios
import time
import uuid
from collections.abc import Iterator
from decimal import Decimal
from typing import Any

import pytest
from ziggurat import Cache, Segment

ZIGGURAT = [sys.executable, "-m", "ziggurat"]
MiB = 1 << 20
ME = pwd.getpwuid(os.geteuid()).pw_name
ISO = re.compile(r"\d{4}-\d\d-\d\dT\d\d:\d\d:\d\dZ")
# Another user for the ownership tests (root may give a file away; others may not).
NOBODY = 65534
as_root = pytest.mark.skipif(os.geteuid() != 0, reason="giving a file to another user needs root")


def zig(*args: str, columns: int = 160) -> subprocess.CompletedProcess[str]:
    """Runs the command line ``ziggurat args...`` (tables drawn ``columns`` wide)."""
    return subprocess.run(
        [*ZIGGURAT, *args],
        capture_output=True,
        text=True,
        timeout=60,
        env={**os.environ, "COLUMNS": str(columns)},
    )


def zig_json(*args: str) -> Any:
    """Runs ``ziggurat args... --json``, expecting success and one JSON document."""
    r = zig(*args, "--json")
    assert r.returncode == 0, r.stderr
    assert r.stderr == ""
    assert r.stdout.count("\n") == 1
    return json.loads(r.stdout)


def assert_one_line_error(r: subprocess.CompletedProcess[str], code: int = 1) -> str:
    """A failure: exit ``code``, nothing on stdout, exactly one line on stderr, no traceback."""
    assert r.returncode == code, (r.returncode, r.stdout, r.stderr)
    assert r.stdout == ""
    assert "Traceback" not in r.stderr
    assert r.stderr.endswith("\n") and r.stderr.count("\n") == 1, r.stderr
    return r.stderr.strip()


def json_error(*args: str) -> dict[str, Any]:
    """Runs a failing ``ziggurat args... --json``; its stderr line as JSON."""
    r = zig(*args, "--json")
    err: dict[str, Any] = json.loads(assert_one_line_error(r))
    assert sorted(err) == ["cause", "error"]
    return err


def digest(*paths: str) -> str:
    h = hashlib.sha256()
    for p in paths:
        with open(p, "rb") as f:
            h.update(f.read())
    return h.hexdigest()


@pytest.fixture
def name() -> str:
    return f"cli-{uuid.uuid4().hex[:12]}"


@pytest.fixture
def cache(shm_dir: str, name: str) -> Iterator[Cache]:
    """An 8 MiB cache without L1, so every lookup reaches (and is counted in) the segment."""
    c = Cache(name, size="8MiB", directory=shm_dir, l1_items=0)
    yield c
    c.close()
    for p in paths(shm_dir, name):
        with contextlib.suppress(FileNotFoundError):
            os.unlink(p)


def paths(shm_dir: str, name: str) -> tuple[str, str]:
    return f"{shm_dir}/ziggurat.{name}.v2", f"{shm_dir}/ziggurat.{name}.neg.v2"


@contextlib.contextmanager
def holder(shm_dir: str, name: str) -> Iterator[subprocess.Popen[str]]:
    """Another process with the cache open, until the block ends."""
    code = (
        "import sys; from ziggurat import Cache; "
        f"c = Cache({name!r}, size='8MiB', directory={shm_dir!r}); "
        "print('ready', flush=True); sys.stdin.read()"
    )
    p = subprocess.Popen(
        [sys.executable, "-c", code], stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True
    )
    try:
        assert p.stdout is not None and p.stdout.readline() == "ready\n"
        yield p
    finally:
        assert p.stdin is not None
        p.stdin.close()
        p.wait(timeout=30)


# -- ls --------------------------------------------------------------------------------------


def test_ls_lists_each_cache_once_with_its_figures(shm_dir: str, cache: Cache, name: str) -> None:
    cache.set("a", 1)
    cache.set("b", {"x": "y"})
    assert cache.get("a") == 1  # a hit in the segment (no L1)
    assert cache.get("zz") is None  # a miss
    host = cache.stats()["host"]["l2"]  # also adds this process's pending counts
    # Opened and closed: once the process lets go of it, nothing maps it.
    Cache(f"{name}-v", size="4MiB", directory=shm_dir, version="7").close()
    gc.collect()
    before = time.time()
    doc = zig_json("ls", "--directory", shm_dir)
    assert doc["directory"] == shm_dir
    rows = {r["name"]: r for r in doc["caches"]}
    assert sorted(rows) == [name, f"{name}-v.ver-7"]
    row = rows[name]
    created = row.pop("created")
    assert ISO.fullmatch(created) and row.pop("created_from") in ("birth", "ctime")
    assert time.mktime(time.strptime(created, "%Y-%m-%dT%H:%M:%SZ")) - time.timezone <= before
    assert row == {
        "name": name,
        "path": f"{shm_dir}/ziggurat.{name}.v2",
        "layout": 2,
        "size": 8 * MiB,
        "negative_size": 1 * MiB,
        "bytes_used": host["bytes_used"],
        "bytes_capacity": host["bytes_capacity"],
        "entries": 2,
        "hit_ratio": 0.5,
        "owner": ME,
        "mode": "0600",
        "processes": 1,  # this test process has it open
        "huge_pages": cache.stats()["host"]["huge_pages"]["backed"],
        "status": "ok",
        "error": None,
    }
    assert rows[f"{name}-v.ver-7"]["size"] == 4 * MiB
    assert rows[f"{name}-v.ver-7"]["processes"] == 0


def test_ls_table_names_every_cache(shm_dir: str, cache: Cache, name: str) -> None:
    cache.set("a", 1)
    r = zig("ls", "--directory", shm_dir)
    assert r.returncode == 0 and r.stderr == ""
    line = next(line for line in r.stdout.splitlines() if name in line)
    assert "9.0 MiB" in line  # both files
    assert ME in line and " ok " in line
    # On a narrow terminal the status still shows (the last columns go first).
    narrow = zig("ls", "--directory", shm_dir, columns=60).stdout
    assert re.search(r"^ \S+\s+ok\s", narrow, re.M), narrow


def test_ls_reports_files_it_cannot_read_instead_of_failing(shm_dir: str, name: str) -> None:
    with open(f"{shm_dir}/ziggurat.{name}-empty.v2", "wb") as f:
        f.truncate(8192)  # never initialised
    os.chmod(f"{shm_dir}/ziggurat.{name}-empty.v2", 0o600)
    with open(f"{shm_dir}/ziggurat.{name}-old.v1", "wb") as f:
        f.truncate(8192)
    with open(f"{shm_dir}/ziggurat.{name}-lone.neg.v2", "wb") as f:
        f.truncate(4096)
    with open(f"{shm_dir}/unrelated.file", "wb") as f:
        f.write(b"x")
    rows = {r["name"]: r for r in zig_json("ls", "-d", shm_dir)["caches"]}
    assert sorted(rows) == [f"{name}-empty", f"{name}-lone", f"{name}-old"]
    assert [rows[f"{name}-{k}"]["status"] for k in ("empty", "lone", "old")] == [
        "damaged",
        "missing_segment",
        "incompatible",
    ]
    assert "it is empty: it was never initialised" in rows[f"{name}-empty"]["error"]
    assert rows[f"{name}-old"]["error"] == "layout version 1; this ziggurat reads version 2"
    assert rows[f"{name}-lone"]["size"] is None
    assert rows[f"{name}-lone"]["negative_size"] == 4096
    assert rows[f"{name}-empty"]["entries"] is None


@as_root
def test_ls_shows_another_users_cache_without_attaching_it(
    shm_dir: str, cache: Cache, name: str
) -> None:
    for p in paths(shm_dir, name):
        os.chown(p, NOBODY, NOBODY)
    (row,) = zig_json("ls", "-d", shm_dir)["caches"]
    assert (row["owner"], row["status"], row["entries"]) == (
        pwd.getpwuid(NOBODY).pw_name,
        "other_owner",
        None,
    )


def test_ls_of_a_missing_directory_is_one_line(shm_dir: str) -> None:
    msg = assert_one_line_error(zig("ls", "-d", f"{shm_dir}/nope"))
    assert msg == f"ziggurat ls: directory {shm_dir}/nope does not exist"
    assert json_error("ls", "-d", f"{shm_dir}/nope") == {
        "error": f"directory {shm_dir}/nope does not exist",
        "cause": "missing_directory",
    }


# -- stats -----------------------------------------------------------------------------------


def test_stats_are_the_caches_host_counters(shm_dir: str, cache: Cache, name: str) -> None:
    cache.set("a", 1, tags=["t"])
    cache.get("a")
    cache.get("b")
    for i in range(3):
        cache.fetch(f"load{i}", lambda i=i: None if i == 0 else i)  # type: ignore[misc]
    cache.invalidate_tags("t")
    expected = cache.stats()["host"]
    doc = zig_json("stats", name, "--directory", shm_dir)
    assert doc == {
        "name": name,
        "directory": shm_dir,
        "host": expected,
        "leases": {"loading": 0, "releases": 3},
        "cluster": None,  # no Redis tier on this host
    }
    assert doc["host"]["l2"]["tag_invalidations"] == 1
    assert doc["host"]["negative_l2"]["sets"] == 1  # the loader's None
    # Reading counted nothing: the counters are where they were.
    assert cache.stats()["host"] == expected


def test_stats_of_a_version_and_of_a_bare_segment(shm_dir: str, name: str) -> None:
    c = Cache(name, size="8MiB", directory=shm_dir, version="v2")
    seg = Segment(f"{name}-bare", 4 * MiB, directory=shm_dir)
    try:
        c.set("k", 1)
        doc = zig_json("stats", name, "--version", "v2", "-d", shm_dir)
        assert doc["name"] == f"{name}.ver-v2" and doc["host"]["l2"]["entries"] == 1
        assert doc == zig_json("stats", f"{name}.ver-v2", "-d", shm_dir)
        bare = zig_json("stats", f"{name}-bare", "-d", shm_dir)
        assert bare["host"]["negative_l2"] is None and bare["leases"] is None
        assert bare["host"]["l2"]["file_size"] == seg.size
    finally:
        c.unlink()
        seg.unlink()
        seg.close()


def test_stats_table_shows_both_tiers(shm_dir: str, cache: Cache, name: str) -> None:
    cache.set("k", 1)
    r = zig("stats", name, "-d", shm_dir)
    assert r.returncode == 0 and r.stderr == ""
    assert re.search(r"entries\s+│\s+1\s+│\s+0\s+│", r.stdout), r.stdout
    assert "negative_l2" in r.stdout and "lease releases" in r.stdout


# -- get -------------------------------------------------------------------------------------


def get(shm_dir: str, name: str, key: str, *extra: str) -> dict[str, Any]:
    doc: dict[str, Any] = zig_json("get", name, key, "-d", shm_dir, *extra)
    return doc


def test_get_a_json_value_in_a_namespace_with_its_tags(
    shm_dir: str, cache: Cache, name: str
) -> None:
    cache.namespace("users").set("7", {"name": "Ada", "roles": [1, 2]}, ttl=60, tags=["team"])
    doc = get(shm_dir, name, "users:7", "--tag", "team")
    left, kept = doc.pop("seconds_left"), doc.pop("expires_in")
    assert 58 < left <= 60 and kept == pytest.approx(left, abs=0.01)  # no stale_ttl
    tags = doc.pop("tags")
    payload = b'{"name":"Ada","roles":[1,2]}'
    assert doc == {
        "name": name,
        "key": "users:7",
        "found": "value",
        "fresh": True,
        "segment": "l2",
        "format": "json",
        "value": {"name": "Ada", "roles": [1, 2]},
        "preview": "{'name': 'Ada', 'roles': [1, 2]}",
        "error": None,
        "size": len(payload),
        "stored_bytes": len(payload) + 13,
        # word0 + expiry + 2 tags + key + value, to a multiple of 8
        "record_bytes": (8 + 8 + 16 + len("users:7") + len(payload) + 13 + 7) // 8 * 8,
        "ttl": 60.0,
    }
    assert [(t["name"], t["version"], t["current"]) for t in tags] == [
        ("team", 0, 0),
        ("\x00ns:users", 0, 0),
    ]
    cache.invalidate_tags("team")
    # The record is now a miss for every reader: the shared tier no longer returns it.
    assert get(shm_dir, name, "users:7")["found"] == "absent"


def test_get_counters_pickles_and_stale_values(shm_dir: str, name: str) -> None:
    c = Cache(name, size="8MiB", directory=shm_dir, stale_ttl=100, serializer="auto")
    try:
        c.set("n", 41)
        c.incr("n")
        c.set("d", {"price": Decimal("1.50"), "ids": {3}}, ttl=math_inf())
        c.set("old", "x", ttl=0.01)
        written = time.monotonic()
        time.sleep(0.05)
        n = get(shm_dir, name, "n")
        assert (n["found"], n["format"], n["value"], n["preview"], n["size"]) == (
            "counter",
            "counter",
            42,
            "42",
            8,
        )
        d = get(shm_dir, name, "d")
        assert (d["found"], d["format"], d["value"], d["ttl"], d["seconds_left"]) == (
            "value",
            "pickle",
            None,  # not plain JSON data: the preview stands for it
            None,
            None,
        )
        assert d["preview"] == "{'price': Decimal('1.50'), 'ids': {3}}"
        assert d["size"] == len(pickle.dumps({"price": Decimal("1.50"), "ids": {3}}, protocol=5))
        old = get(shm_dir, name, "old")
        # The CLI runs as a process of its own: on a loaded machine it may start late.
        late = time.monotonic() - written + 0.01
        assert (old["found"], old["fresh"], old["value"]) == ("stale", False, "x")
        assert -late - 0.1 < old["seconds_left"] < 0
        assert 100 - late - 0.1 < old["expires_in"] <= 100
        raw = get(shm_dir, name, "d", "--serializer", "raw")
        assert raw["format"] == "raw" and raw["preview"].startswith("b'\\x80\\x05")
    finally:
        c.unlink()


def math_inf() -> float:
    return float("inf")


def test_get_a_pickled_object_shows_its_class_without_importing_it(
    shm_dir: str, cache: Cache, name: str, tmp_path: Any
) -> None:
    # A class the command's process cannot import: it must show it, not load it.
    (tmp_path / "shopmodels.py").write_text(
        "class Item:\n    def __init__(self, sku):\n        self.sku = sku\n"
    )
    sys.path.insert(0, str(tmp_path))
    try:
        import shopmodels  # type: ignore[import-not-found]

        cache.set("item", shopmodels.Item("A-1"))
    finally:
        sys.path.remove(str(tmp_path))
        sys.modules.pop("shopmodels", None)
    doc = get(shm_dir, name, "item")
    assert (doc["format"], doc["preview"], doc["error"]) == (
        "pickle",
        "shopmodels.Item(state={'sku': 'A-1'})",
        None,
    )


def test_get_cached_misses_foreign_records_and_absent_keys(
    shm_dir: str, cache: Cache, name: str
) -> None:
    assert cache.fetch("ghost", lambda: None) is None
    miss = get(shm_dir, name, "ghost")
    assert (miss["found"], miss["fresh"], miss["segment"], miss["ttl"], miss["value"]) == (
        "cached_miss",
        True,
        "negative_l2",
        30.0,
        None,
    )
    # A write of the key voids the cached miss, and the value answers instead.
    cache.set("ghost", "here")
    assert get(shm_dir, name, "ghost")["found"] == "value"
    cache.delete("ghost")
    # The cached miss is still stored, but voided: the key's stamp moved since.
    voided = get(shm_dir, name, "ghost")
    assert (voided["found"], voided["fresh"]) == ("cached_miss", False)
    seg = Segment(name, directory=shm_dir)
    try:
        seg.set("raw", b"abc")
    finally:
        seg.close()
    raw = get(shm_dir, name, "raw")
    assert (raw["found"], raw["format"], raw["preview"], raw["size"], raw["ttl"]) == (
        "foreign",
        "raw",
        "b'abc'",
        3,
        None,
    )
    absent = get(shm_dir, name, "nope")
    assert absent["found"] == "absent" and absent["segment"] is None and absent["tags"] == []


def test_get_table(shm_dir: str, cache: Cache, name: str) -> None:
    cache.set("k", {"a": 1}, ttl=30, tags=["t"])
    r = zig("get", name, "k", "-d", shm_dir, "--tag", "t")
    assert r.returncode == 0 and r.stderr == ""
    assert "value (fresh)" in r.stdout and "{'a': 1}" in r.stdout
    assert "'t' cell" in r.stdout and ": valid" in r.stdout and "30 s" in r.stdout


# -- top -------------------------------------------------------------------------------------


def test_top_json_counts_what_happened_in_each_interval(
    shm_dir: str, cache: Cache, name: str
) -> None:
    p = subprocess.Popen(
        [*ZIGGURAT, "top", name, "-d", shm_dir, "--json", "--interval", "1.5", "--count", "2"],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )
    assert p.stdout is not None
    first = json.loads(p.stdout.readline())
    before = cache.stats()["host"]["l2"]
    for i in range(5):
        cache.set(f"k{i}", i)
    for i in range(5):
        cache.get(f"k{i}")
    for i in range(3):
        cache.fetch(f"load{i}", lambda: "v")
    cache.delete("k0")
    after = cache.stats()["host"]["l2"]  # flushes this process's hits and misses
    second = json.loads(p.stdout.readline())
    assert p.wait(timeout=30) == 0
    assert p.stdout.read() == "" and p.stderr is not None and p.stderr.read() == ""
    assert first["delta"] == {"hits": 0, "misses": 0, "evictions": 0, "loads": 0, "writes": 0}
    assert second["delta"] == {
        "hits": after["hits"] - before["hits"],
        "misses": after["misses"] - before["misses"],
        "evictions": 0,
        "loads": 3,
        "writes": 5 + 3 + 1,  # sets, fetch stores, one delete
    }
    assert second["delta"]["hits"] == 5
    seconds = second["seconds"]
    assert 1.4 < seconds < 3
    assert second["per_second"] == {k: round(v / seconds, 3) for k, v in second["delta"].items()}
    assert second["entries"] == after["entries"] == 7
    assert second["bytes_used"] == after["bytes_used"]
    assert (second["name"], second["loading"]) == (name, 0)
    assert second["hit_ratio"] == 5 / (5 + second["delta"]["misses"])
    assert ISO.fullmatch(second["time"])


def test_top_draws_on_a_terminal_and_stops_after_count(
    shm_dir: str, cache: Cache, name: str
) -> None:
    cache.set("k", 1)
    master, slave = pty.openpty()
    fcntl.ioctl(slave, termios.TIOCSWINSZ, struct.pack("HHHH", 40, 120, 0, 0))
    p = subprocess.Popen(
        [*ZIGGURAT, "top", name, "-d", shm_dir, "--interval", "0.2", "--count", "3"],
        stdin=slave,
        stdout=slave,
        stderr=slave,
        env={**os.environ, "TERM": "xterm-256color"},
    )
    os.close(slave)
    out = b""
    deadline = time.monotonic() + 30
    while time.monotonic() < deadline:
        ready, _, _ = select.select([master], [], [], 0.5)
        if ready:
            try:
                chunk = os.read(master, 65536)
            except OSError as e:  # EIO: the terminal's other side closed
                assert e.errno == errno.EIO
                break
            if not chunk:
                break
            out += chunk
        elif p.poll() is not None:
            break
    os.close(master)
    assert p.wait(timeout=30) == 0
    text = out.decode("utf-8", "replace")
    assert "Traceback" not in text
    assert f"ziggurat top {name}" in text
    for label in ("hits", "misses", "evictions", "loads", "writes", "per second"):
        assert label in text
    # A live view: the cursor goes back up to redraw the table in place.
    assert "\x1b[" in text and ("\x1b[1A" in text or "\x1b[2K" in text)
    assert text.count("per second") >= 2  # redrawn, not printed once


def test_top_rejects_a_bad_interval(shm_dir: str, cache: Cache, name: str) -> None:
    msg = assert_one_line_error(zig("top", name, "-d", shm_dir, "--interval", "0"))
    assert msg == "ziggurat top: --interval must be a number of seconds > 0, got 0.0"


# -- purge -----------------------------------------------------------------------------------


def test_purge_key_tag_namespace_and_all(shm_dir: str, cache: Cache, name: str) -> None:
    posts = cache.namespace("posts")
    posts.set("1", "p1")
    cache.set("a", 1, tags=["red"])
    cache.set("b", 2, tags=["red"])
    cache.set("c", 3)
    base = {"name": name, "directory": shm_dir, "key": None, "tag": None, "namespace": None}
    base.update(deleted=None, entries_before=None)

    assert zig_json("purge", name, "-d", shm_dir, "--key", "c") == {
        **base,
        "purged": "key",
        "key": "c",
        "deleted": True,
    }
    assert cache.get("c") is None and cache.get("a") == 1
    assert zig_json("purge", name, "-d", shm_dir, "--key", "c")["deleted"] is False

    assert zig_json("purge", name, "-d", shm_dir, "--tag", "red") == {
        **base,
        "purged": "tag",
        "tag": "red",
    }
    assert (cache.get("a"), cache.get("b"), posts.get("1")) == (None, None, "p1")

    assert zig_json("purge", name, "-d", shm_dir, "--namespace", "posts") == {
        **base,
        "purged": "namespace",
        "namespace": "posts",
    }
    assert posts.get("1") is None

    cache.set("x", 1)
    cache.fetch("gone", lambda: None)
    entries = cache.stats()["host"]["l2"]["entries"]
    assert zig_json("purge", name, "-d", shm_dir, "--all") == {
        **base,
        "purged": "all",
        "entries_before": entries,
    }
    host = cache.stats()["host"]
    assert (host["l2"]["entries"], host["negative_l2"]["entries"]) == (0, 0)
    assert host["l2"]["clears"] == host["negative_l2"]["clears"] == 1
    assert cache.get("x") is None


def test_purge_needs_exactly_one_target(shm_dir: str, cache: Cache, name: str) -> None:
    r = zig("purge", name, "-d", shm_dir)
    assert r.returncode == 2 and "one of the arguments" in r.stderr and "Traceback" not in r.stderr
    r = zig("purge", name, "-d", shm_dir, "--key", "a", "--all")
    assert r.returncode == 2 and "not allowed with" in r.stderr


def test_purge_of_a_missing_cache_creates_nothing(shm_dir: str, name: str) -> None:
    msg = assert_one_line_error(zig("purge", name, "-d", shm_dir, "--all"))
    assert msg.startswith(f"ziggurat purge: no cache {name!r} in {shm_dir}")
    assert os.listdir(shm_dir) == []


# -- verify ----------------------------------------------------------------------------------


def test_verify_a_healthy_cache(shm_dir: str, cache: Cache, name: str) -> None:
    for i in range(50):
        cache.set(f"k{i}", i)
    cache.fetch("none", lambda: None)
    before = cache.stats()["host"]
    main, neg = paths(shm_dir, name)
    seg = {"header": "ok", "checked": "shards", "problems": []}
    assert zig_json("verify", name, "-d", shm_dir) == {
        "name": name,
        "directory": shm_dir,
        "ok": True,
        "segments": [
            {"segment": "l2", "path": main, **seg, "entries": 50},
            {"segment": "negative_l2", "path": neg, **seg, "entries": 1},
        ],
    }
    assert cache.stats()["host"] == before  # no repair, no reset, nothing counted
    r = zig("verify", name, "-d", shm_dir)
    assert r.returncode == 0 and f"{name}: consistent" in r.stdout


def test_verify_reports_a_bad_index_slot_without_repairing_it(
    shm_dir: str, cache: Cache, name: str
) -> None:
    cache.set("k", 1)
    l2 = cache.stats()["host"]["l2"]
    main, _ = paths(shm_dir, name)
    # Slot 1 of pair 0 of shard 0: valid bit, and an offset where no record starts.
    with open(main, "r+b") as f:
        f.seek(l2["index_offset"] + 8)
        f.write(struct.pack("<Q", 1 << 63 | 1 << 44 | 12345))
    r = zig("verify", name, "-d", shm_dir, "--json")
    assert r.returncode == 3 and r.stderr == ""
    doc = json.loads(r.stdout)
    assert doc["ok"] is False
    assert doc["segments"][0]["problems"] == [
        "shard 0: index slot 0/1 points to no record of its key"
    ]
    assert doc["segments"][1]["problems"] == []
    # Not repaired: a second run finds the same.
    assert json.loads(zig("verify", name, "-d", shm_dir, "--json").stdout) == doc
    r = zig("verify", name, "-d", shm_dir)
    assert r.returncode == 3 and "PROBLEMS FOUND" in r.stdout and "index slot 0/1" in r.stdout


def test_verify_reports_a_damaged_header(shm_dir: str, cache: Cache, name: str) -> None:
    main, _ = paths(shm_dir, name)
    with open(main, "r+b") as f:
        f.seek(20)  # inside the checksummed header (the file size field)
        f.write(b"\xff")
    for extra in ((), ("--header-only",)):
        r = zig("verify", name, "-d", shm_dir, "--json", *extra)
        assert r.returncode == 3 and r.stderr == ""
        doc = json.loads(r.stdout)
        (problem,) = doc["segments"][0]["problems"]
        assert doc["segments"][0]["header"] == "damaged"
        assert "header checksum does not match" in problem
        assert doc["segments"][1]["problems"] == []


def test_read_only_commands_change_no_byte(shm_dir: str, cache: Cache, name: str) -> None:
    cache.set("k", {"v": 1}, tags=["t"])
    cache.fetch("m", lambda: None)
    cache.stats()
    files = paths(shm_dir, name)
    before = digest(*files)
    for args in (
        ("ls", "-d", shm_dir),
        ("stats", name, "-d", shm_dir),
        ("get", name, "k", "-d", shm_dir),
        ("get", name, "m", "-d", shm_dir),
        ("top", name, "-d", shm_dir, "--interval", "0.1", "--count", "1"),
        ("verify", name, "-d", shm_dir, "--header-only"),
    ):
        for fmt in ((), ("--json",)):
            r = zig(*args, *fmt)
            assert r.returncode == 0, (args, r.stderr)
    assert digest(*files) == before


# -- rm --------------------------------------------------------------------------------------


def test_rm_removes_both_files(shm_dir: str, name: str) -> None:
    Cache(name, size="8MiB", directory=shm_dir).close()
    gc.collect()  # this process lets go of its mapping
    main, neg = paths(shm_dir, name)
    doc = zig_json("rm", name, "-d", shm_dir)
    assert doc.pop("unchecked_processes") >= 0
    assert doc == {"name": name, "directory": shm_dir, "removed": [main, neg], "mapped_by": []}
    assert os.listdir(shm_dir) == []
    assert zig_json("ls", "-d", shm_dir)["caches"] == []


def test_rm_refuses_a_cache_in_use_unless_told(shm_dir: str, name: str) -> None:
    main, neg = paths(shm_dir, name)
    with holder(shm_dir, name) as p:
        err = json_error("rm", name, "-d", shm_dir)
        assert err["cause"] == "in_use"
        assert f"mapped by 1 process(es) ({p.pid})" in err["error"]
        msg = assert_one_line_error(zig("rm", name, "-d", shm_dir))
        assert msg.startswith(f"ziggurat rm: {name!r} is in use") and msg.endswith("pass --yes")
        assert os.path.exists(main) and os.path.exists(neg)
        doc = zig_json("rm", name, "-d", shm_dir, "--yes")
        assert (doc["removed"], doc["mapped_by"]) == ([main, neg], [p.pid])
        assert not os.path.exists(main)


def test_rm_removes_a_damaged_file(shm_dir: str, name: str) -> None:
    with open(f"{shm_dir}/ziggurat.{name}.v2", "wb") as f:
        f.write(b"garbage")
    assert zig_json("rm", name, "-d", shm_dir)["removed"] == [f"{shm_dir}/ziggurat.{name}.v2"]


# -- errors ----------------------------------------------------------------------------------

NAMED = (
    ("stats",),
    ("top", "--count", "1"),
    ("get", "KEY"),
    ("purge", "--all"),
    ("verify",),
    ("rm", "--yes"),
)


def run_named(sub: tuple[str, ...], name: str, shm_dir: str, *extra: str) -> list[str]:
    command, *rest = sub
    return [command, name, *rest, "-d", shm_dir, *extra]


@pytest.mark.parametrize("sub", NAMED, ids=[s[0] for s in NAMED])
def test_a_missing_cache_is_one_line(sub: tuple[str, ...], shm_dir: str, name: str) -> None:
    argv = run_named(sub, name, shm_dir)
    msg = assert_one_line_error(zig(*argv))
    assert msg == (
        f"ziggurat {sub[0]}: no cache {name!r} in {shm_dir} (no file ziggurat.{name}.v2); "
        f"ziggurat ls --directory {shm_dir} lists them"
    )
    assert json_error(*argv)["cause"] == "missing_segment"
    assert os.listdir(shm_dir) == []


@as_root
@pytest.mark.parametrize("sub", NAMED, ids=[s[0] for s in NAMED])
def test_another_users_cache_is_refused(
    sub: tuple[str, ...], shm_dir: str, cache: Cache, name: str
) -> None:
    cache.set("KEY", 1)
    files = paths(shm_dir, name)
    for p in files:
        os.chown(p, NOBODY, NOBODY)
    before = digest(*files)
    err = json_error(*run_named(sub, name, shm_dir))
    assert err["cause"] == "other_owner"
    who = pwd.getpwuid(NOBODY).pw_name
    owners = f"is owned by user '{who}' (uid {NOBODY}), this process runs as user '{ME}'"
    assert owners in err["error"]
    assert digest(*files) == before and all(os.path.exists(p) for p in files)


@pytest.mark.parametrize("sub", NAMED[:5], ids=[s[0] for s in NAMED[:5]])
def test_a_damaged_cache_is_one_line(sub: tuple[str, ...], shm_dir: str, name: str) -> None:
    path = f"{shm_dir}/ziggurat.{name}.v2"
    with open(path, "wb") as f:
        f.write(b"NOTASEGM" + bytes(8184))
    os.chmod(path, 0o600)
    r = zig(*run_named(sub, name, shm_dir))
    if sub[0] == "verify":  # a finding of verify, not a failure to run it
        assert r.returncode == 3 and "foreign magic" in r.stdout and "Traceback" not in r.stdout
        return
    msg = assert_one_line_error(r)
    assert msg.startswith(f"ziggurat {sub[0]}: segment file {path} cannot be used")
    assert "it is not a ziggurat segment (foreign magic)" in msg
    assert json_error(*run_named(sub, name, shm_dir))["cause"] == "incompatible"


def test_bad_names_and_keys(shm_dir: str, cache: Cache, name: str) -> None:
    assert json_error("stats", "a/b", "-d", shm_dir)["cause"] == "invalid"
    err = json_error("stats", f"{name}.neg", "-d", shm_dir)
    assert err == {
        "error": f"{name + '.neg'!r} is the cached-miss segment of the cache {name!r}: "
        "name the cache, which covers both",
        "cause": "invalid",
    }
    assert json_error("get", name, "k" * 4097, "-d", shm_dir) == {
        "error": "KEY must be 1 to 4096 bytes, got 4097",
        "cause": "invalid",
    }
    assert json_error("stats", name, "--version", "a.b", "-d", shm_dir)["cause"] == "invalid"


def test_usage_errors_and_help() -> None:
    r = zig()
    assert r.returncode == 2 and "Traceback" not in r.stderr and "COMMAND" in r.stderr
    r = zig("--help")
    assert r.returncode == 0
    for command in ("ls", "stats", "top", "get", "purge", "verify", "rm"):
        assert command in r.stdout


def test_get_decodes_with_the_caches_serializer(shm_dir: str, name: str) -> None:
    c = Cache(name, size="8MiB", directory=shm_dir, serializer="msgpack")
    try:
        c.set("m", {"a": [1, 2], "b": "x"})
        wrong = get(shm_dir, name, "m")  # "auto" reads it as JSON, which it is not
        assert (wrong["format"], wrong["value"]) == ("raw", None)
        assert wrong["error"] is not None and wrong["error"].startswith("not orjson: ")
        right = get(shm_dir, name, "m", "--serializer", "msgpack")
        assert (right["format"], right["value"], right["error"]) == (
            "msgpack",
            {"a": [1, 2], "b": "x"},
            None,
        )
    finally:
        c.unlink()
    assert json_error("get", name, "m", "-d", shm_dir, "--width", "3") == {
        "error": "--width must be at least 16 characters, got 3",
        "cause": "invalid",
    }


@as_root
def test_a_cache_shared_with_a_group_of_this_user_is_used(
    shm_dir: str, cache: Cache, name: str
) -> None:
    cache.set("k", 1)
    # nobody's files, shared with nobody's own group, which the command's process (root,
    # given that group for the test) is a member of.
    for p in paths(shm_dir, name):
        os.chown(p, NOBODY, NOBODY)
        os.chmod(p, 0o660)
    groups = os.getgroups()
    os.setgroups([*groups, NOBODY])
    try:
        assert zig_json("stats", name, "-d", shm_dir)["host"]["l2"]["entries"] == 1
        assert get(shm_dir, name, "k")["value"] == 1
        assert zig_json("verify", name, "-d", shm_dir)["ok"] is True
        assert zig_json("purge", name, "-d", shm_dir, "--key", "k")["deleted"] is True
        # Shared with the group but readable by everyone: not the engine's sharing rule.
        for p in paths(shm_dir, name):
            os.chmod(p, 0o664)
        assert json_error("stats", name, "-d", shm_dir)["cause"] == "other_owner"
    finally:
        os.setgroups(groups)


def test_segment_leases_need_a_read_only_handle(shm_dir: str, cache: Cache, name: str) -> None:
    # Looking at a lease through a writable handle would take it: refused, by name.
    rw = Segment(f"{name}.neg", directory=shm_dir)
    ro = Segment(f"{name}.neg", directory=shm_dir, read_only=True)
    try:
        with pytest.raises(ValueError, match=r"Segment\.leases\(\) .* read_only=True"):
            rw.leases()
        cells = ro.leases()
        assert len(cells) == 192 and cells == [(0, 0)] * 192
        cache.fetch("k", lambda: 1)
        after = ro.leases()
        assert sum(seq for _, seq in after) == 1 and all(pid == 0 for pid, _ in after)
        assert ro.read_only and not rw.read_only
    finally:
        rw.close()
        ro.close()


def test_bytes_keys_are_given_as_their_bytes(shm_dir: str, cache: Cache, name: str) -> None:
    # A key that is not UTF-8 (a bytes key) is given as its bytes on the command line.
    key = b"bin:\xff\xfe"
    cache.set(key, "binary")
    base = [os.fsencode(a) for a in ZIGGURAT]
    where = [b"-d", os.fsencode(shm_dir), b"--json"]
    r = subprocess.run([*base, b"get", name.encode(), key, *where], capture_output=True)
    assert r.returncode == 0, r.stderr
    assert json.loads(r.stdout)["value"] == "binary"
    r = subprocess.run([*base, b"purge", name.encode(), b"--key", key, *where], capture_output=True)
    assert r.returncode == 0 and json.loads(r.stdout)["deleted"] is True
    assert cache.get(key) is None
