"""L3: Redis or Valkey under the host's segment, shared by every host of the cluster.

Reads: the segment's miss path asks ``below(key)`` before any loader (once per key per
host, under the load lease); a value found is checked (MAC), decoded, and copied into the
segment only if nothing voided the key while it travelled. Writes: the value and its
invalidation event go to Redis in one script call, then the host's segment is updated;
when Redis cannot be reached, the host's segment is updated alone and the host marks
itself dirty: its stream reader publishes a clear of the whole cache once Redis is back,
since the other hosts and Redis may hold values older than what was written here.

A stored body is ``b"Z2" + MAC + expiry (ms since the epoch, 0: none) + write time (µs) +
tags + kind + data``, the kind ``P`` for the serializer's bytes or ``I`` for an int in
decimal (which ``incr`` can turn into a counter). A counter made by ``incr`` is
``b"N" + mark + tags + b":" + decimal``: the server-side script adds to it, so its count
cannot be signed; the mark (``Signer.counter_mac``) lets only a key some host made a counter
read as one, and the count is parsed as an int, never unpickled.

Redis is not trusted to keep what was written, only to hand it back: a writer without the
secret can put an older signed body back. Two rules bound that. Every body is valid for at
most ``MAX_AGE`` after its signed write time, whatever its ttl (Redis is told to drop it
then too). And a host notes, for each key (and tag) it wrote or applied an event about,
the write time of the latest write it knows; a body written before it is refused
(``refused_older``) while the note lives (``MAX_AGE``, in the host's segment, which may
evict it or lose it in a clear). A whole-cache clear is noted in a word of the segment.
Write times come from a clock the host's processes share (``clock``), never behind the
latest write time the host has seen, so a write made after applying another's event is
always the later one even when the hosts' clocks differ.
"""

from __future__ import annotations

import contextlib
import hashlib
import logging
import math
import os
import time
from collections.abc import Callable
from typing import Any

from ziggurat.cluster import events, scripts
from ziggurat.cluster.link import Down, Link
from ziggurat.cluster.signing import MAC_LEN, Signer

__all__ = ["ALL", "MAX_AGE", "ClusterTier", "W", "host_figures"]

log = logging.getLogger("ziggurat")

#: The tag every value in Redis carries: a cluster-wide clear moves its version.
ALL = "\x00all"

#: The longest a value stays in Redis, in seconds, whatever its ttl (``math.inf``
#: included): past its signed write time plus this, every host refuses it and Redis drops
#: it. It bounds how long an older signed value put back into Redis can be served by a host
#: that knows no later write of its key.
MAX_AGE = 86400.0
_MAX_AGE_US = int(MAX_AGE * 1_000_000)


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


