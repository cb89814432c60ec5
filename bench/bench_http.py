"""HTTP response cache: a cached response through the middleware against a bare app.

    python bench/bench_http.py                  uvicorn (ASGI) and gunicorn (WSGI), 5 reps
    python bench/bench_http.py --quick          1 s runs, 3 reps (smoke run)
    python bench/bench_http.py --only asgi      one server
    python bench/bench_http.py --ab BASE        the cached app of two builds (BASE, the work tree)

For each server, two apps run under the same server with the same number of workers: the
bare app, which returns a fixed response with ``Cache-Control: max-age``, and the same app
behind the cache middleware, where every request is then a hit. The app is a
framework app (Starlette, Flask) and, as the harshest comparison, a plain callable that
does nothing but return the bytes. ``wrk`` loads each in turn; repetitions alternate
between the two, and which of them goes first, so drift hits both alike; the figure is
the median of the requests per second. The ratio is cached / bare.

Besides requests per second, each run reads the CPU time the server's processes used
(master and workers, from /proc) and reports requests per CPU second: on a machine
shared with other work, throughput moves with the neighbours' load, while the server's
CPU cost per request does not.

Results go to bench/results/http.json and, as a Markdown table, to standard output.
This module is also the app module the servers import (``bench_http:bare_asgi`` …).

``--ab BASE`` compares the hit path of two builds instead: the extension and package of
git revision ``BASE`` and of the work tree, built and installed side by side under
``target/ab/`` as ``bench/ab.py`` does (``--no-build`` reuses them). The cached plain
callable runs under uvicorn and gunicorn once per build (each its own cache), loaded in
alternating repetitions; then, in process, child processes of each build in turn time a
hit against the bare callable (ASGI and WSGI; median of 9 interleaved repetitions of
50,000 calls each), and the table gives the medians over those runs.
"""

from __future__ import annotations

import argparse
import datetime as dt
import json
import os
import re
import shutil
import socket
import statistics
import subprocess
import sys
import time
import urllib.request
import uuid
from pathlib import Path
from typing import Any

HERE = os.path.dirname(os.path.abspath(__file__))
#: ``--ab``'s report: its section of docs/benchmarks.md, kept by ``bench/run.py``.
AB_TITLE = "## HTTP: the hit path of two builds"
AB_REPORT = Path(HERE) / "http_ab.md"
BODY = b"<!doctype html><title>post</title>" + b"<p>lorem ipsum dolor sit amet</p>" * 60
CACHED_ASGI = [
    (b"content-type", b"text/html; charset=utf-8"),
    (b"cache-control", b"max-age=3600"),
    (b"cache-tag", b"posts"),
]


async def origin_asgi(scope: dict[str, Any], receive: Any, send: Any) -> None:
    """A plain ASGI app: a fixed, cacheable response."""
    if scope["type"] != "http":
        return
    headers = [*CACHED_ASGI, (b"content-length", str(len(BODY)).encode())]
    await send({"type": "http.response.start", "status": 200, "headers": headers})
    await send({"type": "http.response.body", "body": BODY})


def origin_wsgi(environ: dict[str, Any], start_response: Any) -> list[bytes]:
    """A plain WSGI app: a fixed, cacheable response."""
    start_response(
        "200 OK",
        [
            ("Content-Type", "text/html; charset=utf-8"),
            ("Content-Length", str(len(BODY))),
            ("Cache-Control", "max-age=3600"),
            ("Cache-Tag", "posts"),
        ],
    )
    return [BODY]


def _starlette() -> Any:
    from starlette.applications import Starlette
    from starlette.responses import Response
    from starlette.routing import Route

    headers = {
        "content-type": "text/html; charset=utf-8",
        "cache-control": "max-age=3600",
        "cache-tag": "posts",
    }

    async def post(request: Any) -> Response:
        return Response(BODY, headers=headers)

    return Starlette(routes=[Route("/post/{n}", post)])


def _flask() -> Any:
    import flask

    app = flask.Flask("bench")
    headers = {
        "Content-Type": "text/html; charset=utf-8",
        "Cache-Control": "max-age=3600",
        "Cache-Tag": "posts",
    }

    @app.route("/post/<n>")
    def post(n: str) -> Any:
        return flask.Response(BODY, headers=headers)

    return app


