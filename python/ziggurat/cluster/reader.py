"""The stream reader: on each host, one process follows the cache's invalidation stream
and applies other hosts' events to the host's segment, which voids every process's L1 at
once through the stamps. It is ziggurat-cluster's, in a thread of its own that runs
without the GIL; this class starts and stops it (and starts it again in a forked child).

Every process that opens the cache runs a small thread that stands for election: a lease
in the segment (the holder's pid and a heartbeat). When the holder dies, or stops beating
for ``STALE_MS``, another process takes over within ``CHECK_S`` seconds and resumes from
the position the holder left in the segment (the last event applied, written after each
read's events: a read the holder did not finish is applied again), so no event is missed;
a restarted worker set or a restarted Redis resumes the same way. The position is checked
against every event's sequence number (see ``events``): a gap or a rewind means events were
lost, and the host clears its segment rather than stay stale.

A host skips the events it wrote itself (its segment already has those writes), reading only
their place in the sequence; after a read that brought nothing else, the reader waits
``OWN_PAUSE_S`` before the next, so a host that writes often wakes its reader about once per
millisecond rather than once per write (another host's event then waits that long at most).

A process that does nothing else can follow the stream for the host instead
(``ziggurat follow``, a ``dedicated`` reader): its thread shares no CPU with requests.
While such a process lives, the workers' threads stand aside: a worker that holds the
lease gives it up at its next read of the stream, and takes it back when the dedicated
process is gone.
"""

from __future__ import annotations

import os
import time
import weakref

from ziggurat._native import (
    CLUSTER_CHECK_MS,
    CLUSTER_OWN_PAUSE_US,
    CLUSTER_STALE_MS,
    ClusterReader,
)
from ziggurat.cluster.tier import ClusterTier

__all__ = ["Reader"]

#: How often a process that does not hold the lease looks at it, in seconds.
CHECK_S = CLUSTER_CHECK_MS / 1000
#: A holder whose heartbeat is older than this is taken over, in ms.
STALE_MS = CLUSTER_STALE_MS
#: How long the reader lets events gather after a read that brought only its host's own
#: events, in seconds.
OWN_PAUSE_S = CLUSTER_OWN_PAUSE_US / 1e6


def _mono_ms() -> int:
    return time.clock_gettime_ns(time.CLOCK_MONOTONIC) // 1_000_000


class Reader:
    """Stands for election and, when elected, follows the stream (see the module)."""

    def __init__(self, tier: ClusterTier, block_s: float = 0.5, dedicated: bool = False) -> None:
        self.tier = tier
        self.dedicated = dedicated
        self.native = ClusterReader(tier.native, dedicated, block_s)
        self._running = False
        ref = weakref.ref(self)
        os.register_at_fork(after_in_child=lambda: _restart(ref))

    def start(self) -> None:
        """Starts the thread (again, in a child after ``fork``)."""
        self._running = True
        self.native.start()

    def stop(self) -> None:
        """Stops the thread and gives the lease up, so another process takes over at once."""
        self._running = False
        self.native.stop()

    def claim(self) -> int:
        """For a dedicated reader: marks this process as the host's follower; returns 0,
        or the pid of another live dedicated reader (then nothing changed). How
        ``ziggurat follow`` uses it, given a Redis server at that address::

            reader = dedicated_reader(Cache("api", redis="redis://10.0.0.5:6379/0", secret=s))
            reader.claim() or reader.run()

        (``ziggurat.clustered.dedicated_reader`` stops the cache's own reader first.)
        """
        return int(self.native.claim())

    def run(self) -> None:
        """Follows the stream until ``halt`` (a dedicated reader): the thread runs, the
        calling thread waits, so that signal handlers run meanwhile."""
        self.start()
        while not self.native.halted:
            time.sleep(0.1)

    def halt(self) -> None:
        """Asks the reader to stop once the batch of events it is applying is done, without
        giving the lease up yet (safe from a signal handler): ``stop`` does that after."""
        self.native.halt()


def _restart(ref: weakref.ref[Reader]) -> None:
    r = ref()
    if r is not None and r._running:
        r.start()
