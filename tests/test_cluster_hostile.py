"""The cluster tier against a Redis writer without the secret: something that can read and
write every key of the server (another client, a compromised replica, a restored backup)
but cannot sign. It can put back older signed values, overwrite values with raw bytes,
and add stream entries of its own; a host must never serve what it put back or forged.
Against real servers; the attacker is a plain redis-py client.
"""

from __future__ import annotations

import math
import os
import signal
import socket
import subprocess
import sys
import time
import uuid
from collections.abc import Callable, Iterator
from typing import Any

import cluster_helpers
import pytest
from cluster_helpers import converges
from redis_servers import Server
from ziggurat import Cache
from ziggurat.cluster.bodies import _body
from ziggurat.cluster.tier import ALL, MAX_AGE, W
from ziggurat.cluster.write_times import MAX_SKEW

pytestmark = pytest.mark.timeout(120)

server = cluster_helpers.server
hosts = cluster_helpers.hosts

MISSING = object()


def vkey_of(r: Any, key: bytes) -> bytes:
    (vkey,) = [k for k in r.keys("*") if k.endswith(b":v:" + key)]
    return bytes(vkey)


def caught_up(c: Cache, r: Any) -> Callable[[], bool]:
    """Whether ``c``'s reader has passed every event in the stream."""
    (seq_key,) = [k for k in r.keys("*") if k.endswith(b"}:seq")]
    return lambda: c.stats()["l3"]["last_seq"] >= int(r.get(seq_key))


def put_back(r: Any, key: bytes, versions: dict[bytes, bytes]) -> None:
    r.delete(key)
    if versions:
        r.hset(key, mapping=versions)


def in_segment(c: Cache, key: str) -> Any:
    """What ``c``'s own tiers (L1, L2) hold for ``key``, without asking Redis."""
    return c._core.get_local(key, None, MISSING)


# -- 11: an older signed value put back -----------------------------------------------------


def test_a_value_put_back_after_a_newer_set_is_not_served(
    server: Server, hosts: Callable[..., Cache]
) -> None:
    a, b = hosts(server.url, "a"), hosts(server.url, "b")
    r = server.client()
    a.set("k", "v1", ttl=3600)
    vkey = vkey_of(r, b"k")
    old = r.get(vkey)
    a.set("k", "v2", ttl=3600)
    assert converges(caught_up(b, r))
    r.set(vkey, old)  # the attacker puts the older signed value back
    # b applied a's second set: it refuses the value written before it.
    assert b.get("k") is None
    assert b.fetch("k", lambda: "loaded", ttl=60) == "loaded"
    assert b.stats()["l3"]["refused_older"] >= 1
    # a wrote the second value itself; with its own copy gone (evicted), it refuses too.
    a._core.delete("k")
    r.set(vkey, old)
    assert a.get("k") is None
    assert a.stats()["l3"]["refused_older"] >= 1
    assert a.stats()["l3"]["bad_signatures"] == 0  # older, not forged


def test_a_value_put_back_after_a_delete_is_not_served(
    server: Server, hosts: Callable[..., Cache]
) -> None:
    a, b = hosts(server.url, "a"), hosts(server.url, "b")
    r = server.client()
    a.set("k", {"v": 1}, ttl=math.inf)
    assert converges(lambda: b.get("k") == {"v": 1})
    vkey = vkey_of(r, b"k")
    old = r.get(vkey)
    a.delete("k")
    assert converges(caught_up(b, r))
    assert in_segment(b, "k") is MISSING
    r.set(vkey, old)
    assert b.get("k") is None and a.get("k") is None
    # A touch must not sign the value put back again (which would make it a new one).
    assert b.touch("k", ttl=3600) is False
    assert b.get("k") is None
    # A host that writes the key afterwards is served its own value, as every host is.
    b.set("k", {"v": 2})
    assert converges(lambda: a.get("k") == {"v": 2})


def test_a_value_put_back_after_its_tag_was_invalidated_is_not_served(
    server: Server, hosts: Callable[..., Cache]
) -> None:
    a, b = hosts(server.url, "a"), hosts(server.url, "b")
    r = server.client()
    a.set("k", "tagged", tags=["red"])
    vkey = vkey_of(r, b"k")
    old = r.get(vkey)
    tags_key = vkey.rpartition(b":v:")[0] + b":tags"
    versions = r.hgetall(tags_key)  # none yet: every tag at version 0
    a.invalidate_tags("red")
    assert converges(caught_up(b, r))
    # The attacker puts back the value and the tag versions it was written with.
    put_back(r, tags_key, versions)
    r.set(vkey, old)
    assert b.get("k") is None and a.get("k") is None


