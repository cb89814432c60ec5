"""Keys of ``Cache.cached``: a digest of the arguments bound to the function's signature.

The same call gives the same key in every process and after a restart (no ``repr``, no
memory addresses), ``f(2)`` and ``f(x=2)`` give one key, and any number of arguments fits.

    >>> def area(w, h=1): ...
    >>> call_key(area, (2,), {}) == call_key(area, (), {"w": 2, "h": 1})
    True
    >>> try:
    ...     call_key(area, (object(),), {})
    ... except TypeError as e:
    ...     print(str(e)[:60])
    cannot build a cache key for area(): argument 'w' is an obje
"""

from __future__ import annotations

import datetime
import decimal
import enum
import hashlib
import inspect
import uuid
from collections.abc import Callable
from typing import Any

__all__ = ["call_key"]

# Long qualified names are cut: the digest carries the identity, the name is for people.
_NAME_MAX = 200


class _Unstable(Exception):
    """An argument (or a part of it) with no stable encoding."""

    def __init__(self, what: str) -> None:
        super().__init__(what)
        self.what = what


def _encode(v: Any, out: list[bytes]) -> None:
    # Exact types first: a subclass may override __eq__ or __hash__, so it is encoded by
    # the rules below only when it is one of the well-known value types.
    t = type(v)
    if v is None:
        out.append(b"N")
    elif t is bool:
        out.append(b"T" if v else b"F")
    elif t is int:
        out.append(b"i%d;" % v)
    elif t is float:
        out.append(b"f" + v.hex().encode() + b";")
    elif t is str:
        b = v.encode("utf-8", "surrogatepass")
        out.append(b"s%d:" % len(b) + b)
    elif t is bytes:
        out.append(b"b%d:" % len(v) + v)
    elif t in (tuple, list):
        out.append(b"l%d[" % len(v))
        for x in v:
            _encode(x, out)
        out.append(b"]")
    elif t is dict:
        items = []
        for k, x in v.items():
            kb: list[bytes] = []
            _encode(k, kb)
            xb: list[bytes] = []
            _encode(x, xb)
            items.append((b"".join(kb), b"".join(xb)))
        out.append(b"d%d{" % len(items))
        for kb2, xb2 in sorted(items):
            out.append(kb2)
            out.append(xb2)
        out.append(b"}")
    elif t in (set, frozenset):
        parts = []
        for x in v:
            xb = []
            _encode(x, xb)
            parts.append(b"".join(xb))
        out.append(b"S%d{" % len(parts) + b"".join(sorted(parts)) + b"}")
    elif isinstance(v, enum.Enum):
        out.append(b"e" + f"{t.__module__}.{t.__qualname__}".encode() + b":")
        _encode(v.value, out)
    elif t in (datetime.datetime, datetime.date, datetime.time):
        out.append(b"t" + v.isoformat().encode() + b";")
    elif t is datetime.timedelta:
        out.append(b"D%d,%d,%d;" % (v.days, v.seconds, v.microseconds))
    elif t is decimal.Decimal:
        out.append(b"m" + str(v).encode() + b";")
    elif t is uuid.UUID:
        out.append(b"u" + v.bytes)
    else:
        raise _Unstable(f"{'an' if t.__name__[0] in 'aeiou' else 'a'} {t.__name__}")


def call_key(fn: Callable[..., Any], args: tuple[Any, ...], kwargs: dict[str, Any]) -> str:
    """The cache key of ``fn(*args, **kwargs)``: the function's qualified name and a
    128-bit digest of its bound arguments (defaults applied).

    Raises ``TypeError`` naming the argument when one has no stable encoding (an
    arbitrary object), and the signature's own ``TypeError`` when the call does not bind.

    >>> def f(x): ...
    >>> call_key(f, (2,), {}) == call_key(f, (), {"x": 2})
    True
    """
    name = f"{fn.__module__}.{fn.__qualname__}"
    try:
        bound = inspect.signature(fn).bind(*args, **kwargs)
    except TypeError as e:
        raise TypeError(f"{fn.__qualname__}(): {e}") from None
    bound.apply_defaults()
    out: list[bytes] = [name.encode("utf-8", "surrogatepass"), b"\x00"]
    for arg, value in bound.arguments.items():
        out.append(arg.encode())
        out.append(b"=")
        try:
            _encode(value, out)
        except _Unstable as e:
            raise TypeError(
                f"cannot build a cache key for {fn.__qualname__}(): argument {arg!r} is "
                f"{e.what}, which has no "
                "stable encoding; pass key= to the decorator"
            ) from None
        except RecursionError:
            raise TypeError(
                f"cannot build a cache key for {fn.__qualname__}(): argument {arg!r} "
                "contains itself; pass key= to the decorator"
            ) from None
    digest = hashlib.blake2b(b"".join(out), digest_size=16).hexdigest()
    return f"{name[:_NAME_MAX]}:{digest}"
