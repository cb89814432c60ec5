"""Unit tests of ``ziggurat.Segment``: the behaviours of the L2 API one at a time.

Guarantees touched here: G4 (bounded memory), G5 (clear errors), G6 (file mode 0600),
and the API contract of ``python/ziggurat/_native.pyi``.  Concurrency, crashes, corruption
and bad input have their own files.
"""

from __future__ import annotations

import os
import random
import stat
import threading
import time
from collections.abc import Callable

import pytest
from helpers_segment import (
    KiB,
    MiB,
    Segment,
    SegmentError,
    ZigguratError,
    distinct_tags,
    fork_child,
    reopen,
    run_forked,
    tag_collides,
    wait_child,
)

STAT_KEYS = (
    "hits", "misses", "sets", "deletes", "evictions", "expirations", "bytes_used",
    "bytes_capacity", "entries", "lock_repairs", "lock_timeouts", "shard_resets",
)  # fmt: skip

MakeSegment = Callable[..., Segment]


# --------------------------------------------------------------------------- file


def test_exception_hierarchy() -> None:
    """SegmentError and LockTimeout are ZigguratErrors (callers can catch one base class)."""
    from helpers_segment import LockTimeout

    assert issubclass(SegmentError, ZigguratError)
    assert issubclass(LockTimeout, ZigguratError)
    assert issubclass(ZigguratError, Exception)


def test_file_is_created_0600_in_directory(make_segment: MakeSegment, shm_dir: str) -> None:
    """G6: the segment file is created with mode 0600, even under umask 0, where asked."""
    old = os.umask(0)
    try:
        seg = make_segment(name="mode-check")
    finally:
        os.umask(old)
    st = os.stat(seg.path)
    assert stat.S_IMODE(st.st_mode) == 0o600, oct(st.st_mode)
    assert stat.S_ISREG(st.st_mode)
    assert st.st_uid == os.geteuid()
    assert os.path.dirname(seg.path) == shm_dir
    assert os.path.basename(seg.path).startswith("ziggurat.mode-check.v")
    assert seg.name == "mode-check"


def test_file_never_exceeds_size(make_segment: MakeSegment) -> None:
    """G4: the file (the whole L2 footprint) is no bigger than the size asked for."""
    size = 4 * MiB
    seg = make_segment(size)
    assert os.path.getsize(seg.path) <= size
    assert 0 < seg.size <= size
    stats = seg.stats()
    assert 0 < stats["bytes_capacity"] <= size


def test_properties(seg: Segment) -> None:
    """max_key_size and max_value_size are positive ints; a 4 MiB segment holds a 1 KiB value."""
    assert isinstance(seg.max_key_size, int)
    assert isinstance(seg.max_value_size, int)
    assert seg.max_key_size >= 250
    assert seg.max_value_size >= 1 * KiB
    assert seg.max_value_size < seg.size


def test_unlink_removes_file(make_segment: MakeSegment, shm_dir: str) -> None:
    """unlink() removes the file; the same name then creates a fresh, empty segment."""
    seg = make_segment(name="gone")
    seg.set("k", b"v")
    path = seg.path
    assert os.path.exists(path)
    seg.unlink()
    assert not os.path.exists(path)
    seg.close()
    fresh = make_segment(name="gone")
    assert fresh.get("k") is None
    assert os.path.exists(fresh.path)


def test_closed_segment_raises(make_segment: MakeSegment) -> None:
    """Every call on a closed handle raises SegmentError (or ValueError), never crashes."""
    seg = make_segment()
    seg.set("k", b"v")
    other = reopen(seg)
    seg.close()
    calls: dict[str, Callable[[], object]] = {
        "get": lambda: seg.get("k"),
        "set": lambda: seg.set("k", b"w"),
        "add": lambda: seg.add("k2", b"w"),
        "delete": lambda: seg.delete("k"),
        "invalidate_tag": lambda: seg.invalidate_tag("t"),
        "clear": lambda: seg.clear(),
        "stamp": lambda: seg.stamp("k"),
        "wait": lambda: seg.wait("k", 0, 0.01),
        "stats": lambda: seg.stats(),
        "verify": lambda: seg.verify(),
    }
    not_raising = []
    for name, call in calls.items():
        try:
            call()
        except (SegmentError, ValueError):
            continue
        not_raising.append(name)
    assert not_raising == [], f"on a closed segment these did not raise: {not_raising}"
    # The data is still there for other handles; nothing was written through the closed one.
    assert other.get("k") == b"v"
    assert other.get("k2") is None
    other.close()


