"""When a file was created: its birth time (``statx``), where the file system records one.

A segment's ctime and mtime move with every write through its mapping, so they say when
the cache was last written, not when it was made; tmpfs (``/dev/shm``) records birth times
since Linux 5.x. Where there is none, the ctime stands in, and ``created`` says so.

>>> import tempfile
>>> with tempfile.NamedTemporaryFile(dir="/dev/shm") as f:
...     t, source = created(f.name)
...     source in ("birth", "ctime") and abs(t - os.stat(f.name).st_ctime) < 5
True
"""

from __future__ import annotations

import ctypes
import ctypes.util
import os

__all__ = ["created"]

_AT_FDCWD = -100
_AT_SYMLINK_NOFOLLOW = 0x100
_STATX_BTIME = 0x800
# struct statx (linux/stat.h): stx_mask at 0, stx_btime {s64 sec, u32 nsec} at 80; 256 bytes.
_STATX_SIZE = 256
_BTIME_OFFSET = 80


def _statx() -> object | None:
    try:
        libc = ctypes.CDLL(ctypes.util.find_library("c") or "libc.so.6", use_errno=True)
        fn = libc.statx
    except (OSError, AttributeError):
        return None
    fn.argtypes = [ctypes.c_int, ctypes.c_char_p, ctypes.c_int, ctypes.c_uint, ctypes.c_void_p]
    fn.restype = ctypes.c_int
    return fn


_STATX = _statx()


def created(path: str) -> tuple[float, str]:
    """``(seconds since the epoch, "birth")``, or ``(ctime, "ctime")`` when the file
    system (or the C library) gives no birth time. ``OSError`` when ``path`` is missing.

    >>> created("/no/such/file")
    Traceback (most recent call last):
    ...
    FileNotFoundError: [Errno 2] No such file or directory: '/no/such/file'
    """
    st = os.lstat(path)
    if callable(_STATX):
        buf = ctypes.create_string_buffer(_STATX_SIZE)
        rc = _STATX(_AT_FDCWD, os.fsencode(path), _AT_SYMLINK_NOFOLLOW, _STATX_BTIME, buf)
        mask = int.from_bytes(buf.raw[0:4], "little")
        if rc == 0 and mask & _STATX_BTIME:
            sec = int.from_bytes(buf.raw[_BTIME_OFFSET : _BTIME_OFFSET + 8], "little", signed=True)
            nsec = int.from_bytes(buf.raw[_BTIME_OFFSET + 8 : _BTIME_OFFSET + 12], "little")
            return sec + nsec / 1e9, "birth"
    return st.st_ctime, "ctime"
