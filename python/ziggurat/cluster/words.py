"""The words the cluster tier keeps in the host's segment (``W``), and the host-wide
figures read from them (``host_figures``): every process of the host, the stream reader
and the command line read the same words.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

__all__ = ["W", "host_figures"]


class W:
    """Indices of the words the tier keeps in the segment (zero in a new file)."""

    LEASE = 0  # pid of the process reading the stream
    BEAT = 1  # its last sign of life, ms of CLOCK_MONOTONIC
    SEQ = 2  # sequence number of the last event applied (0: no position)
    ID_MS = 3  # stream id of that event, first part
    ID_SEQ = 4  # and second part
    HOST = 5  # this host's id in events (random, set once)
    DIRTY = 6  # writes kept local while Redis was unreachable
    APPLIED = 7  # events applied (host-wide count)
    GAP_CLEARS = 8  # clears after a gap, a rewind or a dirty host
    LAG_P50 = 9  # invalidation lag observed by the reader, µs
    LAG_P99 = 10
    PUBLISHED = 11  # events published by the host
    POSITIONED = 12  # 1 once SEQ and ID_* hold a position (SEQ 0 is a valid one)
    GEN = 13  # the stream's generation that position is in (0: not known yet)
    FENCE = 14  # the host's fence: raised before each recovery from a cut-off
    REPLAYS = 15  # events applied that were in the stream before the reader connected
    FOLLOWER = 16  # pid of a process that only follows the stream (``ziggurat follow``)
    FOLLOWER_AT = 17  # when it last asked for the lease, ms of CLOCK_MONOTONIC
    CLEARED = 18  # write time (µs) of the latest whole-cache clear the host made or applied
    CLOCK = 19  # the latest write time (µs) the host gave or saw (see ClusterTier.clock)
    # 1 once a process joined the tier: set before any write or connection, so that a front
    # end that cannot join the tier (Node.js) refuses the cache from then on (the rule of
    # ziggurat-cache's cluster_joined, which reads it as JOINED_WORD)
    JOINED = 20


def host_figures(load: Callable[[int], int]) -> dict[str, Any]:
    """The host-wide figures of the tier, from the words it keeps in the segment (``load``
    reads word ``i``: a ``Cache``'s core, or a read-only attach of the segment).

    >>> host_figures(lambda i: 0)["events_applied"], host_figures(lambda i: 0)["lag_p99_ms"]
    (0, 0.0)
    """
    return {
        "events_published": load(W.PUBLISHED),
        "events_applied": load(W.APPLIED),
        "replays": load(W.REPLAYS),
        "gap_clears": load(W.GAP_CLEARS),
        "dirty_writes": load(W.DIRTY),
        "last_seq": load(W.SEQ),
        "lag_p50_ms": load(W.LAG_P50) / 1000,
        "lag_p99_ms": load(W.LAG_P99) / 1000,
    }
