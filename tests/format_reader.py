"""An independent, read-only reader of ziggurat segment files, written from docs/format.md.

It shares no code with the library: every rule below comes from the document, and each is
marked with the section it comes from (``§Hashing``, ``§Reading (lock-free)``, ...).  The
tests in test_format_reader.py compare its answers with the library's, so the document stays
exact and complete enough for another front end to read a segment.

Word-sized loads go through ``memoryview`` casts of the mapping (``"Q"`` for u64, ``"I"`` for
u32): CPython copies such an item with a fixed-size copy of its width, in practice one native
load, atomic for the naturally aligned words the document lists as shared.  Python has no
fences: on x86-64 (total store order) loads are not reordered with each other, which gives
the acquire order the protocol asks for; this reader is a test of the document, not a
production reader for weaker memory models.  It maps the file read-only, so it never makes
the optional frequency raise of step 6.
"""

from __future__ import annotations

import mmap
import os
import pickle
import time
from dataclasses import dataclass
from typing import Any

import orjson
import xxhash

__all__ = [
    "MISSING",
    "CacheEntry",
    "CacheReader",
    "FormatError",
    "Geometry",
    "LeaseCell",
    "Record",
    "SegmentReader",
    "SlotRef",
    "monotonic_coarse_ms",
    "segment_path",
]

# §Segment file format / §File: the layout version is part of the file name.
LAYOUT_VERSION = 2
DEFAULT_DIRECTORY = "/dev/shm"

# §Global header
MAGIC = b"ZIGGURAT"
HEADER_SIZE = 4096
HEADER_CHECKSUM_SEED = 0x5A49474755524154
STATE_READY = 0x52454459
STATE_RETIRED = 0x52455449
MAX_KEY = 4096
LEASE_CELLS_OFF = 1024
LEASE_CELLS = 192

# §Shard header
SMALL_HEAD_REL = 128
SMALL_TAIL_REL = 136
MAIN_HEAD_REL = 192
MAIN_TAIL_REL = 200

# §Hashing
MIX_MULTIPLIER = 0xBF58476D1CE4E5B9
TAG_SEED_XOR = 0x7461677374616773
U32 = 0xFFFFFFFF
U64 = 0xFFFFFFFFFFFFFFFF

# §Index: slot word bits.
SLOT_VALID = 1 << 63
SLOT_FREQ_SHIFT = 45
SLOT_FREQ_MASK = 3 << SLOT_FREQ_SHIFT
SLOT_RING_BIT = 1 << 44
SLOT_OFF_MASK = (1 << 44) - 1
SLOTS_PER_PAIR = 16

# §Rings and records: word0 flags.
FLAG_EXPIRY = 1
FLAG_PAD = 2
MAX_RECORD_TAGS = 8

# §Reading (lock-free), step 5: "ziggurat tries 4 times, then reports a miss".
DEFAULT_TRIES = 4

# §Values written by `Cache`: the trailer and its kinds.
TRAILER_SIZE = 13
KIND_VALUE = 1
KIND_MISS = 2
KIND_COUNTER = 3
PICKLE_PROTO = 0x80

# CLOCK_MONOTONIC_COARSE is 6 on Linux; the time module does not always name it.
CLOCK_MONOTONIC_COARSE: int = getattr(time, "CLOCK_MONOTONIC_COARSE", 6)


class FormatError(Exception):
    """The file is not a segment this reader may attach (§File: what an attacher refuses)."""


class _Retry(Exception):
    """A writer moved a record under the read: start the whole read again (§Reading)."""


class _Missing:
    """The type of ``MISSING``."""

    def __repr__(self) -> str:
        return "MISSING"


#: What ``CacheReader.get`` returns for a key with no fresh value.
MISSING = _Missing()


def segment_path(name: str, directory: str = DEFAULT_DIRECTORY) -> str:
    """§File: ``{directory}/ziggurat.{name}.v2``."""
    return os.path.join(directory, f"ziggurat.{name}.v{LAYOUT_VERSION}")