# The bare apps are the very apps the middleware wraps: same code, same response bytes
# (the cached response adds Age and Cache-Status and drops the tag header).
bare_asgi, bare_wsgi = origin_asgi, origin_wsgi
bare_starlette = _origin_starlette = _starlette()
bare_flask = _origin_flask = _flask()

if os.environ.get("ZIG_BENCH_HTTP_CACHE"):
    from ziggurat import Cache
    from ziggurat.http import CacheMiddleware, WSGICacheMiddleware

    _cache = Cache(
        os.environ["ZIG_BENCH_HTTP_CACHE"],
        size="64MiB",
        directory=os.environ.get("ZIG_BENCH_HTTP_DIR", "/dev/shm"),
    )
    cached_asgi = CacheMiddleware(origin_asgi, _cache, allowed_hosts=["127.0.0.1"])
    cached_wsgi = WSGICacheMiddleware(origin_wsgi, _cache, allowed_hosts=["127.0.0.1"])
    cached_starlette = CacheMiddleware(_origin_starlette, _cache, allowed_hosts=["127.0.0.1"])
    cached_flask = WSGICacheMiddleware(_origin_flask, _cache, allowed_hosts=["127.0.0.1"])


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def _start(kind: str, app: str, workers: int, env: dict[str, str]) -> tuple[Any, int]:
    port = _free_port()
    if kind == "asgi":
        cmd = [sys.executable, "-m", "uvicorn", f"bench_http:{app}", "--host", "127.0.0.1"]
        cmd += ["--port", str(port), "--workers", str(workers), "--log-level", "warning"]
        # uvloop and httptools: the asyncio loop leaves Nagle's algorithm on for the
        # workers' sockets here, which adds the client's delayed ACK (about 40 ms) to
        # every keep-alive response, for the bare app and the cached one alike.
        cmd += ["--no-access-log", "--loop", "uvloop", "--http", "httptools"]
    else:
        cmd = [sys.executable, "-m", "gunicorn", f"bench_http:{app}", "-b", f"127.0.0.1:{port}"]
        cmd += ["-w", str(workers), "--log-level", "warning"]
    proc = subprocess.Popen(
        cmd, cwd=HERE, env=env, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL
    )
    deadline = time.monotonic() + 60
    while time.monotonic() < deadline:
        try:
            with urllib.request.urlopen(f"http://127.0.0.1:{port}/post/1", timeout=2) as r:
                if r.read() == BODY:
                    return proc, port
        except OSError:
            time.sleep(0.1)
    proc.kill()
    raise RuntimeError(f"{kind} server for {app} did not start")


def _stop(proc: Any) -> None:
    proc.terminate()
    try:
        proc.wait(15)
    except subprocess.TimeoutExpired:
        proc.kill()
        proc.wait(5)


def _server_cpu(root: int) -> float:
    """CPU seconds used so far by a server: its master process and every worker."""
    tick = os.sysconf("SC_CLK_TCK")
    total = 0.0
    for entry in os.listdir("/proc"):
        if not entry.isdigit():
            continue
        try:
            with open(f"/proc/{entry}/stat") as f:
                fields = f.read().rsplit(")", 1)[1].split()
        except OSError:
            continue
        # fields[1] is the parent pid, fields[11] and [12] user and system ticks.
        if int(entry) == root or int(fields[1]) == root:
            total += (int(fields[11]) + int(fields[12])) / tick
    return total


def _wrk(port: int, seconds: int, connections: int, threads: int, root: int) -> tuple[float, float]:
    """Requests per second, and requests per CPU second of the server's processes."""
    cpu0 = _server_cpu(root)
    out = subprocess.run(
        [
            "wrk",
            f"-t{threads}",
            f"-c{connections}",
            f"-d{int(seconds)}s",
            f"http://127.0.0.1:{port}/post/1",
        ],
        capture_output=True,
        text=True,
        check=True,
    ).stdout
    cpu = _server_cpu(root) - cpu0
    m = re.search(r"Requests/sec:\s+([\d.]+)", out)
    n = re.search(r"(\d+) requests in", out)
    if m is None or n is None or "Non-2xx" in out:
        raise RuntimeError(f"wrk failed or saw errors:\n{out}")
    return float(m.group(1)), int(n.group(1)) / cpu if cpu > 0 else float("nan")