def test_a_value_put_back_after_a_clear_is_not_served(
    server: Server, hosts: Callable[..., Cache]
) -> None:
    a, b = hosts(server.url, "a"), hosts(server.url, "b")
    r = server.client()
    a.set("k", "before the clear")
    vkey = vkey_of(r, b"k")
    old = r.get(vkey)
    tags_key = vkey.rpartition(b":v:")[0] + b":tags"
    versions = r.hgetall(tags_key)
    a.clear()
    assert converges(caught_up(b, r))
    put_back(r, tags_key, versions)
    r.set(vkey, old)
    assert b.get("k") is None and a.get("k") is None


def test_a_forever_value_lives_in_redis_at_most_max_age(
    server: Server, hosts: Callable[..., Cache]
) -> None:
    a, b = hosts(server.url, "a"), hosts(server.url, "b")
    r = server.client()
    a.set("f", "forever", ttl=math.inf)
    vkey = vkey_of(r, b"f")
    assert 0 < r.pttl(vkey) <= MAX_AGE * 1000  # Redis drops it then
    stored = r.get(vkey)
    head = stored[: stored.index(b"Z2")]
    tier = a._tier
    assert tier is not None
    now_us = time.time_ns() // 1000
    # Another key, which no host knows a write of: only the bound can refuse its value.
    gkey = vkey.replace(b":v:f", b":v:g")

    def written_ago(seconds: float) -> bytes:
        # A genuine body, signed as a host did it ``seconds`` ago, kept forever by Redis.
        body, _ = tier.encode(b"g", "replayed", math.inf, (ALL,), now_us - int(seconds * 1e6))
        return bytes(head + body)

    r.set(gkey, written_ago(MAX_AGE - 600))  # within its bound: served
    assert b.get("g") == "replayed"
    b._core.delete("g")
    r.set(gkey, written_ago(MAX_AGE + 1))  # past it: refused, whatever Redis keeps
    assert b.get("g") is None
    assert b.stats()["l3"]["bad_signatures"] == 0


# -- 12: ints are signed; only counters made by incr are raw ---------------------------------


def test_an_int_overwritten_in_redis_is_never_served(
    server: Server, hosts: Callable[..., Cache]
) -> None:
    a, b = hosts(server.url, "a"), hosts(server.url, "b")
    r = server.client()
    a.set("k", 5)
    vkey = vkey_of(r, b"k")
    stored = r.get(vkey)
    head = stored[: stored.index(b"Z2")]
    forged = [
        b"6",  # no prefix at all
        head + b"C\x01\x00\x04\x00all:6",  # a counter as hosts used to store any int
        head + b"N" + bytes(16) + b"\x01\x00\x04\x00all:6",  # a counter without its mark
        head + b"\xff",  # a prefix that runs past the value
    ]
    for raw in forged:
        r.set(vkey, raw)
        b._core.delete("k")
        assert b.get("k") is None, raw
    assert b.stats()["l3"]["bad_signatures"] >= 3


def test_incr_still_counts_across_hosts_and_on_an_int_set_by_set(
    server: Server, hosts: Callable[..., Cache]
) -> None:
    a, b = hosts(server.url, "a"), hosts(server.url, "b")
    a.set("n", 5)
    assert b.incr("n") == 6
    assert a.incr("n", 2) == 8
    assert converges(lambda: b.get("n") == 8 and a.get("n") == 8)
    assert a.incr("c", default=0) == 1 and b.incr("c") == 2
    assert converges(lambda: a.get("c") == 2)
    a.set("s", "text")
    with pytest.raises(TypeError, match=r"Cache.incr\(\)"):
        b.incr("s")
    # A counter's count is Redis's to add to, so it is not signed; its mark is: a counter
    # under another key does not make this key read as one.
    r = server.client()
    counter = r.get(vkey_of(r, b"c"))
    r.set(vkey_of(r, b"n"), counter.replace(b":2", b":99"))
    b._core.delete("n")
    assert b.get("n") is None


# -- 13: an event's fields split one way only (the rule and its property tests are
# ziggurat-cluster's: tests/hostile.rs) ------------------------------------------------------


