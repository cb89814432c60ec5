"""docs/format.md is exact: an independent reader written from it agrees with the library.

``format_reader.py`` reads segment files from the document alone (no code of the library).
These tests write through ``ziggurat.Segment`` and ``ziggurat.Cache`` and check that the
reader finds the same values, misses, stamps, tag cells, records and leases:

* the header, the geometry and the hashing (stamps, tag cells) of fresh segments;
* a static workload (str and bytes keys, values of 1 byte to 6 KiB, TTLs, expired
  entries, tags, invalidations, deletes, overwrites, small segments whose rings wrap and
  evict): every key read by both, the rings walked from tail to head, every slot checked;
* a copy of a segment with invalid words, slots and positions written into it: the reader
  and a read-only ``Segment`` on the copy agree on every key;
* a writer process churning a segment while this process reads: every value the reader
  returns is one the writer wrote for that key, whole, and never older than one seen before;
* values, counters, TTLs, namespaces, versions, cached misses and load leases of ``Cache``.
"""

from __future__ import annotations

import math
import mmap
import multiprocessing
import os
import random
import shutil
import threading
import time
import zlib
from collections.abc import Callable, Iterator
from multiprocessing.connection import Connection
from typing import Any

import cache_helpers
import pytest
from cache_helpers import new_name, open_like
from format_reader import (
    KIND_COUNTER,
    KIND_MISS,
    KIND_VALUE,
    MISSING,
    CacheEntry,
    CacheReader,
    FormatError,
    SegmentReader,
    SlotRef,
    check_byte,
    decode_word0,
    monotonic_coarse_ms,
    segment_path,
)
from helpers_segment import MiB, Segment
from ziggurat import Cache

cache_dir = cache_helpers.cache_dir
make_cache = cache_helpers.make_cache

MakeSegment = Callable[..., Segment]
CTX = multiprocessing.get_context("fork")

pytestmark = pytest.mark.timeout(120)

# Segments of the static check: (size, Segment options). The 1 MiB one has a single shard
# whose rings wrap many times; the 16 MiB one has 4 shards and a larger index.
CONFIGS = [
    pytest.param(1 * MiB, {}, id="1MiB-1shard"),
    pytest.param(16 * MiB, {"shards": 4, "avg_item_size": 512}, id="16MiB-4shards"),
]

VALUE_SIZES = (1, 2, 7, 8, 9, 31, 100, 255, 256, 1000, 2048, 4000, 6144)
TAGS = [f"tag-{i}" for i in range(12)]


@pytest.fixture
def reader_of() -> Iterator[Callable[[str], SegmentReader]]:
    """Factory of readers on a path; every reader is closed at the end of the test."""
    opened: list[SegmentReader] = []

    def make(path: str) -> SegmentReader:
        reader = SegmentReader(path)
        opened.append(reader)
        return reader

    yield make
    for reader in opened:
        reader.close()


def mixed_keys(n: int, prefix: str) -> list[str | bytes]:
    """``n`` keys, str (some non-ASCII) and bytes (some not UTF-8), of 1 to ~300 bytes."""
    keys: list[str | bytes] = []
    for i in range(n):
        if i % 4 == 0:
            keys.append(b"%s-b-%d-\xff\x00" % (prefix.encode(), i))
        elif i % 4 == 1:
            keys.append(f"{prefix}-é-{i}")
        elif i % 97 == 2:
            keys.append(f"{prefix}-long-{i}-" + "x" * 280)
        else:
            keys.append(f"{prefix}-{i}")
    return keys


# ---------------------------------------------------------------------- header, hashing


