"""The polyglot demo (``make demo``, its third part), in a short run: the URL shortener served
by Python workers (uvicorn) and Node.js workers (``cluster``) at once, on one PostgreSQL
database and one host cache.

The test builds what the demo's Node.js side needs (the package's addon and the app's own
packages, through the Makefile's targets), runs the demo with the ziggurat mode alone, a
short load and 300 rounds of cross-language link changes, and checks from its output that:

- each language's workers served the load, with lookups answered by their L1;
- every read through one language, right after a write through the other returned, served
  the write (0 stale), in both directions, with both workers of the reading side answering;
- the Node.js workers read every entry the Python workers wrote (none was a pickle);
- new links asked for by both languages at once took one database load each.
"""

from __future__ import annotations

import os
import re
import shutil

import pytest
from demo_runs import make, run_demo

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
ROUNDS = 300
KEYS = 12
READS = 4  # reads through the other language after each change (the demo's own figure)

pytestmark = [
    pytest.mark.timeout(1500),  # the first run builds the Node.js addon
    pytest.mark.skipif(
        shutil.which("node") is None,
        reason="Node.js is not installed: the polyglot demo runs Node.js workers",
    ),
]


@pytest.fixture(scope="module")
def node_app() -> None:
    """The Node.js package built and the demo app's packages installed, as `make demo` does."""
    make("node-build", "examples/shortener/node/node_modules/.installed")


def test_short_polyglot_demo_serves_each_write_at_once_through_the_other_language(
    node_app: None,
) -> None:
    proc = run_demo(
        "examples.shortener.polyglot_demo",
        DEMO_MODES="l1+l2",
        DEMO_LINKS="2000",
        DEMO_SECONDS="1",
        DEMO_WARMUP_SECONDS="1",
        DEMO_CONNECTIONS="8",
        DEMO_ROUNDS=str(ROUNDS),
        DEMO_KEYS=str(KEYS),
        DEMO_CALLERS="6",
    )
    out = proc.stdout + proc.stderr
    assert proc.returncode == 0, out[-5000:]

    # The throughput table: one row per language, each with requests served and L1 hits.
    for lang, server in (("Python", "uvicorn"), ("Node.js", "cluster")):
        row = re.search(
            rf"{re.escape(lang)} \({server}\)\s*│\s*([\d,]+)\s*│.*?│\s*([\d.]+)%\s*│", out
        )
        assert row is not None, out[-5000:]
        assert int(row.group(1).replace(",", "")) > 0, row.group(0)
        assert float(row.group(2)) > 0, row.group(0)

    per_direction = ROUNDS // 2
    for writer, reader in (("Python", "Node.js"), ("Node.js", "Python")):
        line = (
            f"{writer} writes, {reader} reads at once, ziggurat (L1 + L2): PASS "
            f"(0 stale of {per_direction * READS:,} reads by 2 workers, {per_direction} rounds)"
        )
        assert line in out, out[-5000:]
    unreadable = "Node.js workers read every entry Python wrote, ziggurat (L1 + L2): PASS (0 "
    assert unreadable in out, out[-5000:]
    flight = re.search(
        r"One load per key across Python and Node\.js, ziggurat \(L1 \+ L2\): PASS "
        r"\((\d+) DB loads for (\d+) keys, ([\d,]+) requests\)",
        out,
    )
    assert flight is not None, out[-5000:]
    assert int(flight.group(1)) == int(flight.group(2)) == KEYS, flight.group(0)
    assert int(flight.group(3).replace(",", "")) == KEYS * 6 * 2, flight.group(0)
    assert "FAIL" not in out, out[-5000:]
