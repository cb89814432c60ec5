"""Run the benchmarks and rewrite docs/benchmarks.md (``make bench``).

    python bench/run.py                 every benchmark, 5 interleaved reps per figure
    python bench/run.py --quick         fewer and shorter reps (smoke run, ~1-2 minutes)
    python bench/run.py --only get,mix  some benchmarks; the others keep their last results
    python bench/run.py --only scale    the size scaling alone (as bench/bench_scale.py)

Raw results go to bench/results/ as JSON (one file per run, plus the latest results per
benchmark, which the Markdown report is rendered from). A quick run writes its report to
bench/results/benchmarks-quick.md unless ``--out`` says otherwise, so a smoke run never
replaces the full figures in docs/benchmarks.md.
"""

from __future__ import annotations

import argparse
import datetime as dt
import json
import os
import shlex
import signal
import subprocess
import sys
import time
import traceback
from typing import Any

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(HERE)
if HERE not in sys.path:
    sys.path.insert(0, HERE)

import bench_cache as bc  # noqa: E402
import bench_cluster as bcl  # noqa: E402
import bench_scale as bsc  # noqa: E402
import bench_segment as bs  # noqa: E402
import harness as h  # noqa: E402
import peers  # noqa: E402

RESULTS = os.path.join(HERE, "results")
# How the extension was built (ziggurat._native.BUILD), as the report's header says it.
BUILDS = {
    "pgo": "release build with profile-guided optimization (`bench/pgo.py`, as `make build` "
    "and `make wheel` make it; docs/packaging.md)",
    "release": "plain release build (no profile-guided optimization)",
}
DOC = os.path.join(ROOT, "docs", "benchmarks.md")
# report order: the segment (L2 alone), the multi-level Cache, its cluster tier, then the
# segment's size scaling (its section comes from bench/scale.md, which a run of
# bench/bench_scale.py alone writes too)
BENCHMARKS = {**bs.BENCHMARKS, **bc.BENCHMARKS, **bcl.BENCHMARKS, **bsc.BENCHMARKS}
NEEDS_REDIS = bs.NEEDS_REDIS | bc.NEEDS_REDIS | bcl.NEEDS_REDIS


def command_line(argv: list[str]) -> str:
    """The command as typed from the repository root, without machine paths."""
    exe = sys.executable
    rel = os.path.relpath(exe, ROOT)
    py = rel if not rel.startswith("..") else "python"
    return " ".join([py, "bench/run.py", *(shlex.quote(a) for a in argv)])


def git_commit() -> str:
    try:
        out = subprocess.run(
            ["git", "rev-parse", "--short", "HEAD"],
            cwd=ROOT,
            capture_output=True,
            text=True,
            timeout=10,
        )
        return out.stdout.strip() if out.returncode == 0 else "uncommitted"
    except Exception:
        return "unknown"


def parse(argv: list[str]) -> argparse.Namespace:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawTextHelpFormatter)
    p.add_argument("--quick", action="store_true", help="fewer, shorter reps (smoke run)")
    p.add_argument(
        "--only",
        default="",
        help="comma-separated benchmark names: " + ", ".join(BENCHMARKS),
    )
    p.add_argument("--out", default="", help="Markdown report path (default: see above)")
    p.add_argument("--no-doc", action="store_true", help="write the JSON results only")
    args = p.parse_args(argv)
    names = [n.strip() for n in args.only.split(",") if n.strip()] or list(BENCHMARKS)
    unknown = [n for n in names if n not in BENCHMARKS]
    if unknown:
        p.error(f"unknown benchmark(s) {unknown}; choose from {list(BENCHMARKS)}")
    args.names = names
    return args


def _raise_exit(signum: int, _frame: Any) -> None:
    raise SystemExit(128 + signum)


