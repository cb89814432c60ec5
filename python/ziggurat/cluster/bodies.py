"""Stored bodies: a value signed for Redis and read back (``Bodies``, a part of
``ClusterTier``), and the prefix the scripts keep before a body (``_body``).

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

from ziggurat.cluster.signing import MAC_LEN, Signer
from ziggurat.cluster.write_times import MAX_AGE, WriteTimes

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
    refused_ahead: int = 0
    _logged_bad: bool
    _logged_older: bool

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

    def counter_head(self, kb: bytes, w: int) -> bytes:
        """What a counter's body holds before its tags when ``incr`` at ``w`` leaves it:
        the mark that signs ``kb`` with ``w``, then ``w``.

        >>> b = Bodies(); b.signer = Signer("doc", [b"0123456789abcdef"])
        >>> len(b.counter_head(b"hits", 1)), b.counter_head(b"hits", 1)[-8:]
        (24, b'\\x00\\x00\\x00\\x00\\x00\\x00\\x00\\x01')
        """
        wb = w.to_bytes(8, "big")
        return self.signer.counter_mac(kb, wb) + wb

    def decode(
        self, kb: bytes, body: bytes | memoryview, pttl: int = -1
    ) -> tuple[Any, float, tuple[str, ...], bytes | None, int] | None:
        """``(value, seconds left, tags, encoded, written)`` of a body, or None (expired,
        stamped too far ahead, bad MAC, junk); ``encoded`` is the value as the serializer
        wrote it (None for an int or a counter), ``written`` its signed write time (a
        counter's: its last ``incr``'s). ``pttl``: the milliseconds Redis keeps a counter
        (-1: no expiry), which its body does not hold.

        ``body`` may be a view into the reply (no copy of a large value until the one that
        the serializer reads)."""
        try:
            return self._decode(kb, body, pttl)
        except (ValueError, IndexError, UnicodeDecodeError):
            self._bad(kb)
            return None

    def _decode(
        self, kb: bytes, body: bytes | memoryview, pttl: int
    ) -> tuple[Any, float, tuple[str, ...], bytes | None, int] | None:
        now = time.time()
        if body[:1] == b"N":
            wb = body[1 + MAC_LEN : 9 + MAC_LEN]
            if len(wb) < 8 or not self.signer.counter_ok(kb, wb, body[1 : 1 + MAC_LEN]):
                self._bad(kb)
                return None
            written = int.from_bytes(wb, "big")
            tags, pos = _read_tags(body, 9 + MAC_LEN)
            if body[pos : pos + 1] != b":":
                raise ValueError("no count")
            left = (written + _MAX_AGE_US) / 1_000_000 - now
            if pttl >= 0:
                left = min(left, pttl / 1000)
            if left <= 0 or self._ahead_of(written):
                return None
            return int(bytes(body[pos + 1 :])), left, tags, None, written
        if body[:2] != b"Z2" or len(body) < 2 + MAC_LEN + 18:
            self._bad(kb)
            return None
        rest = body[2 + MAC_LEN :]
        if not self.signer.value_ok(kb, rest, body[2 : 2 + MAC_LEN]):
            self._bad(kb)
            return None
        expiry = int.from_bytes(rest[:8], "big")
        written = int.from_bytes(rest[8:16], "big")
        left = (written + _MAX_AGE_US) / 1_000_000 - now
        if expiry:
            left = min(left, expiry / 1000 - now)
        if left <= 0 or self._ahead_of(written):
            return None
        tags, pos = _read_tags(rest, 16)
        kind = rest[pos : pos + 1]
        if kind == b"I":
            return int(bytes(rest[pos + 1 :])), left, tags, None, written
        if kind != b"P":
            raise ValueError("unknown kind")
        payload = bytes(rest[pos + 1 :])
        return self.loads(payload), left, tags, payload, written

    def _ahead_of(self, written: int) -> bool:
        if not WriteTimes.ahead(self, written):  # type: ignore[arg-type]
            return False
        self.refused_ahead += 1
        return True

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
