"""Write times: the clock a host's writes are stamped with, and the notes that refuse a
body older than a write the host knows of. The rules and the notes are ziggurat-cluster's
(``ClusterTier.clock``, ``saw``, ``note`` and ``fresh`` reach them); this module names
their bounds.

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

from ziggurat._native import CLUSTER_ALL, CLUSTER_MAX_AGE_US, CLUSTER_MAX_SKEW_US

__all__ = ["ALL", "MAX_AGE", "MAX_SKEW"]

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
