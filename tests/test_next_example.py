"""The Next.js example (``examples/next``, ``make demo-next``), in a short run: the app built
once, then four ``next start`` instances per cache mode. With ``withZiggurat`` in next.config,
a page every instance misses at once is rendered once for the host, and right after a
``revalidateTag`` through one instance every instance serves the new page; Next.js's own
cache, per instance, is measured beside it (it renders the page in each instance, and serves
stale pages after a revalidation through another).
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess

import pytest
from demo_runs import make

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))

pytestmark = [
    pytest.mark.timeout(1500),  # the first run installs Next.js and builds the app
    pytest.mark.skipif(shutil.which("node") is None, reason="Node.js is not installed"),
]


def test_next_instances_share_one_cache_and_revalidate_together() -> None:
    make("node-build", "examples/next/.next/BUILD_ID")
    run = subprocess.run(
        ["node", "demo.mjs", "--seconds", "1", "--rounds", "3", "--modes", "default,ziggurat"],
        cwd=os.path.join(ROOT, "examples", "next"),
        stdin=subprocess.DEVNULL,
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert run.returncode == 0, (run.stdout + run.stderr)[-5000:]
    results = {r["mode"]: r for r in json.loads(run.stdout.strip().splitlines()[-1])["results"]}
    zig = results["ziggurat"]
    assert zig["missRenders"] == [1, 1, 1], zig
    assert zig["stale"] == 0 and zig["reads"] == 12, zig
    own = results["default"]
    # Next.js's own cache, for the table: each instance keeps its own pages.
    assert own["reads"] == 12 and max(own["missRenders"]) >= 1, own
