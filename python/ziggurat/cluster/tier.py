"""L3: Redis or Valkey under the host's segment, shared by every host of the cluster.

The reads, the writes, their events and the write-time rules are ziggurat-cluster's (its
``Tier``, reached through ``ClusterTier`` of the native module, each call with the GIL
released); this class drives it for a ``Cache``: it runs the serializer, words the errors
an application sees, and says in the log what the tier reports once.

Reads: the segment's miss path asks ``ask(key)`` before any loader (once per key per
host, under the load lease); a value found is checked (MAC), decoded, and copied into the
segment only if nothing voided the key while it travelled. Writes: the value and its
invalidation event go to Redis in one script call, then the host's segment is updated;
when Redis cannot be reached, the host's segment is updated alone and the host marks
itself dirty: its stream reader publishes a clear of the whole cache once Redis is back,
since the other hosts and Redis may hold values older than what was written here.
"""

from __future__ import annotations

import functools
import logging
from collections.abc import Callable
from typing import Any

from ziggurat._native import CLUSTER_EXACT_INT, cluster_refusal
from ziggurat._native import ClusterTier as _Native
from ziggurat.cluster import scripts
from ziggurat.cluster.bodies import Bodies, _body, data_of
from ziggurat.cluster.link import ClusterReply, Link
from ziggurat.cluster.signing import Signer
from ziggurat.cluster.words import W, host_figures
from ziggurat.cluster.write_times import ALL, MAX_AGE

__all__ = ["ALL", "MAX_AGE", "ClusterTier", "W", "host_figures"]

log = logging.getLogger("ziggurat")


