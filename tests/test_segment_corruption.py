"""Damaged, foreign and hostile segment files (G5, G6, G2).

* Random bytes over the header (first 4096 bytes) of a closed segment: opening raises
  SegmentError whose message mentions ``recreate``, the file is left as it was, and
  ``recreate=True`` then gives a working, empty segment.
* A file with foreign magic, a truncated file, or a file owned by another user is refused
  (and not modified).
* Random bytes over the index region while attached: ``get`` never returns a value that was
  not written for that key and never crashes; ``verify(repair=True)`` reports problems and a
  second ``verify()`` is clean.

Where the index is: ``stats()["index_offset"]`` and ``stats()["index_bytes"]`` when the
engine reports them.  Otherwise (documented fallback) the middle third of the first 25% of
the file, which lies past the 4 KiB header and inside the index/stamp area of the layout in
research/engine-design.md §3.1.

Every open and read of a damaged file runs in a forked child, so a SIGSEGV or SIGBUS in the
engine fails the test instead of killing the test run.
"""

from __future__ import annotations

import os
import random
import stat
from collections.abc import Callable
from typing import Any

import pytest
from helpers_segment import MiB, Segment, SegmentError, make_value, reopen, run_forked

MakeSegment = Callable[..., Segment]
pytestmark = pytest.mark.timeout(120)
HEADER_BYTES = 4096


def _try_open(name: str, size: int, directory: str, **kwargs: Any) -> dict[str, Any]:
    """Open in a forked child; report whether it opened or what it raised."""

    def attempt() -> dict[str, Any]:
        try:
            s = Segment(name, size, directory=directory, **kwargs)
        except Exception as exc:
            return {
                "opened": False,
                "segment_error": isinstance(exc, SegmentError),
                "type": type(exc).__name__,
                "message": str(exc),
            }
        out = {"opened": True, "get": s.get("k0")}
        s.close()
        return out

    result: dict[str, Any] = run_forked(attempt, timeout=30)
    return result


def _closed_segment(make_segment: MakeSegment) -> tuple[Segment, dict[bytes, bytes]]:
    seg = make_segment(4 * MiB)
    rng = random.Random(0)
    values = {b"k%d" % i: make_value(b"k%d" % i, rng) for i in range(50)}
    for k, v in values.items():
        seg.set(k, v)
    seg.close()
    return seg, values


def _overwrite(path: str, offset: int, data: bytes) -> None:
    with open(path, "r+b") as f:
        f.seek(offset)
        f.write(data)


def _read(path: str) -> bytes:
    with open(path, "rb") as f:
        return f.read()


def _assert_refused(seg: Segment, shm_dir: str, *, mention_recreate: bool) -> None:
    before = _read(seg.path)
    result = _try_open(seg.name, seg.size, shm_dir)
    assert not result["opened"], "a damaged/foreign file was attached"
    assert result["segment_error"], f"raised {result['type']}: {result['message']}"
    if mention_recreate:
        assert "recreate" in result["message"].lower(), result["message"]
    assert _read(seg.path) == before, "refusing the file must not modify it"


def _assert_recreate_works(seg: Segment, shm_dir: str) -> None:
    fresh = Segment(seg.name, seg.size, directory=shm_dir, recreate=True)
    try:
        assert fresh.get(b"k0") is None, "recreate gives an empty segment"
        fresh.set(b"k0", b"new")
        assert fresh.get(b"k0") == b"new"
        assert reopen(fresh).get(b"k0") == b"new"
        st = os.stat(fresh.path)
        assert stat.S_IMODE(st.st_mode) == 0o600
        assert st.st_uid == os.geteuid()
        report = fresh.verify()
        assert report["ok"], report
    finally:
        fresh.unlink()
        fresh.close()


@pytest.mark.parametrize("seed", range(3))
def test_random_header_refused_then_recreate(
    make_segment: MakeSegment, shm_dir: str, seed: int
) -> None:
    """G5: a header overwritten with random bytes is refused with a SegmentError that says
    to use recreate; the file is not touched; recreate=True then works.
    """
    seg, _ = _closed_segment(make_segment)
    _overwrite(seg.path, 0, random.Random(seed).randbytes(HEADER_BYTES))
    _assert_refused(seg, shm_dir, mention_recreate=True)
    _assert_recreate_works(seg, shm_dir)


