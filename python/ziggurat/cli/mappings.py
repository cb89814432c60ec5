"""Which processes have a file mapped, read from ``/proc/<pid>/maps``.

A process attached to a segment maps its file; the maps line names the file's device and
inode, so a removed (``(deleted)``) or renamed file is still recognised. The maps of
another user's processes are readable by root only: ``Mappings.unreadable`` counts the
processes that could not be checked.

>>> import os, mmap, tempfile
>>> with tempfile.NamedTemporaryFile(dir="/dev/shm") as f:
...     _ = f.truncate(4096)
...     m = mmap.mmap(f.fileno(), 4096)
...     os.getpid() in Mappings.scan().pids(os.stat(f.name))
...     m.close()
True
"""

from __future__ import annotations

import os
from dataclasses import dataclass, field

__all__ = ["Mappings"]


@dataclass
class Mappings:
    """Processes by mapped file, as ``(major, minor, inode) -> {pid}``.

    >>> Mappings().pids(os.stat("/"))
    []
    """

    files: dict[tuple[int, int, int], set[int]] = field(default_factory=dict)
    #: Processes whose maps could not be read (another user's, when not root).
    unreadable: int = 0

    @classmethod
    def scan(cls, proc: str = "/proc") -> Mappings:
        """Reads the maps of every process of the host (processes that exit meanwhile are
        skipped).

        >>> Mappings.scan().unreadable >= 0
        True
        """
        out = cls()
        try:
            entries = os.listdir(proc)
        except OSError:
            return out
        for entry in entries:
            if not entry.isdigit():
                continue
            pid = int(entry)
            try:
                with open(os.path.join(proc, entry, "maps"), "rb") as f:
                    data = f.read()
            except (FileNotFoundError, ProcessLookupError):
                continue  # it exited
            except OSError:
                out.unreadable += 1
                continue
            for line in data.splitlines():
                # address perms offset dev inode [path]
                parts = line.split(maxsplit=5)
                if len(parts) < 6 or parts[4] == b"0":
                    continue
                major, _, minor = parts[3].partition(b":")
                try:
                    key = (int(major, 16), int(minor, 16), int(parts[4]))
                except ValueError:
                    continue
                out.files.setdefault(key, set()).add(pid)
        return out

    def pids(self, st: os.stat_result) -> list[int]:
        """The processes that map the file of ``st``, sorted.

        >>> st = os.stat("/")
        >>> Mappings({(os.major(st.st_dev), os.minor(st.st_dev), st.st_ino): {3, 1}}).pids(st)
        [1, 3]
        """
        key = (os.major(st.st_dev), os.minor(st.st_dev), st.st_ino)
        return sorted(self.files.get(key, ()))