def test_header_and_geometry(make_segment: MakeSegment, shm_dir: str) -> None:
    """§File, §Global header: the name, the fields the API reports, and the refusals."""
    seg = make_segment(16 * MiB, shards=4)
    assert seg.path == segment_path(seg.name, shm_dir)
    reader = SegmentReader.open(seg.name, shm_dir)
    try:
        g = reader.geometry
        assert g.nshards == 4
        assert g.file_size == seg.size == os.path.getsize(seg.path)
        assert g.max_key == seg.max_key_size == 4096
        assert g.max_value == seg.max_value_size
        epoch = reader.epoch
        clears = reader.clears
        seg.clear()
        assert reader.epoch == epoch + 2  # before the shards are emptied and after
        assert reader.clears == clears + 1
        invalidations = reader.tag_invalidations
        seg.invalidate_tag("a")
        seg.invalidate_tag("b")
        assert reader.tag_invalidations == invalidations + 2
        assert reader.app_word(3) == seg.app_load(3) == 0
    finally:
        reader.close()

    def damaged(offset: int, data: bytes) -> str:
        path = os.path.join(shm_dir, f"damaged-{offset}")
        shutil.copyfile(seg.path, path)
        with open(path, "r+b") as f:
            f.seek(offset)
            f.write(data)
        return path

    SegmentReader(damaged(0, b"")).close()  # an intact copy is accepted
    for offset, data, why in [
        (0, b"ZIGGURAX", "magic"),
        (8, b"\x01", "version"),
        (72, b"\x01", "checksum"),  # the seed, covered by the checksum
        (256, b"\x49\x54\x45\x52", "READY"),  # RETIRED
    ]:
        with pytest.raises(FormatError, match=why):
            SegmentReader(damaged(offset, data))
    short = damaged(0, b"")
    os.truncate(short, seg.size - 4096)
    with pytest.raises(FormatError, match="file's size"):
        SegmentReader(short)


@pytest.mark.parametrize(("size", "options"), CONFIGS)
def test_hashing_stamps_and_tag_cells(
    make_segment: MakeSegment,
    reader_of: Callable[[str], SegmentReader],
    size: int,
    options: dict[str, Any],
) -> None:
    """§Hashing: the stamp index of every key and the cell of every tag are the library's."""
    seg = make_segment(size, **options)
    reader = reader_of(seg.path)
    rng = random.Random(7)
    keys = mixed_keys(1500, "h")
    for key in keys:  # a different number of writes per key: stamps differ
        for _ in range(rng.randrange(4)):
            seg.delete(key)
    for key in keys:
        assert reader.stamp(key) == seg.stamp(key), key
    tags = [f"t{i}" for i in range(600)] + ["é", "\x00ns:posts", "x" * 500]
    for i, tag in enumerate(tags[:50]):
        for _ in range(i % 5):
            seg.invalidate_tag(tag)
    for tag in tags:
        assert reader.tag_version(tag) == seg.tag_version(tag), tag


# ---------------------------------------------------------------------- static workload


def write_round(seg: Segment, rng: random.Random, keys: list[str | bytes], n: int) -> None:
    """``n`` random writes: sets (TTLs long or already over, tags), deletes, invalidations."""
    for _ in range(n):
        key = rng.choice(keys)
        r = rng.random()
        if r < 0.1:
            seg.delete(key)
            continue
        if r < 0.11:
            seg.invalidate_tag(rng.choice(TAGS))
            continue
        ttl = rng.choice((None, None, None, 3600.0, 0.001, 0.003))
        tags = rng.sample(TAGS, rng.choice((0, 0, 0, 1, 2, 8)))
        value = rng.randbytes(rng.choice(VALUE_SIZES))
        seg.set(key, value, ttl=ttl, tags=tags)