def run(argv: list[str]) -> int:
    args = parse(argv)
    settings = h.Settings.make(args.quick)
    started = dt.datetime.now(dt.timezone.utc)
    t_start = time.perf_counter()
    meta: dict[str, Any] = {
        "command": command_line(argv),
        "date": started.strftime("%Y-%m-%d %H:%M UTC"),
        "machine": h.machine_facts(),
        "versions": peers.versions(),
        "commit": git_commit(),
        "settings": vars(settings),
        "segment": "available" if peers.segment_class() else peers.segment_unavailable(),
        "build": peers.extension_build(),
        "loadavg_start": list(os.getloadavg()),
    }
    signal.signal(signal.SIGTERM, _raise_exit)
    redis = peers.RedisServer() if NEEDS_REDIS & set(args.names) else None
    scratch = peers.Scratch()
    sections: list[bs.Section] = []
    failed: list[str] = []
    try:
        if redis is not None and not redis.start():
            print(f"note: {redis.reason}; Redis rows skipped", file=sys.stderr)
        if redis is not None:
            meta["versions"]["redis-server"] = redis.version or "not installed"
        ctx = bs.Ctx(settings, scratch, redis)
        for name in args.names:
            print(f"[bench] {name} ...", file=sys.stderr, flush=True)
            t0 = time.perf_counter()
            try:
                sec = BENCHMARKS[name](ctx)
            except Exception:
                failed.append(name)
                tb = traceback.format_exc()
                print(tb, file=sys.stderr)
                sec = bs.Section(
                    name, name, "**This benchmark failed:**\n\n```\n" + tb + "```", {"error": tb}
                )
            sec.seconds = time.perf_counter() - t0
            print(f"[bench] {name}: {sec.seconds:.1f} s", file=sys.stderr, flush=True)
            sections.append(sec)
    finally:
        if redis is not None:
            redis.stop()
        scratch.cleanup()
    meta["seconds"] = time.perf_counter() - t_start
    meta["loadavg_end"] = list(os.getloadavg())

    os.makedirs(RESULTS, exist_ok=True)
    stem = "quick" if args.quick else "full"
    run_doc = {"meta": meta, "sections": [section_json(s, meta) for s in sections]}
    stamp = started.strftime("%Y%m%d-%H%M%S")
    with open(os.path.join(RESULTS, f"{stamp}-{stem}.json"), "w") as f:
        json.dump(run_doc, f, indent=1, default=str)
    latest_path = os.path.join(RESULTS, f"latest-{stem}.json")
    latest: dict[str, Any] = {"sections": {}}
    if os.path.exists(latest_path):
        try:
            with open(latest_path) as f:
                latest = json.load(f)
        except (OSError, ValueError):
            pass
    latest["meta"] = meta
    for s in run_doc["sections"]:
        latest["sections"][s["name"]] = s
    with open(latest_path, "w") as f:
        json.dump(latest, f, indent=1, default=str)

    if not args.no_doc:
        out = args.out or (os.path.join(RESULTS, "benchmarks-quick.md") if args.quick else DOC)
        with open(out, "w") as f:
            f.write(render(latest, meta, args.quick))
        print(f"[bench] report: {os.path.relpath(out, ROOT)}", file=sys.stderr)
    print(f"[bench] done in {meta['seconds']:.0f} s", file=sys.stderr)
    return 1 if failed else 0


def section_json(s: bs.Section, meta: dict[str, Any]) -> dict[str, Any]:
    return {
        "name": s.name,
        "title": s.title,
        "markdown": s.markdown,
        "goals": [vars(g) for g in s.goals],
        "data": s.data,
        "seconds": s.seconds,
        "date": meta["date"],
        "command": meta["command"],
        "commit": meta["commit"],
    }


def status(ok: bool | None) -> str:
    return "not measured" if ok is None else ("meets" if ok else "**misses**")


