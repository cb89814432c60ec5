"""Several processes on one segment.

* G2 under contention: 3 processes do mixed set/get/delete/add/invalidate_tag on 200 shared
  keys; every value read must be intact and belong to its key (values embed their key and a
  CRC32), and the host-wide ``sets`` counter must equal the sum of the processes' sets.
* G1 coherence on a host: process A (this one) writes, then signals process B over a pipe;
  B must immediately read the new value (or a miss after a delete/invalidate_tag/clear),
  never the old one.  Thousands of rounds.
"""

from __future__ import annotations

import multiprocessing
import random
import time
from collections.abc import Callable
from multiprocessing.connection import Connection
from typing import Any

import pytest
from helpers_segment import (
    STRESS,
    Background,
    MiB,
    Segment,
    check_value,
    make_value,
    mixed_worker,
    reopen,
    run_forked,
)

MakeSegment = Callable[..., Segment]


def test_mixed_workload_no_corrupt_or_foreign_values(make_segment: MakeSegment) -> None:
    """G2 under contention: 0 torn, garbage or foreign values read by 3 busy processes,
    exact host-wide ``sets`` counter, and a clean verify() afterwards.
    """
    seg = make_segment(8 * MiB)
    keys = [b"mix-%03d" % i for i in range(200)]
    sets_before = seg.stats()["sets"]
    seconds = 20.0 if STRESS else 2.5
    workers = [Background(mixed_worker, seg, keys, seed, seconds) for seed in range(3)]
    try:
        results = [w.stop(timeout=seconds + 60) for w in workers]
    finally:
        for w in workers:
            w.kill()

    for r in results:
        assert r["corrupt"] == 0 and r["foreign"] == 0, r["examples"]
        assert r["ops"] > 1000, "a worker barely ran: the test proves nothing"
    assert sum(r["hits"] for r in results) > 100
    assert seg.stats()["sets"] - sets_before == sum(r["sets"] for r in results)
    for key in keys:
        value = seg.get(key)
        assert value is None or check_value(key, value) is None, (key, value)
    report = seg.verify()
    assert report["ok"], report


# --------------------------------------------------------------------------- G1


def _coherence_reader(seg: Segment, conn: Connection) -> None:
    """Process B: for each message, read the listed keys and report every mismatch."""
    s = reopen(seg)
    while True:
        checks = conn.recv()
        if checks is None:
            break
        bad = []
        for key, expected in checks:
            got = s.get(key)
            if got != expected:
                bad.append((key, _short(expected), _short(got)))
        conn.send(bad)
    s.close()
    conn.send("bye")


def _short(v: bytes | None) -> Any:
    return v if v is None or len(v) <= 40 else v[:40] + b"..."


class Peer:
    """Process B of the coherence tests, driven by this process (A)."""

    def __init__(self, seg: Segment) -> None:
        ctx = multiprocessing.get_context("fork")
        self.conn, child_conn = ctx.Pipe()
        self.proc = ctx.Process(target=_coherence_reader, args=(seg, child_conn), daemon=True)
        self.proc.start()
        child_conn.close()
        self.failures: list[Any] = []

    def check(self, round_: int, what: str, checks: list[tuple[bytes, bytes | None]]) -> None:
        """Ask B to read now; record what it saw that it must not have."""
        self.conn.send(checks)
        bad = self.conn.recv()
        if bad and len(self.failures) < 10:
            self.failures.append((round_, what, bad))
        elif bad:
            self.failures.append(None)

    def close(self) -> None:
        self.conn.send(None)
        assert self.conn.recv() == "bye"
        self.proc.join(10)
        assert self.proc.exitcode == 0


@pytest.fixture
def peer_seg(make_segment: MakeSegment) -> Segment:
    return make_segment(8 * MiB)


ROUNDS = 20_000 if STRESS else 2_000


