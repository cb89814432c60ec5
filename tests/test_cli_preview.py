"""``ziggurat get``'s preview of a stored value stays bounded whatever the value says.

A value in a segment is written by any process of the host, so the command reads it as
untrusted: a pickle that declares more bytes than it holds, or asks for
``bytearray(10**10)`` or ``set(range(10**9))``, is not built (the preview says why); a
large real value is decoded only up to ``DECODE_MAX`` bytes and printed within ``--width``
characters, saying how much was left out. Memory is measured with ``tracemalloc`` (what
the interpreter allocates), never with timings.
"""

from __future__ import annotations

import ast
import json
import os
import pickle
import resource
import struct
import subprocess
import sys
import tracemalloc
import uuid
from collections.abc import Iterator
from typing import Any

import pytest
from ziggurat import Cache
from ziggurat.cli.entry import DECODE_MAX, KIND_VALUE, decode

MiB = 1 << 20
# What decoding a small hostile payload may allocate at most.
BOUND = 8 * MiB


class Raw:
    """A serializer that stores the bytes it is given: what a hostile writer could store."""

    def dumps(self, obj: Any) -> bytes:
        assert isinstance(obj, bytes)
        return obj

    def loads(self, data: bytes) -> Any:
        return data


def declaring(n: int) -> bytes:
    """A protocol-5 pickle of a 1000-byte bytearray whose BYTEARRAY8 opcode declares ``n``."""
    p = pickle.dumps(bytearray(1000), protocol=5)
    at = p.index(pickle.BYTEARRAY8) + 1
    assert struct.unpack("<Q", p[at : at + 8]) == (1000,)
    return p[:at] + struct.pack("<Q", n) + p[at + 8 :]


def calling(module: str, name: str, arg: bytes) -> bytes:
    """A pickle that calls ``module.name(arg)``; ``arg`` is the pickled argument's opcodes."""
    return b"\x80\x02c" + f"{module}\n{name}\n".encode() + arg + b"\x85R."


def peak_of(payload: bytes, width: int = 200) -> tuple[Any, int]:
    tracemalloc.start()
    try:
        d = decode(payload, KIND_VALUE, "auto", width)
        return d, tracemalloc.get_traced_memory()[1]
    finally:
        tracemalloc.stop()


def test_a_declared_length_beyond_the_payload_is_not_allocated() -> None:
    """A BYTEARRAY8 declaring 256 MiB over 1000 real bytes allocates nothing of the sort."""
    d, peak = peak_of(declaring(256 * MiB))
    assert peak < BOUND
    assert d.format == "raw"
    assert d.error is not None and "268435456" in d.error


def test_bytearray_of_a_size_is_not_built() -> None:
    """``bytearray(64 MiB)`` asked for by a 30-byte pickle is refused, naming the class."""
    payload = calling("builtins", "bytearray", b"J" + struct.pack("<i", 64 * MiB))
    d, peak = peak_of(payload)
    assert peak < BOUND
    assert (d.format, d.value) == ("raw", None)
    assert d.error is not None and "builtins.bytearray() from int" in d.error


def test_a_set_of_a_range_is_not_built() -> None:
    """``set(range(n))``: the range is lazy, the set would not be."""
    rng = b"cbuiltins\nrange\nJ" + struct.pack("<i", 10**6) + b"\x85R"
    payload = b"\x80\x02cbuiltins\nset\n" + rng + b"\x85R."
    d, peak = peak_of(payload)
    assert peak < BOUND
    assert d.error is not None and "builtins.set() from range" in d.error


def test_plain_data_classes_still_preview() -> None:
    """The classes built from data still show as before."""
    import collections

    for value, shown in [
        ({1, 2}, "{1, 2}"),
        (frozenset({3}), "frozenset({3})"),
        (bytearray(b"ab"), "bytearray(b'ab')"),
        (collections.deque([1], maxlen=3), "deque([1])"),
        (collections.OrderedDict(a=1), "OrderedDict({'a': 1})"),
    ]:
        for protocol in (2, 5):
            d = decode(pickle.dumps(value, protocol=protocol), KIND_VALUE)
            assert (d.format, d.error) == ("pickle", None), d
            assert d.preview.replace("OrderedDict([('a', 1)])", "OrderedDict({'a': 1})") == shown


def test_many_unknown_classes_are_refused() -> None:
    """Each unknown class a preview shows costs a class object: their number is bounded."""
    names = b"".join(b"cmod\nC%d\n" % i for i in range(5000))
    d, peak = peak_of(b"\x80\x02(" + names + b"l.")
    assert peak < BOUND
    assert d.error is not None and "more than 1000 classes" in d.error


