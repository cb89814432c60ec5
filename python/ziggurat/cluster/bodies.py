"""Stored bodies: a value signed for Redis and read back (``Bodies``, a part of
``ClusterTier``), and the prefix the scripts keep before a body (``_body``).

A stored body is ``b"Z2" + MAC + expiry (ms since the epoch, 0: none) + write time (µs) +
tags + kind + data``, the kind ``P`` for the serializer's bytes or ``I`` for an int in
decimal (which ``incr`` can turn into a counter). A counter made by ``incr`` is
``b"N" + mark + tags + b":" + decimal``: the server-side script adds to it, so its count
cannot be signed; the mark (``Signer.counter_mac``) lets only a key some host made a counter
read as one, and the count is parsed as an int, never unpickled. A body is valid for at most
``MAX_AGE`` after its signed write time (see ``write_times``).
"""

from __future__ import annotations

import logging
import math
import time
from collections.abc import Callable
from typing import Any

from ziggurat.cluster.signing import MAC_LEN, Signer
from ziggurat.cluster.write_times import MAX_AGE

__all__ = ["Bodies"]

log = logging.getLogger("ziggurat")

_MAX_AGE_US = int(MAX_AGE * 1_000_000)


class Bodies:
    """The body format of a ``ClusterTier`` (see the module's description); the tier sets
    the attributes below and counts what it refuses.

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
    bad_signatures: int
    refused_older: int
    _logged_bad: bool
    _logged_older: bool
    _counter_mark: dict[bytes, bytes]

    def encode(
        self, kb: bytes, value: Any, ttl: float, tags: tuple[str, ...], w: int
    ) -> tuple[bytes, bytes | None]:
        """The signed body of ``value`` written at ``w`` (see ``clock``), and the value as
        the serializer encoded it (None for an exact int), which the host's segment can
        take as it is."""
        payload: bytes | None
        if type(value) is int and -(2**53) < value < 2**53:
            payload, kind, data = None, b"I", str(value).encode()
        else:
            payload = self.dumps(value)
            kind, data = b"P", payload
        expiry = 0 if ttl == math.inf else int((time.time() + ttl) * 1000)
        head = expiry.to_bytes(8, "big") + w.to_bytes(8, "big") + _tag_list(tags) + kind
        rest = head + data
        return b"Z2" + self.signer.value_mac(kb, rest) + rest, payload

    def counter_mark(self, kb: bytes) -> bytes:
        """The counter mark of ``kb`` (see ``Signer.counter_mac``), remembered for the
        keys this process counted last."""
        mark = self._counter_mark.get(kb)
        if mark is None:
            if len(self._counter_mark) >= 1024:
                self._counter_mark.clear()
            mark = self._counter_mark[kb] = self.signer.counter_mac(kb)
        return mark

    def decode(
        self, kb: bytes, body: bytes | memoryview
    ) -> tuple[Any, float, tuple[str, ...], bytes | None, int | None] | None:
        """``(value, seconds left, tags, encoded, written)`` of a body, or None (expired,
        bad MAC, junk); ``encoded`` is the value as the serializer wrote it (None for an
        int), ``written`` its signed write time (None for a counter, which has none).

        ``body`` may be a view into the reply (no copy of a large value until the one that
        the serializer reads)."""
        try:
            return self._decode(kb, body)
        except (ValueError, IndexError, UnicodeDecodeError):
            self._bad(kb)
            return None

    def _decode(
        self, kb: bytes, body: bytes | memoryview
    ) -> tuple[Any, float, tuple[str, ...], bytes | None, int | None] | None:
        if body[:1] == b"N":
            if not self.signer.counter_ok(kb, body[1 : 1 + MAC_LEN]):
                self._bad(kb)
                return None
            tags, pos = _read_tags(body, 1 + MAC_LEN)
            if body[pos : pos + 1] != b":":
                raise ValueError("no count")
            return int(bytes(body[pos + 1 :])), math.inf, tags, None, None
        if body[:2] != b"Z2" or len(body) < 2 + MAC_LEN + 18:
            self._bad(kb)
            return None
        rest = body[2 + MAC_LEN :]
        if not self.signer.value_ok(kb, rest, body[2 : 2 + MAC_LEN]):
            self._bad(kb)
            return None
        expiry = int.from_bytes(rest[:8], "big")
        written = int.from_bytes(rest[8:16], "big")
        now = time.time()
        left = (written + _MAX_AGE_US) / 1_000_000 - now
        if expiry:
            left = min(left, expiry / 1000 - now)
        if left <= 0:
            return None
        tags, pos = _read_tags(rest, 16)
        kind = rest[pos : pos + 1]
        if kind == b"I":
            return int(bytes(rest[pos + 1 :])), left, tags, None, written
        if kind != b"P":
            raise ValueError("unknown kind")
        payload = bytes(rest[pos + 1 :])
        return self.loads(payload), left, tags, payload, written

    def _older(self, kb: bytes) -> None:
        self.refused_older += 1
        if not self._logged_older:
            self._logged_older = True
            log.warning(
                "ziggurat cache %r: a value in Redis under %r is older than a write of it "
                "this host knows of (put back by something that writes to Redis, or written "
                "at the same time by a host whose clock is behind); it is treated as a miss",
                self.name,
                kb,
            )

    def _bad(self, kb: bytes) -> None:
        self.bad_signatures += 1
        if not self._logged_bad:
            self._logged_bad = True
            log.warning(
                "ziggurat cache %r: a value in Redis under %r failed its check (tampered, "
                "or written with another secret); it is treated as a miss and never decoded",
                self.name,
                kb,
            )
        return None


def _body(stored: bytes | None) -> memoryview | None:
    """The body of a stored value, past the prefix the scripts keep (see ``scripts``);
    raises ``IndexError`` for a prefix that does not add up."""
    if stored is None:
        return None
    pos = 1
    for _ in range(stored[0]):
        pos += 2 + int.from_bytes(stored[pos : pos + 2], "big")
        pos += 1 + stored[pos]
    if pos > len(stored):
        raise IndexError("the prefix runs past the value")
    return memoryview(stored)[pos:]


def _tag_list(tags: tuple[str, ...]) -> bytes:
    out = [len(tags).to_bytes(1, "big")]
    for t in tags:
        tb = t.encode()
        out.append(len(tb).to_bytes(2, "big") + tb)
    return b"".join(out)


def _read_tags(b: bytes | memoryview, pos: int) -> tuple[tuple[str, ...], int]:
    n, pos, tags = b[pos], pos + 1, []
    for _ in range(n):
        ln = int.from_bytes(b[pos : pos + 2], "big")
        tags.append(str(b[pos + 2 : pos + 2 + ln], "utf-8"))
        pos += 2 + ln
    return tuple(tags), pos
