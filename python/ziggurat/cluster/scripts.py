"""The server-side scripts of the cluster tier: each write and its invalidation event are
one atomic step in Redis, and a read checks the value's tags there too.

A stored value is ``prefix + body``. The prefix (written by the script, read only by the
scripts) lists the value's tags with each tag's version when it was written; ``body`` is
what the client signed. A read returns ``body`` only while every tag still has that
version, so ``invalidate_tags`` (one ``HINCRBY`` per tag) voids every value carrying the tag
at once, on every host, without touching the values. A clear of the whole cache is the
same with a tag every value carries.

Every write except a fill takes the next number of the cache's sequence and appends the
event (``s`` seq, ``h`` host, ``o`` op, ``k`` key or tags, ``m`` MAC, ``w`` the write's
time, ``g`` the stream's generation) to the stream, trimmed to about ``maxlen`` entries.
Keys are named in ``KEYS`` and share one hash tag, so the scripts run on a Redis Cluster
too.

The scripts' text lives in ziggurat-cluster (its lua/ directory), which every front end sends.

A write carries its host's fence. A host that could not reach Redis raises its fence before
it publishes its clear; a write it sent before (which timed out, so the host kept it local,
but which the server may still run when it wakes up) carries the old fence and is refused,
so it cannot land after the clear that was meant to void it.

>>> "XADD" in WRITE and "HMGET" in READ
True
"""

from __future__ import annotations

from ziggurat._native import CLUSTER_READ, CLUSTER_RELEASE, CLUSTER_WRITE

__all__ = ["READ", "RELEASE", "WRITE"]

#: KEYS: a cluster-wide load lease. ARGV: the holder's token. Deletes it only if it is still
#: that holder's (it may have expired and been taken by another host).
RELEASE: str = CLUSTER_RELEASE

#: KEYS: value, tag versions. Returns the stored value, prefix included (the client skips
#: it: cheaper than a copy here), or nil (missing, tombstone, voided by a tag); a counter
#: with its PTTL, {value, pttl}: its body holds no expiry.
READ: str = CLUSTER_READ

#: KEYS: value, tag versions, sequence, stream, generation, host fences.
#: ARGV: op, host:fence, maxlen, event key field, event MAC, event write time, then per op:
#:   set/add/fill: body, px (0: no expiry), tags...
#:   del: tombstone px
#:   incr: delta, default ('' for none), px, the key's counter mark and write time, tags...
#:   touch: px, expected body ('' for a counter), new body
#:   tags: tags...           clear, recover: the tag every value carries
#: Returns {seq (0 when nothing was published), result}, or the error FENCED.
WRITE: str = CLUSTER_WRITE
