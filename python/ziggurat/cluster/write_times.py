"""Write times: the clock a host's writes are stamped with, and the notes that refuse a
body older than a write the host knows of (``WriteTimes``, a part of ``ClusterTier``).

Redis is not trusted to keep what was written, only to hand it back: a writer without the
secret can put an older signed body back. Two rules bound that. Every body is valid for at
most ``MAX_AGE`` after its signed write time, whatever its ttl (Redis is told to drop it
then too). And a host notes, for each key (and tag) it wrote or applied an event about,
the write time of the latest write it knows; a body written before it is refused
(``refused_older``) while the note lives (``MAX_AGE``, in the host's segment, which may
evict it or lose it in a clear). A whole-cache clear is noted in a word of the segment.
Write times come from a clock the host's processes share (``clock``), never behind the
latest write time the host has seen, so a write made after applying another's event is
always the later one even when the hosts' clocks differ. A time more than ``MAX_SKEW``
ahead of the host's own clock moves nothing: the clock ignores it, a body stamped with it is
refused, and a note made from it is cut to the bound. Without that bound one host with a
wrong clock (or a damaged word) would move every host's write times ahead for good, and
every body would outlive ``MAX_AGE`` by as much.
"""

from __future__ import annotations

import logging
import time
from typing import Any

from ziggurat._native import (
    CLUSTER_ALL,
    CLUSTER_MAX_AGE_US,
    CLUSTER_MAX_SKEW_US,
    cluster_believable,
    cluster_bounded,
    cluster_fresh,
    cluster_next_write_time,
    cluster_note_key,
)
from ziggurat.cluster.words import W

__all__ = ["ALL", "MAX_AGE", "MAX_SKEW", "WriteTimes"]

log = logging.getLogger("ziggurat")

#: The tag every value in Redis carries: a cluster-wide clear moves its version.
ALL: str = CLUSTER_ALL

#: The longest a value stays in Redis, in seconds, whatever its ttl (``math.inf``
#: included): past its signed write time plus this, every host refuses it and Redis drops
#: it. It bounds how long an older signed value put back into Redis can be served by a host
#: that knows no later write of its key.
MAX_AGE: float = CLUSTER_MAX_AGE_US / 1_000_000

#: How far ahead of this host's wall clock a write time may be, in seconds: hosts' clocks
#: are expected within seconds of each other, and five minutes leaves room for a host whose
#: clock steps back while its last write times still stand.
MAX_SKEW: float = CLUSTER_MAX_SKEW_US / 1_000_000


class WriteTimes:
    """The write-time rules of a ``ClusterTier`` (see the module's description); the tier
    sets ``core`` (the host's segment) and ``name``.

    >>> from ziggurat import Cache
    >>> t = WriteTimes()
    >>> t.core, t.name = Cache("doc-write-times", size="8MiB")._core, "doc"
    >>> first = t.clock(); later = t.clock(); t.note(b"kuser:1", later)
    >>> later > first, t.fresh(b"user:1", first, ()), t.fresh(b"user:1", later, ())
    (True, False, True)
    """

    core: Any
    name: str
    _logged_ahead: bool = False

    def clock(self) -> int:
        """A write time (µs since the epoch) for a write made now: the wall clock, or one
        more than the latest write time this host gave or saw, whichever is later, so every
        write time a host gives is above any it knew of (see ``saw``). A latest time more
        than ``MAX_SKEW`` ahead of the wall clock is dropped for the wall clock's."""
        now = time.time_ns() // 1000
        while True:
            cur = int(self.core.app_load(W.CLOCK))
            w, ignored = cluster_next_write_time(now, cur)
            if ignored:
                self._ahead("the host's own write clock", cur)
            if self.core.app_cas(W.CLOCK, cur, w):
                return w

    def saw(self, w: int) -> None:
        """The host learnt of a write made at ``w`` (another host's event); a time more
        than ``MAX_SKEW`` ahead of this host's clock is ignored."""
        if not cluster_believable(w, time.time_ns() // 1000):
            self._ahead("an event", w)
            return
        _raise_word(self.core, W.CLOCK, w)

    def bounded(self, w: int) -> int:
        """``w``, cut to ``MAX_SKEW`` ahead of this host's clock: what a note made from
        another host's event keeps (a later time would refuse the key's next writes for as
        long as the note lives).

        >>> import time
        >>> t = WriteTimes(); now = time.time_ns() // 1000
        >>> t.bounded(now) == now, t.bounded(now + 10**12) < now + 10**12
        (True, True)
        """
        return cluster_bounded(w, time.time_ns() // 1000)

    def ahead(self, written: int) -> bool:
        """Whether a body written at ``written`` is stamped more than ``MAX_SKEW`` ahead of
        this host's clock (it is then refused)."""
        if cluster_believable(written, time.time_ns() // 1000):
            return False
        self._ahead("a value in Redis", written)
        return True

    def _ahead(self, what: str, w: int) -> None:
        if not self._logged_ahead:
            self._logged_ahead = True
            log.warning(
                "ziggurat cache %r: %s is stamped %.0f s ahead of this host's clock, more "
                "than the %.0f s allowed; it is ignored (check the hosts' clocks)",
                self.name,
                what,
                (w - time.time_ns() // 1000) / 1e6,
                MAX_SKEW,
            )

    def note(self, what: bytes, w: int) -> None:
        """The latest write this host knows of the key (``b"k" + key``) or tag
        (``b"t" + tag``) ``what`` was made at ``w``: a body written before it is refused
        from now on (see the module). Kept in the host's segment for ``MAX_AGE``."""
        fk = _note_key(what)
        try:
            cur = self.core.get_local(fk, 0, 0)
            if type(cur) is not int or cur < w:
                self.core.set(fk, w, ttl=MAX_AGE)
        except Exception as e:  # a note not kept only narrows the defence; never fail
            log.debug("ziggurat cache %r: note of a write not kept: %s", self.name, e)

    def cleared(self, w: int) -> None:
        """The whole cache was cleared at ``w``: every body written before is refused."""
        _raise_word(self.core, W.CLEARED, w)

    def _known(self, what: bytes) -> int:
        try:
            cur = self.core.get_local(_note_key(what), 0, 0)
        except Exception:
            return 0
        return cur if type(cur) is int else 0

    def fresh(self, kb: bytes, written: int, tags: tuple[str, ...]) -> bool:
        """Whether a body of ``kb`` written at ``written`` with ``tags`` is not older than a
        write, tag invalidation or clear this host knows of."""
        notes = [0 if t == ALL else self._known(b"t" + t.encode()) for t in tags]
        return cluster_fresh(
            written, self.core.app_load(W.CLEARED), self._known(b"k" + kb), list(tags), notes
        )


def _note_key(what: bytes) -> bytes:
    """The segment key of the note about a key or tag (see ``ClusterTier.note``): fixed
    size whatever the key's, in a space of keys an application is unlikely to use."""
    return cluster_note_key(what)


def _raise_word(core: Any, word: int, v: int) -> None:
    while True:
        cur = core.app_load(word)
        if cur >= v or core.app_cas(word, cur, v):
            return