def test_g1_set_then_other_process_reads_new_value(peer_seg: Segment) -> None:
    """G1 (set): once set() returns here, process B reads the new value, never the old one.

    B read the previous value of the key in the previous round, so any stale copy (process
    cache, torn publish, reordered stores) would show up as the old value.
    """
    seg = peer_seg
    rng = random.Random(1)
    keys = [b"g1-%02d" % i for i in range(50)]
    peer = Peer(seg)
    try:
        for i in range(ROUNDS):
            key = keys[i % len(keys)]
            value = make_value(key + b"#%d" % i, rng)
            seg.set(key, value)
            peer.check(i, "set", [(key, value)])
    finally:
        peer.close()
    assert peer.failures == [], f"{len(peer.failures)} stale/missing reads: {peer.failures[:5]}"


def test_g1_delete_then_other_process_misses(peer_seg: Segment) -> None:
    """G1 (delete): once delete() returns here, process B gets a miss, never the old value."""
    seg = peer_seg
    rng = random.Random(2)
    peer = Peer(seg)
    try:
        for i in range(ROUNDS // 2):
            key = b"del-%02d" % (i % 37)
            value = make_value(key, rng)
            seg.set(key, value)
            peer.check(i, "set", [(key, value)])
            assert seg.delete(key) is True
            peer.check(i, "delete", [(key, None)])
    finally:
        peer.close()
    assert peer.failures == [], f"{len(peer.failures)} stale reads: {peer.failures[:5]}"


def test_g1_invalidate_tag_then_other_process_misses(peer_seg: Segment) -> None:
    """G1 (invalidate_tag): once it returns here, B misses every entry carrying the tag and
    still reads the entries that do not carry it.
    """
    seg = peer_seg
    rng = random.Random(3)
    peer = Peer(seg)
    try:
        for i in range(ROUNDS // 4):
            tag, other_tag = f"tag-{i}", f"keep-{i}"
            tagged = [(b"tg-%d-%d" % (i % 11, j), [tag] if j else [other_tag, tag]) for j in (0, 1)]
            kept = [(b"kp-%d" % (i % 13), [other_tag]), (b"plain-%d" % (i % 7), [])]
            values = {}
            for key, tags in tagged + kept:
                values[key] = make_value(key, rng)
                seg.set(key, values[key], tags=tags)
            peer.check(i, "before", [(k, values[k]) for k, _ in tagged + kept])
            seg.invalidate_tag(tag)
            peer.check(i, "after", [(k, None) for k, _ in tagged] + [(k, values[k]) for k, _ in kept])
    finally:
        peer.close()
    assert peer.failures == [], f"{len(peer.failures)} stale reads: {peer.failures[:5]}"


def test_g1_clear_then_other_process_misses(make_segment: MakeSegment) -> None:
    """G1 (clear): once clear() returns here, B misses every key; new sets are then seen."""
    seg = make_segment(4 * MiB)
    rng = random.Random(4)
    peer = Peer(seg)
    try:
        for i in range(ROUNDS // 10):
            keys = [b"clr-%d" % ((i + j) % 23) for j in range(4)]
            values = {k: make_value(k, rng) for k in keys}
            for k in keys:
                seg.set(k, values[k], tags=["x"] if i % 2 else ())
            peer.check(i, "before", list(values.items()))
            seg.clear()
            peer.check(i, "after", [(k, None) for k in keys])
    finally:
        peer.close()
    assert peer.failures == [], f"{len(peer.failures)} stale reads: {peer.failures[:5]}"


def test_g1_writes_from_other_process_seen_here(peer_seg: Segment) -> None:
    """G1 in the other direction: a child writes and returns; this process reads the new
    value at once (its own earlier reads of the key must not be served again).
    """
    seg = peer_seg
    rng = random.Random(5)
    key = b"reverse"
    for i in range(30):
        old = make_value(key, rng)
        seg.set(key, old)
        assert seg.get(key) == old
        new = make_value(key + b"%d" % i, rng)

        def child(new: bytes = new) -> None:
            s = reopen(seg)
            if i % 3 == 2:
                s.delete(key)
            else:
                s.set(key, new)
            s.close()

        run_forked(child)
        assert seg.get(key) == (None if i % 3 == 2 else new)
        assert seg.stamp(key) % 2 == 0
