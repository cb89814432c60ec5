"""Stored bodies: a value signed for Redis and read back (``Bodies``, a part of
``ClusterTier``), and the prefix the scripts keep before a body (``_body``). The format
and its checks are ziggurat-cluster's; this module runs the serializer on them.

A stored body is ``b"Z2" + MAC + expiry (ms since the epoch, 0: none) + write time (µs) +
tags + kind + data``, the kind ``P`` for the serializer's bytes or ``I`` for an int in
decimal (which ``incr`` can turn into a counter). A counter made by ``incr`` is
``b"N" + mark + write time (µs) + tags + b":" + decimal``: the server-side script adds to
it, so its count cannot be signed; the mark (``Signer.counter_mac``) signs the key with the
write time of the counter's last ``incr`` (each one puts its own), so only a key some host
made a counter reads as one, and a counter follows the write-time rules as a value does.
The count is parsed as an int, never unpickled. A body is valid for at most ``MAX_AGE``
after its signed write time (see ``write_times``), a counter also no longer than Redis
keeps it.
"""

from __future__ import annotations

import logging
import math
import time
from collections.abc import Callable
from typing import Any

from ziggurat._native import (
    CLUSTER_EXACT_INT,
    cluster_body_start,
    cluster_counter_head,
    cluster_decode,
    cluster_encode,
)
from ziggurat.cluster.signing import Signer

__all__ = ["Bodies"]

log = logging.getLogger("ziggurat")


class Bodies:
    """The body format of a ``ClusterTier`` (see the module's description): for the tests
    and tools that look at what Redis holds; the tier's own reads and writes run in
    ziggurat-cluster. The tier sets the attributes below.

    >>> import pickle, time
    >>> b = Bodies()
    >>> b.name, b.signer = "doc", Signer("doc", [b"0123456789abcdef"])
    >>> b.loads, b.dumps = pickle.loads, pickle.dumps
    >>> body, _ = b.encode(b"k", "v", 60.0, ("t",), time.time_ns() // 1000)
    >>> value, left, tags, _, _ = b.decode(b"k", body)
    >>> value, 0 < left <= 60, tags
    ('v', True, ('t',))
    """

    name: str
    signer: Signer
    loads: Callable[[bytes], Any]
    dumps: Callable[[Any], bytes]
    _logged_bad: bool = False

    def encode(
        self, kb: bytes, value: Any, ttl: float, tags: tuple[str, ...], w: int
    ) -> tuple[bytes, bytes | None]:
        """The signed body of ``value`` written at ``w`` (µs since the epoch), and the
        value as the serializer encoded it (None for an exact int)."""
        data = data_of(value, self.dumps)
        payload = data if isinstance(data, bytes) else None
        expiry = 0 if ttl == math.inf else int((time.time() + ttl) * 1000)
        return cluster_encode(self.signer, kb, data, expiry, w, list(tags)), payload

    def counter_head(self, kb: bytes, w: int) -> bytes:
        """What a counter's body holds before its tags when ``incr`` at ``w`` leaves it:
        the mark that signs ``kb`` with ``w``, then ``w``.

        >>> b = Bodies(); b.signer = Signer("doc", [b"0123456789abcdef"])
        >>> len(b.counter_head(b"hits", 1)), b.counter_head(b"hits", 1)[-8:]
        (24, b'\\x00\\x00\\x00\\x00\\x00\\x00\\x00\\x01')
        """
        return cluster_counter_head(self.signer, kb, w)

    def decode(
        self, kb: bytes, body: bytes | memoryview, pttl: int = -1
    ) -> tuple[Any, float, tuple[str, ...], bytes | None, int] | None:
        """``(value, seconds left, tags, encoded, written)`` of a body, or None (expired,
        stamped too far ahead, bad MAC, junk); ``encoded`` is the value as the serializer
        wrote it (None for an int or a counter), ``written`` its signed write time (a
        counter's: its last ``incr``'s). ``pttl``: the milliseconds Redis keeps a counter
        (-1: no expiry), which its body does not hold."""
        got = cluster_decode(self.signer, kb, bytes(body), pttl, time.time_ns() // 1000, False)
        if len(got) == 2:
            return None
        kind, data, left, tags, written = got
        if kind != "P":
            return data, left, tags, None, written
        assert isinstance(data, bytes)
        try:
            return self.loads(data), left, tags, data, written
        except (ValueError, IndexError, UnicodeDecodeError):
            return None

    def _bad_logged(self, kb: bytes) -> None:
        if not self._logged_bad:
            self._logged_bad = True
            log.warning(
                "ziggurat cache %r: a value in Redis under %r passed its check but this "
                "cache's serializer cannot decode it (written by a host with another "
                "serializer?); it is treated as a miss",
                self.name,
                kb,
            )


def data_of(value: Any, dumps: Callable[[Any], bytes]) -> bytes | int:
    """What a body holds for ``value``: an int the crate stores as such (within
    ±``CLUSTER_EXACT_INT``, which ``incr`` can add to), anything else as ``dumps`` encodes it.

    >>> import pickle
    >>> data_of(41, pickle.dumps), data_of(2**60, pickle.dumps) == pickle.dumps(2**60)
    (41, True)
    """
    if type(value) is int and -CLUSTER_EXACT_INT < value < CLUSTER_EXACT_INT:
        return value
    return dumps(value)


def _body(stored: bytes | None) -> memoryview | None:
    """The body of a stored value, past the prefix the scripts keep (see ``scripts``);
    raises ``IndexError`` for a prefix that does not add up.

    >>> bytes(_body(b"\\x01\\x00\\x01t\\x011body"))
    b'body'
    """
    if stored is None:
        return None
    start = cluster_body_start(stored)
    if start is None:
        raise IndexError("the prefix runs past the value")
    return memoryview(stored)[start:]
