"""Serializers: how values become bytes in the shared tiers.

A serializer is any object with ``dumps(obj) -> bytes`` and ``loads(bytes) -> obj``.
``"pickle"`` (the default) handles any picklable object; ``"msgpack"`` and ``"orjson"``
are faster for plain data when those packages are installed.

    >>> s = resolve("pickle")
    >>> s.loads(s.dumps({"a": 1}))
    {'a': 1}
"""

from __future__ import annotations

import functools
import pickle
from collections.abc import Callable
from typing import Any, Protocol, runtime_checkable


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
    packer = msgpack.Packer(use_bin_type=True)

    def loads(data: bytes) -> Any:
        return msgpack.unpackb(data, raw=False, strict_map_key=False)

    return _Pair("msgpack", packer.pack, loads)


def _orjson() -> _Pair:
    try:
        import orjson
    except ImportError as e:  # pragma: no cover - depends on the environment
        raise ValueError("serializer='orjson' needs the orjson package: pip install orjson") from e
    return _Pair("orjson", orjson.dumps, orjson.loads)


_BUILTIN: dict[str, Callable[[], _Pair]] = {
    "pickle": _pickle,
    "msgpack": _msgpack,
    "orjson": _orjson,
}


def resolve(serializer: str | Serializer) -> Serializer:
    """Returns the serializer named by ``serializer``, or checks a custom one.

    >>> resolve("orjson").loads(b"[1]")
    [1]
    """
    if isinstance(serializer, str):
        make = _BUILTIN.get(serializer)
        if make is None:
            raise ValueError(
                "serializer must be 'pickle', 'msgpack', 'orjson' or an object with dumps/loads, "
                f"got {serializer!r}"
            )
        return make()
    if callable(getattr(serializer, "dumps", None)) and callable(
        getattr(serializer, "loads", None)
    ):
        return serializer
    raise TypeError(
        "serializer must be 'pickle', 'msgpack', 'orjson' or an object with dumps/loads, "
        f"not {type(serializer).__name__}"
    )