@pytest.mark.parametrize(
    "magic", [b"\x7fELF\x02\x01\x01\x00", b"SQLite format 3\x00", b"REDIS0011"]
)
def test_foreign_magic_refused(make_segment: MakeSegment, shm_dir: str, magic: bytes) -> None:
    """G5/G6: a file of the segment's name and size that is not a segment is refused,
    left unmodified, and replaced only with recreate=True.
    """
    seg, _ = _closed_segment(make_segment)
    size = os.path.getsize(seg.path)
    rng = random.Random(magic)
    with open(seg.path, "wb") as f:
        f.write(magic + rng.randbytes(HEADER_BYTES - len(magic)) + bytes(size - HEADER_BYTES))
    _assert_refused(seg, shm_dir, mention_recreate=True)
    _assert_recreate_works(seg, shm_dir)


def test_truncated_file_refused(make_segment: MakeSegment, shm_dir: str) -> None:
    """G5: a file shorter than its header says (intact header) is refused, without SIGBUS."""
    seg, _ = _closed_segment(make_segment)
    os.truncate(seg.path, HEADER_BYTES + 512)
    _assert_refused(seg, shm_dir, mention_recreate=False)
    _assert_recreate_works(seg, shm_dir)


@pytest.mark.skipif(os.geteuid() != 0, reason="needs root to chown the file")
def test_file_of_other_user_refused(make_segment: MakeSegment, shm_dir: str) -> None:
    """G6: a segment file owned by another user (uid 65534) is refused, even by root."""
    seg, _ = _closed_segment(make_segment)
    os.chown(seg.path, 65534, 65534)
    _assert_refused(seg, shm_dir, mention_recreate=False)
    assert os.stat(seg.path).st_uid == 65534


# --------------------------------------------------------------------------- index


def _index_region(seg: Segment) -> tuple[int, int, str]:
    stats = seg.stats()
    if "index_offset" in stats and "index_bytes" in stats:
        return int(stats["index_offset"]), int(stats["index_bytes"]), "stats"
    quarter = os.path.getsize(seg.path) // 4
    return quarter // 3, quarter // 3, "fallback"


@pytest.mark.parametrize("mode", ["sparse", "full"])
def test_index_corruption_detected_and_repaired(make_segment: MakeSegment, mode: str) -> None:
    """G2/G5: with random bytes over the index of a live segment, reads return only values
    written for their key (or a miss) and never crash; verify(repair=True) reports the
    problems and repairs them, a second verify() is clean, and writes work again.
    """
    seg = make_segment(8 * MiB)
    rng = random.Random(mode)
    keys = [b"idx-%03d" % i for i in range(400)]
    history: dict[bytes, set[bytes]] = {k: set() for k in keys}
    for round_ in range(3):
        for k in keys[: 400 - 100 * round_]:
            v = make_value(k, rng)
            seg.set(k, v)
            history[k].add(v)
    offset, length, source = _index_region(seg)
    assert offset > 0 and offset + length <= os.path.getsize(seg.path), (offset, length)

    if mode == "full":
        _overwrite(seg.path, offset, rng.randbytes(length))
    else:
        for _ in range(64):
            pos = offset + rng.randrange(length // 8) * 8
            _overwrite(seg.path, pos, rng.randbytes(8))

    def read_all() -> dict[bytes, bytes | None]:
        s = reopen(seg)
        got = {k: s.get(k) for k in keys}
        for k in keys[:20]:
            s.stamp(k)
        s.stats()
        s.close()
        return got

    def check(got: dict[bytes, bytes | None]) -> None:
        bad = {k: v[:40] for k, v in got.items() if v is not None and v not in history[k]}
        assert not bad, f"{len(bad)} reads returned values never written for their key"

    check(run_forked(read_all))
    check({k: seg.get(k) for k in keys})

    first = run_forked(lambda: reopen(seg).verify(repair=True))
    assert first["problems"], f"verify found nothing after {mode} corruption ({source} region)"
    assert all(isinstance(p, str) for p in first["problems"])
    second = run_forked(lambda: reopen(seg).verify())
    assert second["ok"] is True and second["problems"] == [], second

    check(run_forked(read_all))
    for k in keys[:50]:
        v = make_value(k, rng)
        seg.set(k, v)
        assert seg.get(k) == v
    report = seg.verify()
    assert report["ok"], report