def test_deep_nesting_is_shown_not_raised() -> None:
    """A value nested deeper than Python recurses is previewed, not a RecursionError."""
    depth = 100_000
    d = decode(b"\x80\x02" + b"]" * depth + b"a" * (depth - 1) + b".", KIND_VALUE)
    assert d.format == "pickle" and d.value is None
    assert d.preview.startswith("[[[[")


@pytest.mark.parametrize("value", [b"\x00" * (DECODE_MAX // 2), "é" * (DECODE_MAX // 4)])
def test_a_large_decoded_value_is_cut_and_says_so(value: bytes | str) -> None:
    d, peak = peak_of(pickle.dumps(value, protocol=5), width=80)
    assert d.error is None and d.format == "pickle"
    assert len(d.preview) <= 80
    unit = "bytes" if isinstance(value, bytes) else "characters"
    shown = d.preview.rsplit("…", 1)
    assert len(shown) == 2 and shown[1].endswith(f" {unit} more)")
    more = int(shown[1].strip(" ()").split()[0].replace(",", ""))
    assert len(ast.literal_eval(shown[0])) + more == len(value)
    # Decoding holds the value; turning it into text adds little.
    assert peak < 3 * len(pickle.dumps(value, protocol=5)) + BOUND


# ---------------------------------------------------------------- the command itself


@pytest.fixture
def stored(shm_dir: str) -> Iterator[tuple[Cache, str]]:
    name = f"preview-{uuid.uuid4().hex[:12]}"
    c = Cache(name, size="64MiB", directory=shm_dir, serializer=Raw())
    try:
        yield c, name
    finally:
        c.unlink()


def _limit_memory() -> None:
    # The command may not use more than 1 GiB of address space: a pickle that got it to
    # allocate what it declares fails here, instead of taking the host's memory.
    resource.setrlimit(resource.RLIMIT_AS, (1 << 30, 1 << 30))


def get_json(directory: str, name: str, key: str, *args: str, timeout: float = 120) -> Any:
    command = [sys.executable, "-m", "ziggurat", "get", name, key, "--directory", directory]
    r = subprocess.run(
        [*command, *args, "--json"],
        capture_output=True,
        text=True,
        timeout=timeout,
        preexec_fn=_limit_memory,
    )
    assert r.returncode == 0, r.stderr
    assert r.stderr == ""
    return json.loads(r.stdout)


def test_get_of_a_pickle_declaring_ten_gigabytes(shm_dir: str, stored: tuple[Cache, str]) -> None:
    """The crafted pickle (13 bytes declaring 10**10) is shown as bytes, with why."""
    c, name = stored
    c.set("huge", declaring(10**10))
    doc = get_json(shm_dir, name, "huge")
    assert doc["found"] == "value" and doc["format"] == "raw" and doc["value"] is None
    assert "10000000000" in doc["error"]
    assert len(doc["preview"]) <= 200


def test_get_of_a_large_real_value_is_cut(shm_dir: str, stored: tuple[Cache, str]) -> None:
    """A 4 MiB value (above DECODE_MAX) is not decoded: its first bytes are shown within
    --width, with how many were left out."""
    c, name = stored
    payload = pickle.dumps(bytearray(4 * MiB), protocol=5)
    c.set("big", payload)
    doc = get_json(shm_dir, name, "big", "--width", "100")
    assert (doc["format"], doc["value"], doc["size"]) == ("raw", None, len(payload))
    assert len(doc["preview"]) <= 100
    assert doc["preview"].endswith(" bytes more)")
    assert f"{len(payload):,} bytes, more than a preview decodes" in doc["error"]
    shown = doc["preview"].rsplit("…", 1)
    more = int(shown[1].strip(" ()").split()[0].replace(",", ""))
    assert len(ast.literal_eval(shown[0])) + more == len(payload)
    assert os.path.exists(os.path.join(shm_dir, f"ziggurat.{name}.v2"))


def test_get_of_a_pickle_of_shared_lists_returns_promptly(
    shm_dir: str, stored: tuple[Cache, str]
) -> None:
    """A 257-byte pickle whose memo makes every level's list hold the one below twice:
    2**40 items read as a tree. The command looks at each list once, shows the preview and
    leaves the value out of --json (JSON would print every item)."""
    x: list[Any] = [1]
    for _ in range(40):
        x = [x, x]
    payload = pickle.dumps(x, protocol=5)
    assert len(payload) < 300
    c, name = stored
    c.set("bomb", payload)
    doc = get_json(shm_dir, name, "bomb", timeout=30)
    assert (doc["format"], doc["value"]) == ("pickle", None)
    assert doc["preview"].startswith("[[[[")
    tree: list[Any] = [1]
    for _ in range(3):
        tree = [tree, json.loads(json.dumps(tree))]
    assert decode(pickle.dumps(tree, protocol=5), KIND_VALUE).value == tree
