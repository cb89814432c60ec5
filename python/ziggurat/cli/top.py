"""``ziggurat top NAME``: hits, misses, evictions, loads and writes per second, live.

Each interval reads the host-wide counters (read-only attaches, which count nothing) and
shows what changed:

- ``hits``, ``misses``: lookups of the main segment. Processes add theirs every 1024
  lookups and when they call ``stats()`` or close, so a quiet process's lookups show late
  and in steps.
- ``evictions``: entries the main segment removed to make room.
- ``loads``: load leases released in the cached-miss segment, one per completed ``fetch``
  load on the host (a caller that finds the value landed while it took the lease also
  releases one without loading); None for a bare ``Segment``.
- ``writes``: records written to the main segment (``sets``: set, add, incr, touch, fetch
  stores) plus live records deleted (``deletes``).

>>> a = {"hits": 5, "misses": 1, "evictions": 0, "sets": 2, "deletes": 0}
>>> b = {"hits": 15, "misses": 1, "evictions": 1, "sets": 5, "deletes": 1}
>>> changes(Sample(0.0, a, [7], 1, 64, 0), Sample(2.0, b, [9], 3, 128, 1))
{'hits': 10, 'misses': 0, 'evictions': 1, 'loads': 2, 'writes': 4}
"""

from __future__ import annotations

import argparse
import time
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from ziggurat._native import Segment
from ziggurat.cli.errors import CliError
from ziggurat.cli.output import Output, human_bytes, percent
from ziggurat.cli.segments import CacheFiles, attach

if TYPE_CHECKING:
    from rich.table import Table

__all__ = ["RATES", "Sample", "changes", "report", "run", "sample"]

#: What ``top`` counts per interval, in display order.
RATES = ("hits", "misses", "evictions", "loads", "writes")


@dataclass(frozen=True)
class Sample:
    """The counters at one moment (``t``: ``time.monotonic()``).

    >>> Sample(0.0, {}, None, 0, 0, None).leases is None
    True
    """

    t: float
    counters: dict[str, int]
    leases: list[int] | None
    entries: int
    bytes_used: int
    loading: int | None


def sample(main: Segment, neg: Segment | None) -> Sample:
    """Reads the counters of a cache's segments now."""
    s = main.stats()
    cells = neg.leases() if neg is not None else None
    return Sample(
        time.monotonic(),
        dict(s),
        [seq for _, seq in cells] if cells is not None else None,
        s["entries"],
        s["bytes_used"],
        sum(1 for pid, _ in cells if pid) if cells is not None else None,
    )


def changes(a: Sample, b: Sample) -> dict[str, int | None]:
    """What happened between samples ``a`` and ``b`` (lease counters wrap at 2**32)."""
    c, d = a.counters, b.counters
    loads = None
    if a.leases is not None and b.leases is not None:
        loads = sum((y - x) % 2**32 for x, y in zip(a.leases, b.leases, strict=True))
    return {
        "hits": d["hits"] - c["hits"],
        "misses": d["misses"] - c["misses"],
        "evictions": d["evictions"] - c["evictions"],
        "loads": loads,
        "writes": d["sets"] + d["deletes"] - c["sets"] - c["deletes"],
    }


def report(name: str, a: Sample, b: Sample) -> dict[str, Any]:
    """One interval as ``--json`` prints it.

    >>> a = Sample(0.0, dict(hits=0, misses=0, evictions=0, sets=0, deletes=0), None, 0, 0, None)
    >>> b = Sample(0.5, dict(hits=3, misses=1, evictions=0, sets=1, deletes=0), None, 1, 8, None)
    >>> r = report("api", a, b); r["per_second"], r["hit_ratio"]
    ({'hits': 6.0, 'misses': 2.0, 'evictions': 0.0, 'loads': None, 'writes': 2.0}, 0.75)
    """
    seconds = round(b.t - a.t, 3)
    delta = changes(a, b)
    lookups = (delta["hits"] or 0) + (delta["misses"] or 0)
    return {
        "name": name,
        "time": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime()),
        "seconds": seconds,
        "delta": delta,
        "per_second": {
            k: None if v is None else round(v / seconds, 3) if seconds > 0 else 0.0
            for k, v in delta.items()
        },
        "hit_ratio": (delta["hits"] or 0) / lookups if lookups else None,
        "entries": b.entries,
        "bytes_used": b.bytes_used,
        "loading": b.loading,
    }


def _table(files: CacheFiles, interval: float, r: dict[str, Any] | None) -> Table:
    from rich.table import Table

    t = Table(
        title=f"ziggurat top {files.name} ({files.directory}), every {interval:g} s",
        title_justify="left",
        caption="Ctrl-C to quit",
    )
    t.add_column("", style="bold")
    t.add_column("per second", justify="right")
    t.add_column("last interval", justify="right")
    for k in RATES:
        if r is None or r["delta"][k] is None:
            t.add_row(k, "-", "-")
        else:
            t.add_row(k, f"{r['per_second'][k]:,.1f}", f"{r['delta'][k]:,}")
    t.add_section()
    t.add_row("hit ratio", "", percent(r["hit_ratio"]) if r else "-")
    t.add_row("entries", "", f"{r['entries']:,}" if r else "-")
    t.add_row("bytes used", "", human_bytes(r["bytes_used"]) if r else "-")
    loading = r["loading"] if r else None
    t.add_row("loads in progress", "", "-" if loading is None else str(loading))
    return t


def run(args: argparse.Namespace, out: Output) -> int:
    """Shows the rates of ``args.name`` every ``args.interval`` seconds, ``args.count``
    times (None: until interrupted)."""
    if not args.interval > 0:
        raise CliError(
            f"--interval must be a number of seconds > 0, got {args.interval}", "invalid"
        )
    if args.count is not None and args.count < 1:
        raise CliError(f"--count must be at least 1, got {args.count}", "invalid")
    files = CacheFiles.of(args.name, args.directory, args.version)
    main = attach(files)
    assert main is not None
    neg = attach(files, negative=True)
    live = None
    try:
        if not out.as_json:
            console = out.console  # first: it says what to do when rich is missing
            from rich.live import Live

            live = Live(_table(files, args.interval, None), console=console, auto_refresh=False)
            live.start(refresh=True)
        prev = sample(main, neg)
        n = 0
        while args.count is None or n < args.count:
            n += 1
            time.sleep(max(0.0, prev.t + args.interval - time.monotonic()))
            cur = sample(main, neg)
            r = report(files.name, prev, cur)
            prev = cur
            if live is not None:
                live.update(_table(files, args.interval, r), refresh=True)
            else:
                out.line(r)
    except KeyboardInterrupt:
        pass  # how one leaves a live view
    finally:
        if live is not None:
            live.stop()
        main.close()
        if neg is not None:
            neg.close()
    return 0
