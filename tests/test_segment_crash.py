"""Writers that die or stall while holding a shard lock.

* G3 (no stuck locks), deterministic: ``Segment._crash_at(point)`` SIGKILLs a child writer
  at each step of a write while it holds the shard lock.  Then, in this process: reads never
  wait (they answer at once, with the old or the new value), the next write to the shard
  succeeds within the lock timeout, ``lock_repairs`` counts the repair, a stamp left odd is
  even again (and differs from the old stamp if the value changed), and verify() is clean.
* G3, stalled holder: a writer stopped with SIGSTOP inside the lock makes other writers fail
  with LockTimeout after about ``lock_timeout`` (no state change), while reads stay instant.
* G2 + G3 storm: writer processes SIGKILLed at random moments while a reader process checks
  every value it reads (key + CRC32 embedded): no torn or foreign value, no reader stall,
  no writer error, and afterwards every write succeeds and verify() is clean.  A few
  hundred kills in CI; ``ZIGGURAT_STRESS=1`` (``make stress``) runs at least 10,000.

The shard tests use ``shards=1`` so that "the next write to that shard" is any write.
"""

from __future__ import annotations

import os
import random
import select
import signal
import time
from collections.abc import Callable
from typing import Any

import pytest
from helpers_segment import (
    CRASH_POINTS,
    STRESS,
    Background,
    LockTimeout,
    MiB,
    Segment,
    ZigguratError,
    check_value,
    describe_status,
    fork_child,
    make_value,
    needs_crash_hook,
    reopen,
    storm_reader,
    storm_writer,
    wait_child,
)

MakeSegment = Callable[..., Segment]
pytestmark = pytest.mark.timeout(180)
NOT_REACHED = 3  # exit code of a crash child whose write finished without reaching the point
LOCK_TIMEOUT = 0.5
SLACK = 0.3  # scheduling noise allowed on top of the lock timeout (2 noisy cores)

FAILPOINT_CASES = (
    [("set", p) for p in CRASH_POINTS]
    + [("add", p) for p in CRASH_POINTS if p != "evict"]
    + [("delete", p) for p in CRASH_POINTS if p != "evict"]
)


