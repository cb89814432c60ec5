"""Invalidation events: their fields, their check, and the rule that keeps a host from
ever following the stream past a hole without noticing.

Redis never says that a read skipped entries: reading from a position the stream no longer
holds (trimmed, or lost with the server's data, or on a replica that never had it) just
returns the next entry that survived. So each event carries the next number of a sequence
kept beside the stream, and a host expects exactly ``last + 1``. Anything else means events
were lost (a gap) or the sequence started again (the server lost its data): the host
cannot know what changed, and clears.

Each event also carries its write's time ``w`` (µs, from the writing host's clock; see
``ClusterTier.clock``), signed with the rest: a host that applies the event refuses, from
then on, any value of the key written before it, so an older signed value put back into
Redis is not served again. The fields, their check and the rule are ziggurat-cluster's.

>>> follow(41, 42), follow(41, 45), follow(41, 3), follow(0, 1)
(<Next.APPLY: 1>, <Next.GAP: 2>, <Next.BACK: 3>, <Next.APPLY: 1>)
"""

from __future__ import annotations

import enum
from typing import NamedTuple

from ziggurat._native import (
    cluster_follow,
    cluster_parse,
    cluster_place,
    cluster_signed_body,
    cluster_tags_field,
)
from ziggurat.cluster.signing import Signer

__all__ = ["Event", "Next", "follow", "key_field", "parse", "place", "tags_field"]


class Next(enum.IntEnum):
    """What a host does with an event of sequence number ``seq`` after ``last``."""

    APPLY = 1  # the next one: apply it (or skip it, when the host wrote it)
    GAP = 2  # events between were lost: clear
    BACK = 3  # the sequence went back: the server lost its data; clear


def follow(last: int, seq: int) -> Next:
    """The rule (see the module's example). A host that starts following takes the
    stream's last number as ``last`` (0 for a new stream), so it is strict from the first
    event on.

    >>> follow(5, 5), follow(0, 7)
    (<Next.BACK: 3>, <Next.GAP: 2>)
    """
    return Next(cluster_follow(last, seq))


class Event(NamedTuple):
    """One event: ``op`` is set, add, del, incr, touch (a key changed), tags, clear or
    recover (a clear after a cut-off);
    ``keys`` the key (bytes) or the tags (str)."""

    seq: int
    host: str
    op: str
    keys: tuple[bytes | str, ...]
    gen: int = 0
    w: int = 0  # the write's time, µs (signed)


def key_field(key: bytes) -> bytes:
    """The ``k`` field of an event about one key.

    >>> key_field(b"user:1")
    b'user:1'
    """
    return key


def tags_field(tags: tuple[str, ...]) -> bytes:
    """The ``k`` field of an event about tags (any str is a valid tag, so it is JSON).

    >>> tags_field(("a", "\\x00ns:x"))
    b'["a","\\\\u0000ns:x"]'
    """
    return cluster_tags_field(list(tags))


def signed_body(host: str, op: str, k: bytes, w: int) -> bytes:
    """What an event's MAC covers: each field after its length, so the fields of one event
    can never be read as those of another (a key may hold any byte).

    >>> signed_body("h1", "del", b"k", 7)[:10]
    b'\\x00\\x00\\x00\\x02h1\\x00\\x00\\x00\\x03'
    >>> signed_body("h1", "del", b"k", 7) == signed_body("h1\\x00\\x00\\x00\\x03del", "", b"k", 7)
    False
    """
    return cluster_signed_body(host, op, k, w)


def place(fields: dict[bytes, bytes]) -> tuple[int, int] | None:
    """``(seq, gen)`` of an event the host that reads it wrote, which it skips: read
    without checking its MAC, since only that place in the sequence matters then, and the
    MAC never covers it (the server assigns both). A forged entry naming the host gets no
    further than a genuine event replayed with another number would: the host's position
    moves, and a number out of turn makes the host clear. None when malformed.

    >>> place({b"s": b"7", b"h": b"h1", b"g": b"12"}), place({b"s": b"x"})
    ((7, 12), None)
    """
    return cluster_place(fields)


def parse(fields: dict[bytes, bytes], signer: Signer) -> Event | None:
    """The event in a stream entry's fields, or None when it is malformed or its MAC does
    not check (a forged or damaged event has no effect).

    >>> s = Signer("c", [b"0123456789abcdef"])
    >>> f = {b"s": b"7", b"h": b"h1", b"o": b"del", b"k": b"x", b"w": b"5"}
    >>> f[b"m"] = s.event_mac(signed_body("h1", "del", b"x", 5))
    >>> parse(f, s)
    Event(seq=7, host='h1', op='del', keys=(b'x',), gen=0, w=5)
    >>> parse({**f, b"k": b"y"}, s) is None
    True
    """
    got = cluster_parse(fields, signer)
    if got is None:
        return None
    seq, host, op, keys, gen, w = got
    return Event(seq, host, op, keys, gen, w)
