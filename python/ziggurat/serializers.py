"""Serializers: how values become bytes in the shared tiers.

A serializer is any object with ``dumps(obj) -> bytes`` and ``loads(bytes) -> obj``.
The built-ins:

- ``"auto"``: plain JSON-shaped values (dicts with str keys, lists, str, int in the 64-bit
  range, finite floats, bools, None, no container appearing twice) are written as compact
  JSON (the bytes ``orjson.dumps`` writes; the extension writes them while it checks the
  value) and read with ``orjson.loads``, everything else with pickle protocol 5; a value
  comes back with the same types either way. When orjson is not installed, ``"auto"`` is
  the pickle serializer.
- ``"pickle"``: any picklable object.
- ``"msgpack"`` and ``"orjson"``: plain data only, when those packages are installed.

    >>> s = resolve("pickle")
    >>> s.loads(s.dumps({"a": 1}))
    {'a': 1}
    >>> auto = resolve("auto")
    >>> auto.dumps({"a": [1, 2.5]})
    b'{"a":[1,2.5]}'
    >>> auto.loads(auto.dumps({"a": (1, 2)}))
    {'a': (1, 2)}
"""

from __future__ import annotations

import functools
import pickle
from collections.abc import Callable
from typing import Any, Protocol, runtime_checkable

from ziggurat._native import AutoCodec

_CHOICES = "'auto', 'pickle', 'msgpack', 'orjson' or an object with dumps/loads"


@runtime_checkable
class Serializer(Protocol):
    """Turns objects into bytes and back.

    >>> isinstance(resolve("pickle"), Serializer)
    True
    """

    def dumps(self, obj: Any) -> bytes: ...

    def loads(self, data: bytes) -> Any: ...


class _Pair:
    """A serializer made of two functions."""

    def __init__(self, name: str, dumps: Callable[[Any], bytes], loads: Callable[[bytes], Any]):
        self.name = name
        self.dumps = dumps
        self.loads = loads

    def __repr__(self) -> str:
        return f"<serializer {self.name}>"


def _pickle() -> _Pair:
    # A partial of the C function: no Python frame per call on the write path.
    return _Pair("pickle", functools.partial(pickle.dumps, protocol=5), pickle.loads)


def _msgpack() -> _Pair:
    try:
        import msgpack  # type: ignore[import-untyped]
    except ImportError as e:  # pragma: no cover - depends on the environment
        raise ValueError(
            "serializer='msgpack' needs the msgpack package: pip install msgpack"
        ) from e

    def loads(data: bytes) -> Any:
        return msgpack.unpackb(data, raw=False, strict_map_key=False)

    # packb, not one shared Packer: a Packer keeps its buffer between calls and is not
    # thread-safe, and a serializer is shared by every thread of the process.
    return _Pair("msgpack", functools.partial(msgpack.packb, use_bin_type=True), loads)


def _orjson() -> _Pair:
    try:
        import orjson
    except ImportError as e:  # pragma: no cover - depends on the environment
        raise ValueError("serializer='orjson' needs the orjson package: pip install orjson") from e
    return _Pair("orjson", orjson.dumps, orjson.loads)


class _Auto(_Pair):
    """The "auto" serializer; ``codec`` is the native codec its dumps/loads belong to, for
    callers that encode without a Python call."""

    def __init__(self, codec: AutoCodec):
        super().__init__("auto", codec.dumps, codec.loads)
        self.codec = codec


def _auto() -> _Pair:
    try:
        codec = AutoCodec()
    except ImportError:
        # Without orjson every value would take the pickle path anyway.
        return _pickle()
    return _Auto(codec)


_BUILTIN: dict[str, Callable[[], _Pair]] = {
    "auto": _auto,
    "pickle": _pickle,
    "msgpack": _msgpack,
    "orjson": _orjson,
}


def resolve(serializer: str | Serializer) -> Serializer:
    """Returns the serializer named by ``serializer``, or checks a custom one.

    ``"auto"`` resolves to an object that also has a ``codec`` attribute (the native
    ``AutoCodec``), unless orjson is missing and it is the pickle serializer.

    >>> resolve("orjson").loads(b"[1]")
    [1]
    >>> resolve("auto").codec.loads(b"[1]")
    [1]
    >>> resolve("yaml")  # doctest: +ELLIPSIS
    Traceback (most recent call last):
    ...
    ValueError: serializer must be 'auto', 'pickle', 'msgpack', 'orjson' or an object ...
    """
    if isinstance(serializer, str):
        make = _BUILTIN.get(serializer)
        if make is None:
            raise ValueError(f"serializer must be {_CHOICES}, got {serializer!r}")
        return make()
    if callable(getattr(serializer, "dumps", None)) and callable(
        getattr(serializer, "loads", None)
    ):
        return serializer
    raise TypeError(f"serializer must be {_CHOICES}, not {type(serializer).__name__}")