def check_rings_and_slots(reader: SegmentReader) -> tuple[int, int, bool, int]:
    """§Rings and records, §Index: each ring walks from tail to head, and every slot points
    at the start of a record of its ring whose key hashes to the slot's shard, pair and
    fingerprint.  Returns (records, PAD records, whether some ring has wrapped, records
    whose expiry has passed)."""
    g = reader.geometry
    now = monotonic_coarse_ms()
    records = pads = expired = 0
    wrapped = False
    for shard in range(g.nshards):
        starts: list[dict[int, bytes]] = []
        for ring, cap in ((0, g.small_cap), (1, g.main_cap)):
            walk = reader.walk_ring(shard, ring)
            records += len(walk)
            pads += sum(e.pad for e in walk)
            expired += sum(1 for e in walk if e.expiry_ms and e.expiry_ms <= now)
            wrapped = wrapped or reader.ring_positions(shard, ring)[1] > cap
            starts.append({e.off: e.key for e in walk if not e.pad})
        first_slot = g.shards_off + shard * g.shard_stride + g.index_rel
        for slot_index, word in reader.slots(shard):
            assert word >> 63 == 1
            ring = (word >> 44) & 1
            off = (word & ((1 << 44) - 1)) * 8
            assert off in starts[ring], f"slot {word:#x} points at no record start"
            kh = reader.hash_key(starts[ring][off])
            assert kh.shard == shard
            assert (slot_index - first_slot) // 128 == kh.pair
            assert (word >> 47) & 0xFFFF == kh.fingerprint
    return records, pads, wrapped, expired


@pytest.mark.parametrize(("size", "options"), CONFIGS)
def test_static_reads_agree(
    make_segment: MakeSegment,
    reader_of: Callable[[str], SegmentReader],
    size: int,
    options: dict[str, Any],
) -> None:
    """Every key, after each round of writes, reads the same through the reader and
    ``Segment.get`` (hit value or miss); hits also agree with ``Segment.inspect``."""
    seg = make_segment(size, **options)
    reader = reader_of(seg.path)
    rng = random.Random(size)
    keys = mixed_keys(3000, "s")
    never_written = mixed_keys(200, "absent")
    rounds = 5
    lookups = hits = 0
    for _round in range(rounds):
        write_round(seg, rng, keys, 4000)
        time.sleep(0.02)  # TTLs of 1-3 ms are over: those keys are misses
        for key in keys + never_written:
            mine = reader.lookup(key)
            theirs = seg.get(key)
            lookups += 1
            assert (mine.value if mine else None) == theirs, key
            if mine is None:
                continue
            hits += 1
            record = seg.inspect(key)
            assert record is not None
            assert mine.expiry_ms == record["expiry_ms"]
            assert [t[:2] for t in record["tags"]] == list(mine.tags)
            assert mine.record_bytes == record["record_bytes"]
        # Entries whose TTL is over are still in the rings, and read as misses.
        records, pads, wrapped, expired = check_rings_and_slots(reader)
    stats = seg.stats()
    assert reader.gave_up == 0
    assert lookups == rounds * 3200
    assert hits > 400
    assert expired > 0
    assert records > 0
    if size == 1 * MiB:  # the small segment evicts, pads and wraps
        assert stats["evictions"] > 1000
        assert pads > 0
        assert wrapped


# ---------------------------------------------------------------------- invalid words


def word0(val_len: int, key_len: int, ntags: int, flags: int) -> int:
    """§Rings and records: a word0 with its check byte."""
    check = check_byte(val_len, key_len, ntags, flags)
    return val_len | key_len << 32 | ntags << 48 | flags << 52 | check << 56


