"""Reading an entry a ``Cache`` wrote: the 13-byte trailer and a preview of the payload.

Every value a ``Cache`` stores ends with ``kind:u8 || soft deadline:u64 || ttl ms:u32``
(little-endian; docs/format.md, "Values written by Cache"). The payload before it is the
serializer's output (kind 1), an i64 counter (kind 3) or, in the cached-miss segment, the
key's stamp (kind 2).

>>> trailer = bytes([1]) + (5000).to_bytes(8, "little") + (60000).to_bytes(4, "little")
>>> payload, t = split(b'{"a":1}' + trailer)
>>> payload, t
(b'{"a":1}', Trailer(kind=1, soft_ms=5000, ttl_ms=60000))
>>> decode(payload, t.kind, "auto")
Decoded(format='json', value={'a': 1}, preview="{'a': 1}", error=None)
"""

from __future__ import annotations

import _compat_pickle
import io
import itertools
import json
import pickle
import pickletools
import reprlib
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

__all__ = [
    "KIND_COUNTER",
    "KIND_NEGATIVE",
    "KIND_VALUE",
    "SERIALIZERS",
    "TRAILER_LEN",
    "Decoded",
    "Trailer",
    "decode",
    "split",
]

TRAILER_LEN = 13
KIND_VALUE, KIND_NEGATIVE, KIND_COUNTER = 1, 2, 3
#: What ``--serializer`` accepts: the cache's serializers, and ``raw`` for the bytes.
SERIALIZERS = ("auto", "pickle", "orjson", "msgpack", "raw")
# The pickle PROTO opcode: how the "auto" serializer marks a pickled value.
_PICKLE_PROTO = 0x80
#: The largest payload a preview decodes, in bytes. Decoding builds objects several times
#: the size of their encoding (an empty list is one byte of pickle and 56 bytes of
#: memory); a larger payload is shown as its first bytes, undecoded.
DECODE_MAX = 1 << 20
# Classes a preview may build: plain data with no side effects. Anything else a pickle
# names is shown by name and arguments, never imported or called.
_SAFE_GLOBALS = {
    ("builtins", "complex"),
    ("builtins", "range"),
    ("builtins", "slice"),
    ("datetime", "date"),
    ("datetime", "datetime"),
    ("datetime", "time"),
    ("datetime", "timedelta"),
    ("datetime", "timezone"),
    ("decimal", "Decimal"),
    ("uuid", "UUID"),
}
# Classes built from an iterable (or, for bytearray, a size): a pickle could ask for
# bytearray(10**10) or set(range(10**10)), memory and time out of proportion to its own
# size. A preview builds them only from objects already built (whose size the payload
# bounds), and never from an int or a lazy iterable such as a range.
_FROM_DATA = {
    ("builtins", "set"),
    ("builtins", "frozenset"),
    ("builtins", "bytearray"),
    ("collections", "OrderedDict"),
    ("collections", "deque"),
}
_BUILT = (str, bytes, bytearray, list, tuple, dict, set, frozenset)
# Distinct unknown classes one preview makes (a class costs about a kilobyte; its name,
# a few bytes of pickle).
_MAX_OPAQUE_CLASSES = 1000


@dataclass(frozen=True)
class Trailer:
    """The trailer of a stored entry: its kind, soft deadline (ms of the host's
    ``CLOCK_MONOTONIC_COARSE``; 0: never) and the TTL it was written with (ms; 0: never).

    >>> Trailer(1, 0, 0).kind
    1
    """

    kind: int
    soft_ms: int
    ttl_ms: int


def split(stored: bytes) -> tuple[bytes, Trailer] | None:
    """Splits a stored value into payload and trailer; None when a ``Cache`` did not
    write it (shorter than the trailer, or an unknown kind).

    >>> split(b"short") is None
    True
    """
    if len(stored) < TRAILER_LEN:
        return None
    t = stored[-TRAILER_LEN:]
    if t[0] not in (KIND_VALUE, KIND_NEGATIVE, KIND_COUNTER):
        return None
    soft = int.from_bytes(t[1:9], "little")
    ttl = int.from_bytes(t[9:13], "little")
    return stored[:-TRAILER_LEN], Trailer(t[0], soft, ttl)


