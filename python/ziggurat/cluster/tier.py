"""L3: Redis or Valkey under the host's segment, shared by every host of the cluster.

Reads: the segment's miss path asks ``ask(key)`` before any loader (once per key per
host, under the load lease); a value found is checked (MAC), decoded, and copied into the
segment only if nothing voided the key while it travelled. Writes: the value and its
invalidation event go to Redis in one script call, then the host's segment is updated;
when Redis cannot be reached, the host's segment is updated alone and the host marks
itself dirty: its stream reader publishes a clear of the whole cache once Redis is back,
since the other hosts and Redis may hold values older than what was written here.

``ClusterTier`` is this file's reads and writes, with two parts of its own files: the
format of a stored body (``bodies``) and the write times that refuse a body older than a
write the host knows of (``write_times``); the segment words it keeps are in ``words``.
"""

from __future__ import annotations

import contextlib
import logging
import os
import time
from collections.abc import Callable
from typing import Any

from ziggurat._native import (
    cluster_px_since,
    cluster_px_value,
    cluster_refusal,
    cluster_write_args,
)
from ziggurat.cluster import events, scripts
from ziggurat.cluster.bodies import Bodies, _body
from ziggurat.cluster.link import ClusterReply, Down, Link
from ziggurat.cluster.signing import Signer
from ziggurat.cluster.words import W, host_figures
from ziggurat.cluster.write_times import ALL, MAX_AGE, WriteTimes

__all__ = ["ALL", "MAX_AGE", "ClusterTier", "W", "host_figures"]

log = logging.getLogger("ziggurat")


