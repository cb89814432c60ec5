"""Authentication of what the cluster tier puts in Redis: values and events.

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

import hashlib
import hmac
from collections.abc import Sequence

__all__ = ["MAC_LEN", "Signer", "secrets_of"]

#: Bytes of a MAC.
MAC_LEN = 16
_MIN_SECRET = 16


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


class Signer:
    """Signs and checks values and events of one cache (see the module's example)."""

    def __init__(self, name: str, secrets: list[bytes]) -> None:
        self.name = name.encode()
        # Fixed-size keys derived per secret, so any secret length works with BLAKE2b's
        # 64-byte key limit, and values and events never share a key. Each is kept as a
        # hash state that has taken the key and the cache's name (length first): a MAC
        # copies it, cheaper than keying BLAKE2b again.
        head = len(self.name).to_bytes(2, "big") + self.name
        self._values = [_keyed(_derive(s, b"value"), head) for s in secrets]
        self._events = [_keyed(_derive(s, b"event"), head) for s in secrets]
        self._counters = [_keyed(_derive(s, b"counter"), head) for s in secrets]

    def value_mac(self, key: bytes, body: bytes) -> bytes:
        """The MAC of ``body`` stored under ``key``.

        >>> len(Signer("c", [b"0123456789abcdef"]).value_mac(b"k", b"v"))
        16
        """
        return _mac(self._values[0], key, body)

    def value_ok(self, key: bytes, body: bytes | memoryview, mac: bytes | memoryview) -> bool:
        """Whether ``mac`` is the MAC of ``body`` under ``key`` for any secret.

        >>> s = Signer("c", [b"0123456789abcdef"]); s.value_ok(b"k", b"v", bytes(16))
        False
        """
        return any(hmac.compare_digest(_mac(k, key, body), mac) for k in self._values)

    def counter_mac(self, key: bytes, written: bytes) -> bytes:
        """The mark that lets ``key`` hold a counter, signing it with ``written`` (the
        write time of its last ``incr``, 8 bytes): Redis adds to a counter, so its count
        cannot be signed, but only a key a host made a counter reads as one, and only with
        the write time the host gave it.

        >>> s = Signer("c", [b"0123456789abcdef"])
        >>> mark = s.counter_mac(b"hits", bytes(8))
        >>> s.counter_ok(b"hits", bytes(8), mark), s.counter_ok(b"k", bytes(8), mark)
        (True, False)
        >>> s.counter_ok(b"hits", b"\\x00" * 7 + b"\\x01", mark)
        False
        """
        return _mac(self._counters[0], key, written)

    def counter_ok(self, key: bytes, written: bytes | memoryview, mac: bytes | memoryview) -> bool:
        """Whether ``mac`` is the counter mark of ``key`` and ``written`` for any secret
        (see ``counter_mac``)."""
        return any(hmac.compare_digest(_mac(k, key, written), mac) for k in self._counters)

    def event_mac(self, body: bytes) -> bytes:
        """The MAC of an event's fields.

        >>> s = Signer("c", [b"0123456789abcdef"]); s.event_ok(b"e", s.event_mac(b"e"))
        True
        """
        return _mac(self._events[0], b"", body)

    def event_ok(self, body: bytes, mac: bytes) -> bool:
        """Whether ``mac`` is the MAC of an event's fields for any secret.

        >>> Signer("c", [b"0123456789abcdef"]).event_ok(b"e", b"forged")
        False
        """
        return any(hmac.compare_digest(_mac(k, b"", body), mac) for k in self._events)


def _derive(secret: bytes, purpose: bytes) -> bytes:
    return hashlib.blake2b(secret, digest_size=32, person=b"ziggurat-" + purpose[:7]).digest()


def _keyed(key: bytes, head: bytes) -> hashlib.blake2b:
    h = hashlib.blake2b(key=key, digest_size=MAC_LEN)
    h.update(head)
    return h


def _mac(keyed: hashlib.blake2b, item: bytes, body: bytes | memoryview) -> bytes:
    h = keyed.copy()
    # Lengths first, so (name, key, body) splits one way only.
    h.update(len(item).to_bytes(4, "big") + item)
    h.update(body)
    return h.digest()