def test_context_manager_closes(make_segment: MakeSegment) -> None:
    """``with Segment(...) as s`` returns the segment and closes it on exit."""
    seg = make_segment()
    with reopen(seg) as s:
        assert isinstance(s, Segment)
        s.set("k", b"v")
    with pytest.raises((SegmentError, ValueError)):
        s.get("k")
    assert seg.get("k") == b"v"


# --------------------------------------------------------------------------- sharing


def test_two_handles_same_process_share_data(make_segment: MakeSegment) -> None:
    """Opening the same name twice attaches to the same data, both ways."""
    a = make_segment(name="shared")
    b = make_segment(name="shared")
    assert a.path == b.path
    a.set("from-a", b"1")
    b.set("from-b", b"2")
    assert b.get("from-a") == b"1"
    assert a.get("from-b") == b"2"
    assert b.delete("from-a") is True
    assert a.get("from-a") is None
    a.close()
    assert b.get("from-b") == b"2"


def test_attach_with_other_size_uses_existing_file(make_segment: MakeSegment) -> None:
    """Attaching with a different size attaches to the existing file: data shared, file kept."""
    a = make_segment(4 * MiB, name="resized")
    a.set("k", b"original")
    file_size = os.path.getsize(a.path)
    for size in (8 * MiB, 2 * MiB):
        b = make_segment(size, name="resized")
        assert b.get("k") == b"original"
        b.set(f"from-{size}", b"x")
        assert a.get(f"from-{size}") == b"x"
        assert os.path.getsize(a.path) == file_size
        b.close()


def test_other_process_sees_writes(seg: Segment) -> None:
    """A write in one process is read in another, and the reverse."""
    seg.set("parent", b"p-value")

    def child() -> tuple[bytes | None, bool]:
        s = reopen(seg)
        got = s.get("parent")
        s.set("child", b"c-value")
        deleted = s.delete("parent")
        s.close()
        return got, deleted

    got, deleted = run_forked(child)
    assert got == b"p-value"
    assert deleted is True
    assert seg.get("child") == b"c-value"
    assert seg.get("parent") is None


# --------------------------------------------------------------------------- get/set


def test_set_get_roundtrip(seg: Segment) -> None:
    """A value set is read back byte for byte; an unknown key is a miss (None)."""
    assert seg.get("missing") is None
    value = bytes(range(256)) * 3
    seg.set("k", value)
    got = seg.get("k")
    assert got == value
    assert type(got) is bytes


def test_str_and_bytes_are_the_same_key(seg: Segment) -> None:
    """A str key is its UTF-8 bytes: "a" and b"a" (and "é" and its UTF-8) are one key."""
    seg.set("a", b"1")
    assert seg.get(b"a") == b"1"
    seg.set(b"a", b"2")
    assert seg.get("a") == b"2"
    seg.set("é日本", b"unicode")
    assert seg.get("é日本".encode()) == b"unicode"
    assert seg.get("é日本".encode("latin-1", "replace")) is None
    assert seg.stamp("a") == seg.stamp(b"a")
    assert seg.delete(b"a") is True
    assert seg.get("a") is None


def test_binary_keys_and_values(seg: Segment) -> None:
    """Keys and values may hold any bytes, NUL included; similar keys stay distinct."""
    keys = [b"\x00", b"\x00\x00", b"\xff" * 10, b"a\x00b", b"a\x00c", b"A", b"a"]
    for i, key in enumerate(keys):
        seg.set(key, bytes([i]) * (i + 1) + b"\x00")
    for i, key in enumerate(keys):
        assert seg.get(key) == bytes([i]) * (i + 1) + b"\x00"


def test_overwrite_longer_and_shorter(seg: Segment) -> None:
    """Overwriting with a longer then a shorter value always returns the latest one."""
    for n in (1, 10, 1000, 50_000, 3, 70_000, 1, 200):
        value = bytes([n % 256]) * n
        seg.set("k", value)
        assert seg.get("k") == value


