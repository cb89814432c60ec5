"""Opening a segment: the ``cause`` of a refusal, and processes that share one segment.

A ``SegmentError`` raised while creating or attaching a segment carries a stable
``cause`` (missing_directory, not_writable, other_owner, no_space, damaged,
incompatible), so callers never need to match messages.
"""

from __future__ import annotations

import os
from collections.abc import Callable

import pytest
from helpers_segment import MiB, Segment, SegmentError, new_name


def _refusal(name: str, directory: str, **kwargs: object) -> SegmentError:
    with pytest.raises(SegmentError) as info:
        Segment(name, 2 * MiB, directory=directory, **kwargs)
    return info.value


def test_missing_directory_cause(shm_dir: str) -> None:
    e = _refusal(new_name(), os.path.join(shm_dir, "absent"))
    assert e.cause == "missing_directory", e
    assert "does not exist" in str(e)


def test_damaged_and_foreign_causes(shm_dir: str) -> None:
    name = new_name()
    seg = Segment(name, 2 * MiB, directory=shm_dir)
    path = seg.path
    seg.close()
    with open(path, "r+b") as f:
        f.seek(100)
        byte = f.read(1)[0]
        f.seek(100)
        f.write(bytes([byte ^ 0xFF]))
    e = _refusal(name, shm_dir)
    assert e.cause == "damaged", e
    assert "recreate=True" in str(e)
    with open(path, "r+b") as f:
        f.write(b"\x7fELF\x02\x01\x01\x00")
    assert _refusal(name, shm_dir).cause == "incompatible"
    Segment(name, 2 * MiB, directory=shm_dir, recreate=True).close()


@pytest.mark.skipif(os.geteuid() != 0, reason="needs root to chown the file")
def test_other_owner_cause(shm_dir: str) -> None:
    name = new_name()
    seg = Segment(name, 2 * MiB, directory=shm_dir)
    path = seg.path
    seg.close()
    os.chown(path, 65534, 65534)
    e = _refusal(name, shm_dir)
    assert e.cause == "other_owner", e
    assert "(uid 65534)" in str(e) and "(uid 0)" in str(e)
    assert "group=" in str(e)


def test_hits_counted_in_a_forked_child(make_segment: Callable[..., Segment]) -> None:
    """A segment opened before fork (gunicorn --preload): the child's hits reach the
    host-wide counters, and the parent's pending hits are counted once, by the parent."""
    seg = make_segment(2 * MiB)
    seg.set("k", b"v")
    base = seg.stats()["hits"]  # flushes: nothing pending in the parent now
    for _ in range(3):
        assert seg.get("k") == b"v"  # pending in the parent at fork
    read_end, write_end = os.pipe()
    pid = os.fork()
    if pid == 0:  # child: report its view through the pipe, leave without cleanup
        code = 1
        try:
            os.close(read_end)
            for _ in range(6):
                assert seg.get("k") == b"v"
            os.write(write_end, str(seg.stats()["hits"]).encode())
            code = 0
        finally:
            os._exit(code)
    os.close(write_end)
    with os.fdopen(read_end, "rb") as f:
        child_view = f.read()
    _, status = os.waitpid(pid, 0)
    assert os.WIFEXITED(status) and os.WEXITSTATUS(status) == 0
    assert int(child_view) == base + 6, "the child counts its own 6 hits, not the parent's 3"
    assert seg.stats()["hits"] == base + 9, "the parent still flushes its 3 pending hits"