@dataclass(frozen=True)
class Decoded:
    """A payload read for display: how it was decoded (``json``, ``pickle``, ``msgpack``,
    ``counter``, ``raw``), the value when it is plain data (JSON-shaped: ``--json``
    prints it), a bounded ``repr`` of it, and why it could not be decoded.

    >>> decode((7).to_bytes(8, "little", signed=True), KIND_COUNTER, "auto").value
    7
    """

    format: str
    value: Any
    preview: str
    error: str | None


class _Opaque:
    """What a preview builds for a class it does not trust: the class's name and the
    arguments and state the pickle gave it."""

    qualname = "?"

    def __new__(cls, *args: Any, **kwargs: Any) -> _Opaque:
        obj = super().__new__(cls)
        obj.args = args
        obj.state = None
        obj.items = []
        return obj

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        pass

    args: tuple[Any, ...]
    state: Any
    items: list[Any]

    def __setstate__(self, state: Any) -> None:
        self.state = state

    def append(self, item: Any) -> None:
        self.items.append(item)

    def extend(self, items: Any) -> None:
        self.items.extend(items)

    def __setitem__(self, key: Any, value: Any) -> None:
        self.items.append((key, value))

    def __repr__(self) -> str:
        parts = [repr(a) for a in self.args]
        if self.state is not None:
            parts.append(f"state={self.state!r}")
        if self.items:
            parts.append(f"items={self.items!r}")
        return f"{self.qualname}({', '.join(parts)})"


def _from_data(cls: Callable[..., Any], qualname: str) -> Callable[..., Any]:
    """``cls`` called only with arguments already built: a size or a lazy iterable is
    refused, naming the class."""

    def build(*args: Any, **kwargs: Any) -> Any:
        data = args[:1]
        if not all(isinstance(a, _BUILT) for a in data):
            raise ValueError(
                f"the pickle builds {qualname}() from {type(args[0]).__name__}, which a "
                "preview does not (its size is not bounded by the stored bytes)"
            )
        rest = args[1:]
        if qualname == "collections.deque" and not all(
            isinstance(a, int) or a is None for a in rest
        ):
            raise ValueError("the pickle gives collections.deque() an unusual maxlen")
        if qualname == "builtins.bytearray" and not all(isinstance(a, str) for a in rest):
            raise ValueError("the pickle gives bytearray() an unusual encoding")
        return cls(*args, **kwargs)

    return build


def _latin1(text: Any, encoding: Any = None) -> bytes:
    """``_codecs.encode`` for the one use pickles of bytes make of it (a codec may
    decompress, or run anything its module does)."""
    if not isinstance(text, str) or encoding not in ("latin1", "latin-1"):
        raise ValueError("the pickle calls _codecs.encode(), which a preview does not")
    return text.encode("latin-1")


class _PreviewUnpickler(pickle.Unpickler):
    def __init__(self, payload: bytes) -> None:
        super().__init__(io.BytesIO(payload))
        self._opaque: dict[tuple[str, str], type[_Opaque]] = {}

    def find_class(self, module: str, name: str) -> Any:
        # Python 2's names (protocols 0 to 2), mapped as pickle.Unpickler maps them before
        # it imports: no Python 3 module has those names.
        if (module, name) in _compat_pickle.NAME_MAPPING:
            module, name = _compat_pickle.NAME_MAPPING[(module, name)]
        else:
            module = _compat_pickle.IMPORT_MAPPING.get(module, module)
        if (module, name) in _SAFE_GLOBALS:
            return super().find_class(module, name)
        if (module, name) == ("_codecs", "encode"):
            return _latin1  # how protocols 0 to 2 give bytes (a bytearray's)
        if (module, name) in _FROM_DATA:
            return _from_data(super().find_class(module, name), f"{module}.{name}")
        cls = self._opaque.get((module, name))
        if cls is None:
            if len(self._opaque) >= _MAX_OPAQUE_CLASSES:
                raise ValueError(f"the pickle names more than {_MAX_OPAQUE_CLASSES} classes")
            cls = type(name, (_Opaque,), {"qualname": f"{module}.{name}"})
            self._opaque[(module, name)] = cls
        return cls