def test_key_and_value_size_limits(seg: Segment) -> None:
    """A key of exactly max_key_size bytes and a value of max_value_size bytes are stored."""
    key = b"k" * seg.max_key_size
    seg.set(key, b"v")
    assert seg.get(key) == b"v"
    multibyte = "é" * (seg.max_key_size // 2)  # 2 UTF-8 bytes each: limit is in bytes
    seg.set(multibyte, b"m")
    assert seg.get(multibyte) == b"m"
    big = random.Random(1).randbytes(seg.max_value_size)
    seg.set("big", big)
    assert seg.get("big") == big


def test_any_size_up_to_max_always_fits(make_segment: MakeSegment) -> None:
    """G4 + set contract: on a small segment, sets of random sizes up to max_value_size
    never fail (eviction makes room), each is readable right after, and memory stays bounded.
    """
    size = 4 * MiB
    seg = make_segment(size)
    rng = random.Random(42)
    top = seg.max_value_size
    file_size = os.path.getsize(seg.path)
    for i in range(600):
        if i % 40 == 0:
            n = top
        elif i % 3 == 0:
            n = rng.randint(1, 64)
        else:
            n = min(top, int(2 ** rng.uniform(0, 21)) + 1)
        key = f"k{rng.randrange(300)}"
        value = rng.randbytes(n)
        seg.set(key, value, tags=["big"] if n > 100_000 else ())
        assert seg.get(key) == value, f"round {i}: value of {n} bytes not readable after set"
    stats = seg.stats()
    assert stats["evictions"] > 0
    assert stats["bytes_used"] <= stats["bytes_capacity"] <= size
    assert os.path.getsize(seg.path) == file_size
    report = seg.verify()
    assert report["ok"], report


# --------------------------------------------------------------------------- delete/add/clear


def test_delete_returns_presence(seg: Segment) -> None:
    """delete() returns True only if the key was present, and the key is then a miss."""
    assert seg.delete("k") is False
    seg.set("k", b"v")
    assert seg.delete("k") is True
    assert seg.get("k") is None
    assert seg.delete("k") is False
    seg.set("k", b"again")
    assert seg.get("k") == b"again"


def test_add_only_if_absent(seg: Segment) -> None:
    """add() stores and returns True when absent; returns False and keeps the value otherwise."""
    assert seg.add("k", b"first") is True
    assert seg.get("k") == b"first"
    assert seg.add("k", b"second") is False
    assert seg.get("k") == b"first"
    assert seg.add(b"k", b"third") is False
    seg.delete("k")
    assert seg.add("k", b"fourth", tags=["t"]) is True
    assert seg.get("k") == b"fourth"
    seg.invalidate_tag("t")
    assert seg.add("k", b"fifth") is True
    assert seg.get("k") == b"fifth"


def test_clear_makes_everything_a_miss(seg: Segment) -> None:
    """clear() makes every entry a miss; later sets work normally."""
    for i in range(100):
        seg.set(f"k{i}", b"v%d" % i, tags=["t"] if i % 2 else ())
    other = reopen(seg)
    seg.clear()
    assert all(seg.get(f"k{i}") is None for i in range(100))
    assert all(other.get(f"k{i}") is None for i in range(100))
    assert seg.add("k1", b"new") is True
    seg.set("k2", b"new2")
    assert other.get("k1") == b"new"
    assert other.get("k2") == b"new2"
    assert seg.delete("k3") is False
    other.close()


# --------------------------------------------------------------------------- ttl


def test_ttl_expires(seg: Segment) -> None:
    """An entry with ttl=0.05 is a miss 0.1 s later; ttl=None and long TTLs stay."""
    t0 = time.monotonic()
    seg.set("short", b"s", ttl=0.05)
    got = seg.get("short")
    if time.monotonic() - t0 < 0.04:  # not descheduled past the TTL on a loaded machine
        assert got == b"s"
    seg.set("short-int", b"i", ttl=1)
    seg.set("forever", b"f", ttl=None)
    seg.set("long", b"l", ttl=3600.5)
    time.sleep(0.1)
    assert seg.get("short") is None
    assert seg.get("short-int") == b"i"
    assert seg.get("forever") == b"f"
    assert seg.get("long") == b"l"
    assert reopen(seg).get("short") is None


def test_add_over_expired_entry(seg: Segment) -> None:
    """add() succeeds over an expired entry (it counts as absent); delete of it is False."""
    t0 = time.monotonic()
    seg.set("live", b"old", ttl=0.05)
    added = seg.add("live", b"new")
    if time.monotonic() - t0 < 0.04:  # not descheduled past the TTL on a loaded machine
        assert added is False
    seg.set("k", b"old", ttl=0.05)
    seg.set("j", b"old", ttl=0.05)
    time.sleep(0.1)
    assert seg.add("k", b"new") is True
    assert seg.get("k") == b"new"
    assert seg.delete("j") is False


def test_set_replaces_ttl(seg: Segment) -> None:
    """A set without ttl replaces an entry that had a short ttl: the new one does not expire."""
    seg.set("k", b"old", ttl=0.05)
    seg.set("k", b"new")
    time.sleep(0.1)
    assert seg.get("k") == b"new"


# --------------------------------------------------------------------------- tags


def test_invalidate_tag(seg: Segment) -> None:
    """invalidate_tag(t) makes every entry carrying t a miss; entries without t stay.

    The tag names are picked so that no two share a cell of the hashed tag table (two tags
    that do may over-invalidate each other: see ``tag_collides``).
    """
    t1, t2, t3, unused = distinct_tags(seg, 4)
    seg.set("a", b"1", tags=[t1])
    seg.set("b", b"2", tags=[t1, t2])
    seg.set("c", b"3", tags=[t2])
    seg.set("d", b"4")
    seg.set("e", b"5", tags=(t3, t1))
    seg.invalidate_tag(t1)
    assert seg.get("a") is None
    assert seg.get("b") is None
    assert seg.get("e") is None
    assert seg.get("c") == b"3"
    assert seg.get("d") == b"4"
    seg.invalidate_tag(unused)
    assert seg.get("c") == b"3"
    # An entry set after the invalidation carries the new version of the tag: it is visible.
    seg.set("a", b"again", tags=[t1])
    assert seg.get("a") == b"again"
    seg.invalidate_tag(t2)
    assert seg.get("c") is None
    assert seg.get("a") == b"again"


def test_tags_accept_any_iterable_and_eight_tags(seg: Segment) -> None:
    """tags may be a list, tuple, set, generator or dict keys; 8 tags per entry are allowed."""
    eight = [f"tag-{i}" for i in range(8)]
    # "uni" must survive invalidate_tag("tag-7") unless its tags share tag-7's hashed cell.
    collide = tag_collides(seg, "ünï ⊂ode", "tag-7") or tag_collides(seg, "tag-0", "tag-7")
    seg.set("list", b"1", tags=eight)
    seg.set("tuple", b"2", tags=tuple(eight))
    seg.set("set", b"3", tags={"x", "tag-7"})
    seg.set("gen", b"4", tags=(t for t in ["y", "tag-7"]))
    seg.set("dict", b"5", tags=dict.fromkeys(["z", "tag-7"]))
    seg.set("uni", b"6", tags=["ünï ⊂ode", "tag-0"])
    for key in ("list", "tuple", "set", "gen", "dict"):
        assert seg.get(key) is not None
    seg.invalidate_tag("tag-7")
    for key in ("list", "tuple", "set", "gen", "dict"):
        assert seg.get(key) is None, key
    assert seg.get("uni") == (None if collide else b"6")
    seg.set("uni", b"6", tags=["ünï ⊂ode", "tag-0"])
    seg.invalidate_tag("ünï ⊂ode")
    assert seg.get("uni") is None


def test_invalidate_tag_seen_by_other_process(seg: Segment) -> None:
    """A tag invalidated in another process makes the entries a miss here too."""
    seg.set("a", b"1", tags=["shared-tag"])
    seg.set("b", b"2")

    def child() -> None:
        s = reopen(seg)
        s.invalidate_tag("shared-tag")
        s.close()

    run_forked(child)
    assert seg.get("a") is None
    assert seg.get("b") == b"2"


# --------------------------------------------------------------------------- stamps and wait


def test_stamp_is_even_int_and_moves_by_two(seg: Segment) -> None:
    """stamp() is an int, even at rest, and grows by 2 with each set and delete of the key."""
    s0 = seg.stamp("k")
    assert isinstance(s0, int)
    assert s0 % 2 == 0
    seg.set("k", b"1")
    s1 = seg.stamp("k")
    assert s1 == s0 + 2
    seg.set("k", b"2")
    assert seg.stamp(b"k") == s1 + 2
    assert seg.delete("k") is True
    assert seg.stamp("k") == s1 + 4
    assert seg.add("k", b"3") is True
    assert seg.stamp("k") == s1 + 6
    assert reopen(seg).stamp("k") == s1 + 6


def test_wait_returns_at_once_when_stamp_already_differs(seg: Segment) -> None:
    """wait() with a stale stamp returns True without waiting."""
    old = seg.stamp("k")
    seg.set("k", b"v")
    t0 = time.monotonic()
    assert seg.wait("k", old, 5.0) is True
    assert time.monotonic() - t0 < 1.0


def test_wait_times_out(seg: Segment) -> None:
    """wait() returns False after about `timeout` when nothing changes."""
    seg.set("k", b"v")
    t0 = time.monotonic()
    assert seg.wait("k", seg.stamp("k"), 0.2) is False
    elapsed = time.monotonic() - t0
    assert 0.15 <= elapsed < 1.5, elapsed


def test_wait_woken_by_other_process(seg: Segment) -> None:
    """wait() is woken by a set in another process well before its timeout."""
    seg.set("k", b"old")
    stamp = seg.stamp("k")

    def child() -> None:
        s = reopen(seg)
        time.sleep(0.3)
        s.set("k", b"new")
        s.close()

    pid = fork_child(child)
    t0 = time.monotonic()
    changed = seg.wait("k", stamp, 10.0)
    elapsed = time.monotonic() - t0
    assert wait_child(pid, 10) == 0
    assert changed is True
    assert 0.2 <= elapsed < 2.0, elapsed
    assert seg.get("k") == b"new"
    assert seg.stamp("k") == stamp + 2


def test_wait_releases_the_gil(seg: Segment) -> None:
    """wait() releases the GIL: another thread of the process runs and its set wakes it."""
    seg.set("k", b"old")
    stamp = seg.stamp("k")
    result: list[object] = []

    def waiter() -> None:
        t0 = time.monotonic()
        result.append(seg.wait("k", stamp, 5.0))
        result.append(time.monotonic() - t0)

    thread = threading.Thread(target=waiter)
    thread.start()
    time.sleep(0.2)
    t0 = time.monotonic()
    seg.set("k", b"new")  # needs the GIL: blocks until wait() returns if wait holds it
    set_took = time.monotonic() - t0
    thread.join(10)
    assert not thread.is_alive()
    assert result[0] is True
    assert set_took < 1.0, set_took
    assert result[1] < 2.0, result[1]


# --------------------------------------------------------------------------- stats and verify


def test_stats_keys_and_counters(make_segment: MakeSegment) -> None:
    """stats() has every documented counter as an int, and they count this process's calls."""
    seg = make_segment()
    s0 = seg.stats()
    for key in STAT_KEYS:
        assert key in s0, key
        assert isinstance(s0[key], int), key
    assert s0["entries"] == 0
    assert s0["sets"] == 0
    assert s0["lock_repairs"] == s0["lock_timeouts"] == s0["shard_resets"] == 0
    for i in range(10):
        seg.set(f"k{i}", b"x" * 100)
    assert seg.get("k1") == b"x" * 100
    assert seg.get("k2") == b"x" * 100
    assert seg.get("nope") is None
    assert seg.delete("k3") is True
    s1 = seg.stats()
    assert s1["sets"] - s0["sets"] == 10
    assert s1["hits"] - s0["hits"] == 2
    assert s1["misses"] - s0["misses"] == 1
    assert s1["deletes"] - s0["deletes"] == 1
    assert s1["entries"] == 9
    assert s1["bytes_used"] > s0["bytes_used"]
    assert s1["bytes_used"] <= s1["bytes_capacity"]
    assert s1["evictions"] == 0


def test_stats_are_host_wide(seg: Segment) -> None:
    """Counters live in the segment: another process's calls show in this one's stats()
    once it closed (hits/misses may be batched per process until stats()/close()).
    """
    seg.set("present", b"v")
    s0 = seg.stats()

    def child() -> None:
        s = reopen(seg)
        for i in range(40):
            s.set(f"c{i}", b"v")
        for _ in range(25):
            assert s.get("present") == b"v"
        for i in range(15):
            assert s.get(f"absent{i}") is None
        for i in range(5):
            assert s.delete(f"c{i}") is True
        s.close()

    run_forked(child)
    s1 = seg.stats()
    assert s1["sets"] - s0["sets"] == 40
    assert s1["hits"] - s0["hits"] == 25
    assert s1["misses"] - s0["misses"] == 15
    assert s1["deletes"] - s0["deletes"] == 5
    assert s1["entries"] - s0["entries"] == 35


def test_verify_clean_after_normal_use(make_segment: MakeSegment) -> None:
    """verify() reports ok, no problems, nothing repaired and the live entry count."""
    seg = make_segment()
    for i in range(200):
        seg.set(f"k{i}", b"v" * (i + 1), tags=[f"t{i % 5}"], ttl=None if i % 2 else 600)
    for i in range(0, 200, 4):
        seg.delete(f"k{i}")
    for i in range(1, 200, 4):
        seg.set(f"k{i}", b"w" * (3 * i + 1))
    report = seg.verify()
    assert set(report) >= {"ok", "problems", "repaired", "entries"}
    assert report["ok"] is True
    assert report["problems"] == []
    assert report["repaired"] == 0
    assert report["entries"] == 150
    assert seg.verify(repair=False)["ok"] is True
