"""The stream reader: on each host, one process follows the cache's invalidation stream
and applies other hosts' events to the host's segment, which voids every process's L1 at
once through the stamps.

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
(``ziggurat follow``, a ``dedicated`` reader): a thread beside CPU-bound requests waits
for the GIL before it can apply an event (up to the interpreter's 5 ms switch interval),
a process of its own does not. While such a process lives, the workers' threads stand
aside: a worker that holds the lease gives it up at its next read of the stream, and
takes it back when the dedicated process is gone.
"""

from __future__ import annotations

import collections
import logging
import os
import threading
import time
import weakref
from typing import Any

from ziggurat._native import (
    CLUSTER_CHECK_MS,
    CLUSTER_STALE_MS,
    ClusterFollower,
    cluster_standing_aside,
    cluster_start,
    cluster_take,
)
from ziggurat.cluster import events
from ziggurat.cluster.link import Down
from ziggurat.cluster.tail import Tail
from ziggurat.cluster.tier import ALL, ClusterTier, W

__all__ = ["Reader"]

log = logging.getLogger("ziggurat")

#: How often a process that does not hold the lease looks at it, in seconds.
CHECK_S = CLUSTER_CHECK_MS / 1000
#: A holder whose heartbeat is older than this is taken over, in ms.
STALE_MS = CLUSTER_STALE_MS
#: How long the reader lets events gather after a read that brought only its host's own
#: events, in seconds (see ``Reader._follow``).
OWN_PAUSE_S = 0.001


def _mono_ms() -> int:
    return time.clock_gettime_ns(time.CLOCK_MONOTONIC) // 1_000_000


def _alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    return True


