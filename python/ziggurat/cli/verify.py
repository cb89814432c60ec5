"""``ziggurat verify NAME``: checks a cache's segments, changing no entry.

For each segment file (the main one, and the cached-miss one if present):

1. **Header** (a read-only attach, the engine's checks): a regular file this user may use,
   at least 4096 bytes and a multiple of 8; magic, layout version, header checksum, state
   READY; a geometry whose every relation holds and that fits the file (docs/format.md,
   "File").
2. **Shards** (``Segment.verify(repair=False)``, skipped with ``--header-only``): each
   shard's lock is taken in turn, so that no write is half done, then an interrupted
   write's stamp (left odd), both rings walked from tail to head (positions consistent,
   every record header valid and within the ring), and every index slot pointing at the
   start of a record whose key hashes to that shard, bucket pair and fingerprint. Problems
   are reported, not repaired. Taking the locks needs a read-write attach; a lock held by
   a process that died is recovered on the way, as the next write would have done.

>>> import tempfile, shutil
>>> from ziggurat import Cache
>>> d = tempfile.mkdtemp(dir="/dev/shm")
>>> c = Cache("doc-verify", size="8MiB", directory=d); c.set("k", 1)
>>> r = check(CacheFiles("doc-verify", d))
>>> r["ok"], [(s["segment"], s["checked"], s["entries"]) for s in r["segments"]]
(True, [('l2', 'shards', 1), ('negative_l2', 'shards', 0)])
>>> c.close(); shutil.rmtree(d)
"""

from __future__ import annotations

import argparse
import os
from typing import TYPE_CHECKING, Any

from ziggurat._native import LockTimeout, Segment, ZigguratError
from ziggurat.cli.errors import EXIT_PROBLEMS, CliError
from ziggurat.cli.output import Output
from ziggurat.cli.segments import CacheFiles, attach

if TYPE_CHECKING:
    from rich.console import Group

__all__ = ["check", "run"]


def _segment(files: CacheFiles, negative: bool, header_only: bool) -> dict[str, Any] | None:
    path, name = (files.neg_path, files.neg_name) if negative else (files.main_path, files.name)
    if not os.path.lexists(path):
        if negative:
            return None
        raise files.missing()
    r: dict[str, Any] = {
        "segment": "negative_l2" if negative else "l2",
        "path": path,
        "header": "ok",
        "checked": "header",
        "problems": [],
        "entries": None,
    }
    try:
        ro = Segment(name, None, directory=files.directory, read_only=True)
    except ZigguratError as e:
        cause = getattr(e, "cause", None) or "io"
        if cause in ("other_owner", "not_readable", "missing_segment"):
            # Not a finding about the file: the command may not look at it (or it is gone).
            raise CliError(str(e), cause) from None
        r["header"] = cause
        r["problems"] = [str(e)]
        return r
    try:
        r["entries"] = ro.stats()["entries"]
    finally:
        ro.close()
    if header_only:
        return r
    rw = attach(files, negative=negative, read_only=False)
    assert rw is not None
    try:
        rep = rw.verify(repair=False)
    except LockTimeout as e:
        r["problems"] = [f"a shard stayed locked: {e}"]
        return r
    finally:
        rw.close()
    r.update(checked="shards", problems=list(rep["problems"]), entries=rep["entries"])
    return r


def check(files: CacheFiles, header_only: bool = False) -> dict[str, Any]:
    """Verifies the segments of ``files``; the ``--json`` document (``ok`` false when a
    header is refused or a shard has problems)."""
    segments = [
        s for s in (_segment(files, neg, header_only) for neg in (False, True)) if s is not None
    ]
    return {
        "name": files.name,
        "directory": files.directory,
        "ok": all(not s["problems"] for s in segments),
        "segments": segments,
    }


def _render(r: dict[str, Any]) -> Group:
    from rich.console import Group
    from rich.text import Text

    lines = [
        Text(
            f"{r['name']}: " + ("consistent" if r["ok"] else "PROBLEMS FOUND"),
            style="bold green" if r["ok"] else "bold red",
        )
    ]
    for s in r["segments"]:
        what = "header and shards" if s["checked"] == "shards" else "header"
        state = "ok" if not s["problems"] else f"{len(s['problems'])} problem(s)"
        entries = "" if s["entries"] is None else f", {s['entries']:,} entries"
        lines.append(Text(f"  {s['segment']} ({s['path']}): {what} {state}{entries}"))
        lines.extend(Text(f"    - {p}") for p in s["problems"][:50])
        if len(s["problems"]) > 50:
            lines.append(Text(f"    ... and {len(s['problems']) - 50} more (--json lists all)"))
    return Group(*lines)


def run(args: argparse.Namespace, out: Output) -> int:
    """Verifies ``args.name``: exits 0 when consistent, 3 when not."""
    r = check(CacheFiles.of(args.name, args.directory, args.version), args.header_only)
    out.show(r, lambda: _render(r))
    return 0 if r["ok"] else EXIT_PROBLEMS
