"""Draws ``ziggurat top`` and ``ziggurat stats`` as they render, for the site: the real
subcommands, run against a real cache under load, recorded by rich and saved as SVG in
docs/img/ (``make docs`` runs this first).

The cache is ``shop`` in ``/dev/shm``, as the pages show it; the script refuses to run when
a cache of that name already exists there, and removes its own at the end. Four processes
load it while ``top`` watches: ``fetch`` over a skewed key set (so some keys miss and load),
``get`` of absent keys, ``set``, ``delete`` and tag invalidations.

    python docs/render_cli.py            # writes docs/img/cli-top.svg, docs/img/cli-stats.svg
"""

from __future__ import annotations

import io
import multiprocessing
import os
import random
import sys
import time

from rich.console import Console
from ziggurat import Cache
from ziggurat.cli.output import Output
from ziggurat.cli.parser import build

NAME = "shop"
DIRECTORY = "/dev/shm"
IMG = os.path.join(os.path.dirname(os.path.abspath(__file__)), "img")
#: Columns of the recorded terminal: what the pages have room for.
WIDTH = 88


def _load(stop_at: float, seed: int) -> None:
    """One worker of the app: reads through ``fetch`` (a skewed key set, so most keys hit
    and the rare ones load), writes, deletes and invalidates now and then."""
    rng = random.Random(seed)
    cache = Cache(NAME, size="64MiB", directory=DIRECTORY, ttl=30)
    try:
        while time.monotonic() < stop_at:
            for _ in range(200):
                n = int(rng.paretovariate(0.8)) % 20_000
                cache.fetch(f"product:{n}", lambda n=n: {"id": n, "price": n * 1.5})
                if rng.random() < 0.01:
                    cache.get(f"absent:{rng.randrange(10**9)}")
                if rng.random() < 0.003:
                    cache.set(f"product:{n}", {"id": n, "price": n * 1.25}, tags=["catalog"])
                if rng.random() < 0.001:
                    cache.delete(f"product:{n}")
            if rng.random() < 0.002:
                cache.invalidate_tags("catalog")
            time.sleep(0.001)
    finally:
        cache.close()


def _record(argv: list[str]) -> Console:
    """Runs the subcommand ``argv`` as ``ziggurat`` runs it, onto a recording console."""
    args = build().parse_args(argv)
    out = Output(as_json=False, stdout=io.StringIO())
    console = Console(
        file=out.stdout, record=True, width=WIDTH, highlight=False, force_terminal=False
    )
    out._console = console  # the console the command draws on (Output.console)
    code = args.func(args, out)
    if code != 0:
        raise SystemExit(f"ziggurat {' '.join(argv)} exited with {code}")
    return console


def main() -> int:
    for suffix in (".v2", ".neg.v2"):
        path = os.path.join(DIRECTORY, f"ziggurat.{NAME}{suffix}")
        if os.path.lexists(path):
            print(f"{path} exists: remove that cache first (ziggurat rm {NAME})", file=sys.stderr)
            return 1
    owner = Cache(NAME, size="64MiB", directory=DIRECTORY, ttl=30)
    try:
        seconds = 2.0
        ctx = multiprocessing.get_context("fork")
        start = time.monotonic()
        workers = [ctx.Process(target=_load, args=(start + seconds + 3.0, i)) for i in range(4)]
        for w in workers:
            w.start()
        time.sleep(1.0)  # the workers attach and warm up before the first reading
        top = _record(
            ["top", NAME, "--directory", DIRECTORY, "--interval", str(seconds), "--count", "1"]
        )
        for w in workers:
            w.join()
        stats = _record(["stats", NAME, "--directory", DIRECTORY])
        os.makedirs(IMG, exist_ok=True)
        _save(top, "cli-top.svg", f"ziggurat top {NAME}")
        _save(stats, "cli-stats.svg", f"ziggurat stats {NAME}")
    finally:
        owner.unlink()
    return 0


def _save(console: Console, name: str, title: str) -> None:
    path = os.path.join(IMG, name)
    console.save_svg(path, title=title)
    print(f"wrote {os.path.relpath(path)}")


if __name__ == "__main__":
    sys.exit(main())