def test_a_regrouped_event_in_the_stream_does_not_clear_a_host(
    server: Server, hosts: Callable[..., Cache]
) -> None:
    a, b = hosts(server.url, "a"), hosts(server.url, "b")
    r = server.client()
    key = "z\x00clear\x00[]"
    a.set(key, 1)
    assert converges(caught_up(b, r))
    (stream,) = [k for k in r.keys("*") if k.endswith(b"}:ev")]
    (seq_key,) = [k for k in r.keys("*") if k.endswith(b"}:seq")]
    (_, fields) = r.xrevrange(stream, count=1)[0]
    host = fields[b"h"]
    forged = {**fields, b"h": host + b"\x00set\x00z", b"o": b"clear", b"k": b"[]"}
    forged[b"s"] = str(r.incr(seq_key)).encode()
    r.xadd(stream, forged)
    a.set("sync", 1)
    assert converges(lambda: b.get("sync") == 1)  # b's reader passed the forged entry
    # Refused, not applied as a clear: an entry that does not check is a hole in the
    # sequence, which b answers as it answers any (a clear of its own, counted).
    assert b.stats()["l3"]["bad_signatures"] == 1
    assert b.stats()["l3"]["gap_clears"] == 1


# -- 14: the CLI takes the Redis URL from the environment -------------------------------------

PASSWORD = "pw-" + uuid.uuid4().hex


class PasswordServer(Server):
    """A server that wants a password (``requirepass``)."""

    def ping(self) -> bool:
        try:
            with socket.create_connection(("127.0.0.1", self.port), timeout=0.2) as s:
                s.sendall(f"AUTH {PASSWORD}\r\nPING\r\n".encode())
                time.sleep(0.05)
                return b"+PONG" in s.recv(64)
        except OSError:
            return False

    @property
    def url(self) -> str:
        return f"redis://:{PASSWORD}@127.0.0.1:{self.port}/0"


@pytest.fixture
def locked(shm_dir: str) -> Iterator[PasswordServer]:
    d = os.path.join(shm_dir, "locked")
    os.mkdir(d)
    s = PasswordServer("valkey", d)
    s.extra = ["--requirepass", PASSWORD]
    s.start()
    try:
        yield s
    finally:
        s.kill()