class ClusterTier:
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
        self.fills = 0
        self._logged_bad = False
        self._logged_older = False
        self._logged_refusal = False
        self._logged_reply_error = False
        self._counter_mark: dict[bytes, bytes] = {}
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

    # -- write times --------------------------------------------------------------------

    def clock(self) -> int:
        """A write time (µs since the epoch) for a write made now: the wall clock, or one
        more than the latest write time this host gave or saw, whichever is later, so every
        write time a host gives is above any it knew of (see ``saw``)."""
        now = time.time_ns() // 1000
        while True:
            cur = int(self.core.app_load(W.CLOCK))
            w = max(now, cur + 1)
            if self.core.app_cas(W.CLOCK, cur, w):
                return w

    def saw(self, w: int) -> None:
        """The host learnt of a write made at ``w`` (another host's event)."""
        _raise_word(self.core, W.CLOCK, w)

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
        if written < self.core.app_load(W.CLEARED) or written < self._known(b"k" + kb):
            return False
        return all(t == ALL or written >= self._known(b"t" + t.encode()) for t in tags)

    # -- bodies ---------------------------------------------------------------------------

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

    def counter_mark(self, kb: bytes) -> bytes:
        """The counter mark of ``kb`` (see ``Signer.counter_mac``), remembered for the
        keys this process counted last."""
        mark = self._counter_mark.get(kb)
        if mark is None:
            if len(self._counter_mark) >= 1024:
                self._counter_mark.clear()
            mark = self._counter_mark[kb] = self.signer.counter_mac(kb)
        return mark

    def decode(
        self, kb: bytes, body: bytes | memoryview
    ) -> tuple[Any, float, tuple[str, ...], bytes | None, int | None] | None:
        """``(value, seconds left, tags, encoded, written)`` of a body, or None (expired,
        bad MAC, junk); ``encoded`` is the value as the serializer wrote it (None for an
        int), ``written`` its signed write time (None for a counter, which has none).

        ``body`` may be a view into the reply (no copy of a large value until the one that
        the serializer reads)."""
        try:
            return self._decode(kb, body)
        except (ValueError, IndexError, UnicodeDecodeError):
            self._bad(kb)
            return None

    def _decode(
        self, kb: bytes, body: bytes | memoryview
    ) -> tuple[Any, float, tuple[str, ...], bytes | None, int | None] | None:
        if body[:1] == b"N":
            if not self.signer.counter_ok(kb, body[1 : 1 + MAC_LEN]):
                self._bad(kb)
                return None
            tags, pos = _read_tags(body, 1 + MAC_LEN)
            if body[pos : pos + 1] != b":":
                raise ValueError("no count")
            return int(bytes(body[pos + 1 :])), math.inf, tags, None, None
        if body[:2] != b"Z2" or len(body) < 2 + MAC_LEN + 18:
            self._bad(kb)
            return None
        rest = body[2 + MAC_LEN :]
        if not self.signer.value_ok(kb, rest, body[2 : 2 + MAC_LEN]):
            self._bad(kb)
            return None
        expiry = int.from_bytes(rest[:8], "big")
        written = int.from_bytes(rest[8:16], "big")
        now = time.time()
        left = (written + _MAX_AGE_US) / 1_000_000 - now
        if expiry:
            left = min(left, expiry / 1000 - now)
        if left <= 0:
            return None
        tags, pos = _read_tags(rest, 16)
        kind = rest[pos : pos + 1]
        if kind == b"I":
            return int(bytes(rest[pos + 1 :])), left, tags, None, written
        if kind != b"P":
            raise ValueError("unknown kind")
        payload = bytes(rest[pos + 1 :])
        return self.loads(payload), left, tags, payload, written

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

    # -- the miss path's hooks --------------------------------------------------------------

    def _stored(self, kb: bytes) -> memoryview | None:
        """The body stored under ``kb`` while its tags are current, as a view into the
        server's reply (raises ``Down``). An error the server answered is none (logged once);
        a stored string whose prefix does not add up is none and counts as a bad signature."""
        try:
            stored = self._read([self._vkey(kb), self.tags_key], [])
        except Down:
            raise
        except Exception as e:  # the server answered an error (busy, out of memory, ...)
            if not self._logged_reply_error:
                self._logged_reply_error = True
                log.warning("ziggurat cache %r: Redis answered a read with %s", self.name, e)
            return None
        try:
            return _body(stored)
        except (IndexError, TypeError, ValueError):
            self._bad(kb)
            return None

    def _lookup(self, key: str | bytes, kb: bytes) -> tuple[Any] | None:
        """One read of ``key`` in Redis: ``(value,)`` copied into the host's segment (see
        ``below``), or None (missing, voided, expired, failing its MAC, unreachable)."""
        if self.core.app_load(W.DIRTY):
            # Writes kept on this host wait for the recovery: Redis may hold values they
            # replaced, so it is not read until then (the loader answers instead).
            return None
        seen = self.core.seen(key) if self.positioned() else None
        try:
            body = self._stored(kb)
        except Down:
            return None
        found = None if body is None else self.decode(kb, body)
        if found is not None and found[4] is not None and not self.fresh(kb, found[4], found[2]):
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

    def below(self, key: str | bytes, loading: bool = False) -> tuple[Any] | None:
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
                if self.link.call(
                    self.link.client.set, lease, self._token, nx=True, px=self._lease_ms
                ):
                    self._leases.add(kb)
                    return None  # this host loads; `above` gives the lease back
            except Down:
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

    def above(self, key: str | bytes, value: Any, ttl: float, tags: list[str]) -> None:
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
        host = self.host_id()
        mac = self.signer.event_mac(events.signed_body(host, op, k, w))
        fenced = f"{host}:{self.core.app_load(W.FENCE)}"
        args = [op, fenced, self.stream_length, k, mac, w, *extra]
        keys = self._keys(kb)
        try:
            r = self._write(keys, args)
        except Down:
            raise
        except Exception as e:
            msg = str(e)
            if op == "incr" and any(m in msg for m in _INCR_REFUSALS):
                raise  # the caller's mistake, answered as Cache.incr answers it
            if "FENCED" not in msg:
                # The server refused the write (out of memory, read-only replica, ...): the
                # app must not fail for it; the write stays on the host, as when cut off.
                self.link.errors += 1
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
        mark = self.counter_mark(kb)
        try:
            r = self._run("incr", kb, kb, [delta, d, _px(ttl), mark, *tags, ALL], w)
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
        # A value's expiry is signed: it is re-signed with the new one, and stored only if
        # the value is still the one read (a counter's expiry is Redis's own). A value older
        # than a write this host knows of is not touched: signing it again would make a
        # value put back into Redis a new one.
        body = self._stored(kb)
        if body is None:
            return False
        found = self.decode(kb, body)
        if found is None:
            return False
        w = self.clock()
        written = found[4]
        if written is None:
            done = int(self._run("touch", kb, kb, [_px(ttl), b""], w)[1])
        elif not self.fresh(kb, written, found[2]):
            self._older(kb)
            return False
        else:
            new, _ = self.encode(kb, found[0], ttl, found[2], w)
            done = int(self._run("touch", kb, kb, [_px_value(ttl), bytes(body), new], w)[1])
        if done:
            self.note(b"k" + kb, w)
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
            "connected": self.link.up,
            **host_figures(self.core.app_load),
        }


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