def run(
    kind: str, app: str, workers: int, reps: int, seconds: int, connections: int
) -> dict[str, Any]:
    base = f"/dev/shm/zigbench-http-{uuid.uuid4().hex}"
    os.mkdir(base, 0o700)
    env = dict(os.environ)
    env.update(ZIG_BENCH_HTTP_CACHE="bench-http-" + uuid.uuid4().hex[:8], ZIG_BENCH_HTTP_DIR=base)
    procs = []
    try:
        bare, bare_port = _start(kind, f"bare_{app}", workers, env)
        procs.append(bare)
        cached, cached_port = _start(kind, f"cached_{app}", workers, env)
        procs.append(cached)
        with urllib.request.urlopen(f"http://127.0.0.1:{cached_port}/post/1") as r:
            status = r.headers.get("Cache-Status", "")
        # Warm both (and every worker's L1).
        _wrk(bare_port, 1, connections, 1, bare.pid)
        _wrk(cached_port, 1, connections, 1, cached.pid)
        with urllib.request.urlopen(f"http://127.0.0.1:{cached_port}/post/1") as r:
            status = r.headers.get("Cache-Status", "")
        if "hit" not in status:
            raise RuntimeError(f"the cached server does not hit: Cache-Status {status!r}")
        rb: list[float] = []
        rc: list[float] = []
        eb: list[float] = []
        ec: list[float] = []
        for i in range(reps):
            # Each pair in turn starts with the other server (bare-cached, cached-bare, …):
            # load from other work that rises or falls during a run then weighs on both
            # alike, instead of always on the second of each pair.
            order = [("bare", bare_port, bare.pid), ("cached", cached_port, cached.pid)]
            for which, port, pid in order if i % 2 == 0 else order[::-1]:
                rps, per_cpu = _wrk(port, seconds, connections, 1, pid)
                (rb if which == "bare" else rc).append(rps)
                (eb if which == "bare" else ec).append(per_cpu)
        b, c = statistics.median(rb), statistics.median(rc)
        cb, cc = statistics.median(eb), statistics.median(ec)
        return {
            "server": "uvicorn" if kind == "asgi" else "gunicorn (sync)",
            "app": {
                "asgi": "plain ASGI callable",
                "wsgi": "plain WSGI callable",
                "starlette": "Starlette",
                "flask": "Flask",
            }[app],
            "workers": workers,
            "bare_rps": b,
            "cached_rps": c,
            "ratio": c / b,
            "bare_per_cpu_s": cb,
            "cached_per_cpu_s": cc,
            "cpu_ratio": cc / cb,
            "bare_reps": rb,
            "cached_reps": rc,
            "bare_per_cpu_s_reps": eb,
            "cached_per_cpu_s_reps": ec,
        }
    finally:
        for p in procs:
            _stop(p)
        shutil.rmtree(base, ignore_errors=True)


# Run by a child process of one build: the in-process hit over the bare callable, in µs
# (median of 9 interleaved repetitions of 50,000 calls), ASGI then WSGI, on one line.
IN_PROCESS = r"""
import asyncio, os, statistics, sys, tempfile, time
sys.path.insert(0, sys.argv[1])
import bench_http as b
from ziggurat import Cache
from ziggurat.http import CacheMiddleware, WSGICacheMiddleware

c = Cache("abhit" + str(os.getpid()), size="16MiB", directory=tempfile.mkdtemp())
asgi = CacheMiddleware(b.origin_asgi, c, allowed_hosts=["127.0.0.1"])
wsgi = WSGICacheMiddleware(b.origin_wsgi, c, allowed_hosts=["127.0.0.1"])
scope = {"type": "http", "method": "GET", "scheme": "http", "path": "/post/1",
         "raw_path": b"/post/1", "query_string": b"", "http_version": "1.1",
         "headers": [(b"host", b"127.0.0.1:8000"), (b"user-agent", b"wrk"), (b"accept", b"*/*")]}
environ = {"REQUEST_METHOD": "GET", "SCRIPT_NAME": "", "PATH_INFO": "/post/1",
           "QUERY_STRING": "", "RAW_URI": "/post/1", "SERVER_NAME": "127.0.0.1",
           "SERVER_PORT": "8000", "SERVER_PROTOCOL": "HTTP/1.1", "HTTP_HOST": "127.0.0.1:8000",
           "HTTP_USER_AGENT": "wrk", "HTTP_ACCEPT": "*/*", "wsgi.url_scheme": "http",
           "wsgi.input": None, "wsgi.errors": sys.stderr, "wsgi.multithread": False,
           "wsgi.multiprocess": True, "wsgi.run_once": False, "wsgi.version": (1, 0)}
got = []
async def receive():
    return {"type": "http.request", "body": b"", "more_body": False}
async def send(m):
    got.append(m)
def start_response(status, headers, exc_info=None):
    got.append(headers)
N = 50_000
async def loop_asgi(app):
    t = time.process_time()
    for _ in range(N):
        await app(scope, receive, send)
        got.clear()
    return (time.process_time() - t) / N * 1e6
def loop_wsgi(app):
    t = time.process_time()
    for _ in range(N):
        app(dict(environ), start_response)
        got.clear()
    return (time.process_time() - t) / N * 1e6
ev = asyncio.new_event_loop()
ev.run_until_complete(loop_asgi(asgi)); loop_wsgi(wsgi)  # fill, then warm
a, w = [], []
for _ in range(9):
    cached = ev.run_until_complete(loop_asgi(asgi))
    a.append(cached - ev.run_until_complete(loop_asgi(b.origin_asgi)))
    w.append(loop_wsgi(wsgi) - loop_wsgi(b.origin_wsgi))
c.unlink()
print(statistics.median(a), statistics.median(w))
"""