def test_cli_cluster_commands_take_the_url_from_the_environment(
    locked: PasswordServer, hosts: Callable[..., Cache], shm_dir: str
) -> None:
    a, b = hosts(locked.url, "a"), hosts(locked.url, "b")
    a.set("k", "v")
    assert converges(lambda: b.get("k") == "v")
    env = {
        **os.environ,
        "ZIGGURAT_SECRET": cluster_helpers.SECRET,
        "ZIGGURAT_REDIS_URL": locked.url,
    }
    cmd = [sys.executable, "-m", "ziggurat"]
    where = ["-d", os.path.join(shm_dir, "a")]
    r = subprocess.run(
        [*cmd, "purge", a.name, *where, "--key", "k", "--json"],
        env=env,
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert r.returncode == 0, r.stderr
    assert '"cluster": true' in r.stdout and '"deleted": true' in r.stdout, r.stdout
    assert converges(lambda: b.get("k") is None)  # reached b through Redis
    # follow: no --redis either; the password is in no process's command line.
    p = subprocess.Popen(
        [*cmd, "follow", a.name, "-d", os.path.join(shm_dir, "b")],
        env=env,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )
    try:
        assert p.stdout is not None
        line = p.stdout.readline()
        assert "following the invalidation stream" in line, (line, p.poll())
        assert PASSWORD not in line
        with open(f"/proc/{p.pid}/cmdline", "rb") as f:
            assert PASSWORD.encode() not in f.read()
        assert converges(lambda: b._core.app_load(W.LEASE) == p.pid, within=10)
        a.set("k", "again")
        assert converges(lambda: b.get("k") == "again")
    finally:
        p.send_signal(signal.SIGTERM)
        p.wait(30)


# -- 15: a touch is not a write; counters follow the write-time rules; no clock runs ahead --


def body_of(r: Any, vkey: bytes) -> memoryview:
    view = _body(r.get(vkey))
    assert view is not None
    return view


def test_a_touch_never_makes_a_value_put_back_new(
    server: Server, hosts: Callable[..., Cache]
) -> None:
    a, b = hosts(server.url, "a"), hosts(server.url, "b")
    r = server.client()
    a.set("sess", {"role": "admin"}, ttl=3600)
    vkey = vkey_of(r, b"sess")
    old = r.get(vkey)
    assert a._tier is not None
    written = a._tier.decode(b"sess", body_of(r, vkey))[4]  # type: ignore[index]
    a.set("sess", {"role": "user"}, ttl=3600)
    assert converges(caught_up(b, r))
    r.set(vkey, old)  # the attacker puts the older session back
    for host in (a, b):
        host._core.delete("sess")
        assert host.get("sess") is None
    # A host that knows no later write serves it (the replay bound's residual) and touches
    # it: the value keeps its write time, so it is no newer than it was.
    c = hosts(server.url, "c")
    assert c.get("sess") == {"role": "admin"}
    assert c.touch("sess", 7200) is True
    assert c._tier is not None
    touched = c._tier.decode(b"sess", body_of(r, vkey))
    assert touched is not None and touched[4] == written
    # The hosts that know the later write still refuse it after the touch's event.
    assert converges(caught_up(a, r)) and converges(caught_up(b, r))
    for host in (a, b):
        host._core.delete("sess")
        assert host.get("sess") is None
    # A new host serves it, but never past MAX_AGE after its write, nor does Redis keep it.
    d = hosts(server.url, "d")
    assert d.get("sess") == {"role": "admin"}
    bound = written / 1e6 + MAX_AGE - time.time()
    assert touched[1] <= bound + 1
    assert r.pttl(vkey) <= (bound + 1) * 1000


def test_a_counter_read_from_redis_expires_and_a_counter_put_back_is_refused(
    server: Server, hosts: Callable[..., Cache]
) -> None:
    a, b = hosts(server.url, "a", ttl=2), hosts(server.url, "b", ttl=2)
    r = server.client()
    assert a.incr("ctr", 5, default=0) == 5
    assert b.get("ctr") == 5  # kept in b's segment, for as long as Redis keeps the counter
    time.sleep(2.5)
    assert not r.keys(b"*:v:ctr")  # Redis dropped it
    assert a.get("ctr") is None and b.get("ctr") is None
    # A counter put back after a later incr is refused by a host that applied the incr.
    assert a.incr("n", default=0) == 1
    vkey = vkey_of(r, b"n")
    old = r.get(vkey)
    assert a.incr("n") == 2
    assert converges(caught_up(b, r))
    r.set(vkey, old)
    b._core.delete("n")
    assert b.get("n") is None
    assert b.stats()["l3"]["refused_older"] >= 1
    # A counter's mark signs its last incr's write time: past MAX_AGE after it, refused.
    assert a._tier is not None
    stored = r.get(vkey)
    prefix = stored[: len(stored) - len(body_of(r, vkey))]
    gkey = vkey.replace(b":v:n", b":v:g")
    now_us = time.time_ns() // 1000

    def counter_written_ago(seconds: float) -> bytes:
        head = a._tier.counter_head(b"g", now_us - int(seconds * 1e6))  # type: ignore[union-attr]
        return bytes(prefix + b"N" + head + b"\x01\x00\x04\x00all:7")

    r.set(gkey, counter_written_ago(MAX_AGE - 600))
    assert b.get("g") == 7
    b._core.delete("g")
    r.set(gkey, counter_written_ago(MAX_AGE + 1))
    assert b.get("g") is None
    assert b.stats()["l3"]["bad_signatures"] == 0


def test_a_write_time_far_ahead_moves_no_clock(server: Server, hosts: Callable[..., Cache]) -> None:
    a, b = hosts(server.url, "a"), hosts(server.url, "b")
    r = server.client()
    year = 365 * 86400 * 10**6
    now_us = time.time_ns() // 1000
    # a's clock word a year ahead (a clock that jumped, a damaged word): a's next write is
    # stamped by the wall clock, and b's after applying it too.
    core = a._core
    core.app_cas(W.CLOCK, core.app_load(W.CLOCK), now_us + year)
    a.set("k", 1)
    assert a._tier is not None and b._tier is not None
    found = a._tier.decode(b"k", body_of(r, vkey_of(r, b"k")))
    assert found is not None and found[4] < now_us + MAX_SKEW * 1e6
    assert converges(caught_up(b, r))
    b.set("k", 2)
    assert b._tier.decode(b"k", body_of(r, vkey_of(r, b"k")))[4] < now_us + MAX_SKEW * 1e6  # type: ignore[index]
    # An event a year ahead (signed by a host whose clock is wrong) leaves b's clock, and a
    # value stamped a year ahead is refused.
    b._tier.saw(now_us + year)
    assert b._tier.clock() < now_us + 2 * MAX_SKEW * 1e6
    vkey = vkey_of(r, b"k")
    stored = r.get(vkey)
    prefix = stored[: len(stored) - len(body_of(r, vkey))]
    body, _ = a._tier.encode(b"f", "future", 60.0, (ALL,), now_us + year)
    r.set(vkey.replace(b":v:k", b":v:f"), bytes(prefix + body))
    assert b.get("f") is None
    assert b.stats()["l3"]["refused_ahead"] == 1
    assert b.stats()["l3"]["bad_signatures"] == 0
