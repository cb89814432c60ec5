"""Two builds of the extension, measured side by side on the Cache's hot paths.

    python bench/ab.py BASE                # BASE: a git revision; the work tree is the other build
    python bench/ab.py BASE --rounds 15    # more rounds (default 9)

A change that adds checks to the engine or the binding must not slow the calls an
application makes most. This builds the extension of ``BASE`` and of the work tree the
same way (``bench/pgo.py wheel``: a profile-guided release build where ``llvm-profdata``
is present, else a plain release build, both the same), installs each into a directory of
its own under ``target/ab/``, and times four calls in child processes, one build after the
other in each round (the order alternates round by round, since this machine's speed drifts
over seconds):

* ``l1_hit``: ``Cache.get`` of a key this process set (a small dict; L1 answers);
* ``l2_hit``: ``Cache.get`` through a cache with no L1 (the segment answers; pickle);
* ``set``: ``Cache.set`` overwriting one of 1,000 keys with a small dict;
* ``fetch_miss``: ``Cache.fetch`` of a new key (the loader returns a constant).

Each child reports the median ns per call of its timed loops; the table gives, per call,
the median over the rounds of each build and the median of the per-round ratios
(work tree / BASE), with their spread. Nothing here is asserted: it prints Markdown.

Example::

    $ .venv/bin/python bench/ab.py 9aeac40 --rounds 9
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import statistics
import subprocess
import sys
import tempfile
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
OUT = ROOT / "target" / "ab"
CALLS = ("l1_hit", "l2_hit", "set", "fetch_miss")

# Runs in a child process whose sys.path starts with one build's install directory.
CHILD = r"""
import gc, json, os, statistics, sys, tempfile, time
import ziggurat
from ziggurat import Cache

value = {"id": 7, "title": "hello", "tags": ["a", "b"], "score": 1.5, "ok": True, "n": None}
keys = [f"key:{i}" for i in range(1000)]
d = tempfile.mkdtemp(prefix="zab")
name = "ab" + str(os.getpid())
w = Cache(name, "64MiB", directory=d, serializer="pickle", ttl=3600)
r = Cache(name, "64MiB", directory=d, serializer="pickle", ttl=3600, l1_items=0)
for k in keys:
    w.set(k, value)
fresh = iter(range(10**9))
loader = lambda: value

def l1_hit(n):
    get = w.get
    for i in range(n):
        get(keys[i % 1000])

def l2_hit(n):
    get = r.get
    for i in range(n):
        get(keys[i % 1000])

def set_(n):
    s = w.set
    for i in range(n):
        s(keys[i % 1000], value)

def fetch_miss(n):
    f = w.fetch
    for _ in range(n):
        f(f"new:{next(fresh)}", loader)

def timed(fn, n, reps):
    out = []
    for _ in range(reps):
        gc.disable()
        t = time.perf_counter_ns()
        fn(n)
        out.append((time.perf_counter_ns() - t) / n)
        gc.enable()
    return statistics.median(out)

fns = {"l1_hit": (l1_hit, 200_000), "l2_hit": (l2_hit, 100_000),
       "set": (set_, 50_000), "fetch_miss": (fetch_miss, 20_000)}
for fn, n in fns.values():
    fn(n // 10)  # warm
res = {k: timed(fn, n, 5) for k, (fn, n) in fns.items()}
w.close(); r.close()
import shutil; shutil.rmtree(d, ignore_errors=True)
print(json.dumps(res))
"""


def run(cmd: list[str], cwd: Path, env: dict[str, str] | None = None) -> None:
    subprocess.run(cmd, cwd=cwd, env=env, check=True)


def build(src: Path, into: Path) -> None:
    """The wheel of the tree at ``src``, built as ``make build`` builds, unpacked in ``into``."""
    wheels = Path(tempfile.mkdtemp(prefix="ab-wheels"))
    run([sys.executable, "bench/pgo.py", "wheel", "-o", str(wheels)], cwd=src)
    (wheel,) = wheels.glob("*.whl")
    shutil.rmtree(into, ignore_errors=True)
    pip = [sys.executable, "-m", "pip", "install", "-q", "--no-deps"]
    run([*pip, "--target", str(into), str(wheel)], cwd=src)
    shutil.rmtree(wheels, ignore_errors=True)


def measure(site: Path) -> dict[str, float]:
    env = {**os.environ, "PYTHONPATH": str(site)}
    out = subprocess.run(
        [sys.executable, "-c", CHILD], env=env, capture_output=True, text=True, check=True
    )
    return {k: float(v) for k, v in json.loads(out.stdout.strip().splitlines()[-1]).items()}


def main(argv: list[str]) -> int:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawTextHelpFormatter)
    p.add_argument("base", help="git revision of the build to compare against")
    p.add_argument("--rounds", type=int, default=9)
    p.add_argument("--no-build", action="store_true", help="reuse target/ab/ from a last run")
    a = p.parse_args(argv)
    base_site, head_site = OUT / "base", OUT / "head"
    if not a.no_build:
        tree = OUT / "base-src"
        if tree.exists():
            run(["git", "worktree", "remove", "--force", str(tree)], cwd=ROOT)
        run(["git", "worktree", "add", "-q", "--detach", str(tree), a.base], cwd=ROOT)
        try:
            build(tree, base_site)
        finally:
            run(["git", "worktree", "remove", "--force", str(tree)], cwd=ROOT)
        build(ROOT, head_site)
    rows: dict[str, list[tuple[float, float]]] = {c: [] for c in CALLS}
    for i in range(a.rounds):
        order = [(base_site, 0), (head_site, 1)] if i % 2 == 0 else [(head_site, 1), (base_site, 0)]
        got: dict[int, dict[str, float]] = {}
        for site, which in order:
            got[which] = measure(site)
        for c in CALLS:
            rows[c].append((got[0][c], got[1][c]))
        print(f"round {i + 1}/{a.rounds} done", file=sys.stderr, flush=True)
    head_rev = subprocess.run(
        ["git", "rev-parse", "--short", "HEAD"], cwd=ROOT, capture_output=True, text=True
    ).stdout.strip()
    print(f"| call | {a.base} (ns) | {head_rev} (ns) | ratio, median | ratios, min–max |")
    print("|---|---|---|---|---|")
    for c in CALLS:
        base = statistics.median(b for b, _ in rows[c])
        head = statistics.median(h for _, h in rows[c])
        ratios = [h / b for b, h in rows[c]]
        print(
            f"| {c} | {base:.0f} | {head:.0f} | ×{statistics.median(ratios):.3f} "
            f"| ×{min(ratios):.3f}–×{max(ratios):.3f} |"
        )
    return 0


if __name__ == "__main__":
    raise SystemExit(main(sys.argv[1:]))
