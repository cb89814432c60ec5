"""``ziggurat get NAME KEY``: what the shared tier holds for a key, and its metadata.

The key is the one the ``Cache`` stores: a str key's UTF-8 bytes, a namespace's key ``k``
being ``"<namespace>:k"``; a ``version`` is a segment of its own (``--version``). Only the
shared tier is read (no process's L1), through read-only attaches: the read counts no hit
and raises no frequency.

``found`` is what a ``Cache`` makes of it: ``value`` or ``counter`` (``fresh`` while its TTL
runs), ``stale`` (past its TTL, kept for ``stale_ttl``: a ``fetch`` whose loader fails may
serve it), ``cached_miss`` (a loader returned None: ``fresh`` while its TTL runs and the key
was not written since), ``foreign`` (a record a ``Cache`` did not write) or ``absent``.

>>> import tempfile, shutil
>>> from ziggurat import Cache
>>> d = tempfile.mkdtemp(dir="/dev/shm")
>>> c = Cache("doc-get", size="8MiB", directory=d)
>>> c.namespace("users").set("7", {"name": "Ada"}, ttl=60, tags=["team:1"])
>>> e = collect(CacheFiles("doc-get", d), "users:7", tags=["team:1"])
>>> e["found"], e["value"], e["ttl"], [t["name"] for t in e["tags"]]
('value', {'name': 'Ada'}, 60.0, ['team:1', '\\x00ns:users'])
>>> c.close(); shutil.rmtree(d)
"""

from __future__ import annotations

import argparse
import os
from collections.abc import Iterable
from typing import TYPE_CHECKING, Any

from ziggurat._native import MAX_KEY, Segment, namespace_parts
from ziggurat.cli.entry import KIND_COUNTER, KIND_NEGATIVE, decode, split
from ziggurat.cli.errors import CliError
from ziggurat.cli.output import Output, human_bytes
from ziggurat.cli.segments import CacheFiles, attach

if TYPE_CHECKING:
    from rich.table import Table

__all__ = ["collect", "run"]


def _seconds(deadline_ms: int, now_ms: int) -> float | None:
    return None if deadline_ms == 0 else round((deadline_ms - now_ms) / 1000, 3)


def _tags(
    seg: Segment, recorded: list[tuple[int, int, int | None]], names: list[str]
) -> list[dict[str, Any]]:
    cells: dict[int, list[str]] = {}
    for name in names:
        cells.setdefault(seg.tag_version(name)[0], []).append(name)
    return [
        {
            "cell": cell,
            "version": version,
            "current": current,
            # Tag names are hashed into cells: only the names given (and the key's
            # namespace) can be recognised, and two of them may share a cell.
            "name": " | ".join(cells[cell]) if cell in cells else None,
        }
        for cell, version, current in recorded
    ]


def _absent(files: CacheFiles, key: str) -> dict[str, Any]:
    return {
        "name": files.name,
        "key": key,
        "found": "absent",
        "fresh": False,
        "segment": None,
        "format": None,
        "value": None,
        "preview": None,
        "error": None,
        "size": None,
        "stored_bytes": None,
        "record_bytes": None,
        "ttl": None,
        "seconds_left": None,
        "expires_in": None,
        "tags": [],
    }


