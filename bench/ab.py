"""Two builds of the extension, measured side by side on the Cache's hot paths.

    python bench/ab.py BASE                # BASE: a git revision; the work tree is the other build
    python bench/ab.py BASE --pairs 9      # more process pairs (default 5)
    python bench/ab.py BASE --keep-base    # BASE's build from a last run, the work tree's anew

A change that adds checks to the engine or the binding must not slow the calls an
application makes most. This builds the extension of ``BASE`` and of the work tree the
same way (``bench/pgo.py wheel``: a profile-guided release build where ``llvm-profdata``
is present, else a plain release build, both the same), installs each into a directory of
its own under ``target/ab/``, and times four calls in pairs of child processes (one per
build), batch after batch, one build after the other (the order alternates, since this
machine's speed drifts over seconds):

* ``l1_hit``: ``Cache.get`` of a key this process set (a small dict; L1 answers);
* ``l2_hit``: ``Cache.get`` through a cache with no L1 (the segment answers; pickle);
* ``set``: ``Cache.set`` overwriting one of 1,000 keys with a small dict;
* ``set_tagged``: the same with two tags (keys of its own);
* ``fetch_miss``: ``Cache.fetch`` of a new key (the loader returns a constant);
* ``fetch_miss_tagged``: the same with two tags (a load checks its tags' versions as it lands);
* ``mix``: 90% ``Cache.get`` and 10% ``Cache.set`` over 10,000 keys, in a random order
  drawn once (as ``cache_mix`` of ``bench/bench_cache.py``);
* ``incr``: ``Cache.incr`` of one counter.

The table gives, per call, the median ns of each build over all batches and the median of
the per-batch ratios (work tree / BASE), with the lowest and highest of the pairs' own
medians as the spread. Nothing here is asserted.
The report goes to ``bench/ab.md`` and into its section of docs/benchmarks.md
(``bench/run.py`` keeps that section when it rewrites the page).

Example::

    $ .venv/bin/python bench/ab.py 9aeac40
"""

from __future__ import annotations

import argparse
import os
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
OUT = ROOT / "target" / "ab"
CALLS = ("l1_hit", "l2_hit", "set", "set_tagged", "fetch_miss", "fetch_miss_tagged", "mix", "incr")
REPORT = ROOT / "bench" / "ab.md"
DOC = ROOT / "docs" / "benchmarks.md"
TITLE = "## Hot paths of two builds (A/B)"

# Runs in a child process whose sys.path starts with one build's install directory: it sets
# up the caches, then times a call each time the parent asks ("l1_hit 200000" on stdin),
# answering with the ns per call of that batch.
CHILD = r"""
import gc, os, shutil, sys, tempfile, time
from ziggurat import Cache

value = {"id": 7, "title": "hello", "tags": ["a", "b"], "score": 1.5, "ok": True, "n": None}
keys = [f"key:{i}" for i in range(1000)]
d = tempfile.mkdtemp(prefix="zab")
name = "ab" + str(os.getpid())
w = Cache(name, "256MiB", directory=d, serializer="pickle", ttl=3600)
r = Cache(name, "256MiB", directory=d, serializer="pickle", ttl=3600, l1_items=0)
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

tagged = [f"tagged:{i}" for i in range(1000)]  # apart: l1_hit and l2_hit read untagged keys

def set_tagged(n):
    s = w.set
    for i in range(n):
        s(tagged[i % 1000], value, tags=("t1", "t2"))

def fetch_miss(n):
    f = w.fetch
    for _ in range(n):
        f(f"new:{next(fresh)}", loader)

def fetch_miss_tagged(n):
    f = w.fetch
    for _ in range(n):
        f(f"new:{next(fresh)}", loader, tags=("t1", "t2"))

import random
rng = random.Random(11)
mix_keys = [f"mix:{i}" for i in range(10_000)]
for k in mix_keys:
    w.set(k, value)
mix_ops = [(rng.choice(mix_keys), rng.random() < 0.1) for _ in range(100_000)]

def mix(n):
    get, s = w.get, w.set
    for i in range(n):
        k, write = mix_ops[i % 100_000]
        if write:
            s(k, value)
        else:
            get(k)

w.set("counter", 0)

def incr(n):
    inc = w.incr
    for _ in range(n):
        inc("counter")

fns = {"l1_hit": l1_hit, "l2_hit": l2_hit, "set": set_, "set_tagged": set_tagged,
       "fetch_miss": fetch_miss, "fetch_miss_tagged": fetch_miss_tagged, "mix": mix,
       "incr": incr}
for fn in fns.values():
    fn(2000)  # warm
print("ready", flush=True)
for line in sys.stdin:
    call, n = line.split()
    gc.disable()
    t = time.perf_counter_ns()
    fns[call](int(n))
    took = time.perf_counter_ns() - t
    gc.enable()
    print(took / int(n), flush=True)
w.close(); r.close()
shutil.rmtree(d, ignore_errors=True)
"""
# Calls per batch: about 20 ms each on this machine, so a round of both builds is short
# against the drift of the machine's speed.
BATCH = {
    "l1_hit": 200_000,
    "l2_hit": 15_000,
    "set": 12_000,
    "set_tagged": 10_000,
    "fetch_miss": 6_000,
    "fetch_miss_tagged": 5_000,
    "mix": 60_000,
    "incr": 20_000,
}


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


