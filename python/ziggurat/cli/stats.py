"""``ziggurat stats NAME``: every host-wide counter of a cache, per tier.

The same figures as ``Cache.stats()["host"]`` in any of its processes: ``l2`` (the main
segment; with ``hit_ratio``) and ``negative_l2`` (the cached-miss segment; None for a bare
``Segment``), read through read-only attaches, which count nothing. ``leases`` adds what the
cached-miss segment's load-lease cells say: loads in progress on the host now, and the
leases released since the segment was created (one per completed load). ``cluster`` (None
for a cache that never had a Redis tier on this host) has the host-wide figures of
``Cache.stats()["l3"]`` and which processes follow the event stream.

>>> import tempfile
>>> from ziggurat import Cache
>>> d = tempfile.mkdtemp(dir="/dev/shm")
>>> c = Cache("doc-stats", size="8MiB", directory=d); c.fetch("k", lambda: 1)
1
>>> s = collect(CacheFiles("doc-stats", d))
>>> s["host"]["l2"]["sets"], s["host"]["negative_l2"]["sets"], s["leases"], s["cluster"]
(1, 0, {'loading': 0, 'releases': 1}, None)
>>> import shutil; c.close(); shutil.rmtree(d)
"""

from __future__ import annotations

import argparse
from typing import TYPE_CHECKING, Any

from ziggurat._native import Segment
from ziggurat.cli.output import Output, human_bytes
from ziggurat.cli.segments import CacheFiles, attach
from ziggurat.cluster.tier import W, host_figures

if TYPE_CHECKING:
    from rich.table import Table

__all__ = ["cluster", "collect", "host_counters", "leases", "run"]

# Counters shown as byte sizes in the table.
_BYTES = {
    "bytes_used",
    "bytes_capacity",
    "file_size",
    "index_bytes",
    "shard_stride",
    "max_value_size",
    "index_offset",
}


def host_counters(main: Segment, neg: Segment | None) -> dict[str, Any]:
    """``{"l2": ..., "negative_l2": ..., "huge_pages": ...}`` as ``Cache.stats()["host"]``
    has them (``huge_pages``: whether huge pages back the main segment, as this process
    maps it, and how to get them; see ``Segment.huge_pages``).

    >>> import tempfile, shutil
    >>> d = tempfile.mkdtemp(dir="/dev/shm")
    >>> s = Segment("doc-hc", 8 << 20, directory=d)
    >>> host_counters(s, None)["l2"]["hit_ratio"], host_counters(s, None)["negative_l2"]
    (0.0, None)
    >>> s.close(); shutil.rmtree(d)
    """
    l2: dict[str, Any] = dict(main.stats())
    total = l2["hits"] + l2["misses"]
    l2["hit_ratio"] = l2["hits"] / total if total else 0.0
    return {
        "l2": l2,
        "negative_l2": dict(neg.stats()) if neg is not None else None,
        "huge_pages": dict(main.huge_pages()),
    }


def leases(neg: Segment | None) -> dict[str, int] | None:
    """Loads in progress (``loading``) and lease releases so far (``releases``, each
    cell's counter wrapping at 2**32) of a read-only cached-miss segment; None without one.

    >>> leases(None) is None
    True
    """
    if neg is None:
        return None
    cells = neg.leases()
    return {"loading": sum(1 for pid, _ in cells if pid), "releases": sum(s for _, s in cells)}


def cluster(main: Segment) -> dict[str, Any] | None:
    """The cluster tier's host-wide figures kept in a (read-only) main segment, with the
    pid of the process that holds the stream (``reader_pid``, 0: none) and of a
    ``ziggurat follow`` process (``follower_pid``); None when no tier ever ran on the host.

    >>> import tempfile, shutil
    >>> d = tempfile.mkdtemp(dir="/dev/shm")
    >>> s = Segment("doc-cl", 8 << 20, directory=d)
    >>> cluster(s) is None
    True
    >>> s.close(); shutil.rmtree(d)
    """
    if not main.app_load(W.HOST):
        return None
    return {
        **host_figures(main.app_load),
        "reader_pid": main.app_load(W.LEASE),
        "follower_pid": main.app_load(W.FOLLOWER),
    }


def collect(files: CacheFiles) -> dict[str, Any]:
    """The ``--json`` document of ``stats`` for the cache of ``files``."""
    main = attach(files)
    assert main is not None
    neg = attach(files, negative=True)
    try:
        return {
            "name": files.name,
            "directory": files.directory,
            "host": host_counters(main, neg),
            "leases": leases(neg),
            "cluster": cluster(main),
        }
    finally:
        main.close()
        if neg is not None:
            neg.close()


def _cell(key: str, v: Any) -> str:
    if v is None:
        return "-"
    if key == "hit_ratio":
        return f"{100 * v:.1f}%"
    if key in _BYTES:
        return f"{v:,} ({human_bytes(v)})" if v >= 1024 else f"{v:,}"
    return f"{v:,}"


def _table(data: dict[str, Any]) -> Table:
    from rich.table import Table

    l2, neg = data["host"]["l2"], data["host"]["negative_l2"] or {}
    t = Table(title=f"ziggurat cache {data['name']} ({data['directory']})", title_justify="left")
    t.add_column("counter")
    t.add_column("l2", justify="right")
    t.add_column("negative_l2", justify="right")
    for key in l2:
        t.add_row(key, _cell(key, l2[key]), _cell(key, neg.get(key)))
    if data["leases"] is not None:
        t.add_section()
        t.add_row("loads in progress", "", f"{data['leases']['loading']:,}")
        t.add_row("lease releases", "", f"{data['leases']['releases']:,}")
    huge = data["host"]["huge_pages"]
    t.add_section()
    t.add_row(
        "huge pages",
        f"{human_bytes(huge['backed_bytes'])} of {human_bytes(huge['eligible_bytes'])}"
        if huge["backed"]
        else "no",
        "",
    )
    t.add_row(
        "huge pages offered",
        f"{huge['file_system']} huge={huge['mount'] or '-'}, kernel {huge['kernel'] or '-'}",
        "",
    )
    if huge["remedy"] is not None:
        t.add_row("to get huge pages", huge["remedy"], "")
    if data["cluster"] is not None:
        t.add_section()
        for key, v in data["cluster"].items():
            t.add_row(f"cluster {key}", f"{v:,}", "")
    return t


def run(args: argparse.Namespace, out: Output) -> int:
    """Prints the counters of ``args.name``."""
    data = collect(CacheFiles.of(args.name, args.directory, args.version))
    out.show(data, lambda: _table(data))
    return 0
