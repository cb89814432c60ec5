"""The shortener's cluster demo (``make demo-cluster``), in a short run: 20 links, 3 changes.

It starts Valkey and two hosts of two uvicorn workers each, creates links through both hosts,
changes links through host A and reads them through every worker of host B. The test checks
the exit code, that every read was right, that each worker of host B is reported serving
every change within the lag bound, that each host read from Valkey the links the other host
created, and that every process and cache directory the demo made is gone afterwards.
"""

from __future__ import annotations

import os
import re
import shutil
import subprocess

import pytest
from demo_runs import make, run_demo

pytestmark = pytest.mark.timeout(180)

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
LINKS = 20
CHANGES = 3


def _run(**env_vars: str) -> subprocess.CompletedProcess[str]:
    return run_demo("examples.shortener.cluster_demo", **env_vars)


def _alive(pid: int) -> bool:
    try:
        with open(f"/proc/{pid}/status") as f:
            state = next(line for line in f if line.startswith("State:"))
    except (OSError, StopIteration):
        return False
    return "Z" not in state.split()[1]  # a zombie has stopped already


def test_short_cluster_demo_every_worker_of_host_b_serves_the_change() -> None:
    proc = _run(DEMO_LINKS=str(LINKS), DEMO_CHANGES=str(CHANGES))
    out = proc.stdout + proc.stderr
    assert proc.returncode == 0, out[-5000:]

    for host in "AB":
        assert f"Links read through host {host}: ok {LINKS}/{LINKS} right" in out, out[-5000:]
    workers = re.findall(
        rf"Host B worker (\d+): serves the changed link \({CHANGES}/{CHANGES} changes", out
    )
    assert len(set(workers)) == 2, out[-5000:]
    lag = re.search(
        rf"first read showing the change, {CHANGES} changes: "
        r"p50 ([\d.]+) ms, max ([\d.]+) ms \(bound 1000 ms\)",
        out,
    )
    assert lag is not None, out[-5000:]
    assert 0 < float(lag.group(1)) <= float(lag.group(2)) < 1000, lag.group(0)
    assert "Every worker of host B serves the changed links: PASS" in out, out[-5000:]
    assert "FAIL" not in out and "BAD" not in out, out[-5000:]

    # The tier table: host, workers, lookups, L1, L2, L3 hits (kept), DB reads, ...; half of
    # the links were created through the other host, so each host found them in Valkey.
    rows = dict(
        re.findall(
            r"│ host ([AB])\s+│\s+2\s+│\s+[\d,]+\s+│\s+[\d,]+\s+│\s+[\d,]+\s+│\s+([\d,]+) \(",
            out,
        )
    )
    assert set(rows) == {"A", "B"}, out[-5000:]
    assert all(int(hits.replace(",", "")) >= LINKS // 2 for hits in rows.values()), rows

    # Everything the demo started is stopped, and its cache directories are gone.
    pids = [int(p) for p in re.findall(r"Valkey: pid (\d+)", out)]
    for found in re.findall(r"uvicorn pid (\d+), workers ([\d,\s]+?),\s+http", out):
        pids.append(int(found[0]))
        pids += [int(p) for p in re.findall(r"\d+", found[1])]
    assert len(pids) == 1 + 2 * 3, out[-5000:]
    assert [p for p in pids if _alive(p)] == [], "the demo left processes running"
    dirs = re.findall(r"cache directory\s+(/\S+)", out)
    assert len(dirs) == 2, out[-5000:]
    assert [d for d in dirs if os.path.exists(d)] == [], "the demo left its cache directories"


def test_bad_settings_are_refused_with_the_variable_named() -> None:
    proc = _run(DEMO_LINKS="2", DEMO_CHANGES="3")
    assert proc.returncode != 0
    assert "DEMO_CHANGES must be at most DEMO_LINKS" in proc.stderr + proc.stdout


@pytest.mark.skipif(shutil.which("node") is None, reason="Node.js is not installed")
def test_cluster_demo_with_node_workers_on_host_b() -> None:
    """Host A: Python workers under uvicorn; host B: Node.js workers under ``cluster``, on the
    same tier (``make demo-cluster-node``): every change through host A reaches both of host
    B's workers within the bound, and each host reads from Valkey what the other created."""
    make("node-build", "examples/shortener/node/node_modules/.installed")
    proc = _run(DEMO_LINKS=str(LINKS), DEMO_CHANGES=str(CHANGES), DEMO_HOST_B="node")
    out = proc.stdout + proc.stderr
    assert proc.returncode == 0, out[-5000:]
    assert re.search(r"Host B: cluster pid \d+", out), out[-5000:]
    for host in "AB":
        assert f"Links read through host {host}: ok {LINKS}/{LINKS} right" in out, out[-5000:]
    workers = re.findall(
        rf"Host B worker (\d+): serves the changed link \({CHANGES}/{CHANGES} changes", out
    )
    assert len(set(workers)) == 2, out[-5000:]
    assert "Every worker of host B serves the changed links: PASS" in out, out[-5000:]
    rows = dict(
        re.findall(
            r"│ host ([AB])\s+│\s+2\s+│\s+[\d,]+\s+│\s+[\d,]+\s+│\s+[\d,]+\s+│\s+([\d,]+) \(",
            out,
        )
    )
    assert all(int(hits.replace(",", "")) >= LINKS // 2 for hits in rows.values()), rows
