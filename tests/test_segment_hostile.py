"""Segment files that lie, seen from Python: a header that checksums but sends offsets
outside the file, a panic inside the engine, and fuzzed files fed to the read-only
commands of the ``ziggurat`` CLI. None may crash the process, hang, or surface as anything
but a ``ZigguratError`` (for the Cache: its degraded mode, with the cause).

Files are edited as anyone who can write them could: fields at the offsets docs/format.md
gives, and the header checksum recomputed as it describes (seeded XXH3-64 of bytes 0..248).
"""

from __future__ import annotations

import json
import os
import shutil
import struct
import subprocess
import sys
import textwrap
import uuid
import warnings
from collections.abc import Iterator

import pytest
import xxhash
from helpers_segment import STRESS, needs_crash_hook, new_name
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from ziggurat import Cache, Segment, SegmentError, ZigguratError

MiB = 1 << 20
CHECKSUM_SEED = 0x5A49474755524154
H_NTAGS, H_TAGS_OFF, H_SHARDS_OFF, H_SHARD_STRIDE, H_NSHARDS, H_CHECKSUM = 36, 96, 104, 112, 24, 248
ZIGGURAT = [sys.executable, "-m", "ziggurat"]


def path_of(directory: str, name: str) -> str:
    return f"{directory}/ziggurat.{name}.v2"


def read(path: str, off: int, fmt: str) -> int:
    with open(path, "rb") as f:
        f.seek(off)
        value: int = struct.unpack(fmt, f.read(struct.calcsize(fmt)))[0]
        return value


def write(path: str, off: int, fmt: str, value: int) -> None:
    with open(path, "r+b") as f:
        f.seek(off)
        f.write(struct.pack(fmt, value))


def reseal(path: str) -> None:
    with open(path, "r+b") as f:
        head = f.read(H_CHECKSUM)
        f.seek(H_CHECKSUM)
        f.write(struct.pack("<Q", xxhash.xxh3_64_intdigest(head, seed=CHECKSUM_SEED)))


def run_child(code: str) -> subprocess.CompletedProcess[str]:
    """Runs ``code`` in a fresh interpreter: a crash there (a signal) fails the test
    instead of ending the test process."""
    return subprocess.run(
        [sys.executable, "-c", textwrap.dedent(code)],
        capture_output=True,
        text=True,
        timeout=120,
    )


def test_a_tag_table_that_wraps_is_refused_by_a_read_only_open(shm_dir: str) -> None:
    """ntags = 1 at tags_off = 2^64 - 4: the table's end wraps to 0 and its one cell lies
    just below the mapping. The open must refuse the file as damaged (it used to attach,
    and reading the tag's version read outside the mapping)."""
    name = new_name("wrap")
    seg = Segment(name, 2 * MiB, directory=shm_dir)
    seg.set("k", b"v", tags=["t"])
    seg.close()
    path = path_of(shm_dir, name)
    write(path, H_NTAGS, "<I", 1)
    write(path, H_TAGS_OFF, "<Q", 2**64 - 4)
    reseal(path)
    r = run_child(
        f"""
        from ziggurat import Segment, SegmentError
        try:
            seg = Segment({name!r}, {2 * MiB}, directory={shm_dir!r}, read_only=True)
        except SegmentError as e:
            print("refused", e.cause, {path!r} in str(e))
        else:
            print("attached", seg.tag_version("t"))
        """
    )
    assert r.returncode == 0, (r.returncode, r.stderr)
    assert r.stdout.split() == ["refused", "damaged", "True"], r.stdout


