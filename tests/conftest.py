"""Fixtures of the segment tests.

Every test gets its own directory ``/dev/shm/zigtest-<uuid>`` (removed afterwards) and
segments with unique names inside it, so tests never share or leak a segment file.
"""

from __future__ import annotations

import contextlib
import os
import shutil
import uuid
from collections.abc import Callable, Iterator
from typing import Any

import pytest
from helpers_segment import MiB, Segment, new_name


@pytest.fixture
def shm_dir() -> Iterator[str]:
    """A fresh private directory under /dev/shm, removed with everything in it."""
    path = f"/dev/shm/zigtest-{uuid.uuid4().hex}"
    os.mkdir(path, 0o700)
    try:
        yield path
    finally:
        shutil.rmtree(path, ignore_errors=True)


@pytest.fixture
def make_segment(shm_dir: str) -> Iterator[Callable[..., Segment]]:
    """Factory ``make_segment(size=4 MiB, name=None, **kwargs)``; every segment is unlinked."""
    made: list[Segment] = []

    def make(size: int = 4 * MiB, name: str | None = None, **kwargs: Any) -> Segment:
        kwargs.setdefault("directory", shm_dir)
        seg = Segment(name or new_name(), size, **kwargs)
        made.append(seg)
        return seg

    yield make
    for seg in made:
        for cleanup in (seg.unlink, seg.close):
            with contextlib.suppress(Exception):
                cleanup()


@pytest.fixture
def seg(make_segment: Callable[..., Segment]) -> Segment:
    """A fresh 4 MiB segment with default settings."""
    return make_segment()
