"""``ziggurat doctor``, run as an operator or a container's health check runs it: in a
subprocess, against directories the tests set up (a 64 MB tmpfs like a container's
/dev/shm, a tmpfs with huge pages, a directory anyone may write), real caches, and a real
Redis server for the cluster checks (Valkey where redis-server is not installed). Exit
codes: 0 ok or info, 4 warnings, 3 errors.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import time
import uuid
from collections.abc import Iterator
from typing import Any

import pytest
from redis_servers import Server, free_port
from tmpfs_mounts import huge_pages_possible, tmpfs
from ziggurat import Cache
from ziggurat.cluster.tier import W

pytestmark = pytest.mark.timeout(120)

SECRET = "doctor-test-secret-0123456789"
NOBODY = 65534


def doctor(*args: str, env: dict[str, str] | None = None) -> tuple[int, dict[str, Any]]:
    """Runs ``ziggurat doctor args... --json``: its exit code and its document."""
    r = subprocess.run(
        [sys.executable, "-m", "ziggurat", "doctor", *args, "--json"],
        capture_output=True,
        text=True,
        timeout=60,
        env={**os.environ, **(env or {})},
    )
    assert r.stderr == "", r.stderr
    return r.returncode, json.loads(r.stdout)


def found(doc: dict[str, Any], check: str, severity: str | None = None) -> list[dict[str, Any]]:
    return [
        f
        for f in doc["findings"]
        if f["check"] == check and (severity is None or f["severity"] == severity)
    ]


def test_a_container_dev_shm_is_too_small_for_the_default_and_for_an_explicit_size() -> None:
    with tmpfs("64m") as d:
        code, doc = doctor("--directory", d)
        assert code == 4 and doc["severity"] == "warning"
        [f] = found(doc, "free_space", "warning")
        assert "takes what fits" in f["message"] and "--shm-size" in f["remedy"]
        assert "sizeLimit" in f["remedy"]
        code, doc = doctor("--directory", d, "--size", "62MiB")
        assert code == 3
        [f] = found(doc, "free_space", "error")
        assert "runs degraded" in f["message"]
        # Enough room for what is asked: no finding above info.
        code, doc = doctor("--directory", d, "--size", "16MiB")
        assert code == 0 and doc["severity"] in ("ok", "info"), doc


def test_a_directory_anyone_may_write_without_the_sticky_bit(shm_dir: str) -> None:
    os.chmod(shm_dir, 0o777)
    code, doc = doctor("--directory", shm_dir)
    assert code == 3
    [f] = found(doc, "directory", "error")
    assert "sticky bit" in f["message"] and "chmod +t" in f["remedy"]
    code, doc = doctor("--directory", os.path.join(shm_dir, "missing"))
    assert code == 3 and "does not exist" in found(doc, "directory", "error")[0]["message"]


def test_files_an_incomplete_pair_and_another_users_file(shm_dir: str) -> None:
    c = Cache("whole", size="8MiB", directory=shm_dir)
    code, doc = doctor("whole", "--directory", shm_dir)
    assert code == 0, doc
    assert [f["severity"] for f in found(doc, "files")] == ["ok", "ok"]
    # Only the entries' file left: an older version's failure, or a hand's.
    os.unlink(os.path.join(shm_dir, "ziggurat.whole.neg.v2"))
    code, doc = doctor("whole", "--directory", shm_dir)
    assert code == 4
    [f] = found(doc, "files", "warning")
    assert "incomplete pair" in f["message"] and "ziggurat rm whole" in f["remedy"]
    c.close()
    if os.geteuid() != 0:
        return  # giving a file to another user needs root
    Cache("theirs", size="8MiB", directory=shm_dir).close()
    for suffix in ("", ".neg"):
        os.chown(os.path.join(shm_dir, f"ziggurat.theirs{suffix}.v2"), NOBODY, -1)
    code, doc = doctor("theirs", "--directory", shm_dir)
    assert code == 3
    errors = found(doc, "files", "error")
    assert len(errors) == 2 and all("other_owner" in f["message"] for f in errors)


@pytest.mark.skipif(huge_pages_possible() is not None, reason=huge_pages_possible() or "")
def test_huge_pages_found_where_the_mount_offers_them_and_explained_where_not() -> None:
    with tmpfs("64m", "within_size") as d:
        c = Cache("hp", size="16MiB", directory=d)
        _, doc = doctor("hp", "--directory", d)
        [f] = found(doc, "huge_pages")
        assert f["severity"] == "ok" and "mapped with huge pages" in f["message"], f
        c.close()
    with tmpfs("64m", "never") as d:
        c = Cache("hp", size="16MiB", directory=d)
        _, doc = doctor("hp", "--directory", d)
        [f] = found(doc, "huge_pages")
        assert f["severity"] == "info" and "huge=within_size" in f["remedy"]
        c.close()


@pytest.fixture
def server(shm_dir: str) -> Iterator[Server]:
    d = os.path.join(shm_dir, "server")
    os.mkdir(d)
    s = Server("redis", d).start()
    try:
        yield s
    finally:
        s.kill()


def test_redis_the_secret_and_the_stream_reader(server: Server, shm_dir: str) -> None:
    name = "d" + uuid.uuid4().hex[:10]
    host = os.path.join(shm_dir, "host")
    os.mkdir(host)
    c = Cache(name, size="8MiB", directory=host, redis=server.url, secret=SECRET)
    for i in range(5):
        c.set(f"k{i}", {"i": i})
    deadline = time.monotonic() + 10
    while c._core.app_load(W.LEASE) != os.getpid() and time.monotonic() < deadline:
        time.sleep(0.01)
    args = (name, "--directory", host, "--redis", server.url)
    code, doc = doctor(*args, env={"ZIGGURAT_SECRET": SECRET})
    assert code == 0, doc
    assert [f["severity"] for f in found(doc, "redis")] == ["ok", "ok"]
    assert "the secret verifies 5 of the 5" in found(doc, "redis")[1]["message"]
    [reader] = found(doc, "stream_reader", "ok")
    assert f"pid {os.getpid()} reads the stream" in reader["message"]
    assert "events behind" in reader["message"]
    # Another secret than the hosts': every value would be refused.
    code, doc = doctor(*args, env={"ZIGGURAT_SECRET": "another-secret-0123456789"})
    assert code == 3
    [f] = found(doc, "redis", "error")
    assert "verifies none of the 5 values" in f["message"]
    # No reader once the cache is closed: nobody applies the other hosts' events.
    c.close()
    code, doc = doctor(*args, env={"ZIGGURAT_SECRET": SECRET})
    assert code == 4
    assert "no process applies" in found(doc, "stream_reader", "warning")[0]["message"]
    # A Redis that does not answer.
    dead = f"redis://127.0.0.1:{free_port()}/0"
    code, doc = doctor(name, "--directory", host, "--redis", dead)
    assert code == 3
    assert "does not answer" in found(doc, "redis", "error")[0]["message"]


def test_the_table_and_a_bad_size() -> None:
    r = subprocess.run(
        [sys.executable, "-m", "ziggurat", "doctor", "--directory", "/dev/shm"],
        capture_output=True,
        text=True,
        env={**os.environ, "COLUMNS": "200"},
    )
    assert r.returncode in (0, 4), r.stderr
    assert "ziggurat doctor: /dev/shm" in r.stdout and "free_space" in r.stdout
    r = subprocess.run(
        [sys.executable, "-m", "ziggurat", "doctor", "--size", "12 parsecs", "--json"],
        capture_output=True,
        text=True,
    )
    assert r.returncode == 1 and r.stdout == ""
    assert json.loads(r.stderr)["cause"] == "invalid"