def test_a_cache_on_a_header_whose_shards_wrap_starts_degraded(shm_dir: str) -> None:
    """Shards whose stride makes their sum wrap past 2^64: the Cache must start in its
    degraded mode with cause "damaged" (a write used to panic, which reached Python as a
    PanicException that nothing catches), and still answer every call."""
    name = new_name("stride")
    Cache(name, size="64MiB", directory=shm_dir).close()
    path = path_of(shm_dir, name)
    nshards = read(path, H_NSHARDS, "<I")
    assert nshards > 1
    write(path, H_SHARD_STRIDE, "<Q", 2**64 // nshards)
    reseal(path)
    with warnings.catch_warnings(record=True):
        warnings.simplefilter("always")
        c = Cache(name, size="64MiB", directory=shm_dir)
    try:
        assert c.degraded
        assert c.degraded_cause == "damaged"
        assert c.degraded_reason is not None and path in c.degraded_reason
        for i in range(200):
            c.set(f"k{i}", i)
        assert c.fetch("f", lambda: 41) == 41
        assert c.stats()["degraded_cause"] == "damaged"
    finally:
        c.close()


@needs_crash_hook
def test_a_panic_inside_the_engine_is_a_ziggurat_error_and_degrades_the_cache(
    shm_dir: str,
) -> None:
    """A write that panics in the engine (a failpoint stands in for an unforeseen damage)
    raises SegmentError naming the file, with cause "damaged"; the Cache then reports its
    degraded mode, reads miss, loads still answer, and the file stays usable by others."""
    name = new_name("panic")
    c = Cache(name, size="8MiB", directory=shm_dir)
    try:
        c.set("before", 1)
        assert c._segment is not None
        c._segment._crash_at("panic")
        with (
            pytest.warns(RuntimeWarning, match="stopped using its shared segment"),
            pytest.raises(ZigguratError) as e,
        ):
            c.set("k", 2)
        assert isinstance(e.value, SegmentError)
        assert e.value.cause == "damaged"  # type: ignore[attr-defined]
        assert path_of(shm_dir, name) in str(e.value)
        assert c.degraded
        assert c.degraded_cause == "damaged"
        assert c.get("never-written") is None
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            assert c.fetch("loaded", lambda: 7) == 7
        with pytest.raises(ZigguratError):
            c.set("k", 3)
        # Another worker's handle was not touched: it reads, writes and verifies clean.
        other = Cache(name, size="8MiB", directory=shm_dir)
        try:
            assert not other.degraded
            assert other.get("before") == 1
            other.set("k", 4)
            assert other.get("k") == 4
            assert other._segment is not None
            assert other._segment.verify(repair=False)["problems"] == []
        finally:
            other.close()
    finally:
        c.close()


# -- the CLI's read-only commands on fuzzed files ----------------------------------------

HEADER_FIELDS = [
    (16, "<Q"), (24, "<I"), (28, "<I"), (32, "<I"), (36, "<I"), (40, "<Q"), (48, "<Q"),
    (56, "<I"), (60, "<I"), (64, "<I"), (88, "<Q"), (96, "<Q"), (104, "<Q"), (112, "<Q"),
    (120, "<Q"), (128, "<Q"), (136, "<Q"), (144, "<Q"), (256, "<I"), (264, "<Q"),
]  # fmt: skip
SHARD_FIELDS = [(64, "<I"), (72, "<I"), (128, "<Q"), (136, "<Q"), (192, "<Q"), (200, "<Q"),
                (256, "<Q"), (288, "<Q"), (392, "<Q")]  # fmt: skip
INTERESTING = [0, 1, 2**64 - 1, 2**64 - 4, 2**64 - 8, 2**63, 2**62, 2**32 - 1, 8, 4096]

edit = st.one_of(
    st.tuples(st.just("header"), st.sampled_from(HEADER_FIELDS), st.sampled_from(INTERESTING)),
    st.tuples(st.just("header"), st.sampled_from(HEADER_FIELDS), st.integers(0, 2**64 - 1)),
    st.tuples(st.just("shard"), st.sampled_from(SHARD_FIELDS), st.sampled_from(INTERESTING)),
    st.tuples(st.just("shard"), st.sampled_from(SHARD_FIELDS), st.integers(0, 2**64 - 1)),
    st.tuples(st.just("word"), st.integers(0, 2**32), st.integers(0, 2**64 - 1)),
)


def mutate(path: str, edits: list[tuple[str, object, int]]) -> None:
    size = os.path.getsize(path)
    shards_off = read(path, H_SHARDS_OFF, "<Q")
    for kind, where, value in edits:
        if kind == "header":
            off, fmt = where  # type: ignore[misc]
        elif kind == "shard":
            rel, fmt = where  # type: ignore[misc]
            off = shards_off + rel
        else:
            off, fmt = 256 + int(where) % ((size - 256) // 8) * 8, "<Q"  # type: ignore[call-overload]
        mask = (1 << (8 * struct.calcsize(fmt))) - 1
        if off + struct.calcsize(fmt) <= size:
            write(path, off, fmt, value & mask)


def zig(*args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run([*ZIGGURAT, *args], capture_output=True, text=True, timeout=60)


@pytest.fixture(scope="module")
def fuzz_dir() -> Iterator[str]:
    # Module-scoped: hypothesis runs every example of a test with the same fixture value.
    path = f"/dev/shm/zigtest-fuzz-{uuid.uuid4().hex}"
    os.mkdir(path, 0o700)
    try:
        yield path
    finally:
        shutil.rmtree(path, ignore_errors=True)


def cli_on_fuzzed_file(
    fuzz_dir: str, edits: list[tuple[str, object, int]], reseal_header: bool
) -> None:
    """``ls``, ``stats``, ``verify`` and ``get`` on a cache whose main file was fuzzed:
    each ends with an answer or a one-line error, never a traceback, a signal or a hang."""
    name = new_name("fz")
    c = Cache(name, size="4MiB", directory=fuzz_dir)
    for i in range(300):
        c.set(f"k{i}", {"i": i, "pad": "x" * (i % 90)}, tags=["t"] if i % 3 == 0 else ())
    c.close()
    path = path_of(fuzz_dir, name)
    try:
        mutate(path, edits)
        if reseal_header:
            reseal(path)
        for args in (
            ("ls", "-d", fuzz_dir),
            ("stats", name, "-d", fuzz_dir),
            ("verify", name, "-d", fuzz_dir),
            ("get", name, "k7", "-d", fuzz_dir),
        ):
            r = zig(*args)
            # 1: an error (such as a damaged file); 3: verify found problems.
            assert r.returncode in (0, 1, 3), (args, r.returncode, r.stderr)
            assert "Traceback" not in r.stderr and "panicked" not in r.stderr, (args, r.stderr)
    finally:
        for p in (path, path_of(fuzz_dir, name + ".neg")):
            if os.path.exists(p):
                os.unlink(p)


# The Cache's own calls on a fuzzed file, in a child process (a signal there fails the
# test). Reads never raise; writes raise nothing but a ZigguratError; the child ends.
CACHE_ON_FUZZED_FILE = """
import json, sys, warnings
warnings.simplefilter("ignore")
from ziggurat import Cache, ZigguratError
c = Cache(sys.argv[1], size="4MiB", directory=sys.argv[2], lock_timeout=0.2)
reads, writes = [], []
def attempt(into, f):
    try:
        f()
        into.append("ok")
    except ZigguratError as e:
        into.append(type(e).__name__)
for i in range(0, 300, 7):
    attempt(reads, lambda: c.get(f"k{i}"))
attempt(writes, lambda: c.set("k7", {"new": 1}, tags=["t"]))
attempt(reads, lambda: c.get("k7"))
attempt(writes, lambda: c.fetch("k8", lambda: 8))
attempt(writes, lambda: c.delete("k9"))
attempt(writes, lambda: c.incr("n", default=0))
attempt(writes, lambda: c.invalidate_tags("t"))
attempt(reads, lambda: c.stats())
print(json.dumps({"reads": reads, "writes": writes, "degraded": c.degraded}))
c.close()
"""


def cache_on_fuzzed_file(
    fuzz_dir: str, edits: list[tuple[str, object, int]], reseal_header: bool
) -> None:
    """A Cache's reads, writes, loads, counters, tags and stats on a cache whose main file
    was fuzzed: the process ends, its reads answer, its writes raise only ZigguratError."""
    name = new_name("fc")
    c = Cache(name, size="4MiB", directory=fuzz_dir)
    for i in range(300):
        c.set(f"k{i}", {"i": i, "pad": "x" * (i % 90)}, tags=["t"] if i % 3 == 0 else ())
    c.close()
    path = path_of(fuzz_dir, name)
    try:
        mutate(path, edits)
        if reseal_header:
            reseal(path)
        r = subprocess.run(
            [sys.executable, "-c", CACHE_ON_FUZZED_FILE, name, fuzz_dir],
            capture_output=True,
            text=True,
            timeout=120,
        )
        assert r.returncode == 0, (r.returncode, r.stderr[-2000:])
        assert "panicked" not in r.stderr, r.stderr[-2000:]
        out = json.loads(r.stdout.strip().splitlines()[-1])
        assert set(out["reads"]) == {"ok"}, out
    finally:
        for p in (path, path_of(fuzz_dir, name + ".neg")):
            if os.path.exists(p):
                os.unlink(p)


FUZZ_SETTINGS = {
    "deadline": None,
    "suppress_health_check": [HealthCheck.function_scoped_fixture, HealthCheck.too_slow],
}
fuzzed = given(edits=st.lists(edit, min_size=1, max_size=6), reseal_header=st.booleans())


@settings(max_examples=12, **FUZZ_SETTINGS)
@fuzzed
def test_the_cli_reads_fuzzed_files_without_crashing(
    fuzz_dir: str, edits: list[tuple[str, object, int]], reseal_header: bool
) -> None:
    """A dozen fuzzed files through the CLI's read-only commands (see cli_on_fuzzed_file)."""
    cli_on_fuzzed_file(fuzz_dir, edits, reseal_header)


@settings(max_examples=12, **FUZZ_SETTINGS)
@fuzzed
def test_the_cache_works_on_fuzzed_files(
    fuzz_dir: str, edits: list[tuple[str, object, int]], reseal_header: bool
) -> None:
    """A dozen fuzzed files under the Cache's calls (see cache_on_fuzzed_file)."""
    cache_on_fuzzed_file(fuzz_dir, edits, reseal_header)


@pytest.mark.stress
@pytest.mark.skipif(not STRESS, reason="make stress runs it (ZIGGURAT_STRESS=1)")
@settings(max_examples=300, **FUZZ_SETTINGS)
@fuzzed
def test_the_cache_works_on_fuzzed_files_stress(
    fuzz_dir: str, edits: list[tuple[str, object, int]], reseal_header: bool
) -> None:
    """As above, for 300 fuzzed files."""
    cache_on_fuzzed_file(fuzz_dir, edits, reseal_header)


@pytest.mark.stress
@pytest.mark.skipif(not STRESS, reason="make stress runs it (ZIGGURAT_STRESS=1)")
@settings(max_examples=400, **FUZZ_SETTINGS)
@fuzzed
def test_the_cli_reads_fuzzed_files_without_crashing_stress(
    fuzz_dir: str, edits: list[tuple[str, object, int]], reseal_header: bool
) -> None:
    """As above, for 400 fuzzed files."""
    cli_on_fuzzed_file(fuzz_dir, edits, reseal_header)
