"""Targeted cache-control fields (RFC 9213), such as ``CDN-Cache-Control``: their values
are Structured Field Dictionaries (RFC 8941), parsed (by the ``ziggurat-http`` crate) into
the directive form that ``rules.parse_cache_control`` gives. Pure functions, no I/O.

>>> parse_targeted([b"max-age=600, stale-if-error=60"])
{'max-age': '600', 'stale-if-error': '60'}
"""

from __future__ import annotations

from collections.abc import Sequence

from ziggurat import _native

__all__ = ["parse_targeted"]


def parse_targeted(values: Sequence[bytes]) -> dict[str, str | None] | None:
    """A targeted cache-control field (RFC 9213, a Structured Field Dictionary) as
    directives in the form ``parse_cache_control`` gives; None when the field is empty
    or not a valid Dictionary (the cache then ignores it). A directive whose argument
    has the wrong type (``max-age="60"``) is dropped.

    >>> parse_targeted([b"max-age=60, must-revalidate"])
    {'max-age': '60', 'must-revalidate': None}
    >>> parse_targeted([b'max-age="60", no-cache']), parse_targeted([b"max-age=1, &&"])
    ({'no-cache': None}, None)
    >>> parse_targeted([b"MaX-aGe=60"]), parse_targeted([b" "])
    (None, None)
    """
    return _native.http_parse_targeted(values)
