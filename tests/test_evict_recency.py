"""Eviction in a segment that holds only a few hundred entries (large values, small size).

S3-FIFO drops an entry that nobody read while it crossed the small ring (a tenth of the
bytes: a few dozen entries here). Where reuse follows recency, as in block traces, most
keys come back only after that, yet well within the segment's capacity: while the main
ring keeps dropping its own entries unread, such entries move to main instead, so the
segment keeps them as LRU of its size would. Where some keys are read again and again,
main keeps those, and one-hit keys still only churn the small ring.
"""

from __future__ import annotations

from collections.abc import Callable

from helpers_segment import MiB, Segment

MakeSegment = Callable[..., Segment]

SIZE = 2 * MiB
VALUE = b"v" * 5000  # about 350 entries fit, about 35 in the small ring


def test_keys_stay_until_their_second_access(make_segment: MakeSegment) -> None:
    """Each key is read twice, 100 keys (about 200 writes) apart, then never again."""
    seg = make_segment(SIZE)
    n, lag = 20_000, 100
    second_hits = 0
    for i in range(n + lag):
        if i < n:
            key = f"k{i}"
            assert seg.get(key) is None
            seg.set(key, VALUE)
        if i >= lag:
            key = f"k{i - lag}"
            if seg.get(key) is None:
                seg.set(key, VALUE)
            else:
                second_hits += 1
    stats = seg.stats()
    assert stats["entries"] < 400, stats
    # The small ring alone would keep about 35 keys for a second access: under 2%.
    assert second_hits >= n // 2, f"only {second_hits} of {n} second accesses hit: {stats}"


def test_after_a_recency_phase_hot_keys_outlive_one_hit_keys(make_segment: MakeSegment) -> None:
    """Once keys are read again and again, one-hit keys stop moving to the main ring."""
    seg = make_segment(SIZE)
    n, lag = 5000, 100
    for i in range(n + lag):
        for key in ([f"k{i}"] if i < n else []) + ([f"k{i - lag}"] if i >= lag else []):
            if seg.get(key) is None:
                seg.set(key, VALUE)
    hot = [f"hot{i}" for i in range(100)]
    late_missed = 0
    late_moved = 0
    for r in range(300):
        before = seg.stats()["promotions"]
        for key in hot:
            if seg.get(key) is None:
                seg.set(key, VALUE)
                late_missed += r >= 20
        for j in range(40):
            seg.set(f"once{r}-{j}", VALUE)
        if r >= 20:
            late_moved += seg.stats()["promotions"] - before
    kept = sum(seg.get(key) is not None for key in hot)
    assert kept == 100, f"only {kept} of 100 hot keys kept: {seg.stats()}"
    assert late_missed == 0, f"{late_missed} reads of hot keys missed: {seg.stats()}"
    # 11,200 one-hit keys were written after round 20: they leave through the ghost table.
    assert late_moved <= 100, f"{late_moved} entries moved to the main ring: {seg.stats()}"
