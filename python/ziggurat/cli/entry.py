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

import io
import itertools
import json
import pickle
import reprlib
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
# Classes a preview may build: plain data with no side effects. Anything else a pickle
# names is shown by name and arguments, never imported or called.
_SAFE_GLOBALS = {
    ("builtins", "set"),
    ("builtins", "frozenset"),
    ("builtins", "bytearray"),
    ("builtins", "complex"),
    ("builtins", "range"),
    ("builtins", "slice"),
    ("collections", "OrderedDict"),
    ("collections", "deque"),
    ("datetime", "date"),
    ("datetime", "datetime"),
    ("datetime", "time"),
    ("datetime", "timedelta"),
    ("datetime", "timezone"),
    ("decimal", "Decimal"),
    ("uuid", "UUID"),
}


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


class _PreviewUnpickler(pickle.Unpickler):
    def find_class(self, module: str, name: str) -> Any:
        if (module, name) in _SAFE_GLOBALS:
            return super().find_class(module, name)
        return type(name, (_Opaque,), {"qualname": f"{module}.{name}"})


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


def _repr(obj: Any, width: int) -> str:
    r = _Repr()
    r.maxlevel, r.maxdict, r.maxlist, r.maxtuple, r.maxset = 4, 20, 20, 20, 20
    r.maxstring, r.maxother, r.maxlong = max(width - 2, 8), width, width
    text = r.repr(obj)
    return text if len(text) <= width else text[: width - 3] + "..."


def _plain(obj: Any) -> bool:
    """Whether ``obj`` prints as JSON exactly (what ``--json`` may include as a value)."""
    if obj is None or isinstance(obj, (bool, str)):
        return True
    if isinstance(obj, int):
        return True
    if isinstance(obj, float):
        return obj == obj and obj not in (float("inf"), float("-inf"))
    if isinstance(obj, list):
        return all(_plain(x) for x in obj)
    if isinstance(obj, dict):
        return all(isinstance(k, str) and _plain(v) for k, v in obj.items())
    return False


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
    try:
        if serializer == "orjson":
            obj: Any = json.loads(payload)
            return Decoded("json", obj, _repr(obj, width), None)
        if serializer == "pickle":
            obj = _PreviewUnpickler(io.BytesIO(payload)).load()
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
