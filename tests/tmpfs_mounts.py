"""Small tmpfs file systems that a test mounts for itself: a container's 64 MB /dev/shm,
or a tmpfs with huge pages (``huge=always|within_size|advise|never``). Mounting needs
root: elsewhere the test is skipped and says why.
"""

from __future__ import annotations

import contextlib
import os
import subprocess
import tempfile
from collections.abc import Iterator

import pytest


@contextlib.contextmanager
def tmpfs(size: str = "64m", huge: str | None = None) -> Iterator[str]:
    """Mounts a tmpfs of ``size`` (with ``huge=`` when given) on a fresh directory and
    yields its path; unmounts it afterwards (lazily: a segment may still be mapped)."""
    if os.geteuid() != 0:
        pytest.skip("mounting a tmpfs needs root, and this test run is not root")
    if huge not in (None, "never", "deny"):
        # The huge pages such a mount hands out are free 2 MiB runs of memory, which a
        # busy machine (a build beside the tests) may have none of: compact first, as an
        # operator would before relying on them.
        with contextlib.suppress(OSError), open("/proc/sys/vm/compact_memory", "w") as f:
            f.write("1")
    path = tempfile.mkdtemp(prefix="zig-tmpfs-")
    options = f"size={size}" + (f",huge={huge}" if huge else "")
    r = subprocess.run(
        ["mount", "-t", "tmpfs", "-o", options, "tmpfs", path], capture_output=True, text=True
    )
    if r.returncode != 0:
        os.rmdir(path)
        pytest.skip(f"cannot mount a tmpfs with {options}: {r.stderr.strip()}")
    try:
        os.chmod(path, 0o1777)  # as /dev/shm is
        yield path
    finally:
        subprocess.run(["umount", "-l", path], capture_output=True)
        os.rmdir(path)


def huge_pages_possible() -> str | None:
    """Why this kernel cannot give shared memory huge pages at all, or None."""
    try:
        with open("/sys/kernel/mm/transparent_hugepage/shmem_enabled") as f:
            policy = f.read()
    except OSError:
        return "this kernel has no transparent huge pages"
    if "[deny]" in policy:
        return "the kernel's shmem policy is 'deny'"
    return None