def ab_main(
    base_rev: str,
    build: bool,
    reps: int,
    seconds: int,
    connections: int,
    workers: int,
    argv: list[str],
) -> int:
    """The hit path of ``base_rev`` against the work tree's (see the module docstring)."""
    import ab  # bench/ab.py: builds and installs a revision's wheel

    sites = {"base": ab.OUT / "http-base", "head": ab.OUT / "http-head"}
    if build:
        tree = ab.OUT / "http-base-src"
        if tree.exists():
            ab.run(["git", "worktree", "remove", "--force", str(tree)], cwd=ab.ROOT)
        ab.run(["git", "worktree", "add", "-q", "--detach", str(tree), base_rev], cwd=ab.ROOT)
        try:
            ab.build(tree, sites["base"])
        finally:
            ab.run(["git", "worktree", "remove", "--force", str(tree)], cwd=ab.ROOT)
        ab.build(ab.ROOT, sites["head"])
    lines = []
    for kind, app in (("asgi", "asgi"), ("wsgi", "wsgi")):
        got: dict[str, list[tuple[float, float]]] = {"base": [], "head": []}
        procs, ports = {}, {}
        base = f"/dev/shm/zigbench-http-{uuid.uuid4().hex}"
        os.mkdir(base, 0o700)
        try:
            for b, site in sites.items():
                env = dict(os.environ, PYTHONPATH=str(site), ZIG_BENCH_HTTP_DIR=base)
                env["ZIG_BENCH_HTTP_CACHE"] = f"bench-http-{b}-{uuid.uuid4().hex[:6]}"
                procs[b], ports[b] = _start(kind, f"cached_{app}", workers, env)
                _wrk(ports[b], 1, connections, 1, procs[b].pid)
            for i in range(reps):
                for b in ("base", "head") if i % 2 == 0 else ("head", "base"):
                    got[b].append(_wrk(ports[b], seconds, connections, 1, procs[b].pid))
        finally:
            for proc in procs.values():
                _stop(proc)
            shutil.rmtree(base, ignore_errors=True)
        med = {b: (statistics.median(r for r, _ in v), statistics.median(c for _, c in v))
               for b, v in got.items()}  # fmt: skip
        server = "uvicorn" if kind == "asgi" else "gunicorn (sync)"
        lines.append(
            f"| {server}, cached plain callable | {med['base'][0]:,.0f} req/s, "
            f"{med['base'][1]:,.0f} per CPU s | {med['head'][0]:,.0f} req/s, "
            f"{med['head'][1]:,.0f} per CPU s "
            f"| {100 * med['head'][0] / med['base'][0]:.0f} %, "
            f"{100 * med['head'][1] / med['base'][1]:.0f} % |"
        )
    runs: dict[str, list[tuple[float, float]]] = {"base": [], "head": []}
    for i in range(reps):
        for b in ("base", "head") if i % 2 == 0 else ("head", "base"):
            out = subprocess.run(
                [sys.executable, "-c", IN_PROCESS, HERE],
                env=dict(os.environ, PYTHONPATH=str(sites[b])),
                capture_output=True, text=True, check=True,
            ).stdout.split()  # fmt: skip
            runs[b].append((float(out[0]), float(out[1])))
    for i, name in ((0, "ASGI"), (1, "WSGI")):
        mb = statistics.median(r[i] for r in runs["base"])
        mh = statistics.median(r[i] for r in runs["head"])
        lines.append(
            f"| in process, {name} hit over the bare callable | {mb:.2f} µs | {mh:.2f} µs "
            f"| {mh - mb:+.2f} µs |"
        )
    head_rev = subprocess.run(
        ["git", "rev-parse", "--short", "HEAD"], cwd=ab.ROOT, capture_output=True, text=True
    ).stdout.strip()
    when = time.strftime("%Y-%m-%d %H:%M UTC", time.gmtime())
    report = "\n".join(
        [
            AB_TITLE,
            "",
            f"`python bench/bench_http.py {' '.join(argv)}` on {when} (load average "
            f"{os.getloadavg()[0]:.2f} at the end): the extension and package of {base_rev} "
            f"against those of {head_rev}, each built by `bench/pgo.py wheel` into `target/ab/`. "
            f"Through the servers: wrk -t1 -c{connections} -d{seconds}s, {workers} workers, "
            f"median of {reps} alternating repetitions; in process: CPU time per hit over the "
            f"bare callable, median of {reps} alternating child processes per build.",
            "",
            f"| | {base_rev} | {head_rev} | {head_rev} / {base_rev} |",
            "|---|---|---|---|",
            *lines,
        ]
    )
    print(report)
    AB_REPORT.write_text(report + "\n")
    ab.splice(report, AB_TITLE)
    return 0