def render(latest: dict[str, Any], meta: dict[str, Any], quick: bool = False) -> str:
    m = meta["machine"]
    s = meta["settings"]
    secs = [latest["sections"][n] for n in BENCHMARKS if n in latest["sections"]]
    # The size scaling of a full run is its last run, alone or by this script (bench/scale.md).
    scale = None if quick else bsc.load()
    if scale is not None:
        secs = [x for x in secs if x["name"] not in bsc.BENCHMARKS]
    out = [
        "# Benchmarks",
        "",
        "Generated by `bench/run.py` (`make bench`): do not edit by hand, rerun it. Raw numbers "
        "of every run are kept as JSON in bench/results/ (not committed).",
        "",
        f"* command: `{meta['command']}`",
        f"* date: {meta['date']}; commit {meta['commit']}; took {meta['seconds']:.0f} s",
        f"* machine: {m['nproc']} CPUs usable ({m['cpu']}), {m['memory']} RAM, "
        f"{m['system']} {m['kernel']}, {m['implementation']} {m['python']}",
        f"* extension: {BUILDS.get(meta.get('build', ''), meta.get('build', 'unknown'))}",
        "* load average (1 min) at start / end: "
        f"{meta['loadavg_start'][0]:.2f} / {meta['loadavg_end'][0]:.2f} "
        "(above ~0.3, other work shared the 2 CPUs during the run)",
        f"* method: every figure is the median of {s['reps']} repetitions, interleaved "
        "round-robin across the backends of its table (the order rotates each round), with the "
        "min–max of the reps as the spread; latency reps are calibrated to "
        f"~{s['rep_seconds']:g} s each, `time.perf_counter_ns`, garbage collector off while "
        "timing. Ratios (×) are to a yardstick measured in the same run: compare ratios, not "
        "raw ns, across machines.",
        "",
        "This machine has 2 vCPUs that deliver roughly 1.2–1.6 CPUs and noisy neighbours; "
        "anything that talks to a server (Redis) is bimodal from run to run.",
        "",
        "The HTTP response cache is measured through real servers by `bench/bench_http.py` "
        "(`make bench-http`); its figures are in [http.md](http.md).",
        "",
        "## Goals",
        "",
    ]
    rows = []
    for sec in secs:
        for g in sec["goals"]:
            rows.append([g["measure"], g["value"], g["goal"], status(g["ok"])])
    if scale is not None:
        for g in bsc.goals(scale):
            rows.append([g["measure"], g["value"], g["goal"], status(g["ok"])])
    out.append(h.md_table(["measure", "measured", "goal", "status"], rows, "lrrl"))
    for sec in secs:
        out += ["", f"## {sec['title']}", ""]
        if sec["date"] != meta["date"]:
            out += [f"*From an earlier run: {sec['date']}, `{sec['command']}`.*", ""]
        out.append(sec["markdown"])
    report = bsc.report_text() if scale is not None else None
    if report:
        out += ["", report]
    # The Node.js section is the last run of bench/node/bench.mjs (`make bench-node`); the
    # last A/Bs of two builds (bench/bench_http.py --ab, bench/ab.py) and the lease rule's
    # measure (bench/leases.md: bench/bench_leases.py and the A/Bs against the build before
    # it) are kept: this run makes none of them.
    for name in ("leases.md", "node.md", "http_ab.md", "ab.md"):
        path = os.path.join(HERE, name)
        if os.path.exists(path):
            with open(path) as f:
                out += ["", f.read().rstrip()]
    out += ["", "## Software versions", ""]
    out.append(h.md_table(["component", "version"], sorted(meta["versions"].items()), "ll"))
    out += [
        "",
        "## Notes on the peers",
        "",
        "* lmdb: default flags (sync on, but /dev/shm has nothing to sync), a new read "
        "transaction per get (what makes another process's commit visible), one write "
        "transaction per set.",
        "* diskcache: defaults (SQLite, WAL) in a /dev/shm directory.",
        '* Redis: a private redis-server on 127.0.0.1 (free port, `--save "" --appendonly no`) '
        "started and stopped by the run; redis-py with the hiredis parser over TCP.",
        "* cachebox, cachetools, theine, functools.lru_cache, dict: in-process, per process, "
        "no cross-process coherence; cachetools is not thread-safe.",
        "* ziggurat.Cache: default options unless the row says otherwise (L1 of 10,000 "
        'objects per process, serializer "auto": orjson for JSON-shaped values such as these '
        'small dicts, else pickle; copy="shared"), over a 64 MiB L2 segment in '
        "/dev/shm; str keys.",
        "* libCacheSim (GPL) is a benchmark-only dependency, never imported by ziggurat.",
        "* Cluster tier (L3): two hosts are two `ziggurat.Cache`s with the same name and the "
        "run's redis-server but their own directories (segments) in /dev/shm; each host's "
        "stream reader is a thread of a process that opened its cache, as in production; "
        'rows compared with redis-py + pickle use `serializer="pickle"`.',
        "",
    ]
    return "\n".join(out)


if __name__ == "__main__":
    sys.exit(run(sys.argv[1:]))