@needs_crash_hook
@pytest.mark.parametrize(
    ("op", "point"), FAILPOINT_CASES, ids=[f"{o}-{p}" for o, p in FAILPOINT_CASES]
)
def test_writer_killed_at_failpoint_is_repaired(
    make_segment: MakeSegment, op: str, point: str
) -> None:
    """G2/G3 at each failpoint: reads stay instant and correct with a dead lock holder; the
    next write repairs the shard within lock_timeout; stamps even; verify() clean.
    """
    seg = make_segment(4 * MiB, shards=1, lock_timeout=LOCK_TIMEOUT)
    rng = random.Random(f"{op}-{point}")
    keys = [b"fp-%02d" % i for i in range(40)]
    values = {k: make_value(k, rng) for k in keys}
    for k in keys:
        seg.set(k, values[k])
    target = b"fp-add-target" if op == "add" else keys[0]
    old = values.get(target)  # None for add
    new = make_value(target, rng, 3000)
    stamp0 = seg.stamp(target)
    stats0 = seg.stats()

    def child() -> None:
        s = reopen(seg)
        s._crash_at(point)
        if point == "evict":
            filler = make_value(b"filler", rng, min(20_000, s.max_value_size // 2))
            for i in range(50 * seg.size // len(filler)):
                s.set(b"fill-%d" % i, filler)
        elif op == "set":
            s.set(target, new)
        elif op == "add":
            s.add(target, new)
        else:
            s.delete(target)
        os._exit(NOT_REACHED)

    code = wait_child(fork_child(child), 60)
    if (op, point) == ("delete", "appended"):
        # A delete appends no record: it finishes without reaching the point, and leaves
        # the key gone and the segment whole.
        assert code == NOT_REACHED, f"delete at 'appended': child {describe_status(code)}"
        assert seg.get(target) is None
        report = seg.verify()
        assert report["ok"] is True and report["problems"] == [], report
        return
    assert code == -signal.SIGKILL, (
        f"_crash_at({point!r}) during {op}: child {describe_status(code)}"
        f" (exit {NOT_REACHED} = the write finished without reaching the failpoint)"
    )

    # 1. With the dead holder still owning the lock, and before any write: reads answer at
    #    once, other keys are intact, the killed write's key is old or new, never garbage.
    allowed = {"set": (old, new), "add": (None, new), "delete": (old, None)}[op]
    t0 = time.perf_counter()
    got = seg.get(target)
    others = {k: seg.get(k) for k in keys if k != target}
    read_time = time.perf_counter() - t0
    assert read_time < 0.1, f"reads took {read_time:.3f} s: they waited on the dead lock"
    if point == "evict":  # evicting or moving a record: any key may be gone, none torn
        for k, v in [(target, got), *others.items()]:
            assert v is None or check_value(k, v) is None, (k, v[:40])
    else:
        assert got in allowed, f"killed {op} at {point}: read {got!r:.60}"
        assert others == {k: values[k] for k in others}
    stamp_dead = seg.stamp(target)
    if point == "stamp_odd":
        assert stamp_dead % 2 == 1, "at 'stamp_odd' the writer has made the stamp odd"

    # 2. The next write to the shard (another key: shards=1) repairs it within lock_timeout.
    t0 = time.monotonic()
    seg.set(b"repair-trigger", b"x")
    elapsed = time.monotonic() - t0
    assert elapsed < LOCK_TIMEOUT + SLACK, f"next write waited {elapsed:.3f} s"
    stats1 = seg.stats()
    assert stats1["lock_repairs"] > stats0["lock_repairs"], "repair not counted"

    # 3. After the repair: stamp even, and moved if the value changed (else L1 keeps the old).
    stamp_after = seg.stamp(target)
    assert stamp_after % 2 == 0, f"stamp {stamp_dead} left by the dead writer is now {stamp_after}"
    got_after = seg.get(target)
    if point != "evict":
        assert got_after in (*allowed, None), f"after repair read {got_after!r:.60}"
        if got_after != old:
            assert stamp_after != stamp0, "value changed but stamp did not: stale L1 hits"
    for k in keys:
        v = seg.get(k)
        assert v is None or check_value(k, v) is None, (k, v[:40])
    report = seg.verify()
    assert report["ok"] is True and report["problems"] == [], report

    # 4. Writes work normally again.
    final = make_value(target, rng)
    seg.set(target, final)
    assert seg.get(target) == final
    assert seg.stamp(target) % 2 == 0
    assert seg.stamp(target) > stamp_after


def test_stopped_lock_holder_times_out_writers_not_readers(make_segment: MakeSegment) -> None:
    """G3 with a live but stalled holder (SIGSTOP, not detectable as dead): another writer
    gets LockTimeout after about lock_timeout, counted in stats and with no state change;
    reads during the stall answer at once; after SIGCONT writes work again.
    """
    lock_timeout = 0.2
    seg = make_segment(4 * MiB, shards=1, lock_timeout=lock_timeout)
    rng = random.Random(9)
    keys = [b"stop-%02d" % i for i in range(20)]
    for k in keys:
        seg.set(k, make_value(k, rng))
    big = make_value(b"w", rng, min(200_000, seg.max_value_size - 1000))
    stats0 = seg.stats()

    def writer(ready_fd: int) -> None:
        s = reopen(seg)
        os.write(ready_fd, b"r")
        i = 0
        while True:  # long writes (big memcpy + evictions): mostly inside the lock
            s.set(b"w-%d" % (i % 64), big)
            i += 1

    pid = _spawn_ready(writer)
    timeouts: list[float] = []
    try:
        for attempt in range(300):
            time.sleep(rng.uniform(0, 0.003))
            os.kill(pid, signal.SIGSTOP)
            os.waitpid(pid, os.WUNTRACED)
            try:
                t0 = time.perf_counter()
                for k in keys:
                    v = seg.get(k)
                    assert v is None or check_value(k, v) is None
                read_time = time.perf_counter() - t0
                assert read_time < 0.1, f"reads took {read_time:.3f} s behind a stopped writer"
                probe = b"probe-%d" % attempt
                t0 = time.monotonic()
                try:
                    seg.set(b"probe", probe)
                except LockTimeout as exc:
                    timeouts.append(time.monotonic() - t0)
                    assert isinstance(exc, ZigguratError)
                    assert seg.get(b"probe") != probe, "a write that timed out was applied"
                    if len(timeouts) >= 2:
                        break
            finally:
                os.kill(pid, signal.SIGCONT)
    finally:
        os.kill(pid, signal.SIGKILL)
        wait_child(pid, 10)

    assert timeouts, "never caught the writer inside the lock in 300 tries"
    for waited in timeouts:
        assert lock_timeout * 0.75 <= waited < lock_timeout + SLACK, timeouts
    assert seg.stats()["lock_timeouts"] - stats0["lock_timeouts"] >= len(timeouts)
    seg.set(b"probe", b"after")  # repairs the lock if the writer was killed inside it
    assert seg.get(b"probe") == b"after"
    report = seg.verify()
    assert report["ok"], report


def _spawn_ready(fn: Callable[[int], object], *args: Any) -> int:
    """Fork ``fn(*args, ready_fd)``; return its pid once it wrote its ready byte."""
    r, w = os.pipe()
    pid = fork_child(fn, *args, w)
    os.close(w)
    try:
        ready = select.select([r], [], [], 20)[0]
        data = os.read(r, 1) if ready else b""
    finally:
        os.close(r)
    if data != b"r":
        os.kill(pid, signal.SIGKILL)
        code = wait_child(pid, 10)
        raise AssertionError(f"writer did not start: {describe_status(code)}")
    return pid


# --------------------------------------------------------------------------- kill storm


def _kill_storm(
    make_segment: MakeSegment, kills_target: int, budget_s: float, min_kills: int
) -> None:
    seg = make_segment(8 * MiB, shards=4, lock_timeout=LOCK_TIMEOUT)
    rng = random.Random(kills_target)
    keys = [b"storm-%03d" % i for i in range(200)]
    for k in keys:
        seg.set(k, make_value(k, rng))
    stats0 = seg.stats()

    reader = Background(storm_reader, seg, keys, 11)
    writers: list[int] = []
    writer_failures: list[str] = []
    kills = 0
    seed = 0
    try:
        for _ in range(2):
            writers.append(_spawn_ready(storm_writer, seg, keys, seed := seed + 1))
        start = time.monotonic()
        while kills < kills_target and time.monotonic() - start < budget_s:
            time.sleep(rng.uniform(0, 0.006))
            victim = writers.pop(rng.randrange(len(writers)))
            os.kill(victim, signal.SIGKILL)
            code = wait_child(victim, 10)
            if code != -signal.SIGKILL:
                writer_failures.append(describe_status(code))
            kills += 1
            writers.append(_spawn_ready(storm_writer, seg, keys, seed := seed + 1))
    finally:
        for pid in writers:
            os.kill(pid, signal.SIGKILL)
            wait_child(pid, 10)
        try:
            result = reader.stop(timeout=60)
        finally:
            reader.kill()

    assert kills >= min_kills, f"only {kills} kills in {budget_s} s"
    assert writer_failures == [], f"writers raised instead of being killed: {writer_failures}"
    assert result["errors"] == 0, result["examples"]
    assert result["corrupt"] == 0, result["examples"]
    assert result["foreign"] == 0, result["examples"]
    assert result["gets"] > 10_000 and result["hits"] > 0, result
    # Reads never wait for a writer's lock: no two reads took half the lock timeout (one
    # may have been descheduled that long on a loaded machine).
    assert result["second_get_s"] < LOCK_TIMEOUT / 2, f"reads took {result['max_get_s']:.3f} s"
    assert result["max_get_s"] < LOCK_TIMEOUT + SLACK, f"a read took {result['max_get_s']:.3f} s"

    # Every shard is written (200 keys over 4 shards): each write succeeds within the timeout.
    final = {}
    for k in keys:
        final[k] = make_value(k, rng)
        t0 = time.monotonic()
        seg.set(k, final[k])
        assert time.monotonic() - t0 < LOCK_TIMEOUT + SLACK
    stats1 = seg.stats()
    print(
        f"kill storm: {kills} kills, {result['gets']} checked gets ({result['hits']} hits),"
        f" max get {result['max_get_s'] * 1e3:.2f} ms, lock_repairs"
        f" {stats1['lock_repairs'] - stats0['lock_repairs']}, shard_resets"
        f" {stats1['shard_resets'] - stats0['shard_resets']}, evictions {stats1['evictions']}"
    )
    assert stats1["lock_repairs"] > stats0["lock_repairs"], "no kill landed inside a lock?"
    for k in keys:
        assert seg.stamp(k) % 2 == 0
        assert seg.get(k) == final[k]
    report = seg.verify()
    assert report["ok"] is True and report["problems"] == [], report


def test_kill_storm(make_segment: MakeSegment) -> None:
    """G2/G3: 600 random SIGKILLs of writers (CI size) while a reader checks every value."""
    _kill_storm(make_segment, kills_target=600, budget_s=25, min_kills=150)


@pytest.mark.stress
@pytest.mark.timeout(3600)
@pytest.mark.skipif(not STRESS, reason="set ZIGGURAT_STRESS=1 (make stress)")
def test_kill_storm_stress(make_segment: MakeSegment) -> None:
    """G2/G3 at stress size: at least 10,000 random SIGKILLs of writers."""
    _kill_storm(make_segment, kills_target=10_000, budget_s=3000, min_kills=10_000)
