"""Size limits of a segment: a value of an eighth of the segment is always storable."""

from __future__ import annotations

import random
from collections.abc import Callable

import pytest
from helpers_segment import MiB, Segment

MakeSegment = Callable[..., Segment]


@pytest.mark.parametrize("size", [16 * MiB, 64 * MiB])
def test_an_eighth_of_the_segment_fits(make_segment: MakeSegment, size: int) -> None:
    seg = make_segment(size)
    assert seg.max_value_size >= size // 8
    assert seg.stats()["max_value_size"] == seg.max_value_size
    for i in range(20):
        seg.set(f"small{i}", b"v")
    big = random.Random(size).randbytes(size // 8)
    seg.set("big", big)
    assert seg.get("big") == big


def test_above_the_maximum_names_both_sizes(make_segment: MakeSegment) -> None:
    seg = make_segment(16 * MiB)
    top = seg.max_value_size
    with pytest.raises(ValueError) as info:
        seg.set("k", b"x" * (top + 1))
    assert str(top + 1) in str(info.value) and str(top) in str(info.value)
    assert seg.get("k") is None