class Reader:
    """Stands for election and, when elected, follows the stream (see the module)."""

    def __init__(self, tier: ClusterTier, block_s: float = 0.5, dedicated: bool = False) -> None:
        self.tier = tier
        self.core = tier.core
        self.dedicated = dedicated
        self.block_ms = int(block_s * 1000)
        self._stop = threading.Event()
        self._thread: threading.Thread | None = None
        self._lags: collections.deque[float] = collections.deque(maxlen=2000)
        self._last_lag_flush = 0.0
        self._replay_until = (0, 0)
        self._replaying = False
        ref = weakref.ref(self)
        os.register_at_fork(after_in_child=lambda: _restart(ref))

    def start(self) -> None:
        """Starts the thread (again, in a child after ``fork``)."""
        self._stop = threading.Event()
        t = threading.Thread(target=self._run, name=f"ziggurat-l3-{self.tier.name}", daemon=True)
        self._thread = t
        t.start()

    def stop(self) -> None:
        """Stops the thread and gives the lease up, so another process takes over at once."""
        self._stop.set()
        t = self._thread
        if t is not None and t is not threading.current_thread():
            t.join(self.block_ms / 1000 + 2)
        pid = os.getpid()
        try:
            if self.core.app_load(W.LEASE) == pid:
                self.core.app_cas(W.LEASE, pid, 0)
            if self.dedicated and self.core.app_load(W.FOLLOWER) == pid:
                self.core.app_cas(W.FOLLOWER, pid, 0)
        except Exception:
            pass

    def claim(self) -> int:
        """For a dedicated reader: marks this process as the host's follower; returns 0,
        or the pid of another live dedicated reader (then nothing changed). How
        ``ziggurat follow`` uses it, given a Redis server at that address::

            reader = dedicated_reader(Cache("api", redis="redis://10.0.0.5:6379/0", secret=s))
            reader.claim() or reader.run()

        (``ziggurat.clustered.dedicated_reader`` stops the cache's own reader first.)
        """
        pid = os.getpid()
        while True:
            cur = int(self.core.app_load(W.FOLLOWER))
            if cur not in (0, pid) and _alive(cur):
                return cur
            if self.core.app_cas(W.FOLLOWER, cur, pid):
                self._stamp(W.FOLLOWER_AT)
                return 0

    def run(self) -> None:
        """Follows the stream in the calling thread until ``halt`` or ``stop`` (a dedicated
        reader)."""
        self._run()

    def halt(self) -> None:
        """Asks the reader to stop once the batch of events it is applying is done, without
        giving the lease up yet (safe from a signal handler): ``stop`` does that after."""
        self._stop.set()

    # -- election -------------------------------------------------------------------------

    def _lease(self) -> tuple[int, int, int, int, int]:
        """The lease's words (holder, beat, dedicated reader, when it asked) and the
        monotonic clock, as ziggurat-cluster's election reads them."""
        w = self.core.app_load
        return w(W.LEASE), w(W.BEAT), w(W.FOLLOWER), w(W.FOLLOWER_AT), _mono_ms()

    def _standing_aside(self) -> bool:
        """Whether a dedicated reader (another live process) follows for this host: it
        holds the lease and beats, or asked for it within ``STALE_MS`` (a pid alone could
        be another process's by now)."""
        return cluster_standing_aside(os.getpid(), self.dedicated, *self._lease())

    def _take(self) -> bool:
        pid = os.getpid()
        lease = self._lease()
        what = cluster_take(pid, self.dedicated, *lease)
        if what == "hand_back":
            self.core.app_cas(W.LEASE, pid, 0)  # hand over at once
            return False
        if what == "ask":
            self._stamp(W.FOLLOWER_AT)  # still asking: the holder stands aside
            return False
        if what == "claim":
            if not self.core.app_cas(W.LEASE, lease[0], pid):
                return False
            self._beat()
            return True
        return what == "hold"

    def _beat(self) -> None:
        self._stamp(W.BEAT)

    def _stamp(self, word: int) -> None:
        b = self.core.app_load(word)
        self.core.app_cas(word, b, _mono_ms())

    def _holding(self) -> bool:
        return bool(self.core.app_load(W.LEASE) == os.getpid()) and not self._standing_aside()

    def _run(self) -> None:
        while not self._stop.is_set():
            try:
                if self._take():
                    self._follow()
            except Exception as e:  # never let the thread die: log and stand again
                log.warning("ziggurat cache %r: stream reader: %s", self.tier.name, e)
            self._stop.wait(CHECK_S)

    # -- following ------------------------------------------------------------------------

    def _position(self) -> tuple[int, str]:
        w = self.core.app_load
        return w(W.SEQ), f"{w(W.ID_MS)}-{w(W.ID_SEQ)}"

    def _set_position(self, seq: int, sid: str) -> None:
        self._place(seq, _id(sid))

    def _place(self, seq: int, at: tuple[int, int]) -> None:
        words = ((W.ID_MS, at[0]), (W.ID_SEQ, at[1]), (W.SEQ, seq), (W.POSITIONED, 1))
        for word, v in words:
            self._set_word(word, v)

    def _clear(self, why: str) -> None:
        log.warning("ziggurat cache %r: clearing this host's cache: %s", self.tier.name, why)
        self.core.clear()
        self.tier._bump(W.GAP_CLEARS)

    def _set_word(self, word: int, v: int) -> None:
        cur = self.core.app_load(word)
        if cur != v:
            self.core.app_cas(word, cur, v)

    def _adopt_end(self, client: Any, server_seq: int, server_gen: int) -> None:
        """Starts following at the stream's end: a host with no position has nothing to
        catch up with (its segment is new, or was just cleared)."""
        tier = self.tier
        if not server_gen:
            # A new stream: name its generation now, so a later loss is told apart.
            client.set(tier.gen_key, str(time.time_ns() // 1000), nx=True)
            server_gen = int(client.get(tier.gen_key) or 0)
        last = client.xrevrange(tier.stream_key, count=1)
        ev = events.parse(last[0][1], tier.signer) if last else None
        if last and ev is not None:
            self._set_position(ev.seq, last[0][0].decode())
        else:
            # An empty stream (or a forged last entry): the sequence says where it is.
            self._set_position(server_seq, last[0][0].decode() if last else "0-0")
        self._set_word(W.GEN, server_gen)

    def _follow(self) -> None:
        tier = self.tier
        link = tier.link
        reads = Tail(link, tier.stream_key, 1000, self.block_ms / 1000)
        client = reads.client
        try:
            seq, _ = self._position()
            try:
                server_seq, server_gen = (
                    int(x or 0) for x in link.call(client.mget, tier.seq_key, tier.gen_key)
                )
            except Down:
                return
            # Where to start: the rule is ziggurat-cluster's (a host with no position has
            # kept nothing from Redis, see ClusterTier.positioned).
            positioned = bool(self.core.app_load(W.POSITIONED))
            action, gen, why = cluster_start(
                positioned, seq, self.core.app_load(W.GEN), server_seq, server_gen
            )
            if why is not None:
                self._clear(why)
            if action in ("adopt_end", "clear_and_adopt_end"):
                self._adopt_end(client, server_seq, server_gen)
            elif gen is not None:
                self._set_word(W.GEN, gen)
            follower = ClusterFollower(tier.host_id())
            # Events already in the stream when the reader (re)connects are a replay of
            # what the host missed while no process followed (or Redis was away).
            try:
                tail = link.call(client.xrevrange, tier.stream_key, count=1)
            except Down:
                return
            self._replay_until = _id(tail[0][0].decode()) if tail else (0, 0)
            self._replaying = bool(tail)
            mine = False
            while not self._stop.is_set() and self._holding():
                self._beat()
                dirty = self.core.app_load(W.DIRTY)
                if dirty:
                    try:
                        tier.recover()
                    except Down:
                        return
                    self.core.app_cas(W.DIRTY, dirty, 0)
                    log.warning(
                        "ziggurat cache %r: %d writes were kept on this host while Redis "
                        "was unreachable; published a clear of the cache to every host",
                        tier.name,
                        dirty,
                    )
                if mine:
                    # A host that writes wakes its reader once per write, for an event the
                    # reader only moves past: each wake-up costs the host a few tens of µs
                    # of CPU and the server a blocked read to serve and set up again. After
                    # a read of its own events only, the reader lets a millisecond's events
                    # gather and takes them in one read. Another host's event that comes
                    # meanwhile waits that long at most, and only while this host writes.
                    time.sleep(OWN_PAUSE_S)
                last, sid = self._position()
                try:
                    got = link.call(reads.read, sid)
                except Down:
                    return
                last, others = self._batch(got, last, follower)
                mine = bool(got) and not others
                self._flush_lags()
        finally:
            reads.close()

    def _batch(
        self, got: list[tuple[bytes, dict[bytes, bytes]]], last: int, follower: ClusterFollower
    ) -> tuple[int, bool]:
        """Applies one read's entries in order, as ziggurat-cluster's follower says: the
        last sequence number passed, and whether any entry was another host's.

        The host's position (the last entry passed and its sequence number) is written
        once, after the entries it passed (also when one of them raised), and only while
        this process still holds the lease: a reader that dies before that, or loses the
        lease, leaves the entries to be applied again, which is harmless (a delete, an
        invalidation or a clear done twice; a clear costs the host its cache again). The
        host's own events that follow one another in the current generation (most of them,
        in a host that writes) are passed by reading each one's place only."""
        gen = self.core.app_load(W.GEN)
        tier = self.tier
        applied = replays = 0
        others = False
        passed = b""
        try:
            for eid, fields in got:
                seq, clears, new_gen, ev, lag = follower.entry(fields, last, gen, tier.signer)
                others = others or not follower.own(fields)
                if seq is None:
                    tier.bad_signatures += 1
                    passed = eid
                    continue  # refused: passed, not applied
                for why in clears:
                    self._clear(why)
                if new_gen is not None:
                    self._set_word(W.GEN, new_gen)
                    gen = new_gen
                if ev is not None:
                    self._apply(events.Event(*ev))
                if lag:
                    # The lag of an invalidation: an own event invalidates nothing here.
                    self._lags.append(time.time() * 1000 - _id(eid.decode())[0])
                # Passed only once applied: an entry whose application raised is read again.
                passed = eid
                last = seq
                applied += 1
                if self._replaying:
                    if _id(eid.decode()) <= self._replay_until:
                        replays += 1
                    else:
                        self._replaying = False
        finally:
            if passed and self._holding():
                self._place(last, _id(passed.decode()))
                if applied:
                    self.tier._bump(W.APPLIED, applied)
                if replays:
                    self.tier._bump(W.REPLAYS, replays)
        return last, others

    def _apply(self, ev: events.Event) -> None:
        # The host notes the event's write time first, so a process that misses after the
        # segment changed already refuses what the event made old (see ``ClusterTier``).
        core, tier = self.core, self.tier
        tier.saw(ev.w)
        w = tier.bounded(ev.w)
        if ev.op in ("clear", "recover") or (ev.op == "tags" and ALL in ev.keys):
            tier.cleared(w)
            core.clear()
        elif ev.op == "tags":
            tags = tuple(str(t) for t in ev.keys)
            for t in tags:
                tier.note(b"t" + t.encode(), w)
            core.invalidate_tags(tags)
        else:
            for k in ev.keys:
                kb = k if isinstance(k, bytes) else k.encode()
                tier.note(b"k" + kb, w)
                core.delete(k)

    def _flush_lags(self) -> None:
        now = time.monotonic()
        if not self._lags or now - self._last_lag_flush < 0.5:
            return
        self._last_lag_flush = now
        xs = sorted(self._lags)
        for word, q in ((W.LAG_P50, 0.5), (W.LAG_P99, 0.99)):
            v = max(0, int(xs[min(len(xs) - 1, int(q * len(xs)))] * 1000))
            cur = self.core.app_load(word)
            self.core.app_cas(word, cur, v)


def _id(sid: str) -> tuple[int, int]:
    ms, _, n = sid.partition("-")
    return int(ms), int(n or 0)


def _restart(ref: weakref.ref[Reader]) -> None:
    r = ref()
    if r is not None and r._thread is not None and not r._stop.is_set():
        r.start()