def main(argv: list[str]) -> int:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawTextHelpFormatter)
    p.add_argument("--quick", action="store_true")
    p.add_argument("--only", choices=["asgi", "wsgi"], default=None)
    p.add_argument("--workers", type=int, default=2)
    p.add_argument("--connections", type=int, default=32)
    p.add_argument("--ab", metavar="BASE", help="compare the hit path of BASE and the work tree")
    p.add_argument("--no-build", action="store_true", help="with --ab: reuse target/ab/")
    p.add_argument("--reps", type=int, default=None, help="repetitions (default 5; --quick 3)")
    args = p.parse_args(argv)
    if shutil.which("wrk") is None:
        print("bench_http: wrk is required (apt-get install wrk)", file=sys.stderr)
        return 2
    if args.ab:
        reps, seconds = (3, 1) if args.quick else (args.reps or 5, 3)
        return ab_main(
            args.ab, not args.no_build, reps, seconds, args.connections, args.workers, argv
        )
    reps, seconds = (3, 1) if args.quick else (5, 4)
    kinds = [args.only] if args.only else ["asgi", "wsgi"]
    apps = {"asgi": ["starlette", "asgi"], "wsgi": ["flask", "wsgi"]}
    rows = [
        run(k, a, args.workers, reps, seconds, args.connections) for k in kinds for a in apps[k]
    ]
    os.makedirs(os.path.join(HERE, "results"), exist_ok=True)
    result = {
        "date": dt.datetime.now(dt.timezone.utc).isoformat(timespec="seconds"),
        "body_bytes": len(BODY),
        "reps": reps,
        "seconds": seconds,
        "connections": args.connections,
        "cpus": os.cpu_count(),
        "rows": rows,
    }
    with open(os.path.join(HERE, "results", "http.json"), "w") as f:
        json.dump(result, f, indent=2)
    print(
        f"body {len(BODY)} bytes, wrk -t1 -c{args.connections} -d{seconds}s, "
        f"median of {reps} interleaved reps, {os.cpu_count()} CPUs\n"
    )
    print(
        "| server | app | bare app (req/s) | cached (req/s) | ratio "
        "| bare app (req per server CPU s) | cached (req per server CPU s) | ratio |"
    )
    print("|---|---|---|---|---|---|---|---|")
    for r in rows:
        print(
            f"| {r['server']} | {r['app']} | {r['bare_rps']:,.0f} | {r['cached_rps']:,.0f} "
            f"| {100 * r['ratio']:.0f} % | {r['bare_per_cpu_s']:,.0f} "
            f"| {r['cached_per_cpu_s']:,.0f} | {100 * r['cpu_ratio']:.0f} % |"
        )
    return 0


if __name__ == "__main__":
    raise SystemExit(main(sys.argv[1:]))