def _note_key(what: bytes) -> bytes:
    """The segment key of the note about a key or tag (see ``ClusterTier.note``): fixed
    size whatever the key's, in a space of keys an application is unlikely to use."""
    return b"\x00zg-note:" + hashlib.blake2b(what, digest_size=16).digest()


def _raise_word(core: Any, word: int, v: int) -> None:
    while True:
        cur = core.app_load(word)
        if cur >= v or core.app_cas(word, cur, v):
            return


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


def _kb(key: str | bytes) -> bytes:
    return key.encode() if isinstance(key, str) else key


#: What the write script answers an ``incr`` it refuses with.
_INCR_REFUSALS = ("MISSING", "NOTINT", "OVERFLOW")


def _incr_error(kb: bytes, e: Exception) -> Exception:
    msg = str(e)
    if "MISSING" in msg:
        return KeyError(kb)
    if "NOTINT" in msg:
        return TypeError(
            f"Cache.incr(): the value of {kb!r} is not an integer; only values stored as an "
            "int (or created by incr) can be incremented"
        )
    if "OVERFLOW" in msg:
        return OverflowError(
            f"Cache.incr(): the counter {kb!r} would leave the range Redis scripts count "
            "exactly (±2**53)"
        )
    return e


def _px(ttl: float) -> int:
    return 0 if math.isinf(ttl) else max(1, int(ttl * 1000))


def _px_value(ttl: float) -> int:
    """A signed value's time to live in Redis: its ttl, at most ``MAX_AGE``."""
    return _px(min(ttl, MAX_AGE))