class Child:
    """One build's child process (see ``CHILD``)."""

    def __init__(self, site: Path) -> None:
        env = {**os.environ, "PYTHONPATH": str(site)}
        self.p = subprocess.Popen(
            [sys.executable, "-c", CHILD], env=env, stdin=subprocess.PIPE,
            stdout=subprocess.PIPE, text=True,
        )  # fmt: skip
        assert self.p.stdout is not None and self.p.stdout.readline().strip() == "ready"

    def time(self, call: str) -> float:
        assert self.p.stdin is not None and self.p.stdout is not None
        self.p.stdin.write(f"{call} {BATCH[call]}\n")
        self.p.stdin.flush()
        return float(self.p.stdout.readline())

    def close(self) -> None:
        assert self.p.stdin is not None
        self.p.stdin.close()
        self.p.wait(timeout=60)


def render(
    base: str,
    head: str,
    pairs: int,
    rounds: int,
    rows: dict[str, list[tuple[float, float]]],
    argv: list[str],
) -> str:
    """The report's Markdown section: what ran, then a row per call."""
    load = os.getloadavg()[0]
    when = time.strftime("%Y-%m-%d %H:%M UTC", time.gmtime())
    out = [
        TITLE,
        "",
        f"`python bench/ab.py {' '.join(argv)}` on {when}"
        f" (load average {load:.2f} at the end): the extension of {base} against that of {head},"
        f" each built by `bench/pgo.py wheel`. {pairs} pairs of processes (one per build), each"
        f" pair timing {rounds} rounds of a batch of each call (about 20 ms) in both processes,"
        " one after the other (the order alternating). ns are medians over all batches; the"
        f" ratio is the median of the per-batch ratios ({head} / {base}); the spread is the"
        " lowest and highest median of one pair's batches.",
        "",
        f"| call | {base} (ns) | {head} (ns) | ratio, median | pairs' medians, min–max |",
        "|---|---|---|---|---|",
    ]
    for c in CALLS:
        b = statistics.median(x for x, _ in rows[c])
        h = statistics.median(y for _, y in rows[c])
        ratios = [y / x for x, y in rows[c]]
        per_pair = [
            statistics.median(ratios[i : i + rounds]) for i in range(0, len(ratios), rounds)
        ]
        out.append(
            f"| {c} | {b:.0f} | {h:.0f} | ×{statistics.median(ratios):.3f} "
            f"| ×{min(per_pair):.3f}–×{max(per_pair):.3f} |"
        )
    return "\n".join(out)


def splice(report: str, title: str = TITLE) -> None:
    """Puts ``report`` in place of its section (``title``) of docs/benchmarks.md (or before
    its software versions)."""
    doc = DOC.read_text()
    versions = doc.index("## Software versions")
    start = doc.find(title)
    if start < 0 or start > versions:
        start = end = versions
    else:  # the section runs to the next one
        end = doc.index("\n## ", start + len(title)) + 1
    DOC.write_text(doc[:start] + report + "\n\n" + doc[end:])


def main(argv: list[str]) -> int:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawTextHelpFormatter)
    p.add_argument("base", help="git revision of the build to compare against")
    p.add_argument("--pairs", type=int, default=5, help="process pairs (default 5)")
    p.add_argument("--rounds", type=int, default=31, help="rounds per pair (default 31)")
    p.add_argument("--no-build", action="store_true", help="reuse target/ab/ from a last run")
    p.add_argument(
        "--keep-base", action="store_true", help="reuse target/ab/base, build the work tree"
    )
    a = p.parse_args(argv)
    base_site, head_site = OUT / "base", OUT / "head"
    if not a.no_build and not (a.keep_base and base_site.exists()):
        tree = OUT / "base-src"
        if tree.exists():
            run(["git", "worktree", "remove", "--force", str(tree)], cwd=ROOT)
        run(["git", "worktree", "add", "-q", "--detach", str(tree), a.base], cwd=ROOT)
        try:
            build(tree, base_site)
        finally:
            run(["git", "worktree", "remove", "--force", str(tree)], cwd=ROOT)
    if not a.no_build:
        build(ROOT, head_site)
    rows: dict[str, list[tuple[float, float]]] = {c: [] for c in CALLS}
    for pair in range(a.pairs):
        # A pair of fresh processes, one per build: where each process's memory lands
        # moves its speed by a few percent, so several pairs are measured.
        kids = (Child(base_site), Child(head_site))
        for i in range(a.rounds):
            for c in CALLS:
                got = [0.0, 0.0]
                for which in (0, 1) if (i + pair) % 2 == 0 else (1, 0):
                    got[which] = kids[which].time(c)
                rows[c].append((got[0], got[1]))
        for k in kids:
            k.close()
        print(f"pair {pair + 1}/{a.pairs} done", file=sys.stderr, flush=True)
    head_rev = subprocess.run(
        ["git", "rev-parse", "--short", "HEAD"], cwd=ROOT, capture_output=True, text=True
    ).stdout.strip()
    report = render(a.base, head_rev, a.pairs, a.rounds, rows, argv)
    print(report)
    REPORT.write_text(report + "\n")
    splice(report)
    return 0


if __name__ == "__main__":
    raise SystemExit(main(sys.argv[1:]))
