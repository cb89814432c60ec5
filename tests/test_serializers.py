"""The built-in serializers, mostly "auto" (``ziggurat._native.AutoCodec``).

"auto" writes plain JSON-shaped values with orjson and everything else with pickle
protocol 5, and must give back exactly what it was given: the same types (bool stays
bool, tuple stays tuple, subclasses stay subclasses), the same values (including the sign
of -0.0 and NaN), the same dict key order, and the same sharing of containers (a dict that
appears twice, a list that contains itself).
"""

from __future__ import annotations

import collections
import enum
import math
import pickle
import sys
import threading
from typing import Any

import hypothesis.strategies as st
import orjson
import pytest
from hypothesis import given, settings
from ziggurat._native import AutoCodec
from ziggurat.serializers import resolve

PICKLE_PROTO = 0x80
CODEC = AutoCodec()


class Color(enum.IntEnum):
    RED = 1
    GREEN = 2


class Tag(str):
    pass


# Found by pickle through its module, where no name "<lambda>" exists.
MODULE_LAMBDAS = [lambda: 1]


def same(a: Any, b: Any) -> bool:
    """Whether ``b`` is an exact copy of ``a``: same types and values all the way down, and
    the same containers shared (or cyclic) at the same places."""
    return _same(a, b, {}, {})


def _same(a: Any, b: Any, fwd: dict[int, int], back: dict[int, int]) -> bool:
    if type(a) is not type(b):
        return False
    if isinstance(a, float):
        if math.isnan(a):
            return math.isnan(b)
        return a == b and math.copysign(1.0, a) == math.copysign(1.0, b)
    if not isinstance(a, list | tuple | dict | set | frozenset):
        return bool(a == b)
    # Containers: pair them up by identity, so sharing and cycles must match too.
    if id(a) in fwd or id(b) in back:
        return fwd.get(id(a)) == id(b) and back.get(id(b)) == id(a)
    fwd[id(a)], back[id(b)] = id(b), id(a)
    if len(a) != len(b):
        return False
    if isinstance(a, dict):
        return all(
            _same(ka, kb, fwd, back) and _same(va, vb, fwd, back)
            for (ka, va), (kb, vb) in zip(a.items(), b.items(), strict=True)
        )
    if isinstance(a, set | frozenset):
        # Set elements here are hashable atoms whose equality implies the same type.
        return a == b and all(type(x) is type(next(y for y in b if y == x)) for x in a)
    return all(_same(x, y, fwd, back) for x, y in zip(a, b, strict=True))


def roundtrip(value: Any) -> tuple[bytes, Any]:
    data = CODEC.dumps(value)
    assert type(data) is bytes
    return data, CODEC.loads(data)


def nested(depth: int) -> list[Any]:
    """``depth`` lists, each the only element of the one outside it."""
    value: list[Any] = []
    for _ in range(depth - 1):
        value = [value]
    return value


# ----------------------------------------------------------------------------- paths taken

PLAIN_VALUES: list[Any] = [
    None,
    True,
    False,
    0,
    -7,
    2**63 - 1,
    -(2**63),
    0.0,
    -0.0,
    1.5,
    0.1 + 0.2,
    1e16,
    5e-324,
    1.7976931348623157e308,
    "",
    'text ünïcode 日本語 \x00 \n "quoted" \\',
    [],
    {},
    [True, 1, 1.0, "1", None],
    {"b": 1, "a": 2, "c": {"z": [], "y": {}}},
    {"users": [{"id": i, "name": f"u{i}", "ok": i % 2 == 0} for i in range(50)]},
    nested(128),
]


@pytest.mark.parametrize("value", PLAIN_VALUES, ids=lambda v: repr(v)[:40])
def test_plain_values_are_json(value: Any) -> None:
    """Plain JSON-shaped data is written by orjson and comes back exactly."""
    data, back = roundtrip(value)
    assert data[0] != PICKLE_PROTO
    assert data == orjson.dumps(value)
    assert same(value, back)


def _shared_dict() -> list[Any]:
    d = {"a": 1}
    return [d, d]


def _self_list() -> list[Any]:
    v: list[Any] = [1]
    v.append(v)
    return v


def _shared_late() -> list[Any]:
    # Past the small linear scan: the repeat must be found in the hash set.
    items: list[Any] = [{"i": i} for i in range(1000)]
    items.append(items[3])
    return items