def _unpickle(payload: bytes) -> Any:
    """The object of a pickle, read without trusting the lengths it declares.

    The unpickler allocates what a length opcode declares (BYTEARRAY8, BINBYTES8, ...)
    before reading the bytes: 13 bytes may declare 10 GB. The opcodes are read first,
    each length checked against the bytes that follow it, so a pickle is built only when
    it holds everything it declares.
    """
    for _ in pickletools.genops(payload):
        pass
    return _PreviewUnpickler(payload).load()


class _Repr(reprlib.Repr):
    """``reprlib``'s bounded repr, keeping a dict's own order (``reprlib`` sorts keys)."""

    def repr_dict(self, x: dict[Any, Any], level: int) -> str:
        if not x:
            return "{}"
        if level <= 0:
            return "{...}"
        items = itertools.islice(x.items(), self.maxdict)
        pieces = [f"{self.repr1(k, level - 1)}: {self.repr1(v, level - 1)}" for k, v in items]
        if len(x) > self.maxdict:
            pieces.append("...")
        return "{" + ", ".join(pieces) + "}"

    def repr1(self, x: Any, level: int) -> str:
        # reprlib picks a method by the type's name: an unknown class called "set" or
        # "list" must not be shown as one.
        if isinstance(x, _Opaque):
            return self.repr_opaque(x, level)
        return super().repr1(x, level)

    def repr_opaque(self, x: _Opaque, level: int) -> str:
        if level <= 0:
            return f"{x.qualname}(...)"
        parts = [self.repr1(a, level - 1) for a in x.args[: self.maxtuple]]
        if x.state is not None:
            parts.append(f"state={self.repr1(x.state, level - 1)}")
        if x.items:
            parts.append(f"items={self.repr1(x.items, level - 1)}")
        return f"{x.qualname}({', '.join(parts)})"

    def repr_bytes(self, x: bytes, level: int) -> str:
        return self._cut(x)

    def repr_bytearray(self, x: bytearray, level: int) -> str:
        return self._cut(x)

    def _cut(self, x: bytes | bytearray) -> str:
        # Only the part shown is turned into text: repr of the whole would be up to four
        # times its size.
        n = max(self.maxstring // 4, 4)
        return repr(x) if len(x) <= n else repr(x[:n]) + "..."


def _more(n: int, unit: str) -> str:
    return f"… ({n:,} {unit} more)"


def _repr(obj: Any, width: int) -> str:
    """At most ``width`` characters of ``obj``'s repr; a str or bytes value cut short
    ends with how much was left out."""
    if isinstance(obj, (str, bytes, bytearray)):
        unit = "characters" if isinstance(obj, str) else "bytes"
        # Fewer items than characters are kept, and only they are turned into text.
        text = repr(obj[:width])
        if len(text) <= width:
            return text
        for keep in range(min(width, len(obj)), -1, -1):
            text = repr(obj[:keep]) + _more(len(obj) - keep, unit)
            if len(text) <= width or keep == 0:
                return text
    r = _Repr()
    r.maxlevel, r.maxdict, r.maxlist, r.maxtuple, r.maxset = 4, 20, 20, 20, 20
    r.maxstring, r.maxother, r.maxlong = max(width - 2, 8), width, width
    try:
        text = r.repr(obj)
    except Exception as e:  # an int too long for str(), a class's own __repr__
        text = f"<{type(obj).__name__} that cannot be shown: {e}>"
    return text if len(text) <= width else text[: width - 3] + "..."


#: The most containers and items ``_plain`` looks at: a plain value the preview may print in
#: full (``DECODE_MAX`` bytes) holds fewer.
_PLAIN_BUDGET = 1_000_000


def _plain(obj: Any) -> bool:
    """Whether ``obj`` prints as JSON exactly (what ``--json`` may include as a value).
    Not plain: nesting deeper than 100 levels, more than ``_PLAIN_BUDGET`` items, and a
    list or dict reached twice. A pickle's memo lets a few hundred bytes reference one list
    from two places at every level; read as a tree, that is 2**40 items, and JSON would
    print each of them. So the walk is linear in the containers decoded and stops there.

    >>> x = [1]
    >>> _plain([x, {"a": 1.5}]), _plain([x, x]), _plain([float("nan")])
    (True, False, False)
    """
    seen: set[int] = set()
    todo: list[tuple[Any, int]] = [(obj, 0)]
    budget = _PLAIN_BUDGET
    while todo:
        x, depth = todo.pop()
        budget -= 1
        if budget < 0 or depth > 100:
            return False
        if x is None or isinstance(x, (bool, str, int)):
            continue
        if isinstance(x, float):
            if x != x or x in (float("inf"), float("-inf")):
                return False
            continue
        if not isinstance(x, (list, dict)) or id(x) in seen:
            return False
        seen.add(id(x))
        if isinstance(x, list):
            todo.extend((v, depth + 1) for v in x)
        else:
            if not all(isinstance(k, str) for k in x):
                return False
            todo.extend((v, depth + 1) for v in x.values())
        if len(todo) > budget:
            return False
    return True


def decode(payload: bytes, kind: int, serializer: str = "auto", width: int = 200) -> Decoded:
    """Decodes a payload of ``kind`` for display, as ``serializer`` would (``auto``: a
    leading 0x80 byte is a pickle, anything else JSON). Pickles are read without importing
    or calling anything but plain-data classes: an object of another class shows as its
    class name with the arguments and state the pickle holds. A payload that does not
    decode is shown as bytes, with the error.

    >>> import pickle
    >>> decode(pickle.dumps({1, 2}, protocol=5), KIND_VALUE).preview
    '{1, 2}'
    >>> from fractions import Fraction
    >>> decode(pickle.dumps([Fraction(1, 3)], protocol=5), KIND_VALUE).preview
    '[fractions.Fraction(1, 3)]'
    >>> decode(b"\\xff\\x00", KIND_VALUE).format
    'raw'
    """
    if kind == KIND_COUNTER and len(payload) == 8:
        n = int.from_bytes(payload, "little", signed=True)
        return Decoded("counter", n, str(n), None)
    if serializer == "auto":
        serializer = "pickle" if payload[:1] == bytes([_PICKLE_PROTO]) else "orjson"
    if serializer != "raw" and len(payload) > DECODE_MAX:
        error = (
            f"not decoded: {len(payload):,} bytes, more than a preview decodes "
            f"({DECODE_MAX:,} bytes)"
        )
        return Decoded("raw", None, _repr(payload, width), error)
    try:
        if serializer == "orjson":
            obj: Any = json.loads(payload)
            return Decoded("json", obj, _repr(obj, width), None)
        if serializer == "pickle":
            obj = _unpickle(payload)
        elif serializer == "msgpack":
            try:
                import msgpack  # type: ignore[import-untyped]
            except ImportError:
                raise ValueError("--serializer msgpack needs the msgpack package") from None
            obj = msgpack.unpackb(payload, raw=False, strict_map_key=False)
        else:
            return Decoded("raw", None, _repr(payload, width), None)
    except Exception as e:
        error = f"not {serializer}: {e}".replace("\n", " ")
        return Decoded("raw", None, _repr(payload, width), error)
    return Decoded(serializer, obj if _plain(obj) else None, _repr(obj, width), None)