def monotonic_coarse_ms() -> int:
    """§Rings and records, "Time": ``tv_sec × 1000 + tv_nsec ÷ 1_000_000`` of the coarse clock."""
    return time.clock_gettime_ns(CLOCK_MONOTONIC_COARSE) // 1_000_000


def reduce32(x: int, n: int) -> int:
    """§Hashing: ``reduce(x, n) = (x as u64 * n) >> 32`` for a u32 ``x``."""
    return ((x & U32) * n) >> 32


def mix(h: int) -> int:
    """§Hashing: ``h2`` from ``h`` (wrapping u64 arithmetic)."""
    h2 = ((h ^ (h >> 29)) * MIX_MULTIPLIER) & U64
    return h2 ^ (h2 >> 32)


def _rotl8(x: int, r: int) -> int:
    return ((x << r) | (x >> (8 - r))) & 0xFF if r else x


def check_byte(val_len: int, key_len: int, ntags: int, flags: int) -> int:
    """§Rings and records: the check byte of a word0."""
    v = val_len.to_bytes(4, "little")
    k = key_len.to_bytes(2, "little")
    c = 0xA5 ^ v[0] ^ _rotl8(v[1], 1) ^ _rotl8(v[2], 2) ^ _rotl8(v[3], 3)
    c ^= _rotl8(k[0], 4) ^ _rotl8(k[1], 5)
    return c ^ ((ntags << 4) | flags)


def decode_word0(word0: int) -> tuple[int, int, int, int] | None:
    """§Rings and records: ``(val_len, key_len, ntags, flags)`` of a valid word0, else None.

    Checks what word0 alone decides: the check byte, the flags, ``ntags ≤ 8`` and the PAD
    rules; whether the record fits its ring is the caller's check.
    """
    val_len = word0 & U32
    key_len = (word0 >> 32) & 0xFFFF
    ntags = (word0 >> 48) & 0xF
    flags = (word0 >> 52) & 0xF
    if word0 >> 56 != check_byte(val_len, key_len, ntags, flags):
        return None
    if flags & ~(FLAG_EXPIRY | FLAG_PAD) or ntags > MAX_RECORD_TAGS:
        return None
    if flags & FLAG_PAD and (key_len or ntags or val_len % 8):
        return None
    return val_len, key_len, ntags, flags


def as_key_bytes(key: str | bytes) -> bytes:
    """§Hashing: a str key is its UTF-8 bytes, a bytes key itself."""
    return key.encode() if isinstance(key, str) else bytes(key)