def collect(
    files: CacheFiles,
    key: str,
    serializer: str = "auto",
    width: int = 200,
    tags: Iterable[str] = (),
) -> dict[str, Any]:
    """The ``--json`` document of ``get`` (see the module's docstring). ``tags`` are tag
    names to recognise among the entry's; the key's namespace tag is always tried.

    >>> collect(CacheFiles("x", "/dev/shm"), "")
    Traceback (most recent call last):
    ...
    ziggurat.cli.errors.CliError: KEY must be 1 to 4096 bytes, got 0
    """
    # The key's bytes as the command line gave them: UTF-8 for text, and any other byte
    # sequence as it is (a bytes key).
    kb = os.fsencode(key)
    n = len(kb)
    if not 0 < n <= MAX_KEY:
        raise CliError(f"KEY must be 1 to {MAX_KEY} bytes, got {n}", "invalid")
    names = list(dict.fromkeys(tags))
    if ":" in key and not key.startswith(":"):
        names.append(namespace_parts(key.split(":", 1)[0])[1])
    main = attach(files)
    assert main is not None
    neg = attach(files, negative=True)
    try:
        out = _absent(files, key)
        seg, info = main, main.inspect(kb)
        parts = split(info["value"]) if info is not None else None
        if (
            info is None
            or (parts is not None and parts[1].soft_ms != 0 and info["now_ms"] >= parts[1].soft_ms)
        ) and neg is not None:
            # Absent or stale in the main segment: a cached miss may answer instead.
            miss = neg.inspect(kb)
            mparts = split(miss["value"]) if miss is not None else None
            if miss is not None and mparts is not None and mparts[1].kind == KIND_NEGATIVE:
                seg, info, parts = neg, miss, mparts
        if info is None:
            return out
        stored: bytes = info["value"]
        now = info["now_ms"]
        out.update(
            segment="l2" if seg is main else "negative_l2",
            size=len(stored),
            stored_bytes=len(stored),
            record_bytes=info["record_bytes"],
            expires_in=_seconds(info["expiry_ms"], now),
            tags=_tags(seg, info["tags"], names),
        )
        if parts is None:
            d = decode(stored, 0, "raw", width)
            out.update(found="foreign", format=d.format, preview=d.preview)
            return out
        payload, t = parts
        fresh = t.soft_ms == 0 or now < t.soft_ms
        out.update(
            size=len(payload),
            ttl=None if t.ttl_ms == 0 else t.ttl_ms / 1000,
            seconds_left=_seconds(t.soft_ms, now),
        )
        if t.kind == KIND_NEGATIVE:
            # A cached miss counts while the key's stamp in the main segment is the one
            # it recorded: any write or delete of the key since voids it.
            recorded = int.from_bytes(payload, "little") if len(payload) == 4 else None
            out.update(found="cached_miss", fresh=fresh and recorded == main.stamp(kb))
            return out
        d = decode(payload, t.kind, serializer, width)
        found = "counter" if t.kind == KIND_COUNTER else "value"
        out.update(
            found=found if fresh else "stale",
            fresh=fresh,
            format=d.format,
            value=d.value,
            preview=d.preview,
            error=d.error,
        )
        return out
    finally:
        main.close()
        if neg is not None:
            neg.close()


def _when(s: float | None, never: str) -> str:
    if s is None:
        return never
    return f"in {s:g} s" if s >= 0 else f"{-s:g} s ago"


def _table(e: dict[str, Any]) -> Table:
    from rich.table import Table

    t = Table(title=f"{e['name']}: {e['key']!r}", title_justify="left", show_header=False)
    t.add_column("", style="bold")
    t.add_column("")
    t.add_row("found", e["found"] + (" (fresh)" if e["fresh"] else ""))
    if e["found"] != "absent":
        t.add_row("segment", e["segment"])
        if e["format"] is not None:
            t.add_row("format", e["format"])
        t.add_row(
            "size",
            f"{e['size']:,} bytes ({human_bytes(e['stored_bytes'])} stored, "
            f"record {human_bytes(e['record_bytes'])})",
        )
        if e["found"] != "foreign":
            t.add_row("ttl", "never expires" if e["ttl"] is None else f"{e['ttl']:g} s")
            t.add_row("stale", _when(e["seconds_left"], "never"))
        t.add_row("removed", _when(e["expires_in"], "when evicted"))
        for tag in e["tags"]:
            state = "valid" if tag["current"] == tag["version"] else "invalidated"
            label = repr(tag["name"]) if tag["name"] is not None else "(unknown name)"
            t.add_row("tag", f"{label} cell {tag['cell']} version {tag['version']}: {state}")
        if e["preview"] is not None:
            t.add_row("value", e["preview"])
        if e["error"] is not None:
            t.add_row("error", e["error"])
    return t


def run(args: argparse.Namespace, out: Output) -> int:
    """Shows what ``args.name`` holds for ``args.key``; exits 0 whatever it found."""
    if args.width < 16:
        raise CliError(f"--width must be at least 16 characters, got {args.width}", "invalid")
    files = CacheFiles.of(args.name, args.directory, args.version)
    e = collect(files, args.key, args.serializer, args.width, args.tag)
    out.show(e, lambda: _table(e))
    return 0
