"""Targeted cache-control fields (RFC 9213), such as ``CDN-Cache-Control``: their values
are Structured Field Dictionaries (RFC 8941), parsed here into the directive form that
``rules.parse_cache_control`` gives. Pure functions, no I/O.

>>> parse_targeted([b"max-age=600, stale-if-error=60"])
{'max-age': '600', 'stale-if-error': '60'}
"""

from __future__ import annotations

import re
from collections.abc import Sequence

__all__ = ["parse_targeted"]

_SF_KEY = re.compile(rb"[a-z*][a-z0-9_\-.*]*")
_SF_NUMBER = re.compile(rb"-?[0-9]{1,15}(?:\.[0-9]{1,3})?")
_SF_TOKEN = re.compile(rb"[A-Za-z*][!#$%&'*+\-.^_`|~0-9A-Za-z:/]*")
_SF_BYTES = re.compile(rb":[A-Za-z0-9+/=]*:")
_SF_STRING = re.compile(rb'"(?:[\x20\x21\x23-\x5b\x5d-\x7e]|\\["\\])*"')
# Targeted directives whose argument must be an Integer (RFC 9213 §2.2).
_DELTA_DIRECTIVES = frozenset({"max-age", "s-maxage", "stale-while-revalidate", "stale-if-error"})


def _sf_item(raw: bytes, i: int) -> tuple[object, int] | None:
    """One bare item of a Structured Field at ``raw[i:]``: its value (an int, a str for a
    string or token, True/False, None for other types) and the end; None if malformed."""
    c = raw[i : i + 1]
    if c == b'"':
        m = _SF_STRING.match(raw, i)
        if m is None:
            return None
        text = m.group()[1:-1].replace(b'\\"', b'"').replace(b"\\\\", b"\\")
        return text.decode("ascii"), m.end()
    if c == b"?":
        if raw[i + 1 : i + 2] in (b"0", b"1"):
            return raw[i + 1 : i + 2] == b"1", i + 2
        return None
    for pattern in (_SF_NUMBER, _SF_TOKEN, _SF_BYTES):
        m = pattern.match(raw, i)
        if m is not None:
            v = m.group()
            if pattern is _SF_NUMBER:
                return (int(v) if b"." not in v else None), m.end()
            if pattern is _SF_TOKEN:
                return v.decode("ascii"), m.end()
            return None, m.end()
    return None


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
    raw = b",".join(values)
    n = len(raw)
    i = 0
    while i < n and raw[i] == 0x20:
        i += 1
    if i == n:
        return None
    out: dict[str, str | None] = {}
    while True:
        m = _SF_KEY.match(raw, i)
        if m is None:
            return None
        name = m.group().decode("ascii")
        i = m.end()
        value: object = True
        if raw[i : i + 1] == b"=":
            item = _sf_item(raw, i + 1)
            if item is None:
                return None
            value, i = item
        while raw[i : i + 1] == b";":  # parameters: parsed, not used
            i += 1
            while raw[i : i + 1] == b" ":
                i += 1
            pm = _SF_KEY.match(raw, i)
            if pm is None:
                return None
            i = pm.end()
            if raw[i : i + 1] == b"=":
                item = _sf_item(raw, i + 1)
                if item is None:
                    return None
                i = item[1]
        # The last occurrence of a key wins in a Dictionary (RFC 8941 §3.2).
        out.pop(name, None)
        if name in _DELTA_DIRECTIVES:
            if type(value) is int and value >= 0:
                out[name] = str(value)
        elif value is True:
            out[name] = None
        elif isinstance(value, str):
            out[name] = value
        while i < n and raw[i] in b" \t":
            i += 1
        if i == n:
            return out
        if raw[i] != 0x2C:
            return None
        i += 1
        while i < n and raw[i] in b" \t":
            i += 1
        if i == n:
            return None