@dataclass(frozen=True)
class Geometry:
    """§Global header: the fields a reader needs, checked as §File lists."""

    file_size: int
    nshards: int
    npairs: int
    nstamps: int
    ntags: int
    small_cap: int
    main_cap: int
    ghost_buckets: int
    max_key: int
    max_value: int
    seed: int
    instance_id: int
    stamps_off: int
    tags_off: int
    shards_off: int
    shard_stride: int
    index_rel: int
    ghost_rel: int
    small_rel: int
    main_rel: int

    @classmethod
    def parse(cls, buf: bytes | mmap.mmap, actual_size: int) -> Geometry:
        """Parses and validates the header, in the order of §File ("The checks, in order")."""

        def u32(off: int) -> int:
            return int.from_bytes(buf[off : off + 4], "little")

        def u64(off: int) -> int:
            return int.from_bytes(buf[off : off + 8], "little")

        if actual_size < HEADER_SIZE or actual_size % 8:
            raise FormatError(f"file of {actual_size} bytes: too small or not a multiple of 8")
        if bytes(buf[0:8]) != MAGIC:
            raise FormatError(f"foreign magic {bytes(buf[0:8])!r}")
        if u32(8) != LAYOUT_VERSION:
            raise FormatError(f"layout version {u32(8)}, expected {LAYOUT_VERSION}")
        checksum = xxhash.xxh3_64_intdigest(bytes(buf[0:248]), seed=HEADER_CHECKSUM_SEED)
        if u64(248) != checksum:
            raise FormatError("header checksum mismatch")
        if u32(256) != STATE_READY:
            raise FormatError(f"state {u32(256):#x} is not READY")
        g = cls(
            file_size=u64(16),
            nshards=u32(24),
            npairs=u32(28),
            nstamps=u32(32),
            ntags=u32(36),
            small_cap=u64(40),
            main_cap=u64(48),
            ghost_buckets=u32(56),
            max_key=u32(60),
            max_value=u32(64),
            seed=u64(72),
            instance_id=u64(80),
            stamps_off=u64(88),
            tags_off=u64(96),
            shards_off=u64(104),
            shard_stride=u64(112),
            index_rel=u64(120),
            ghost_rel=u64(128),
            small_rel=u64(136),
            main_rel=u64(144),
        )
        g._check_relations(actual_size, header_size=u32(12))
        return g

    def _check_relations(self, actual_size: int, header_size: int) -> None:
        """§File: the geometry, "whose every relation must hold"."""
        relations = {
            "header size is 4096": header_size == HEADER_SIZE,
            "file_size equals the file's size": self.file_size == actual_size,
            "nshards is a power of two from 1 to 256": 1 <= self.nshards <= 256
            and self.nshards & (self.nshards - 1) == 0,
            "npairs, ntags, ghost_buckets > 0": min(self.npairs, self.ntags, self.ghost_buckets)
            > 0,
            "nstamps >= nshards and a multiple of it": self.nstamps >= self.nshards
            and self.nstamps % self.nshards == 0,
            "stamps_off = 4096": self.stamps_off == HEADER_SIZE,
            "tags_off >= stamps_off + 4 nstamps": self.tags_off
            >= self.stamps_off + 4 * self.nstamps,
            "shards_off >= tags_off + 4 ntags": self.shards_off >= self.tags_off + 4 * self.ntags,
            "shards fit the file": self.shards_off + self.nshards * self.shard_stride
            <= self.file_size,
            "shards_off and shard_stride multiples of 64": self.shards_off % 64 == 0
            and self.shard_stride % 64 == 0,
            "index_rel = 1024": self.index_rel == 1024,
            "ghost_rel = index_rel + 128 npairs": self.ghost_rel
            == self.index_rel + 128 * self.npairs,
            "small_rel >= ghost_rel + 32 ghost_buckets, multiple of 8": self.small_rel
            >= self.ghost_rel + 32 * self.ghost_buckets
            and self.small_rel % 8 == 0,
            "main_rel = small_rel + small_cap": self.main_rel == self.small_rel + self.small_cap,
            "main ring fits the shard": self.main_rel + self.main_cap <= self.shard_stride,
            "caps multiples of 8 and > 0": self.small_cap % 8 == 0
            and self.main_cap % 8 == 0
            and self.small_cap > 0,
            "small_cap <= main_cap < 2^32 - 7": self.small_cap <= self.main_cap < 2**32 - 7,
            "max key = 4096": self.max_key == MAX_KEY,
            "max_value + 4352 <= main_cap / 8 * 7": self.max_value + 4352 <= self.main_cap // 8 * 7,
        }
        broken = [what for what, holds in relations.items() if not holds]
        if broken:
            raise FormatError(f"geometry does not hold: {', '.join(broken)}")


@dataclass(frozen=True)
class KeyHash:
    """§Hashing: where a key lives."""

    shard: int
    pair: int
    fingerprint: int
    stamp_index: int
    h2: int


@dataclass(frozen=True)
class Record:
    """A live record as one successful lock-free read saw it (§Rings and records)."""

    value: bytes
    expiry_ms: int  # 0: the record has no expiry word
    tags: tuple[tuple[int, int], ...]  # (cell, version) per tag word
    ring: int  # 0 small, 1 main (§Index)
    record_bytes: int


