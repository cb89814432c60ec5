"""Authentication of what the cluster tier puts in Redis: values and events (the rules are
ziggurat-cluster's, this module names them and checks the ``secret`` argument).

Redis is shared infrastructure, so nothing read from it is trusted: a value is decoded (and
a pickle loaded) only after its MAC checks, and an event is applied only after its own. The
MAC is keyed BLAKE2b (a MAC by construction, faster than HMAC-SHA256 for the small values a
cache holds), over the cache's name and the key as well as the bytes, so a valid value
cannot be moved to another key or another cache. Values, counters and events each have a
key of their own, so no MAC of one kind checks as another. Several secrets may be given
for rotation: the first signs, every one verifies.

>>> s = Signer("shop", [b"new-secret-0123456789", b"old-secret-0123456789"])
>>> tag = s.value_mac(b"user:1", b"payload")
>>> s.value_ok(b"user:1", b"payload", tag), s.value_ok(b"user:2", b"payload", tag)
(True, False)
"""

from __future__ import annotations

from collections.abc import Sequence

from ziggurat._native import CLUSTER_MAC_LEN, CLUSTER_MIN_SECRET, ClusterSigner

__all__ = ["MAC_LEN", "Signer", "secrets_of"]

#: Bytes of a MAC.
MAC_LEN: int = CLUSTER_MAC_LEN
_MIN_SECRET: int = CLUSTER_MIN_SECRET

#: Signs and checks values of one cache: ``Signer(name, secrets)`` (see the module's
#: example); ``value_mac``/``value_ok`` and ``counter_ok`` (a counter's mark, signing its
#: key with the write time of its last ``incr``), for tools that look at what Redis holds.
Signer = ClusterSigner


def secrets_of(secret: object, method: str) -> list[bytes]:
    """The secrets a ``secret`` argument names, first the one that signs; raises a clear
    error for anything else.

    >>> secrets_of("a-long-enough-secret", "Cache")
    [b'a-long-enough-secret']
    >>> secrets_of("short", "Cache")
    Traceback (most recent call last):
    ...
    ValueError: Cache(): secret must be at least 16 bytes (each of them, for a list)
    """
    items: Sequence[object]
    if isinstance(secret, (str, bytes)):
        items = [secret]
    elif isinstance(secret, (list, tuple)) and secret:
        items = secret
    else:
        raise TypeError(
            f"{method}(): secret must be bytes, str or a non-empty list of them (the first "
            f"signs, all verify), not {type(secret).__name__}"
        )
    out: list[bytes] = []
    for s in items:
        if not isinstance(s, (str, bytes)):
            raise TypeError(f"{method}(): secret must be bytes or str, not {type(s).__name__}")
        b = s.encode() if isinstance(s, str) else bytes(s)
        if len(b) < _MIN_SECRET:
            raise ValueError(
                f"{method}(): secret must be at least {_MIN_SECRET} bytes "
                "(each of them, for a list)"
            )
        out.append(b)
    return out
