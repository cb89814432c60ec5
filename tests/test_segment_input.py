"""G5: bad input raises a clear TypeError or ValueError and changes no state.

Table-driven: every bad key, value, ttl and tags argument is tried on every method that
takes it.  Before and after each call we snapshot the segment: the values, stamps and tags
of existing entries, whether a fresh key appeared, and the write counters.  A call that
raised must leave the snapshot identical (validation happens before anything is written).
"""

from __future__ import annotations

import contextlib
import math
import os
from collections.abc import Callable, Iterator
from typing import Any

import pytest
from helpers_segment import MiB, Segment, new_name

MakeSegment = Callable[..., Segment]
Arg = Callable[[Segment], Any]  # builds the argument from the segment (sizes depend on it)

VICTIM = "victim"  # exists, tagged "t"
FRESH = "fresh"  # absent: a bad add/set must not create it


def const(value: Any) -> Arg:
    return lambda _seg: value


def gen(*items: Any) -> Arg:
    """A fresh generator each time (a generator can be consumed once)."""
    return lambda _seg: (item for item in items)


BAD_KEYS: list[tuple[str, Arg, type[Exception]]] = [
    ("empty-str", const(""), ValueError),
    ("empty-bytes", const(b""), ValueError),
    ("too-long-str", lambda s: "k" * (s.max_key_size + 1), ValueError),
    ("too-long-bytes", lambda s: b"k" * (s.max_key_size + 1), ValueError),
    ("too-long-utf8", lambda s: "é" * (s.max_key_size // 2 + 1), ValueError),
    ("lone-surrogate", const("vic\ud800tim"), ValueError),
    ("int", const(1), TypeError),
    ("float", const(1.5), TypeError),
    ("none", const(None), TypeError),
    ("list", const([VICTIM]), TypeError),
    ("tuple", const((VICTIM,)), TypeError),
    ("bytearray", const(bytearray(VICTIM.encode())), TypeError),
    ("memoryview", const(memoryview(VICTIM.encode())), TypeError),
    ("object", const(object()), TypeError),
]

BAD_VALUES: list[tuple[str, Arg, type[Exception]]] = [
    ("empty", const(b""), ValueError),
    ("too-long", lambda s: b"v" * (s.max_value_size + 1), ValueError),
    ("str", const("new"), TypeError),
    ("none", const(None), TypeError),
    ("int", const(5), TypeError),
    ("bytearray", const(bytearray(b"new")), TypeError),
    ("memoryview", const(memoryview(b"new")), TypeError),
    ("list", const([1, 2]), TypeError),
]

BAD_TTLS: list[tuple[str, Arg, type[Exception]]] = [
    ("zero-int", const(0), ValueError),
    ("zero-float", const(0.0), ValueError),
    ("negative-int", const(-1), ValueError),
    ("negative-float", const(-0.001), ValueError),
    ("nan", const(math.nan), ValueError),
    ("inf", const(math.inf), ValueError),
    ("minus-inf", const(-math.inf), ValueError),
    ("true", const(True), TypeError),
    ("false", const(False), TypeError),
    ("str", const("10"), TypeError),
    ("bytes", const(b"10"), TypeError),
    ("list", const([10]), TypeError),
]

BAD_TAGS: list[tuple[str, Arg, type[Exception]]] = [
    ("int-tag", const([1]), TypeError),
    ("none-tag", const([None]), TypeError),
    ("bytes-tag", const([b"t"]), TypeError),
    ("empty-tag", const([""]), ValueError),
    ("empty-after-good", const(["t", ""]), ValueError),
    ("int-after-good", const(["t", 2]), TypeError),
    ("nine-tags", const([f"tag{i}" for i in range(9)]), ValueError),
    ("not-iterable", const(5), TypeError),
    ("generator-with-int", gen("t", "u", 3), TypeError),
]

BAD_INVALIDATE_TAGS: list[tuple[str, Arg, type[Exception]]] = [
    ("int", const(1), TypeError),
    ("none", const(None), TypeError),
    ("bytes", const(b"t"), TypeError),
    ("list", const(["t"]), TypeError),
    ("empty", const(""), ValueError),
]


def _calls_with_key(key: Arg) -> Iterator[tuple[str, Callable[[Segment], object]]]:
    yield "get", lambda s: s.get(key(s))
    yield "set", lambda s: s.set(key(s), b"new")
    yield "add", lambda s: s.add(key(s), b"new")
    yield "delete", lambda s: s.delete(key(s))
    yield "stamp", lambda s: s.stamp(key(s))
    yield "wait", lambda s: s.wait(key(s), 0, 0.01)


def _calls_with_value(value: Arg) -> Iterator[tuple[str, Callable[[Segment], object]]]:
    yield "set-victim", lambda s: s.set(VICTIM, value(s))
    yield "set-fresh", lambda s: s.set(FRESH, value(s))
    yield "add-fresh", lambda s: s.add(FRESH, value(s))


def _calls_with_ttl(ttl: Arg) -> Iterator[tuple[str, Callable[[Segment], object]]]:
    yield "set-victim", lambda s: s.set(VICTIM, b"new", ttl=ttl(s))
    yield "set-fresh", lambda s: s.set(FRESH, b"new", ttl=ttl(s))
    yield "add-fresh", lambda s: s.add(FRESH, b"new", ttl=ttl(s))


def _calls_with_tags(tags: Arg) -> Iterator[tuple[str, Callable[[Segment], object]]]:
    yield "set-victim", lambda s: s.set(VICTIM, b"new", tags=tags(s))
    yield "set-fresh", lambda s: s.set(FRESH, b"new", tags=tags(s))
    yield "add-fresh", lambda s: s.add(FRESH, b"new", tags=tags(s))


def _cases() -> Iterator[Any]:
    for name, key, exc in BAD_KEYS:
        for method, call in _calls_with_key(key):
            yield pytest.param(call, exc, id=f"key-{name}-{method}")
    for name, value, exc in BAD_VALUES:
        for method, call in _calls_with_value(value):
            yield pytest.param(call, exc, id=f"value-{name}-{method}")
    for name, ttl, exc in BAD_TTLS:
        for method, call in _calls_with_ttl(ttl):
            yield pytest.param(call, exc, id=f"ttl-{name}-{method}")
    for name, tags, exc in BAD_TAGS:
        for method, call in _calls_with_tags(tags):
            yield pytest.param(call, exc, id=f"tags-{name}-{method}")
    for name, tag, exc in BAD_INVALIDATE_TAGS:
        yield pytest.param(
            (lambda t: lambda s: s.invalidate_tag(t(s)))(tag), exc, id=f"invalidate_tag-{name}"
        )
    yield pytest.param(lambda s: s.wait(VICTIM, 0, "1"), TypeError, id="wait-timeout-str")
    yield pytest.param(lambda s: s.wait(VICTIM, "0", 0.01), TypeError, id="wait-stamp-str")
    yield pytest.param(lambda s: s.verify(repair="yes"), TypeError, id="verify-repair-str")


@pytest.fixture(scope="module")
def shared_seg() -> Iterator[Segment]:
    """One segment for the whole table (hundreds of cases), in its own /dev/shm directory."""
    directory = f"/dev/shm/zigtest-{new_name('input')}"
    os.mkdir(directory, 0o700)
    seg = Segment(new_name(), 4 * MiB, directory=directory)
    try:
        yield seg
    finally:
        seg.unlink()
        seg.close()
        os.rmdir(directory)


def _reset(seg: Segment) -> None:
    seg.delete(FRESH)
    seg.set(VICTIM, b"old", tags=["t"])
    seg.set("other", b"other", tags=["u"])


def _snapshot(seg: Segment) -> dict[str, Any]:
    stats = seg.stats()
    return {
        "counters": {k: stats[k] for k in ("sets", "deletes", "entries", "evictions")},
        "bytes_used": stats["bytes_used"],
        "values": {k: seg.get(k) for k in (VICTIM, FRESH, "other")},
        "stamps": {k: seg.stamp(k) for k in (VICTIM, FRESH, "other")},
    }


@pytest.mark.parametrize(("call", "exc"), list(_cases()))
def test_bad_input_raises_and_changes_nothing(
    shared_seg: Segment, call: Callable[[Segment], object], exc: type[Exception]
) -> None:
    """G5: the call raises exactly TypeError/ValueError (as listed) and no state changes."""
    _reset(shared_seg)
    before = _snapshot(shared_seg)
    with pytest.raises(exc) as info:
        call(shared_seg)
    assert type(info.value) is exc or issubclass(type(info.value), exc)
    assert str(info.value), "the error message must say what is wrong"
    after = _snapshot(shared_seg)
    assert after == before


def test_bad_input_does_not_poison_later_calls(shared_seg: Segment) -> None:
    """G5: after a burst of rejected calls the segment still works and verifies clean."""
    for call in [p.values[0] for p in _cases()]:
        with contextlib.suppress(TypeError, ValueError):
            call(shared_seg)
    shared_seg.set("after", b"works", ttl=60, tags=["x"])
    assert shared_seg.get("after") == b"works"
    report = shared_seg.verify()
    assert report["ok"], report


GOOD_EDGE_CALLS: list[tuple[str, Callable[[Segment], object]]] = [
    ("key-max-bytes", lambda s: s.set(b"k" * s.max_key_size, b"v")),
    ("key-max-utf8", lambda s: s.set("é" * (s.max_key_size // 2), b"v")),
    ("value-max", lambda s: s.set("big", b"v" * s.max_value_size)),
    ("value-one-byte", lambda s: s.set("one", b"\x00")),
    ("ttl-int", lambda s: s.set("ttl-int", b"v", ttl=1)),
    ("ttl-tiny-float", lambda s: s.set("ttl-tiny", b"v", ttl=1e-3)),
    ("ttl-huge", lambda s: s.set("ttl-huge", b"v", ttl=10.0**9)),
    ("eight-tags", lambda s: s.set("tags8", b"v", tags=[f"t{i}" for i in range(8)])),
    ("tags-generator", lambda s: s.set("tags-gen", b"v", tags=(t for t in ("a", "b")))),
    ("tags-unicode", lambda s: s.set("tags-uni", b"v", tags=["ü", "日本"])),
    ("tags-empty-tuple", lambda s: s.set("tags-none", b"v", tags=())),
]


@pytest.mark.parametrize(
    "call", [c for _, c in GOOD_EDGE_CALLS], ids=[n for n, _ in GOOD_EDGE_CALLS]
)
def test_edge_input_accepted(shared_seg: Segment, call: Callable[[Segment], object]) -> None:
    """The limits themselves are valid input: a set at each limit succeeds and counts."""
    sets = shared_seg.stats()["sets"]
    call(shared_seg)
    assert shared_seg.stats()["sets"] == sets + 1


# --------------------------------------------------------------------------- constructor

BAD_CONSTRUCTORS: list[tuple[str, dict[str, Any], type[Exception]]] = [
    ("name-empty", {"name": ""}, ValueError),
    ("name-slash", {"name": "a/b"}, ValueError),
    ("name-dotdot", {"name": "../escape"}, ValueError),
    ("name-space", {"name": "a b"}, ValueError),
    ("name-nul", {"name": "a\x00b"}, ValueError),
    ("name-unicode", {"name": "é"}, ValueError),
    ("name-too-long", {"name": "n" * 201}, ValueError),
    ("name-int", {"name": 5}, TypeError),
    ("name-bytes", {"name": b"abc"}, TypeError),
    ("size-zero", {"size": 0}, ValueError),
    ("size-negative", {"size": -1}, ValueError),
    ("size-tiny", {"size": 100}, ValueError),
    ("size-float", {"size": 4.5 * MiB}, TypeError),
    ("shards-zero", {"shards": 0}, ValueError),
    ("shards-three", {"shards": 3}, ValueError),
    ("shards-str", {"shards": "4"}, TypeError),
    ("lock-timeout-negative", {"lock_timeout": -1.0}, ValueError),
    ("lock-timeout-nan", {"lock_timeout": math.nan}, ValueError),
    ("avg-item-size-zero", {"avg_item_size": 0}, ValueError),
    ("avg-item-size-negative", {"avg_item_size": -1}, ValueError),
    ("shards-negative", {"shards": -1}, ValueError),
    ("shards-huge", {"shards": 2**40}, ValueError),
]


@pytest.mark.parametrize(
    "override,exc",
    [(o, e) for _, o, e in BAD_CONSTRUCTORS],
    ids=[n for n, _, _ in BAD_CONSTRUCTORS],
)
def test_bad_constructor_arguments(shm_dir: str, override: dict[str, Any], exc: type) -> None:
    """G5/G6: bad Segment() arguments raise TypeError/ValueError and leave no file behind
    (in the directory or, for "../escape", next to it).
    """
    args: dict[str, Any] = {"name": new_name(), "size": 4 * MiB, "directory": shm_dir}
    args.update(override)
    name, size = args.pop("name"), args.pop("size")
    with pytest.raises(exc):
        Segment(name, size, **args)
    assert os.listdir(shm_dir) == []
    assert not [n for n in os.listdir(os.path.dirname(shm_dir)) if "escape" in n]


@pytest.mark.parametrize("stamp", [-1, -(2**70), 2**40, 2**70])
def test_wait_with_impossible_stamp(shared_seg: Segment, stamp: int) -> None:
    """G5: a stamp no key can have is either refused with ValueError or treated as
    "differs" (True at once); never another exception type such as OverflowError.
    """
    try:
        changed = shared_seg.wait(VICTIM, stamp, 0.5)
    except ValueError:
        return
    assert changed is True