class ClusterTier(WriteTimes, Bodies):
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
        tombstone_ttl: float,
        loader_timeout: float = 10.0,
        single_flight: bool = False,
    ) -> None:
        self.core = core
        self.name = name
        self.link = link
        self.signer = signer
        self.loads = loads
        self.dumps = dumps
        self.stream_length = stream_length
        self.tombstone_ms = max(1, int(tombstone_ttl * 1000))
        # "zg2": the format of the values and events (a host of an older format uses other
        # keys, so neither reads what the other wrote).
        prefix = b"{zg2:" + name.encode() + b"}:"
        self.prefix = prefix
        self.tags_key = prefix + b"tags"
        self.seq_key = prefix + b"seq"
        self.stream_key = prefix + b"ev"
        self.gen_key = prefix + b"gen"
        self.fence_key = prefix + b"hosts"
        self._read = link.script(scripts.READ)
        self._write = link.script(scripts.WRITE)
        self._release = link.script(scripts.RELEASE)
        self.single_flight = single_flight
        self.loader_timeout = loader_timeout
        self._lease_ms = max(1, int(loader_timeout * 1000))
        # Names this process's cluster-wide leases; keys it holds one for.
        self._token = os.urandom(8).hex()
        self._leases: set[bytes] = set()
        self.lease_waits = 0
        self.lease_timeouts = 0
        self.hits = 0
        self.misses = 0
        self.bad_signatures = 0
        self.refused_older = 0
        self.refused_ahead = 0
        self.fills = 0
        self._logged_bad = False
        self._logged_older = False
        self._logged_refusal = False
        self._logged_reply_error = False
        core.app_cas(W.JOINED, 0, 1)

    # -- identity -------------------------------------------------------------------------

    def host_id(self) -> str:
        """This host's id in events: random, kept in the segment so every process of the
        host (and a restarted one) uses the same."""
        h = self.core.app_load(W.HOST)
        while h == 0:
            self.core.app_cas(W.HOST, 0, int.from_bytes(os.urandom(8), "big") >> 1 or 1)
            h = self.core.app_load(W.HOST)
        return f"{h:x}"

    def positioned(self) -> bool:
        """Whether the host's reader has a position in the stream. Until it has one, no
        value from Redis is kept in the segment (it is only returned): the events about
        it might come before the position and never be applied."""
        return bool(self.core.app_load(W.POSITIONED))

    def _vkey(self, kb: bytes) -> bytes:
        return self.prefix + b"v:" + kb

    def _keys(self, kb: bytes) -> list[bytes]:
        return [
            self._vkey(kb),
            self.tags_key,
            self.seq_key,
            self.stream_key,
            self.gen_key,
            self.fence_key,
        ]

    # -- the miss path's hooks --------------------------------------------------------------

    def _stored(self, kb: bytes) -> tuple[memoryview | None, int]:
        """The body stored under ``kb`` while its tags are current, as a view into the
        server's reply, and the milliseconds Redis keeps a counter (-1 for any other body,
        or none) (raises ``Down``). An error the server answered is none (logged once); a
        stored string whose prefix does not add up is none and counts as a bad signature."""
        pttl = -1
        try:
            stored = self._read([self._vkey(kb), self.tags_key], [])
            if isinstance(stored, list):
                stored, pttl = stored[0], int(stored[1])
        except Down:
            raise
        except Exception as e:  # the server answered an error (busy, out of memory, ...)
            if not self._logged_reply_error:
                self._logged_reply_error = True
                log.warning("ziggurat cache %r: Redis answered a read with %s", self.name, e)
            return None, -1
        try:
            return _body(stored), pttl
        except (IndexError, TypeError, ValueError):
            self._bad(kb)
            return None, -1

    def _lookup(self, key: str | bytes, kb: bytes) -> tuple[Any] | None:
        """One read of ``key`` in Redis: ``(value,)`` copied into the host's segment (see
        ``ask``), or None (missing, voided, expired, failing its MAC, unreachable)."""
        if self.core.app_load(W.DIRTY):
            # Writes kept on this host wait for the recovery: Redis may hold values they
            # replaced, so it is not read until then (the loader answers instead).
            return None
        seen = self.core.seen(key) if self.positioned() else None
        try:
            body, pttl = self._stored(kb)
        except Down:
            return None
        found = None if body is None else self.decode(kb, body, pttl)
        if found is not None and not self.fresh(kb, found[4], found[2]):
            self._older(kb)
            found = None
        if found is None:
            self.misses += 1
            return None
        value, left, tags, payload, _ = found
        self.hits += 1
        if seen is not None:
            try:
                user_tags = tuple(t for t in tags if t != ALL)
                if self.core.fill(key, value, left, user_tags, seen, payload):
                    self.fills += 1
            except Exception as e:  # the value is still returned, only not kept
                log.debug("ziggurat cache %r: L3 value of %r not kept: %s", self.name, key, e)
        return (value,)

    def ask(self, key: str | bytes, loading: bool = False) -> tuple[Any] | None:
        """The value of ``key`` in Redis as ``(value,)``, copied into the host's segment,
        or None. Called by the segment's miss path (``loading``: by a ``fetch`` about to
        run its loader); never raises for Redis's sake.

        With ``cluster_single_flight``, a loading caller first takes the key's lease in
        Redis; while another host holds it, the caller waits for that host's value to
        appear in Redis, at most ``loader_timeout``, and then loads it itself."""
        kb = _kb(key)
        found = self._lookup(key, kb)
        if found is not None or not (loading and self.single_flight):
            return found
        lease = self.prefix + b"lease:" + kb
        deadline = time.monotonic() + self.loader_timeout
        pause = 0.002
        while True:
            try:
                if self.link.command("SET", lease, self._token, "NX", "PX", self._lease_ms):
                    self._leases.add(kb)
                    return None  # this host loads; `tell` gives the lease back
            except (Down, ClusterReply):
                return None
            if time.monotonic() + pause > deadline:
                self.lease_timeouts += 1
                return None
            time.sleep(pause)
            pause = min(pause * 2, 0.05)
            found = self._lookup(key, kb)
            if found is not None:
                self.lease_waits += 1
                return found

    def tell(self, key: str | bytes, value: Any, ttl: float, tags: list[str]) -> None:
        """How a load on this host ended: a value is offered to Redis, where it lands only
        if no value and no recent delete is there (a delete leaves a tombstone for
        ``tombstone_ttl`` so a load that started before it cannot bring the old value
        back); a cached miss (``value`` None) or a failure (``ttl`` < 0) only gives the
        cluster-wide lease back, if this host held it."""
        kb = _kb(key)
        try:
            if value is not None and ttl > 0:
                body, _ = self.encode(kb, value, ttl, (*tags, ALL), self.clock())
                self._run("fill", kb, b"", [body, _px_value(ttl), *tags, ALL], 0)
        except Down:
            pass
        finally:
            if kb in self._leases:
                self._leases.discard(kb)
                with contextlib.suppress(Down):
                    self._release([self.prefix + b"lease:" + kb], [self._token])

    # -- writes -------------------------------------------------------------------------------

    def _run(self, op: str, kb: bytes, k: bytes, extra: list[Any], w: int) -> list[Any]:
        fence = self.core.app_load(W.FENCE)
        head = cluster_write_args(self.signer, self.host_id(), fence, self.stream_length, op, k, w)
        keys = self._keys(kb)
        try:
            r = self._write(keys, [*head, *extra])
        except Down:
            raise
        except Exception as e:
            why = cluster_refusal(str(e))
            if op == "incr" and why in ("missing", "not_int", "overflow"):
                raise  # the caller's mistake, answered as Cache.incr answers it
            if why != "fenced":
                # The server refused the write (out of memory, read-only replica, ...): the
                # app must not fail for it; the write stays on the host, as when cut off.
                self.link.native.count_error()
                if not self._logged_refusal:
                    self._logged_refusal = True
                    log.warning(
                        "ziggurat cache %r: Redis refused a write (%s); writes stay on this "
                        "host until it accepts them again",
                        self.name,
                        e,
                    )
                raise Down(f"refused: {e}") from None
            # This process's fence is older than its host's: a recovery is under way.
            raise Down("fenced: the host is recovering from a cut-off") from None
        if int(r[0]):
            self._bump(W.PUBLISHED)
        return list(r)

    def _bump(self, word: int, n: int = 1) -> None:
        while True:
            cur = self.core.app_load(word)
            if self.core.app_cas(word, cur, cur + n):
                return

    def dirty(self) -> None:
        """A write was kept on this host alone: the reader will publish a clear."""
        self._bump(W.DIRTY)

    def _local(
        self,
        key: str | bytes,
        seen: tuple[int, int, int] | None,
        value: Any,
        ttl: float,
        tags: tuple[str, ...],
        payload: bytes | None,
    ) -> None:
        """After a write reached Redis: the host's segment takes ``value`` (``payload``, as
        encoded for Redis) unless the key changed meanwhile (an event applied, another
        process's write), when it drops the key instead, to be read again from Redis."""
        try:
            if seen is not None and self.core.fill(key, value, ttl, tags, seen, payload):
                return
        except Exception as e:
            log.debug("ziggurat cache %r: %r kept in Redis only: %s", self.name, key, e)
        self.core.delete(key)

    def set(self, key: str | bytes, value: Any, ttl: float, tags: tuple[str, ...]) -> None:
        """``Cache.set``: Redis and its event, then this host (arguments checked)."""
        kb = _kb(key)
        w = self.clock()
        body, payload = self.encode(kb, value, ttl, (*tags, ALL), w)
        seen = self.core.seen(key) if self.positioned() else None
        try:
            self._run("set", kb, kb, [body, _px_value(ttl), *tags, ALL], w)
        except Down:
            self.dirty()
            self.core.set(key, value, ttl=ttl, tags=tags)
            return
        self.note(b"k" + kb, w)
        self._local(key, seen, value, ttl, tags, payload)

    def add(self, key: str | bytes, value: Any, ttl: float, tags: tuple[str, ...]) -> bool:
        """``Cache.add`` for the whole cluster: exactly one caller of all hosts gets True."""
        kb = _kb(key)
        w = self.clock()
        body, payload = self.encode(kb, value, ttl, (*tags, ALL), w)
        seen = self.core.seen(key) if self.positioned() else None
        try:
            r = self._run("add", kb, kb, [body, _px_value(ttl), *tags, ALL], w)
            stored = bool(int(r[1]))
        except Down:
            self.dirty()
            return bool(self.core.add(key, value, ttl=ttl, tags=tags))
        if stored:
            self.note(b"k" + kb, w)
            self._local(key, seen, value, ttl, tags, payload)
        return stored

    def delete(self, key: str | bytes) -> bool:
        """``Cache.delete`` for the whole cluster: whether Redis or this host held a value."""
        kb = _kb(key)
        w = self.clock()
        try:
            held = bool(int(self._run("del", kb, kb, [self.tombstone_ms], w)[1]))
        except Down:
            self.dirty()
            held = False
        else:
            self.note(b"k" + kb, w)
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
        kb = _kb(key)
        d = "" if default is None else str(default)
        w = self.clock()
        head = self.counter_head(kb, w)
        try:
            r = self._run("incr", kb, kb, [delta, d, _px_value(ttl), head, *tags, ALL], w)
        except Down:
            self.dirty()
            return int(self.core.incr(key, delta, default=default, tags=tags))
        except Exception as e:
            raise _incr_error(kb, e) from None
        self.note(b"k" + kb, w)
        self.core.delete(key)
        return int(r[1])

    def touch(self, key: str | bytes, ttl: float) -> bool:
        """``Cache.touch`` for the whole cluster: whether the key held a value."""
        kb = _kb(key)
        try:
            done = self._touch_redis(kb, ttl)
        except Down:
            self.dirty()
            return bool(self.core.touch(key, ttl))
        self.core.delete(key)
        return done

    def _touch_redis(self, kb: bytes, ttl: float) -> bool:
        # A value's expiry is signed: it is signed again with the new one, and stored only
        # if the value is still the one read (a counter's expiry is Redis's own). The write
        # time stays the one signed with it: a touch is not a write, so a value put back into
        # Redis and touched is still as old as it was, and still refused by every host that
        # knows a later write, and by all of them MAX_AGE after it was written. The event
        # carries that write time too, so the hosts that apply it note nothing newer. A
        # value older than a write this host knows of is not touched at all.
        body, pttl = self._stored(kb)
        if body is None:
            return False
        found = self.decode(kb, body, pttl)
        if found is None:
            return False
        written = found[4]
        if not self.fresh(kb, written, found[2]):
            self._older(kb)
            return False
        px = _px_since(ttl, written)
        if body[0] == ord("N"):
            done = int(self._run("touch", kb, kb, [px, b""], written)[1])
        else:
            new, _ = self.encode(kb, found[0], ttl, found[2], written)
            done = int(self._run("touch", kb, kb, [px, bytes(body), new], written)[1])
        if done:
            self.note(b"k" + kb, written)
        return bool(done)

    def invalidate_tags(self, tags: tuple[str, ...]) -> None:
        """``Cache.invalidate_tags`` for the whole cluster, Redis's values included."""
        w = self.clock()
        try:
            self._run("tags", self.tags_key, events.tags_field(tags), list(tags), w)
        except Down:
            self.dirty()
        else:
            for t in tags:
                self.note(b"t" + t.encode(), w)
        self.core.invalidate_tags(tags)

    def publish_clear(self) -> None:
        """Voids every value in Redis and tells every host to clear (raises ``Down``)."""
        w = self.clock()
        self._run("clear", self.tags_key, events.tags_field((ALL,)), [ALL], w)
        self.cleared(w)

    def recover(self) -> None:
        """After writes were kept on this host: raises the host's fence (writes it sent
        before, which may still run on the server, are refused from now on), then voids
        every value in Redis and tells every host to clear (raises ``Down``), this one
        included: until then, a process of this host may have read from Redis a value that
        one of the writes kept here had replaced (its reader skips the host's own event)."""
        self._bump(W.FENCE)
        w = self.clock()
        self._run("recover", self.tags_key, events.tags_field((ALL,)), [ALL], w)
        self.core.clear()
        self.cleared(w)
        self._bump(W.GAP_CLEARS)

    def clear(self) -> None:
        """``Cache.clear`` for the whole cluster: every value in Redis is voided too."""
        try:
            self.publish_clear()
        except Down:
            self.dirty()
        self.core.clear()

    # -- stats ----------------------------------------------------------------------------------

    def stats(self) -> dict[str, Any]:
        """The tier's counters: this process's reads, the host's stream figures."""
        return {
            "hits": self.hits,
            "misses": self.misses,
            "fills": self.fills,
            "lease_waits": self.lease_waits,
            "lease_timeouts": self.lease_timeouts,
            "errors": self.link.errors,
            "timeouts": self.link.timeouts,
            "bad_signatures": self.bad_signatures,
            "refused_older": self.refused_older,
            "refused_ahead": self.refused_ahead,
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
            "exactly (±2**53)"
        )
    return e


def _px_value(ttl: float) -> int:
    """A signed value's time to live in Redis: its ttl, at most ``MAX_AGE``."""
    return cluster_px_value(ttl)


def _px_since(ttl: float, written: int) -> int:
    """The time to live in Redis of a value written at ``written`` (µs) that gets ``ttl``
    from now: at most until ``MAX_AGE`` after its write."""
    return cluster_px_since(ttl, written, time.time_ns() // 1000)
