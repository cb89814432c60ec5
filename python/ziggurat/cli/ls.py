"""``ziggurat ls``: the caches whose segment files are in a directory.

A row per cache: its main segment ``ziggurat.<name>.v<LAYOUT>`` and, if present, its
cached-miss segment ``ziggurat.<name>.neg.v<LAYOUT>``. Sizes and ownership come from the
files; entries, bytes used and the hit ratio from the main segment, attached read-only;
``processes`` from ``/proc/*/maps``; ``huge_pages`` says whether huge pages back the main
segment (as this command maps it: the kernel backs every mapping of a file alike). Files
of another layout version, another user's files and files the engine refuses are listed
with the reason instead of the figures.

>>> import tempfile
>>> from ziggurat import Cache
>>> d = tempfile.mkdtemp(dir="/dev/shm")
>>> Cache("doc-ls", size="8MiB", directory=d).set("k", 1)
>>> rows = collect(d)
>>> [(r["name"], r["size"], r["entries"], r["status"]) for r in rows]
[('doc-ls', 8388608, 1, 'ok')]
>>> import shutil; shutil.rmtree(d)
"""

from __future__ import annotations

import argparse
import os
import re
import stat
import time
from typing import TYPE_CHECKING, Any

from ziggurat._native import LAYOUT_VERSION, Segment, ZigguratError
from ziggurat.cli.created import created
from ziggurat.cli.errors import CliError
from ziggurat.cli.mappings import Mappings
from ziggurat.cli.output import Output, human_bytes, percent
from ziggurat.cli.segments import NEG_SUFFIX, owner_name

if TYPE_CHECKING:
    from rich.table import Table

__all__ = ["collect", "run"]

_FILE = re.compile(r"ziggurat\.(?P<segment>[A-Za-z0-9_-][A-Za-z0-9._-]*)\.v(?P<layout>[0-9]+)")


def _iso(t: float) -> str:
    return time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime(t))


def _row(
    directory: str, name: str, layout: int, files: dict[str, os.stat_result], maps: Mappings
) -> dict[str, Any]:
    main, neg = files.get("main"), files.get("neg")
    st = main or neg
    assert st is not None
    pids = sorted({p for s in (main, neg) if s is not None for p in maps.pids(s)})
    neg_path = os.path.join(directory, f"ziggurat.{name}{NEG_SUFFIX}.v{layout}")
    row: dict[str, Any] = {
        "name": name,
        "path": os.path.join(directory, f"ziggurat.{name}.v{layout}"),
        "layout": layout,
        "size": main.st_size if main else None,
        "negative_size": neg.st_size if neg else None,
        "bytes_used": None,
        "bytes_capacity": None,
        "entries": None,
        "hit_ratio": None,
        "owner": owner_name(st.st_uid),
        "mode": f"{stat.S_IMODE(st.st_mode):04o}",
        "created": None,
        "created_from": None,
        "processes": len(pids),
        "huge_pages": None,
        "status": "ok",
        "error": None,
    }
    try:
        t, source = created(row["path"] if main else neg_path)
        row.update(created=_iso(t), created_from=source)
    except OSError:
        pass  # removed meanwhile: the row says what else is known
    try:
        if main is None:
            raise CliError(
                f"only the cached-miss segment is there (no file ziggurat.{name}.v{layout})",
                "missing_segment",
            )
        if layout != LAYOUT_VERSION:
            raise CliError(
                f"layout version {layout}; this ziggurat reads version {LAYOUT_VERSION}",
                "incompatible",
            )
        seg = Segment(name, None, directory=directory, read_only=True)
        try:
            s = seg.stats()
            huge = seg.huge_pages()["backed"]
        finally:
            seg.close()
    except CliError as e:
        row["status"], row["error"] = e.cause, str(e)
        return row
    except ZigguratError as e:
        row["status"], row["error"] = getattr(e, "cause", None) or "io", str(e)
        return row
    lookups = s["hits"] + s["misses"]
    row.update(
        bytes_used=s["bytes_used"],
        bytes_capacity=s["bytes_capacity"],
        entries=s["entries"],
        hit_ratio=s["hits"] / lookups if lookups else None,
        huge_pages=huge,
    )
    return row


def collect(directory: str) -> list[dict[str, Any]]:
    """One row per cache in ``directory``, sorted by name (see the module's docstring);
    ``CliError`` when the directory cannot be listed.

    >>> collect("/no/such/directory")
    Traceback (most recent call last):
    ...
    ziggurat.cli.errors.CliError: directory /no/such/directory does not exist
    """
    try:
        names = os.listdir(directory)
    except FileNotFoundError:
        raise CliError(f"directory {directory} does not exist", "missing_directory") from None
    except NotADirectoryError:
        raise CliError(f"{directory} is not a directory", "missing_directory") from None
    except PermissionError as e:
        raise CliError(f"cannot list {directory}: {e.strerror}", "not_readable") from None
    caches: dict[tuple[str, int], dict[str, os.stat_result]] = {}
    for fname in names:
        m = _FILE.fullmatch(fname)
        if m is None:
            continue
        try:
            st = os.lstat(os.path.join(directory, fname))
        except FileNotFoundError:
            continue  # removed meanwhile
        if not stat.S_ISREG(st.st_mode):
            continue
        seg, layout = m["segment"], int(m["layout"])
        tier = "main"
        if seg.endswith(NEG_SUFFIX):
            seg, tier = seg[: -len(NEG_SUFFIX)], "neg"
        caches.setdefault((seg, layout), {})[tier] = st
    maps = Mappings.scan() if caches else Mappings()
    return [
        _row(directory, name, layout, caches[(name, layout)], maps)
        for name, layout in sorted(caches)
    ]


def _table(rows: list[dict[str, Any]], directory: str) -> Table:
    from rich import box
    from rich.table import Table

    t = Table(
        title=f"ziggurat caches in {directory}",
        title_justify="left",
        box=box.SIMPLE_HEAD,
        pad_edge=False,
    )
    # The status comes first after the name: rich drops the last columns when the
    # terminal is too narrow for all of them.
    for col, justify, least in (
        ("name", "left", 12),
        ("status", "left", 6),
        ("size", "right", 7),
        ("used", "right", 7),
        ("entries", "right", 7),
        ("hit ratio", "right", 5),
        ("procs", "right", 5),
        ("huge", "left", 4),
        ("owner", "left", 4),
        ("created", "left", 10),
    ):
        t.add_column(col, justify=justify, min_width=least, overflow="fold")  # type: ignore[arg-type]
    for r in rows:
        size = (r["size"] or 0) + (r["negative_size"] or 0)
        entries = "-" if r["entries"] is None else f"{r['entries']:,}"
        t.add_row(
            r["name"],
            r["status"],
            human_bytes(size),
            human_bytes(r["bytes_used"]),
            entries,
            percent(r["hit_ratio"]),
            str(r["processes"]),
            {True: "yes", False: "no", None: "-"}[r["huge_pages"]],
            r["owner"],
            (r["created"] or "-")[:16].replace("T", " "),
        )
    return t


def run(args: argparse.Namespace, out: Output) -> int:
    """Lists the caches of ``args.directory``.

    >>> import argparse, tempfile
    >>> d = tempfile.mkdtemp(dir="/dev/shm")
    >>> run(argparse.Namespace(directory=d), Output(as_json=True))  # doctest: +ELLIPSIS
    {"directory": "...", "caches": []}
    0
    >>> os.rmdir(d)
    """
    rows = collect(args.directory)
    out.show({"directory": args.directory, "caches": rows}, lambda: _table(rows, args.directory))
    return 0