def test_invalid_words_agree(
    make_segment: MakeSegment, shm_dir: str, reader_of: Callable[[str], SegmentReader]
) -> None:
    """§Reading (lock-free), steps 1 to 5, on a copy of a segment whose words were edited
    one key at a time: the reader and a read-only ``Segment`` on the copy agree on every key
    (a miss for each invalid record, slot or position; a hit where the edit is harmless)."""
    seg = make_segment(1 * MiB)
    keys = [f"c-{i}" for i in range(16)]
    for key in keys:
        seg.set(key, b"value of " + key.encode(), tags=["x", "y"], ttl=3600)
    seg.set("c-main", b"M" * 30000)  # above small_cap / 4: the main ring
    seg.set("c-last", b"last")  # the small ring's newest record
    copy_name = new_name("copy")
    shutil.copyfile(seg.path, segment_path(copy_name, shm_dir))
    original = reader_of(seg.path)
    g = original.geometry
    refs = {key: original.locate(key) for key in [*keys, "c-main", "c-last"]}
    expected: dict[str, bytes | None] = {key: None for key in refs}
    with open(segment_path(copy_name, shm_dir), "r+b") as f, mmap.mmap(f.fileno(), 0) as mm:

        def load(off: int) -> int:
            return int.from_bytes(mm[off : off + 8], "little")

        def store(off: int, value: int) -> None:
            mm[off : off + 8] = value.to_bytes(8, "little")

        def ref(key: str) -> SlotRef:
            found = refs[key]
            assert found is not None, key
            return found

        def fields(key: str) -> tuple[int, int, int, int]:
            decoded = decode_word0(load(ref(key).record))
            assert decoded is not None
            return decoded

        store(ref("c-0").record, load(ref("c-0").record) ^ 1 << 56)  # check byte
        val_len, key_len, ntags, flags = fields("c-1")
        store(ref("c-1").record, word0(val_len, key_len, ntags, flags | 8))  # unknown flag
        val_len, key_len, ntags, flags = fields("c-2")
        store(ref("c-2").record, word0(val_len, key_len, 9, flags))  # ntags > 8
        store(ref("c-3").record, word0(16, 0, 0, 2))  # a PAD
        c4 = ref("c-4")
        store(c4.slot, c4.word & ~((1 << 44) - 1) | c4.cap // 8)  # offset = cap
        tag = ref("c-5").record + 16
        store(tag, load(tag) & ~0xFFFFFFFF | g.ntags)  # tag cell ≥ ntags
        store(ref("c-6").record + 8, 1)  # expired long ago
        store(ref("c-7").slot, ref("c-7").word ^ 1 << 50)  # another fingerprint
        mm[ref("c-8").record + 32] ^= 1  # a key byte
        store(ref("c-9").slot, ref("c-9").word | 3 << 45)  # frequency 3: still a hit
        expected["c-9"] = b"value of c-9"
        mm[ref("c-10").record + 32 + 4] ^= 0x20  # a value byte: read as written
        expected["c-10"] = b"Value of c-10"
        store(ref("c-11").record + 8, 0)  # expiry flag with deadline 0: no deadline
        expected["c-11"] = b"value of c-11"
        val_len, key_len, ntags, flags = fields("c-12")
        store(ref("c-12").record, word0(g.small_cap, key_len, ntags, flags))  # leaves the ring
        for key in ("c-13", "c-14", "c-15"):
            expected[key] = b"value of " + key.encode()
        main = ref("c-main")
        store(main.tail, load(main.tail) + 8)  # the tail passed the record
        last = ref("c-last")
        store(last.head, last.record - (g.shards_off + g.small_rel))  # not yet published
    reader = reader_of(segment_path(copy_name, shm_dir))
    library = Segment(copy_name, directory=shm_dir, read_only=True)
    try:
        for key, value in expected.items():
            assert reader.get(key) == library.get(key) == value, key
    finally:
        library.close()
    assert reader.gave_up == 1  # c-main: the tail check fails on every try


# ---------------------------------------------------------------------- concurrent writer


def versioned_value(key: bytes, version: int, pad: int) -> bytes:
    """``key|version|`` + ``pad`` bytes derived from both + CRC32: a torn, partial or
    misplaced copy is detectable."""
    body = b"%s|%d|" % (key, version) + bytes([(version + pad) % 251]) * pad
    return body + zlib.crc32(body).to_bytes(4, "little")


def parse_versioned(key: bytes, value: bytes) -> int:
    """The version of an intact value of ``key``; AssertionError otherwise."""
    body, crc = value[:-4], value[-4:]
    assert zlib.crc32(body) == int.from_bytes(crc, "little"), f"torn value of {key!r}"
    name, version, pad = body.split(b"|", 2)
    assert name == key, f"value of {name!r} read under {key!r}"
    assert pad == bytes([(int(version) + len(pad)) % 251]) * len(pad), "bad padding"
    return int(version)


WATCHED = [b"w-%02d" % i for i in range(48)]


def writer_main(name: str, directory: str, seconds: float, conn: Connection) -> None:
    """The writer process: overwrites and deletes the watched keys (versions only grow),
    sometimes with a short TTL or a tag it then invalidates, and writes filler keys that
    push records through both rings.  Sends the last version it wrote per key."""
    seg = Segment(name, directory=directory)
    rng = random.Random(os.getpid())
    version = 0
    last: dict[bytes, int] = {}
    deadline = time.monotonic() + seconds
    filler = 0
    while time.monotonic() < deadline:
        for _ in range(50):
            key = rng.choice(WATCHED)
            version += 1
            r = rng.random()
            if r < 0.1:
                seg.delete(key)
            elif r < 0.15:
                seg.invalidate_tag("w-tag")
            else:
                value = versioned_value(key, version, rng.choice((0, 3, 40, 700, 3000, 9000)))
                ttl = 0.002 if r < 0.2 else None
                tags = ["w-tag"] if r > 0.9 else []
                seg.set(key, value, ttl=ttl, tags=tags)
                last[key] = version
            filler += 1
            seg.set(b"filler-%d" % filler, b"f" * rng.choice((100, 2000, 8000)))
    seg.close()
    conn.send(last)
    conn.close()


@pytest.mark.parametrize(("size", "options"), CONFIGS)
def test_concurrent_writer(
    make_segment: MakeSegment, shm_dir: str, size: int, options: dict[str, Any]
) -> None:
    """While a writer process churns a segment, every value the reader returns is a whole
    value of that key, and versions seen per key never go back; Segment.get, read right
    after, returns a value at least as new."""
    seg = make_segment(size, **options)
    reader = SegmentReader(seg.path)
    recv, send = CTX.Pipe(duplex=False)
    seconds = 2.5
    proc = CTX.Process(target=writer_main, args=(seg.name, shm_dir, seconds, send), daemon=True)
    proc.start()
    send.close()
    seen: dict[bytes, int] = {}
    lookups = hits = 0
    rng = random.Random(3)
    try:
        started = time.monotonic()
        while proc.is_alive() and time.monotonic() - started < seconds + 30:
            key = rng.choice(WATCHED)
            value = reader.get(key)
            lookups += 1
            if value is None:
                continue
            hits += 1
            version = parse_versioned(key, value)
            assert version >= seen.get(key, 0), f"{key!r} went back to version {version}"
            seen[key] = version
            if lookups % 8 == 0:
                theirs = seg.get(key)
                if theirs is not None:
                    assert parse_versioned(key, theirs) >= version
        assert recv.poll(30), "the writer sent nothing"
        last: dict[bytes, int] = recv.recv()
        proc.join(10)
        assert proc.exitcode == 0
        # Quiet now: the reader and the library agree on every key.
        for key in WATCHED:
            mine = reader.get(key)
            assert mine == seg.get(key)
            if mine is not None:
                assert parse_versioned(key, mine) == last[key]
    finally:
        if proc.is_alive():
            proc.kill()
            proc.join(5)
        recv.close()
        reader.close()
    assert lookups > 2000, lookups
    assert hits > lookups // 10, (hits, lookups)
    assert seg.stats()["evictions"] > 100


# ---------------------------------------------------------------------- Cache


def assert_same(reader: CacheReader, cache: Cache, other: Cache, key: str | bytes) -> Any:
    """The reader's decoded value equals what ``cache`` and ``other`` (no L1) return."""
    sentinel = object()
    mine = reader.get(key)
    theirs = cache.get(key, sentinel)
    below = other.get(key, sentinel)
    if mine is MISSING:
        assert theirs is sentinel, key
        assert below is sentinel, key
    else:
        assert mine == theirs, key
        assert type(mine) is type(theirs), key
        assert below == mine, key
    return mine


def test_cache_values(make_cache: Callable[..., Cache], cache_dir: str) -> None:
    """§Values written by `Cache`: kinds 1 (JSON and pickle) and 3, the trailer's soft
    deadline and TTL, the record's expiry past it (stale_ttl)."""
    cache = make_cache(ttl=300, stale_ttl=600)
    other = open_like(cache, l1_items=0)
    reader = CacheReader(cache.name, cache_dir)
    try:
        values: dict[str | bytes, Any] = {
            "dict": {"a": [1, 2, {"b": None}], "é": "ü"},
            "str": "hello",
            "empty": "",
            b"bytes-key": [1.5, True, False],
            "float": 2.25,
            "bool": True,  # an int subclass, yet not a counter
            "none": None,
            "big": "x" * 5000,
            "int": 42,
            "neg-int": -(2**63),
            "huge-int": 2**70,  # outside i64: not a counter
            "tuple": (1, "two"),
            "set": {1, 2, 3},
            "bytes": b"\x00\x01",
        }
        for key, value in values.items():
            cache.set(key, value)
        for key, value in values.items():
            assert assert_same(reader, cache, other, key) == value
        kinds = {k: reader.entry(k).kind for k in values}  # type: ignore[union-attr]
        assert kinds["int"] == kinds["neg-int"] == KIND_COUNTER
        assert kinds["dict"] == kinds["tuple"] == kinds["huge-int"] == kinds["bool"] == KIND_VALUE
        assert reader.entry("dict").payload[:1] == b"{"  # type: ignore[union-attr]
        assert reader.entry("tuple").payload[:1] == b"\x80"  # type: ignore[union-attr]

        # incr: kind 3, in place; the record keeps its expiry.
        assert cache.incr("n", default=0) == 1
        before = reader.main.lookup("n")
        for _ in range(9):
            cache.incr("n")
        other.incr("n", 5)
        assert assert_same(reader, cache, other, "n") == 15
        after = reader.main.lookup("n")
        assert before is not None and after is not None
        assert after.expiry_ms == before.expiry_ms

        # The trailer: TTL in ms, soft deadline about now + TTL, record expiry stale_ttl later.
        now = monotonic_coarse_ms()
        cache.set("ttl", "v", ttl=120)
        entry = reader.entry("ttl")
        record = reader.main.lookup("ttl")
        assert entry is not None and record is not None
        assert entry.ttl_ms == 120_000
        assert now + 120_000 <= entry.soft_deadline_ms <= monotonic_coarse_ms() + 120_000
        assert record.expiry_ms == entry.soft_deadline_ms + 600_000

        # Never expires: soft deadline 0, TTL 0, no record expiry.
        cache.set("forever", {"x": 1}, ttl=math.inf)
        entry = reader.entry("forever")
        record = reader.main.lookup("forever")
        assert entry is not None and record is not None
        assert (entry.soft_deadline_ms, entry.ttl_ms, record.expiry_ms) == (0, 0, 0)

        # Past its soft deadline: a miss for get, while the record stays (stale_ttl).
        # Long enough to be read at once on a loaded machine.
        cache.set("short", "s", ttl=0.4)
        cache.set(b"short-int", 7, ttl=0.4)
        assert assert_same(reader, cache, other, "short") == "s"
        time.sleep(0.5)
        for key in ("short", b"short-int"):
            assert assert_same(reader, cache, other, key) is MISSING
            stale = reader.entry(key)
            assert stale is not None and not stale.fresh()

        # touch: a new soft deadline and record expiry, on a fresh value only.
        assert not cache.touch("short", ttl=60)
        cache.set("touched", "t", ttl=60, tags=["t0"])
        assert cache.touch("touched", ttl=3600)
        entry = reader.entry("touched")
        record = reader.main.lookup("touched")
        assert entry is not None and record is not None
        assert entry.ttl_ms == 3_600_000
        assert record.expiry_ms == entry.soft_deadline_ms + 600_000
        assert record.tags == (reader.main.tag_version("t0"),)
        assert assert_same(reader, cache, other, "touched") == "t"
        cache.delete("dict")
        assert assert_same(reader, cache, other, "dict") is MISSING

        # Tags: invalidated entries are misses for both.
        cache.set("tagged", [1], tags=["t1", "t2"])
        assert assert_same(reader, cache, other, "tagged") == [1]
        cache.invalidate_tags("t2")
        assert assert_same(reader, cache, other, "tagged") is MISSING
    finally:
        other.close()
        reader.close()


def test_cache_namespace_and_version(make_cache: Callable[..., Cache], cache_dir: str) -> None:
    """§Values written by `Cache`: namespaces (key ``n:k``, tag ``\\x00ns:n``) and the
    segments of a ``version=`` cache (``<name>.ver-<v>``)."""
    name = new_name()
    cache = make_cache(name)
    versioned = make_cache(name, version="v2")
    reader = CacheReader(name, cache_dir)
    vreader = CacheReader(name, cache_dir, version="v2")
    other = open_like(cache, l1_items=0)
    try:
        posts = cache.namespace("posts")
        posts.set("1", {"title": "hello"})
        posts.set(b"2", "bytes key")
        posts.incr("views", default=0)
        cache.set("posts:3", "not through the namespace")
        key1 = reader.namespace_key("posts", "1")
        key2 = reader.namespace_key("posts", b"2")
        assert (key1, key2) == ("posts:1", b"posts:2")
        assert assert_same(reader, cache, other, key1) == {"title": "hello"}
        assert assert_same(reader, cache, other, key2) == "bytes key"
        assert assert_same(reader, cache, other, "posts:views") == 1
        cell, version = reader.main.tag_version(CacheReader.namespace_tag("posts"))
        for key in (key1, key2, "posts:views"):
            record = reader.main.lookup(key)
            assert record is not None and (cell, version) in record.tags
        posts.clear()
        assert reader.main.tag_version(CacheReader.namespace_tag("posts")) == (cell, version + 1)
        for key in (key1, key2, "posts:views"):
            assert assert_same(reader, cache, other, key) is MISSING
        assert assert_same(reader, cache, other, "posts:3") == "not through the namespace"

        versioned.set("k", {"v": 2})
        cache.set("k", {"v": 1})
        assert vreader.get("k") == versioned.get("k") == {"v": 2}
        assert reader.get("k") == cache.get("k") == {"v": 1}
        versioned.delete("k")
        assert vreader.get("k") is MISSING
        assert versioned.get("k") is None

        numbered = make_cache(name, version=3)
        numbered.set("k", 3)
        with CacheReader(name, cache_dir, version=3) as nreader:
            assert nreader.get("k") == numbered.get("k") == 3
            assert nreader.entry("k").kind == KIND_COUNTER  # type: ignore[union-attr]
    finally:
        other.close()
        reader.close()
        vreader.close()


def test_cache_miss_and_lease(make_cache: Callable[..., Cache], cache_dir: str) -> None:
    """§Values written by `Cache`: a cached miss (kind 2 in ``<name>.neg``, the key's stamp
    in ``<name>``, the entry's tags) and the load lease held while a loader runs (cell,
    holder, deadline, seq)."""
    cache = make_cache(loader_timeout=2.5, neg_ttl=60)
    reader = CacheReader(cache.name, cache_dir)
    neg = Segment(f"{cache.name}.neg", directory=cache_dir, read_only=True)
    try:
        cache.set("nothing", "before")
        cache.delete("nothing")  # the key's stamp in <name> is no longer 0
        assert cache.fetch("nothing", lambda: None) is None
        raw = reader.neg.get("nothing")
        assert raw is not None
        entry = CacheEntry.parse(raw)
        assert entry is not None and entry.kind == KIND_MISS
        assert entry.payload == reader.main.stamp("nothing").to_bytes(4, "little") != bytes(4)
        assert entry.ttl_ms == 60_000
        assert reader.cached_miss("nothing")
        assert reader.get("nothing") is MISSING
        cache.set("nothing", "now something")  # moves the stamp: the cached miss is void
        assert not reader.cached_miss("nothing")
        assert reader.get("nothing") == "now something"

        # A cached miss carries the entry's tags, in the tag table of <name>.neg; invalidating
        # the tag raises its version in both segments.
        assert cache.fetch("tagged-miss", lambda: None, tags=["tm"]) is None
        record = reader.neg.lookup("tagged-miss")
        assert record is not None and record.tags == (reader.neg.tag_version("tm"),)
        assert reader.cached_miss("tagged-miss")
        main_tag = reader.main.tag_version("tm")
        cache.invalidate_tags("tm")
        assert reader.main.tag_version("tm") == (main_tag[0], main_tag[1] + 1)
        assert reader.neg.tag_version("tm") == (record.tags[0][0], record.tags[0][1] + 1)
        assert not reader.cached_miss("tagged-miss")

        index = reader.neg.lease_cell_index("loaded")
        before = reader.lease_of("loaded")
        assert before.holder_pid == 0
        assert neg.leases()[index] == (0, before.seq)
        during: list[Any] = []

        def loader() -> dict[str, int]:
            during.append((reader.lease_of("loaded"), neg.leases()[index], monotonic_coarse_ms()))
            return {"loaded": 1}

        assert cache.fetch("loaded", loader) == {"loaded": 1}
        (cell, theirs, now_ms) = during[0]
        assert cell.holder_pid == os.getpid()
        assert theirs == (os.getpid(), before.seq)
        # deadline: now (whole seconds) + loader_timeout rounded up (3) + 1 s; the lease was
        # taken at most a second boundary before the loader looked at the clock.
        assert now_ms // 1000 + 3 <= cell.deadline_s <= now_ms // 1000 + 4
        after = reader.lease_of("loaded")
        assert (after.holder_pid, after.seq) == (0, before.seq + 1)
        assert neg.leases()[index] == (0, after.seq)
        assert reader.get("loaded") == {"loaded": 1}
    finally:
        neg.close()
        reader.close()


def test_refresh_lease(make_cache: Callable[..., Cache], cache_dir: str) -> None:
    """§Values written by `Cache`, "Refresh lease": the early reload holds the cell of
    ``\\x00refresh:`` + key, hashed in ``<name>.neg``."""
    cache = make_cache(ttl=1, refresh_ahead=0.9, l1_items=0)
    reader = CacheReader(cache.name, cache_dir)
    try:
        load_cell = reader.neg.lease_cell_index("rk")
        refresh_cell = reader.neg.lease_cell_index("\x00refresh:rk")
        if refresh_cell == load_cell:  # pragma: no cover - the key was chosen so they differ
            pytest.skip("the two leases share a cell")
        held: list[list[int]] = []
        reloaded = threading.Event()

        def loader() -> int:
            held.append([c for c in range(192) if reader.neg.lease_cell(c).holder_pid])
            if len(held) > 1:
                reloaded.set()
            return len(held)

        assert cache.fetch("rk", loader) == 1
        time.sleep(0.15)  # less than 90% of the TTL left: the next hit reloads early
        assert cache.fetch("rk", loader) == 1
        assert reloaded.wait(5)
        assert held == [[load_cell], [refresh_cell]]
        assert cache_helpers.wait_until(lambda: reader.get("rk") == 2, 5)
        assert reader.neg.lease_cell(refresh_cell).holder_pid == 0
    finally:
        reader.close()


def test_lease_cells_of_many_keys(make_cache: Callable[..., Cache], cache_dir: str) -> None:
    """The lease cell number of §Values written by `Cache` for many keys: only the cell the
    reader computes is held while each key's loader runs."""
    cache = make_cache(loader_timeout=5)
    reader = CacheReader(cache.name, cache_dir)
    try:
        for i in range(64):
            key: str | bytes = f"lease-{i}" if i % 2 else b"lease-\xfe%d" % i
            index = reader.neg.lease_cell_index(key)

            def loader(index: int = index) -> int:
                held = [c for c in range(192) if reader.neg.lease_cell(c).holder_pid]
                assert held == [index]
                return 1

            assert cache.fetch(key, loader) == 1
    finally:
        reader.close()


def test_versioned_values_detect_damage() -> None:
    """The versioned values of the concurrent check detect tearing and misplacement."""
    value = versioned_value(b"k", 12, 300)
    assert parse_versioned(b"k", value) == 12
    with pytest.raises(AssertionError):
        parse_versioned(b"j", versioned_value(b"j", 1, 10)[:-5] + b"\x00" * 5)
    with pytest.raises(AssertionError):
        parse_versioned(b"k", versioned_value(b"j", 1, 10))