class ClusterTier(Bodies):
    """The cluster tier of one ``Cache``; see the module's description."""

    def __init__(
        self,
        core: Any,
        name: str,
        link: Link,
        signer: Signer,
        loads: Callable[[bytes], Any],
        dumps: Callable[[Any], bytes],
        *,
        stream_length: int,
        loader_timeout: float = 10.0,
        single_flight: bool = False,
    ) -> None:
        self.core = core
        # The cache itself (``core`` is a view of its native methods), which the crate's
        # tier reads and writes the host's segment through.
        self._host = getattr(core, "_cache", core)
        self.name = name
        self.link = link
        self.signer = signer
        self.loads = loads
        self.dumps = dumps
        self.stream_length = stream_length
        # "zg2": the format of the values and events (a host of an older format uses other
        # keys, so neither reads what the other wrote).
        prefix = b"{zg2:" + name.encode() + b"}:"
        self.prefix = prefix
        self.tags_key = prefix + b"tags"
        self.seq_key = prefix + b"seq"
        self.stream_key = prefix + b"ev"
        self.gen_key = prefix + b"gen"
        self.fence_key = prefix + b"hosts"
        self.single_flight = single_flight
        self.loader_timeout = loader_timeout
        self._read = link.script(scripts.READ)
        self.native = _Native(
            link.native,
            signer,
            self._host,
            name,
            stream_length,
            single_flight,
            loader_timeout,
            # The crate words what it reports. Not a bound method: the native tier would
            # hold this object through it, a cycle the garbage collector cannot see.
            functools.partial(log.warning, "%s"),
        )
        core.app_cas(W.JOINED, 0, 1)

    # -- identity and the host's words ----------------------------------------------------

    def host_id(self) -> str:
        """This host's id in events: random, kept in the segment so every process of the
        host (and a restarted one) uses the same."""
        return self.native.host_id()

    def positioned(self) -> bool:
        """Whether the host's reader has a position in the stream. Until it has one, no
        value from Redis is kept in the segment (it is only returned): the events about
        it might come before the position and never be applied."""
        return bool(self.core.app_load(W.POSITIONED))

    # -- write times (the rules and the notes are the crate's) ----------------------------

    def clock(self) -> int:
        """A write time (µs since the epoch) for a write made now: the wall clock, or one
        more than the latest write time this host gave or saw, whichever is later."""
        return self.native.clock()

    def saw(self, w: int) -> None:
        """The host learnt of a write made at ``w`` (another host's event); a time more
        than ``MAX_SKEW`` ahead of this host's clock is ignored."""
        self.native.saw(w)

    # -- the miss path's hooks ------------------------------------------------------------

    def _stored(self, kb: bytes) -> tuple[memoryview | None, int]:
        """The body stored under ``kb`` while its tags are current, and the milliseconds
        Redis keeps a counter (-1 for any other body, or none): for inspection (raises
        ``Down``)."""
        stored = self._read([self.prefix + b"v:" + kb, self.tags_key], [])
        pttl = -1
        if isinstance(stored, list):
            stored, pttl = stored[0], int(stored[1])
        return _body(stored), pttl

    def _value(self, value: Any) -> bytes | int:
        """What the crate stores for ``value`` (see ``bodies.data_of``)."""
        return data_of(value, self.dumps)

    def ask(self, key: str | bytes, loading: bool = False) -> tuple[Any] | None:
        """The value of ``key`` in Redis as ``(value,)``, copied into the host's segment,
        or None. Called by the segment's miss path (``loading``: by a ``fetch`` about to
        run its loader); never raises for Redis's sake.

        With ``cluster_single_flight``, a loading caller first takes the key's lease in
        Redis; while another host holds it, the caller waits for that host's value to
        appear in Redis, at most ``loader_timeout``, and then loads it itself."""
        found = self.native.ask(key, loading)
        if found is None:
            return None
        kind, data, _, _ = found
        if kind != "P" or not isinstance(data, bytes):
            return (data,)
        try:
            return (self.loads(data),)
        except (ValueError, IndexError, UnicodeDecodeError):
            self.native.count_bad()
            self._bad_logged(_kb(key))
            return None

    def tell(self, key: str | bytes, value: Any, ttl: float, tags: list[str]) -> None:
        """How a load on this host ended: a value is offered to Redis, where it lands only
        if no value and no recent delete is there (a delete leaves a tombstone for
        ``loader_timeout``, within 1 to 60 seconds, so a load that started before it
        cannot bring the old value back); a cached miss (``value`` None) or a failure
        (``ttl`` < 0) only gives the cluster-wide lease back, if this host held it."""
        data = None
        if value is not None and ttl > 0:
            try:
                data = self._value(value)
            except Exception as e:  # the value is still the app's, only not in Redis
                log.debug("ziggurat cache %r: %r not offered to Redis: %s", self.name, key, e)
        self.native.tell(key, data, ttl, list(tags))

    # -- writes ---------------------------------------------------------------------------

    def set(self, key: str | bytes, value: Any, ttl: float, tags: tuple[str, ...]) -> None:
        """``Cache.set``: Redis and its event, then this host (arguments checked)."""
        if not self.native.set(key, self._value(value), ttl, list(tags)):
            self.core.set(key, value, ttl=ttl, tags=tags)

    def add(self, key: str | bytes, value: Any, ttl: float, tags: tuple[str, ...]) -> bool:
        """``Cache.add`` for the whole cluster: exactly one caller of all hosts gets True."""
        stored = self.native.add(key, self._value(value), ttl, list(tags))
        if stored is None:
            return bool(self.core.add(key, value, ttl=ttl, tags=tags))
        return stored

    def delete(self, key: str | bytes) -> bool:
        """``Cache.delete`` for the whole cluster: whether Redis or this host held a value."""
        held = self.native.delete(key)
        return bool(self.core.delete(key)) or held

    def incr(
        self,
        key: str | bytes,
        delta: int,
        default: int | None,
        ttl: float,
        tags: tuple[str, ...],
    ) -> int:
        """``Cache.incr`` for the whole cluster (the counter lives in Redis)."""
        try:
            n = self.native.incr(key, delta, default, ttl, list(tags))
        except ClusterReply as e:
            raise _incr_error(_kb(key), e) from None
        if n is None:
            return int(self.core.incr(key, delta, default=default, tags=tags))
        return n

    def touch(self, key: str | bytes, ttl: float) -> bool:
        """``Cache.touch`` for the whole cluster: whether the key held a value."""
        done = self.native.touch(key, ttl)
        if done is None:
            return bool(self.core.touch(key, ttl))
        return done

    def invalidate_tags(self, tags: tuple[str, ...]) -> None:
        """``Cache.invalidate_tags`` for the whole cluster, Redis's values included."""
        self.native.invalidate_tags(list(tags))

    def clear(self) -> None:
        """``Cache.clear`` for the whole cluster: every value in Redis is voided too."""
        self.native.clear()

    # -- stats ----------------------------------------------------------------------------

    def stats(self) -> dict[str, Any]:
        """The tier's counters: this process's reads (the crate's), its connection's, the
        host's stream figures."""
        return {
            **self.native.counts(),
            "errors": self.link.errors,
            "timeouts": self.link.timeouts,
            "connected": self.link.up,
            **host_figures(self.core.app_load),
        }


def _kb(key: str | bytes) -> bytes:
    return key.encode() if isinstance(key, str) else key


def _incr_error(kb: bytes, e: Exception) -> Exception:
    why = cluster_refusal(str(e))
    if why == "missing":
        return KeyError(kb)
    if why == "not_int":
        return TypeError(
            f"Cache.incr(): the value of {kb!r} is not an integer; only values stored as an "
            "int (or created by incr) can be incremented"
        )
    if why == "overflow":
        return OverflowError(
            f"Cache.incr(): the counter {kb!r} would leave the range Redis scripts count "
            f"exactly (±{CLUSTER_EXACT_INT})"
        )
    return e