@dataclass(frozen=True)
class RingEntry:
    """One record met by ``SegmentReader.walk_ring``."""

    pos: int  # logical position
    off: int  # byte offset in the ring
    length: int
    pad: bool
    key: bytes
    expiry_ms: int  # 0: no expiry word


@dataclass(frozen=True)
class SlotRef:
    """Where a key's slot and record are, as file offsets (for tests that edit a copy)."""

    slot: int  # byte offset of the slot word
    word: int
    ring: int  # 0 small, 1 main
    record: int  # byte offset of the record's word0
    head: int  # byte offset of the ring's head word
    tail: int  # byte offset of the ring's tail word
    cap: int


@dataclass(frozen=True)
class _Ring:
    base: int  # absolute byte offset of the ring in the file
    cap: int
    head_word: int  # index of the head word in the u64 view
    tail_word: int


class SegmentReader:
    """A read-only attachment of one segment file; ``get`` follows §Reading (lock-free)."""

    def __init__(self, path: str, tries: int = DEFAULT_TRIES) -> None:
        fd = os.open(path, os.O_RDONLY | os.O_CLOEXEC)
        try:
            size = os.fstat(fd).st_size
            if size < HEADER_SIZE:
                raise FormatError(f"file of {size} bytes is too small")
            self._mm = mmap.mmap(fd, size, prot=mmap.PROT_READ)
        finally:
            os.close(fd)
        self.path = path
        self.tries = tries
        self.retries = 0  # reads started again (steps 3 to 5)
        self.gave_up = 0  # lookups that ran out of tries and reported a miss
        try:
            self.geometry = Geometry.parse(self._mm, size)
        except BaseException:
            self._mm.close()
            raise
        mv = memoryview(self._mm)
        self._u64 = mv.cast("Q")
        self._u32 = mv.cast("I")
        g = self.geometry
        self._stamps_per_shard = g.nstamps // g.nshards

    @classmethod
    def open(
        cls, name: str, directory: str = DEFAULT_DIRECTORY, tries: int = DEFAULT_TRIES
    ) -> SegmentReader:
        """Attaches the segment called ``name`` in ``directory`` (§File)."""
        return cls(segment_path(name, directory), tries)

    def close(self) -> None:
        """Releases the mapping."""
        self._u64.release()
        self._u32.release()
        self._mm.close()

    def __enter__(self) -> SegmentReader:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    # ------------------------------------------------------------------ header words

    @property
    def epoch(self) -> int:
        """§Global header, offset 264: +1 on ``clear()`` and on a shard reset."""
        return self._u64[264 // 8]

    @property
    def tag_invalidations(self) -> int:
        """§Global header, offset 320."""
        return self._u64[320 // 8]

    @property
    def clears(self) -> int:
        """§Global header, offset 328."""
        return self._u64[328 // 8]

    def app_word(self, i: int) -> int:
        """§Global header, offset 512: the 32 words kept for the layers above the engine."""
        if not 0 <= i < 32:
            raise IndexError(i)
        return self._u64[512 // 8 + i]

    # ------------------------------------------------------------------ hashing

    def hash_key(self, key: bytes) -> KeyHash:
        """§Hashing."""
        g = self.geometry
        h = xxhash.xxh3_64_intdigest(key, seed=g.seed)
        h2 = mix(h)
        shard = reduce32(h >> 32, g.nshards)
        return KeyHash(
            shard=shard,
            pair=reduce32(h, g.npairs),
            fingerprint=h2 >> 48,
            stamp_index=shard * self._stamps_per_shard + reduce32(h2 >> 16, self._stamps_per_shard),
            h2=h2,
        )

    def tag_cell(self, tag: str) -> int:
        """§Hashing: ``reduce(XXH3_64(tag, seed ^ 0x7461677374616773) as u32, ntags)``."""
        g = self.geometry
        return reduce32(xxhash.xxh3_64_intdigest(tag.encode(), seed=g.seed ^ TAG_SEED_XOR), g.ntags)

    def tag_version(self, tag: str) -> tuple[int, int]:
        """The tag's cell and that cell's current version (§Stamps, tags, epoch)."""
        cell = self.tag_cell(tag)
        return cell, self._u32[(self.geometry.tags_off >> 2) + cell]

    def stamp(self, key: str | bytes) -> int:
        """The current value of the key's stamp (§Stamps, tags, epoch; §Hashing)."""
        kh = self.hash_key(as_key_bytes(key))
        return self._u32[(self.geometry.stamps_off >> 2) + kh.stamp_index]

    def lease_cell_index(self, key: str | bytes) -> int:
        """§Values written by `Cache`, "Load lease": ``reduce((h2 >> 8) as u32, 192)``."""
        return reduce32(self.hash_key(as_key_bytes(key)).h2 >> 8, LEASE_CELLS)

    def lease_cell(self, i: int) -> LeaseCell:
        """§Global header, offset 1024: load-lease cell ``i`` (holder u64, seq u32, waiters u32)."""
        if not 0 <= i < LEASE_CELLS:
            raise IndexError(i)
        off = LEASE_CELLS_OFF + 16 * i
        holder = self._u64[off // 8]
        return LeaseCell(
            holder_pid=holder & U32,
            deadline_s=holder >> 32,
            seq=self._u32[(off + 8) // 4],
            waiters=self._u32[(off + 12) // 4],
        )

    # ------------------------------------------------------------------ reading

    def _ring(self, shard: int, ring: int) -> _Ring:
        """§Regions and §Shard header: the ring's bytes and its head and tail words."""
        g = self.geometry
        start = g.shards_off + shard * g.shard_stride
        if ring:
            return _Ring(
                start + g.main_rel,
                g.main_cap,
                (start + MAIN_HEAD_REL) // 8,
                (start + MAIN_TAIL_REL) // 8,
            )
        return _Ring(
            start + g.small_rel,
            g.small_cap,
            (start + SMALL_HEAD_REL) // 8,
            (start + SMALL_TAIL_REL) // 8,
        )

    def get(self, key: str | bytes) -> bytes | None:
        """The key's live value, or None (§Reading (lock-free))."""
        record = self.lookup(key)
        return None if record is None else record.value

    def lookup(self, key: str | bytes) -> Record | None:
        """The key's live record, or None: the whole read, retried as step 5 says."""
        kb = as_key_bytes(key)
        if not 1 <= len(kb) <= MAX_KEY:
            return None
        kh = self.hash_key(kb)
        for _ in range(self.tries):
            try:
                return self._read_once(kb, kh)
            except _Retry:
                self.retries += 1
        self.gave_up += 1
        return None  # step 5: "ziggurat tries 4 times, then reports a miss"

    def _read_once(self, key: bytes, kh: KeyHash) -> Record | None:
        """One pass over the 16 slots of the key's pair; raises _Retry to start again."""
        g = self.geometry
        u64 = self._u64
        mm = self._mm
        shard_start = g.shards_off + kh.shard * g.shard_stride
        pair_word = (shard_start + g.index_rel + 128 * kh.pair) // 8  # §Index
        for slot_word in range(pair_word, pair_word + SLOTS_PER_PAIR):
            # Step 1: the slot word (acquire), its fingerprint, ring and offset.
            w = u64[slot_word]
            if w == 0 or not w & SLOT_VALID or (w >> 47) & 0xFFFF != kh.fingerprint:
                continue
            same = w & ~SLOT_FREQ_MASK
            ring = self._ring(kh.shard, 1 if w & SLOT_RING_BIT else 0)
            cap = ring.cap
            off = (w & SLOT_OFF_MASK) * 8
            # Step 2: the record's logical position from the ring's head.
            head = u64[ring.head_word]
            d = ((head % cap) + cap - off) % cap or cap
            parsed = None if head < d else self._parse_record(ring, off, key)
            if parsed is None:
                # Step 3: not this key here (or stale): did a writer move the slot?
                if u64[slot_word] & ~SLOT_FREQ_MASK != same:
                    raise _Retry
                continue
            pos = head - d
            expiry, tags, value_start, val_len, length = parsed
            # Step 4: expired or tag-invalidated entries are a miss, once step 5 confirms.
            if (expiry != 0 and monotonic_coarse_ms() >= expiry) or not self._tags_current(tags):
                if self._still_there(ring, pos, slot_word, same):
                    return None
                raise _Retry
            # Step 5: copy the value, then re-check the tail and the slot.
            value = mm[value_start : value_start + val_len]
            if not self._still_there(ring, pos, slot_word, same):
                raise _Retry
            return Record(
                value=value,
                expiry_ms=expiry,
                tags=tags,
                ring=1 if w & SLOT_RING_BIT else 0,
                record_bytes=length,
            )
        return None  # "A key whose pair has no slot that passes these steps is a miss."

    # ------------------------------------------------------------------ whole rings

    def ring_positions(self, shard: int, ring: int) -> tuple[int, int]:
        """``(tail, head)`` of a ring (§Shard header), loaded tail first."""
        r = self._ring(shard, ring)
        tail = self._u64[r.tail_word]
        return tail, self._u64[r.head_word]

    def walk_ring(self, shard: int, ring: int) -> list[RingEntry]:
        """The records of ``[tail, head)`` in order, as §Recovery's walk reads them.

        Only meaningful while no writer works on the shard.  Raises ``FormatError`` when
        the walk does not land exactly on the head, or meets an invalid word0.
        """
        r = self._ring(shard, ring)
        tail, head = self.ring_positions(shard, ring)
        if not 0 <= head - tail <= r.cap:  # §Rings and records: 0 ≤ head − tail ≤ cap
            raise FormatError(f"ring {ring} of shard {shard}: head {head}, tail {tail}")
        out: list[RingEntry] = []
        pos = tail
        while pos < head:
            off = pos % r.cap
            word0 = self._u64[(r.base + off) // 8]
            fields = decode_word0(word0)
            if fields is None:
                raise FormatError(f"invalid word0 {word0:#018x} at position {pos}")
            val_len, key_len, ntags, flags = fields
            expiry = 0
            if flags & FLAG_PAD:
                length = val_len
                key = b""
            else:
                header = 8 + (8 if flags & FLAG_EXPIRY else 0) + 8 * ntags
                length = (header + key_len + val_len + 7) & ~7
                start = r.base + off + header
                key = self._mm[start : start + key_len]
                if flags & FLAG_EXPIRY:
                    expiry = self._u64[(r.base + off) // 8 + 1]
            if length <= 0 or off + length > r.cap:
                raise FormatError(f"record of {length} bytes at offset {off} leaves the ring")
            out.append(RingEntry(pos, off, length, bool(flags & FLAG_PAD), key, expiry))
            pos += length
        if pos != head:
            raise FormatError(f"walk ended at {pos}, head is {head}")
        return out

    def slots(self, shard: int) -> list[tuple[int, int]]:
        """``(byte offset in the file, word)`` of every nonzero slot of the shard (§Index)."""
        g = self.geometry
        first = (g.shards_off + shard * g.shard_stride + g.index_rel) // 8
        words = self._u64[first : first + SLOTS_PER_PAIR * g.npairs]
        return [(8 * (first + i), w) for i, w in enumerate(words) if w]

    def locate(self, key: str | bytes) -> SlotRef | None:
        """The first slot of the key's pair whose fingerprint matches (§Index), unchecked."""
        kh = self.hash_key(as_key_bytes(key))
        g = self.geometry
        first = (g.shards_off + kh.shard * g.shard_stride + g.index_rel + 128 * kh.pair) // 8
        for slot_word in range(first, first + SLOTS_PER_PAIR):
            w = self._u64[slot_word]
            if w and (w >> 47) & 0xFFFF == kh.fingerprint:
                ring = self._ring(kh.shard, 1 if w & SLOT_RING_BIT else 0)
                return SlotRef(
                    slot=8 * slot_word,
                    word=w,
                    ring=1 if w & SLOT_RING_BIT else 0,
                    record=ring.base + (w & SLOT_OFF_MASK) * 8,
                    head=8 * ring.head_word,
                    tail=8 * ring.tail_word,
                    cap=ring.cap,
                )
        return None

    def _still_there(self, ring: _Ring, pos: int, slot_word: int, same: int) -> bool:
        """Step 5: ``tail ≤ L`` and the slot still points at the same record."""
        tail = self._u64[ring.tail_word]
        return tail <= pos and self._u64[slot_word] & ~SLOT_FREQ_MASK == same

    def _tags_current(self, tags: tuple[tuple[int, int], ...]) -> bool:
        """§Stamps, tags, epoch: every recorded version equals its cell's (acquire load)."""
        g = self.geometry
        base = g.tags_off >> 2
        for cell, version in tags:
            if cell >= g.ntags or self._u32[base + cell] != version:
                return False
        return True

    def _parse_record(
        self, ring: _Ring, off: int, key: bytes
    ) -> tuple[int, tuple[tuple[int, int], ...], int, int, int] | None:
        """Step 3: word0, expiry and tags (relaxed loads); None unless a valid record of ``key``.

        Returns ``(expiry, tags, absolute value offset, val_len, record length)``.
        """
        cap = ring.cap
        # §Rings and records: "its offset is a multiple of 8, offset + 8 ≤ cap".
        if off % 8 or off + 8 > cap:
            return None
        u64 = self._u64
        word_base = (ring.base + off) // 8
        fields = decode_word0(u64[word_base])
        if fields is None:
            return None
        val_len, key_len, ntags, flags = fields
        if flags & FLAG_PAD:
            return None  # step 3: a slot never points at a PAD
        has_expiry = bool(flags & FLAG_EXPIRY)
        header = 8 + (8 if has_expiry else 0) + 8 * ntags
        length = (header + key_len + val_len + 7) & ~7
        if length <= 0 or off + length > cap:
            return None
        if key_len != len(key):
            return None
        expiry = u64[word_base + 1] if has_expiry else 0
        first_tag = word_base + (2 if has_expiry else 1)
        tags = tuple((t & U32, t >> 32) for t in (u64[first_tag + i] for i in range(ntags)))
        key_start = ring.base + off + header
        if self._mm[key_start : key_start + key_len] != key:
            return None
        return expiry, tags, key_start + key_len, val_len, length


# ---------------------------------------------------------------------- values of Cache


@dataclass(frozen=True)
class LeaseCell:
    """§Values written by `Cache`, "Load lease": one cell of the header of ``<name>.neg``."""

    holder_pid: int  # 0: free
    deadline_s: int  # whole seconds of CLOCK_MONOTONIC_COARSE
    seq: int
    waiters: int


@dataclass(frozen=True)
class CacheEntry:
    """A value a ``Cache`` wrote, split at its 13-byte trailer (§Values written by `Cache`)."""

    kind: int
    payload: bytes
    soft_deadline_ms: int  # 0: never stale
    ttl_ms: int  # 0: never expires

    @classmethod
    def parse(cls, raw: bytes) -> CacheEntry | None:
        """None for a record that a ``Cache`` did not write (too short, unknown kind)."""
        if len(raw) < TRAILER_SIZE:
            return None
        trailer = raw[-TRAILER_SIZE:]
        kind = trailer[0]
        if kind not in (KIND_VALUE, KIND_MISS, KIND_COUNTER):
            return None
        return cls(
            kind=kind,
            payload=raw[:-TRAILER_SIZE],
            soft_deadline_ms=int.from_bytes(trailer[1:9], "little"),
            ttl_ms=int.from_bytes(trailer[9:13], "little"),
        )

    def fresh(self, now_ms: int | None = None) -> bool:
        """Whether the soft deadline is ahead: "the value is stale once now ≥ it; 0 = never"."""
        if self.soft_deadline_ms == 0:
            return True
        return (monotonic_coarse_ms() if now_ms is None else now_ms) < self.soft_deadline_ms

    def decode(self) -> Any:
        """Kind 1: the "auto" serializer's bytes; kind 3: an i64 LE."""
        if self.kind == KIND_COUNTER:
            if len(self.payload) != 8:
                raise ValueError(f"counter of {len(self.payload)} bytes")
            return int.from_bytes(self.payload, "little", signed=True)
        if self.kind == KIND_VALUE:
            if self.payload[:1] == bytes([PICKLE_PROTO]):
                return pickle.loads(self.payload)
            return orjson.loads(self.payload)  # "UTF-8 JSON as orjson writes it"
        raise ValueError(f"kind {self.kind} holds no value")


class CacheReader:
    """The two segments of a ``ziggurat.Cache`` (§Values written by `Cache`), read-only."""

    def __init__(
        self, name: str, directory: str = DEFAULT_DIRECTORY, version: str | int | None = None
    ) -> None:
        base = name if version is None else f"{name}.ver-{version}"
        self.main = SegmentReader.open(base, directory)
        try:
            self.neg = SegmentReader.open(f"{base}.neg", directory)
        except BaseException:
            self.main.close()
            raise

    def close(self) -> None:
        """Releases both mappings."""
        self.main.close()
        self.neg.close()

    def __enter__(self) -> CacheReader:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def entry(self, key: str | bytes) -> CacheEntry | None:
        """The entry of ``key`` in ``<name>``, stale or not; None when absent or foreign."""
        raw = self.main.get(key)
        return None if raw is None else CacheEntry.parse(raw)

    def get(self, key: str | bytes) -> Any:
        """What ``Cache.get`` answers from the segment: the fresh value, or ``MISSING``.

        "a value past its soft deadline is a miss for `get`"; only kinds 1 and 3 live in
        ``<name>``.
        """
        entry = self.entry(key)
        if entry is None or entry.kind == KIND_MISS or not entry.fresh():
            return MISSING
        return entry.decode()

    def cached_miss(self, key: str | bytes) -> bool:
        """Whether ``<name>.neg`` holds a cached miss of ``key`` that still counts: kind 2,
        fresh, and recording the key's current stamp in ``<name>``."""
        raw = self.neg.get(key)
        entry = None if raw is None else CacheEntry.parse(raw)
        if entry is None or entry.kind != KIND_MISS or len(entry.payload) != 4:
            return False
        if not entry.fresh():
            return False
        return int.from_bytes(entry.payload, "little") == self.main.stamp(key)

    def namespace_key(self, namespace: str, key: str | bytes) -> str | bytes:
        """The cache key of ``key`` in ``namespace``: "a key `k` of namespace `n` is the cache
        key `n:k` (bytes keys `n:` + `k`)"."""
        if isinstance(key, bytes):
            return namespace.encode() + b":" + key
        return f"{namespace}:{key}"

    @staticmethod
    def namespace_tag(namespace: str) -> str:
        """The tag every entry of a namespace carries: ``\\x00ns:n``."""
        return f"\x00ns:{namespace}"

    def lease_of(self, key: str | bytes) -> LeaseCell:
        """The load-lease cell of ``key`` (hashed in ``<name>.neg``)."""
        return self.neg.lease_cell(self.neg.lease_cell_index(key))