FALLBACK_VALUES: list[Any] = [
    (1, 2),
    [1, (2,)],
    {1, 2, 3},
    frozenset({"a"}),
    b"\x00bytes",
    bytearray(b"ab"),
    collections.OrderedDict([("b", 1), ("a", 2)]),
    collections.defaultdict(list, {"a": [1]}),
    Color.GREEN,
    {"c": Color.RED},
    Tag("x"),
    {Tag("k"): 1},
    {1: "int key"},
    2**70,
    2**63,
    -(2**63) - 1,
    float("inf"),
    float("-inf"),
    [1.0, float("-inf")],
    "\ud800",
    {"\ud800": 1},
    ["ok", "a\udfffb"],
    nested(129),
    nested(200),
    _shared_dict(),
    _self_list(),
    _shared_late(),
    1 + 2j,
]


@pytest.mark.parametrize("value", FALLBACK_VALUES, ids=lambda v: repr(v)[:40])
def test_other_values_are_pickled(value: Any) -> None:
    """Values JSON cannot carry exactly are pickled and come back exactly."""
    data, back = roundtrip(value)
    assert data[0] == PICKLE_PROTO
    assert same(value, back)


def test_nan_is_pickled() -> None:
    """NaN (which orjson would write as null) is pickled and comes back as NaN."""
    data, back = roundtrip(float("nan"))
    assert data[0] == PICKLE_PROTO
    assert type(back) is float and math.isnan(back)
    data, back = roundtrip({"x": [float("nan")]})
    assert data[0] == PICKLE_PROTO
    assert math.isnan(back["x"][0])


def test_shared_dict_stays_shared() -> None:
    """A dict appearing twice in a value is still one object after the round trip."""
    _, back = roundtrip(_shared_dict())
    assert back == [{"a": 1}, {"a": 1}]
    assert back[0] is back[1]


def test_self_referencing_list() -> None:
    """A list that contains itself comes back containing itself."""
    _, back = roundtrip(_self_list())
    assert back[0] == 1
    assert back[1] is back


def test_equal_but_distinct_containers_are_json() -> None:
    """Equal but distinct containers (no sharing) still take the JSON path, also past the
    small linear scan of the guard."""
    value = [{"id": i, "tags": []} for i in range(10_000)]
    data, back = roundtrip(value)
    assert data[0] != PICKLE_PROTO
    assert back == value


def test_bool_and_int_keep_their_types() -> None:
    """bool and int stay distinct: True does not come back as 1, nor 1 as True."""
    _, back = roundtrip([True, 1, False, 0])
    assert [type(x) for x in back] == [bool, int, bool, int]


def test_loads_accepts_bytes_like() -> None:
    """loads takes bytearray and memoryview as well as bytes, on both paths."""
    for value in ({"a": [1]}, (1, 2)):
        data = CODEC.dumps(value)
        assert CODEC.loads(bytearray(data)) == value
        assert CODEC.loads(memoryview(data)) == value


# ----------------------------------------------------------------------------- properties

json_atoms = (
    st.none()
    | st.booleans()
    | st.integers(min_value=-(2**63), max_value=2**63 - 1)
    | st.floats(allow_nan=False, allow_infinity=False)
    | st.text()
)
json_values = st.recursive(
    json_atoms,
    lambda inner: st.lists(inner, max_size=5) | st.dictionaries(st.text(), inner, max_size=5),
    max_leaves=30,
)

hashable_atoms = (
    st.integers()
    | st.text()
    | st.binary(max_size=8)
    | st.sampled_from([Color.RED, Color.GREEN, Tag("t"), "\udc80"])
)
any_atoms = (
    json_atoms
    | st.integers()
    | st.floats()
    | st.binary(max_size=16)
    | st.sampled_from(["\ud800", "x\udfff", Color.RED, Tag("t"), 1 + 2j])
)
any_values = st.recursive(
    any_atoms,
    lambda inner: (
        st.lists(inner, max_size=5)
        | st.lists(inner, max_size=5).map(tuple)
        | st.dictionaries(st.text(), inner, max_size=5)
        | st.dictionaries(hashable_atoms, inner, max_size=5)
        | st.dictionaries(st.text(), inner, max_size=5).map(collections.OrderedDict)
        | st.frozensets(hashable_atoms, max_size=5)
        | st.sets(hashable_atoms, max_size=5)
    ),
    max_leaves=30,
)


