"""The argument rules of the Cache's methods written in Python, with the limits read from
the native module, which applies the same rules to its own methods: each limit has one
home, and a method written here raises what a native one raises.

    >>> ttl_arg(None, 300.0, "ttl", "Cache.set")
    300.0
    >>> ttl_arg(MAX_TTL * 2, None, "ttl", "Cache.set")  # doctest: +ELLIPSIS
    Traceback (most recent call last):
    ValueError: Cache.set(): ttl must be at most 100 years (3153600000 s) or math.inf for never, ...
    >>> tags_arg(["a", "b"], "Cache.set")
    ('a', 'b')
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Mapping
from typing import Any, NoReturn

from ziggurat import _native, rules
from ziggurat.rules import MIN_TAG_BYTES

__all__ = [
    "MAX_KEY",
    "MAX_SIZE",
    "MAX_TAGS",
    "MAX_TTL",
    "check_key",
    "int_arg",
    "items_arg",
    "key_error",
    "key_list",
    "tags_arg",
]

#: The longest finite TTL, in seconds (100 years); ``math.inf`` means never.
MAX_TTL: float = _native.MAX_TTL
#: The longest key, in bytes of UTF-8.
MAX_KEY: int = _native.MAX_KEY
#: The most tags an entry carries.
MAX_TAGS: int = rules.MAX_TAGS
#: The largest size a cache's segment may have, in bytes.
MAX_SIZE: int = _native.MAX_SIZE

#: ``check_key(key, method)``: str or bytes, 1 to ``MAX_KEY`` bytes of UTF-8, raising the
#: error the native methods raise (a lone surrogate included), named after ``method``.
check_key = _native.check_key


def key_error(key: object, method: str) -> NoReturn:
    """Called while a native method's ``TypeError`` or ``ValueError`` is handled: raises
    the error ``check_key`` gives ``key``, named after ``method``, or else the error being
    handled. For a method that calls a native one and names itself only when the key was
    bad, which costs nothing on the way of a valid key.

    >>> try:
    ...     raise ValueError("Cache.get(): key must be 1 to 4096 bytes, got 0")
    ... except ValueError:
    ...     key_error(b"", "Cache.aget")
    Traceback (most recent call last):
    ValueError: Cache.aget(): key must be 1 to 4096 bytes, got 0
    """
    try:
        check_key(key, method)
    except (TypeError, ValueError) as e:
        raise e from None
    raise


def key_list(keys: Iterable[str | bytes], method: str) -> list[str | bytes]:
    """Keys of a method taking many, each checked.

    >>> key_list("ab", "Cache.get_many")
    Traceback (most recent call last):
    TypeError: Cache.get_many(): keys must be an iterable of keys, not a single key
    """
    if isinstance(keys, (str, bytes)):
        raise TypeError(f"{method}(): keys must be an iterable of keys, not a single key")
    try:
        out = list(keys)
    except TypeError:
        raise TypeError(
            f"{method}(): keys must be an iterable of keys, not {type(keys).__name__}"
        ) from None
    for k in out:
        check_key(k, method)
    return out


def items_arg(
    mapping: Mapping[str | bytes, Any], method: str, dumps: Callable[[Any], Any]
) -> list[tuple[str | bytes, Any]]:
    """The items of a ``set_many``, every key checked and every value encoded once by
    ``dumps``, so that bad input anywhere is refused before anything is written.

    >>> items_arg({"a": 1}, "Cache.set_many", repr)
    [('a', 1)]
    """
    if not isinstance(mapping, Mapping):
        raise TypeError(f"{method}(): mapping must be a mapping, not {type(mapping).__name__}")
    items = list(mapping.items())
    for k, v in items:
        check_key(k, method)
        try:
            dumps(v)
        except Exception as e:
            raise TypeError(f"{method}(): cannot serialize the value of {k!r}: {e}") from e
    return items


def ttl_arg(value: object, default: float | None, what: str, method: str) -> float | None:
    """A TTL argument by the cache's rule: seconds > 0, ``math.inf`` for never, at most
    ``MAX_TTL``; ``default`` for None.

    >>> import math; ttl_arg(math.inf, None, "ttl", "Cache.set")
    inf
    """
    if value is None:
        return default
    if isinstance(value, bool) or not isinstance(value, (int, float)):
        raise TypeError(
            f"{method}(): {what} must be a number of seconds or None, not {type(value).__name__}"
        )
    try:
        seconds = float(value)
    except OverflowError:  # an int beyond any float: past the limit all the same
        seconds = MAX_TTL * 2
    return _native.check_ttl(seconds, what, method)


def tags_arg(tags: Iterable[str], method: str) -> tuple[str, ...]:
    """Tags as a tuple of non-empty str (the count is checked where they are stored).

    >>> tags_arg("users", "Cache.set")
    Traceback (most recent call last):
    TypeError: Cache.set(): tags must be an iterable of str, not a single str
    """
    if isinstance(tags, (str, bytes)):
        raise TypeError(f"{method}(): tags must be an iterable of str, not a single str")
    try:
        out = tuple(tags)
    except TypeError:
        raise TypeError(
            f"{method}(): tags must be an iterable of str, not {type(tags).__name__}"
        ) from None
    for t in out:
        if not isinstance(t, str):
            raise TypeError(f"{method}(): each tag must be a str, not {type(t).__name__}")
        if len(t) < MIN_TAG_BYTES:
            raise ValueError(f"{method}(): a tag must not be empty")
    return out


def int_arg(value: object, what: str, method: str, bits: int = 64) -> int:
    """An int argument of a counter (``delta``, ``default``): an int (not a bool) that
    fits ``bits`` signed bits; the cluster tier's Redis scripts count exactly within
    ±2**53 only.

    >>> int_arg(2**60, "delta", "Cache.incr", bits=54)  # doctest: +ELLIPSIS
    Traceback (most recent call last):
    OverflowError: Cache.incr(): delta must be within ±2**53 with a cluster tier ...
    """
    if isinstance(value, bool) or not isinstance(value, int):
        raise TypeError(f"{method}(): {what} must be an int, not {type(value).__name__}")
    if bits == 64 and not -(2**63) <= value < 2**63:
        raise OverflowError(f"{method}(): {what} must fit in a signed 64-bit integer")
    if bits != 64 and not -(2 ** (bits - 1)) < value < 2 ** (bits - 1):
        raise OverflowError(
            f"{method}(): {what} must be within ±2**{bits - 1} with a cluster tier (Redis "
            "scripts count exactly in that range)"
        )
    return value
