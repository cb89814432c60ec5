"""Runs a demo of ``examples/`` as ``make demo`` does: its module under this interpreter, from
the repository's root, with the demo settings of a test (``DEMO_*``) and without the database
URLs of the environment unless a test gives them.
"""

from __future__ import annotations

import os
import subprocess
import sys

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
#: Settings a developer's shell may hold that would point a demo elsewhere.
_UNSET = ("DATABASE_URL", "SHORTENER_DATABASE_URL")


def run_demo(module: str, *args: str, **env_vars: str) -> subprocess.CompletedProcess[str]:
    """``python -m module args`` with ``env_vars`` set; its output captured as text."""
    env = {k: v for k, v in os.environ.items() if k not in _UNSET}
    env.update(env_vars)
    env["PYTHONPATH"] = ROOT + os.pathsep + env.get("PYTHONPATH", "")
    return subprocess.run(
        [sys.executable, "-m", module, *args],
        cwd=ROOT,
        env=env,
        stdin=subprocess.DEVNULL,
        capture_output=True,
        text=True,
        timeout=150,
    )


def make(*targets: str) -> None:
    """Builds ``targets`` with the Makefile, as ``make demo`` would before a demo (the
    Node.js addon, an app's packages from its lockfile); fails the test with make's output."""
    proc = subprocess.run(
        ["make", *targets],
        cwd=ROOT,
        stdin=subprocess.DEVNULL,
        capture_output=True,
        text=True,
        timeout=1200,
    )
    assert proc.returncode == 0, (proc.stdout + proc.stderr)[-5000:]