@settings(max_examples=300, deadline=None)
@given(json_values)
def test_json_values_property(value: Any) -> None:
    """Any plain JSON-shaped value is written as orjson writes it and comes back exactly."""
    data, back = roundtrip(value)
    assert data == orjson.dumps(value)
    assert data[0] != PICKLE_PROTO
    assert same(value, back)


@settings(max_examples=500, deadline=None)
@given(any_values)
def test_any_values_property(value: Any) -> None:
    """Any mix of JSON-like and other types comes back with the same types and values."""
    _, back = roundtrip(value)
    assert same(value, back)


# ----------------------------------------------------------------------------- bad input


def test_loads_empty_is_value_error() -> None:
    """Empty data is refused with ValueError (it is neither JSON nor a pickle)."""
    for empty in (b"", bytearray(), memoryview(b"")):
        with pytest.raises(ValueError, match="empty"):
            CODEC.loads(empty)


def test_loads_non_bytes_is_type_error() -> None:
    """loads refuses str and other non-bytes-like objects with TypeError."""
    for bad in ("[1]", 5, None):
        with pytest.raises(TypeError, match="bytes"):
            CODEC.loads(bad)  # type: ignore[arg-type]


def test_loads_garbage_raises() -> None:
    """Corrupt data raises the decoder's error rather than returning something."""
    with pytest.raises(orjson.JSONDecodeError):
        CODEC.loads(b"{not json")
    with pytest.raises(pickle.UnpicklingError):
        CODEC.loads(b"\x80\x05garbage")


def test_dumps_unpicklable_raises() -> None:
    """An object pickle refuses makes dumps raise pickle's own error."""
    with pytest.raises(pickle.PicklingError):
        CODEC.dumps(MODULE_LAMBDAS[0])
    with pytest.raises(TypeError, match="pickle"):
        CODEC.dumps(threading.Lock())
    with pytest.raises(TypeError, match="pickle"):
        CODEC.dumps({"a": [1, threading.Lock()]})


# ----------------------------------------------------------------------------- resolve


def test_resolve_auto_has_codec() -> None:
    """resolve("auto") gives dumps/loads that are the methods of its ``codec``."""
    s = resolve("auto")
    codec = s.codec  # type: ignore[attr-defined]
    assert isinstance(codec, AutoCodec)
    assert s.name == "auto"  # type: ignore[attr-defined]
    assert s.dumps == codec.dumps and s.loads == codec.loads
    assert s.loads(s.dumps({"a": (1, 2)})) == {"a": (1, 2)}


def test_resolve_auto_without_orjson(monkeypatch: pytest.MonkeyPatch) -> None:
    """Without orjson, AutoCodec raises ImportError and "auto" is the pickle serializer."""
    monkeypatch.setitem(sys.modules, "orjson", None)
    with pytest.raises(ImportError, match="orjson"):
        AutoCodec()
    s = resolve("auto")
    assert s.name == "pickle"  # type: ignore[attr-defined]
    assert not hasattr(s, "codec")
    assert s.loads(s.dumps({"a": 1})) == {"a": 1}


def test_resolve_unknown_lists_choices() -> None:
    """An unknown name or an object without dumps/loads is refused, listing the choices."""
    choices = "'auto', 'pickle', 'msgpack', 'orjson' or an object with dumps/loads"
    with pytest.raises(ValueError, match=f"^serializer must be {choices}, got 'yaml'$"):
        resolve("yaml")
    with pytest.raises(TypeError, match=f"^serializer must be {choices}, not int$"):
        resolve(5)  # type: ignore[arg-type]


def test_msgpack_from_many_threads() -> None:
    """The msgpack serializer round-trips correctly from many threads at once."""
    s = resolve("msgpack")
    n_threads, rounds = 8, 2000
    barrier = threading.Barrier(n_threads)
    failures: list[Any] = []

    def work(t: int) -> None:
        barrier.wait()
        for i in range(rounds):
            value = {"thread": t, "i": i, "blob": bytes([t]) * (i % 64), "s": "x" * (i % 300)}
            back = s.loads(s.dumps(value))
            if back != value:
                failures.append((value, back))
                return

    threads = [threading.Thread(target=work, args=(t,)) for t in range(n_threads)]
    interval = sys.getswitchinterval()
    sys.setswitchinterval(1e-6)  # switch threads as often as the interpreter allows
    try:
        for th in threads:
            th.start()
        for th in threads:
            th.join()
    finally:
        sys.setswitchinterval(interval)
    assert failures == []
