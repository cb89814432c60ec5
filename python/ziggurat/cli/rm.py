"""``ziggurat rm NAME``: removes a cache's segment files.

Both files go (``ziggurat.<name>.v<LAYOUT>`` and ``ziggurat.<name>.neg.v<LAYOUT>``), as
``Cache.unlink()`` does, without attaching: a damaged file is removed as well. Processes
still attached keep their mapping, and so their copy of the cache, until they reopen;
a cache another process maps (``/proc/*/maps``) is therefore only removed with ``--yes``.
Another user's files are refused.

>>> import tempfile, shutil
>>> from ziggurat import Cache
>>> d = tempfile.mkdtemp(dir="/dev/shm")
>>> Cache("doc-rm", size="8MiB", directory=d).close()
>>> [os.path.basename(p) for p in remove(CacheFiles("doc-rm", d))["removed"]]
['ziggurat.doc-rm.v2', 'ziggurat.doc-rm.neg.v2']
>>> os.listdir(d)
[]
>>> shutil.rmtree(d)
"""

from __future__ import annotations

import argparse
import os
import stat
from typing import Any

from ziggurat._native import Segment, ZigguratError
from ziggurat.cli.errors import CliError
from ziggurat.cli.mappings import Mappings
from ziggurat.cli.output import Output
from ziggurat.cli.segments import CacheFiles

__all__ = ["remove", "run"]


def remove(files: CacheFiles, yes: bool = False) -> dict[str, Any]:
    """Removes the files of ``files``; ``CliError`` when there are none, when one is
    another user's, or, unless ``yes``, when another process maps one.

    >>> remove(CacheFiles("no-such-cache", "/dev/shm"))  # doctest: +ELLIPSIS
    Traceback (most recent call last):
    ...
    ziggurat.cli.errors.CliError: no cache 'no-such-cache' in /dev/shm (no file ...); ...
    """
    named = [(files.main_path, files.name), (files.neg_path, files.neg_name)]
    present = [(p, n) for p, n in named if os.path.lexists(p)]
    if not present:
        raise files.missing()
    stats = [_removable(files, p, n) for p, n in present]
    paths = [p for p, _ in present]
    maps = Mappings.scan()
    me = os.getpid()
    pids = sorted({pid for st in stats for pid in maps.pids(st) if pid != me})
    if pids and not yes:
        shown = ", ".join(map(str, pids[:10])) + (" ..." if len(pids) > 10 else "")
        raise CliError(
            f"{files.name!r} is in use: mapped by {len(pids)} process(es) ({shown}); they "
            "would keep their copy until they reopen. Stop them first, or pass --yes",
            "in_use",
        )
    removed = []
    for p in paths:
        try:
            os.unlink(p)
        except FileNotFoundError:
            continue  # removed meanwhile
        except OSError as e:
            raise CliError(f"cannot remove {p}: {e.strerror}", "not_writable") from None
        removed.append(p)
    return {
        "name": files.name,
        "directory": files.directory,
        "removed": removed,
        "mapped_by": pids,
        "unchecked_processes": maps.unreadable,
    }


def _removable(files: CacheFiles, path: str, name: str) -> os.stat_result:
    """``lstat`` of ``path``, a regular file this user may remove: the engine's owner rule
    decides (its read-only open judges the owner before the contents, so a damaged file
    of this user is removable and another user's file is refused whatever it holds)."""
    try:
        st = os.lstat(path)
    except FileNotFoundError:
        raise files.missing() from None
    if not stat.S_ISREG(st.st_mode):
        raise CliError(f"{path} is not a regular file", "incompatible")
    try:
        Segment(name, None, directory=files.directory, read_only=True).close()
    except ZigguratError as e:
        cause = getattr(e, "cause", None) or "io"
        if cause in ("other_owner", "not_readable"):
            raise CliError(str(e), cause) from None
    return st


def run(args: argparse.Namespace, out: Output) -> int:
    """Removes the files of ``args.name``."""
    d = remove(CacheFiles.of(args.name, args.directory, args.version), args.yes)
    out.show(d, lambda: "\n".join(f"removed {p}" for p in d["removed"]))
    return 0
