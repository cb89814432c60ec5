"""The contract suite: every promise of docs/guarantees.md written once, as a scenario
that drives processes of any front end (harness.py, driver.py, driver.mjs). Each
scenario runs with every ordered pair of languages (Python and Python, Python and
Node.js, Node.js and Python, Node.js and Node.js); the randomized mix runs two processes
of each at once. ``make stress`` (ZIGGURAT_STRESS=1) runs ten times the rounds.
"""

from __future__ import annotations

import os
import time
from collections.abc import Iterator
from typing import Any

import pytest
from harness import LANGUAGES, PAIRS, Deployment, DriverError, check, deployment

STRESS = os.environ.get("ZIGGURAT_STRESS") == "1"


def rounds(n: int) -> int:
    return n * 10 if STRESS else n


def ids(pair: tuple[str, ...]) -> str:
    return "-".join(pair)


@pytest.fixture(params=PAIRS, ids=ids)
def pair(request: pytest.FixtureRequest) -> Iterator[Deployment]:
    yield from deployment(*request.param)


@pytest.fixture(params=LANGUAGES)
def one(request: pytest.FixtureRequest) -> Iterator[Deployment]:
    yield from deployment(request.param)


# -- G1: coherence once a write returns ---------------------------------------------------


def test_every_write_is_seen_at_once_by_the_other_process(pair: Deployment) -> None:
    a, b = pair.drivers
    for r in range(rounds(40)):
        k = f"k{r}"
        a.call("set", key=k, value=f"v{r}", tags=[f"t{r}"])
        assert b.call("get2", key=k) == f"v{r}"  # now in b's L1
        a.call("set", key=k, value=f"w{r}")
        assert b.call("get", key=k) == f"w{r}"
        assert b.call("get2", key=k) == f"w{r}"
        which = r % 3
        if which == 0:
            assert a.call("delete", key=k) is True
        elif which == 1:
            a.call("set", key=k, value=f"x{r}", tags=[f"t{r}"])
            assert b.call("get2", key=k) == f"x{r}"
            a.call("invalidate", tags=[f"t{r}"])
        else:
            a.call("clear")
        assert b.call("get", key=k) is None, f"round {r}: b still reads the value"


def test_concurrent_writers_of_one_key_agree_once_both_returned(pair: Deployment) -> None:
    """One process keeps writing a key while the other writes another key, then this
    one, then reads it: once both returned, every process reads the same value, one
    of those written last. (A Node.js L1 once kept its own overwritten value, watching
    the stamp of the key written before it.)"""
    a, b = pair.drivers
    disagreed = []
    n = rounds(150)
    for r in range(n):
        burst = b.start("burst", key="X", prefix=f"b{r}", n=400)
        mine = f"a{r}"
        a.call("write_then_read", other=f"Y{r % 7}", key="X", value=mine)
        last = burst.result()
        va, vb = a.call("get", key="X"), b.call("get", key="X")
        if va != vb or va not in (last, mine):
            disagreed.append((r, va, vb, last))
    assert not disagreed, f"{len(disagreed)} of {n} rounds disagreed: {disagreed[:5]}"


@pytest.mark.parametrize("write", ["set", "delete", "invalidate", "clear"])
def test_a_write_that_returns_during_a_load_wins(pair: Deployment, write: str) -> None:
    """A loader reads the old row; meanwhile the other process writes and its call
    returns; then the loader returns the old row. Its caller gets it, but no process
    reads it afterwards."""
    a, b = pair.drivers
    stale = []
    n = rounds(25)
    for r in range(n):
        k, t, g = f"k{r}", f"t{r}", f"g{r}"
        load = a.start("fetch", key=k, value="old", gate=g, tags=[t])
        assert a.event() == {"event": "loading", "gate": g}
        if write == "set":
            b.call("set", key=k, value="new")
        elif write == "delete":
            b.call("delete", key=k)
        elif write == "invalidate":
            b.call("invalidate", tags=[t])
        else:
            b.call("clear")
        a.call("release", gate=g)
        assert load.result() == {"value": "old", "loaded": True}
        want = "new" if write == "set" else None
        seen = (a.call("get", key=k), b.call("get2", key=k), a.call("get2", key=k))
        if any(v != want for v in seen):
            stale.append((r, seen))
    assert not stale, f"{len(stale)} of {n} loads outlived a {write} that returned: {stale[:3]}"


def test_an_invalidation_during_a_load_that_found_nothing_keeps_its_miss_out(
    pair: Deployment,
) -> None:
    a, b = pair.drivers
    cached = []
    for r in range(rounds(10)):
        k, t, g = f"n{r}", f"nt{r}", f"ng{r}"
        load = a.start("fetch", key=k, value=None, neg_ttl=60, tags=[t], gate=g)
        a.event()
        b.call("invalidate", tags=[t])  # the row was inserted, and its tag invalidated
        a.call("release", gate=g)
        assert load.result() == {"value": None, "loaded": True}
        if b.call("fetch", key=k, value="row", neg_ttl=60, tags=[t])["loaded"] is False:
            cached.append(r)
    assert not cached, f"misses outlived an invalidation that returned: rounds {cached}"


def test_a_load_refused_for_a_write_is_still_one_load_per_key(pair: Deployment) -> None:
    """After a landing is refused, the callers that waited for it share one new load."""
    a, b = pair.drivers
    load = a.start("fetch", key="k", value="old", gate="g")
    a.event()
    waiters = [d.start("fetch", key="k", value="again", ms=100) for d in (a, b, b)]
    time.sleep(0.2)
    b.call("delete", key="k")
    a.call("release", gate="g")
    assert load.result()["value"] == "old"
    got = [w.result() for w in waiters]
    loads = a.call("loads") + b.call("loads")
    # The holder's load, then one more for all of the waiters.
    assert loads == 2, got
    assert all(g["value"] in ("old", "again") for g in got)
    assert a.call("get", key="k") == "again" and b.call("get", key="k") == "again"


def test_a_random_mix_of_two_processes_of_each_language_is_linearizable() -> None:
    """Sets, tagged sets, reads, deletes, invalidations and loads from four processes
    (two Python, two Node.js) on three keys: no read older than a write that had
    returned, no miss that no call explains."""
    for dep in deployment("python", "node", "python", "node"):
        keys, tags = ["k0", "k1", "k2"], ["t0", "t1"]
        n = rounds(1500)
        runs = [
            d.start("mix", seed=1000 + i, me=f"p{i}", keys=keys, tags=tags, n=n)
            for i, d in enumerate(dep.drivers)
        ]
        history: list[list[Any]] = []
        for run in runs:
            history.extend(run.result(timeout=600))
        found = check(history)
        assert found.reads > n
        assert not found.stale, f"{len(found.stale)} stale reads: {found.stale[:5]}"
        assert not found.lost, f"{len(found.lost)} unexplained misses: {found.lost[:5]}"


def test_a_random_mix_of_each_pair_is_linearizable(pair: Deployment) -> None:
    keys, tags = ["k0", "k1"], ["t0"]
    n = rounds(800)
    runs = [
        d.start("mix", seed=7 + i, me=f"p{i}", keys=keys, tags=tags, n=n)
        for i, d in enumerate(pair.drivers)
    ]
    history = [h for run in runs for h in run.result(timeout=600)]
    found = check(history)
    assert not found.stale, f"{len(found.stale)} stale reads: {found.stale[:5]}"
    assert not found.lost, f"{len(found.lost)} unexplained misses: {found.lost[:5]}"


def test_a_random_mix_over_many_keys_sharing_stamp_words_with_clears(pair: Deployment) -> None:
    """Two hundred keys in a small segment: many share a stamp word, so a write of one
    moves the word another's L1 entry watches; clears race the rest."""
    for dep in deployment(*(d.language for d in pair.drivers), size="4MiB"):
        keys = [f"key{i}" for i in range(200)]
        n = rounds(1500)
        runs = [
            d.start("mix", seed=99 + i, me=f"q{i}", keys=keys, tags=["t0", "t1"], n=n, clears=1)
            for i, d in enumerate(dep.drivers)
        ]
        history = [h for run in runs for h in run.result(timeout=600)]
        found = check(history)
        assert not found.stale, f"{len(found.stale)} stale reads: {found.stale[:5]}"
        assert not found.lost, f"{len(found.lost)} unexplained misses: {found.lost[:5]}"


def test_the_history_check_catches_a_stale_read_and_a_lost_write() -> None:
    # The checker itself: a read that began after a later write returned, and a miss
    # after a write that nothing erased.
    ok = [["set", "k", "a", None, 0, 10], ["get", "k", None, "a", 20, 30]]
    assert not check(ok).stale and not check(ok).lost
    stale = [*ok[:1], ["set", "k", "b", None, 40, 50], ["get", "k", None, "a", 60, 70]]
    assert check(stale).stale
    lost = [*ok[:1], ["get", "k", None, None, 20, 30]]
    assert check(lost).lost
    erased = [*ok[:1], ["delete", "k", None, True, 12, 15], ["get", "k", None, None, 20, 30]]
    assert not check(erased).lost


# -- single flight ------------------------------------------------------------------------


def test_one_load_per_key_for_callers_in_several_processes(pair: Deployment) -> None:
    a, b = pair.drivers
    for r in range(rounds(5)):
        calls = [d.start("fetch", key=f"k{r}", value=f"v{r}", ms=300) for d in (a, b, a, b)]
        got = [c.result() for c in calls]
        assert {g["value"] for g in got} == {f"v{r}"}
        assert sum(g["loaded"] for g in got) == 1, got
    assert a.call("loads") + b.call("loads") == rounds(5)


# -- cached misses ------------------------------------------------------------------------


def test_cached_misses_and_their_tags(pair: Deployment) -> None:
    a, b = pair.drivers
    miss = a.call("fetch", key="m", value=None, neg_ttl=60, tags=["mt"])
    assert miss == {"value": None, "loaded": True}
    assert b.call("fetch", key="m", value="x", neg_ttl=60, tags=["mt"]) == {
        "value": None,
        "loaded": False,
    }
    a.call("invalidate", tags=["mt"])
    assert b.call("fetch", key="m", value="x", neg_ttl=60) == {"value": "x", "loaded": True}
    assert a.call("get", key="m") == "x"
    # A write ends a cached miss at once.
    a.call("fetch", key="m2", value=None, neg_ttl=60)
    b.call("set", key="m2", value="v")
    assert a.call("fetch", key="m2", value="w", neg_ttl=60) == {"value": "v", "loaded": False}


# -- add, incr, touch, delete -------------------------------------------------------------


def test_add_incr_touch_delete_across_processes(pair: Deployment) -> None:
    a, b = pair.drivers
    for r in range(rounds(10)):
        adds = [a.start("add", key=f"add{r}", value="a"), b.start("add", key=f"add{r}", value="b")]
        won = [x.result() for x in adds]
        assert sorted(won) == [False, True]
        assert a.call("get", key=f"add{r}") == ("a" if won[0] else "b")
    counts = [d.start("incr_many", key="n", n=rounds(300)) for d in (a, b)]
    for c in counts:
        c.result()
    assert a.call("incr", key="n", delta=0) == 2 * rounds(300) == b.call("incr", key="n", delta=0)
    b.call("set", key="text", value="not a number")
    with pytest.raises(DriverError):
        a.call("incr", key="text", delta=1)
    a.call("set", key="t", value="v", ttl=0.6)
    assert b.call("touch", key="t", ttl=60) is True
    time.sleep(1.0)
    assert a.call("get", key="t") == "v"
    assert b.call("touch", key="absent", ttl=60) is False
    assert a.call("delete", key="t") is True
    assert b.call("delete", key="t") is False
    assert b.call("get", key="t") is None


# -- TTL and stale-on-failure -------------------------------------------------------------


def test_ttl_and_a_stale_value_when_the_loader_fails(pair: Deployment) -> None:
    a, b = pair.drivers
    a.call("set", key="short", value="v", ttl=0.5)
    assert b.call("get2", key="short") == "v"
    time.sleep(0.9)
    assert a.call("get", key="short") is None and b.call("get", key="short") is None
    first = a.call("fetch", key="s", value="v1", ttl=0.5, stale_ttl=60)
    assert first == {"value": "v1", "loaded": True}
    time.sleep(0.9)
    failed = b.call("fetch", key="s", value="v2", fail=True, ttl=0.5, stale_ttl=60)
    assert failed == {"value": "v1", "loaded": True}
    with pytest.raises(DriverError, match="the loader failed"):
        b.call("fetch", key="never", value="x", fail=True, stale_ttl=60)


# -- degraded modes -----------------------------------------------------------------------


@pytest.mark.parametrize("language", LANGUAGES)
def test_degraded_modes_keep_every_call_working(language: str) -> None:
    missing = f"/dev/shm/zigcontract-missing-{os.getpid()}/nowhere"
    for dep in deployment():
        d = dep.add(language, directory=missing, degraded="passthrough")
        assert d.opened["degraded"] is True
        d.call("set", key="k", value="v")
        assert d.call("get", key="k") is None  # nothing is kept
        d.call("fetch", key="f", value="x")
        assert d.call("fetch", key="f", value="x") == {"value": "x", "loaded": True}
        local = dep.add(language, directory=missing, degraded="local")
        local.call("set", key="k", value="v")
        assert local.call("get", key="k") == "v"
        local.call("fetch", key="f", value="x")
        assert local.call("fetch", key="f", value="y") == {"value": "x", "loaded": False}


def test_a_loader_chooses_the_tags_and_ttl_of_its_result_for_every_process(
    pair: Deployment,
) -> None:
    """What a loader says of its result (the loader context: tags, a TTL, or not to
    store it) holds in the other process; tags it chose land only if no tag was
    invalidated during its load."""
    a, b = pair.drivers
    for r in range(rounds(10)):
        k = f"ctx{r}"
        got = a.call("fetch", key=k, value=f"v{r}", tags=["call"], said_tags=[f"author:{r}"])
        assert got == {"value": f"v{r}", "loaded": True}
        assert b.call("get", key=k) == f"v{r}"
        b.call("invalidate", tags=["call"])  # the call's tags were replaced
        assert b.call("get", key=k) == f"v{r}"
        b.call("invalidate", tags=[f"author:{r}"])
        assert a.call("get", key=k) is None and b.call("get", key=k) is None
        assert a.call("fetch", key=k, value="partial", skip=True)["value"] == "partial"
        assert b.call("get", key=k) is None
    a.call("fetch", key="brief", value="b", ttl=600, said_ttl=0.3)
    assert b.call("get", key="brief") == "b"
    time.sleep(0.45)
    assert b.call("get", key="brief") is None
    # A tag invalidated by the other process while the load ran: the result is the
    # caller's, never stored under a tag chosen after the invalidation.
    load = a.start("fetch", key="late", value="old", gate="gl", said_tags=["author:x"])
    a.event()
    b.call("invalidate", tags=["author:x"])
    a.call("release", gate="gl")
    assert load.result() == {"value": "old", "loaded": True}
    assert b.call("get", key="late") is None and a.call("get2", key="late") is None


# -- G2, G3: a writer killed mid-write ----------------------------------------------------


def test_a_writer_killed_mid_write_leaves_no_torn_value_and_no_stuck_lock(pair: Deployment) -> None:
    a = pair.drivers[0]
    writer_language = pair.drivers[1].language
    for r in range(rounds(3)):
        w = pair.add(writer_language)
        w.start("sets_forever", key="hot")
        time.sleep(0.3)
        w.kill()
        v = a.call("get", key="hot")
        assert v is None or (isinstance(v, dict) and len(v["pad"]) == v["n"]), v
        t0 = time.monotonic()
        a.call("set", key="hot", value=f"after{r}")
        assert time.monotonic() - t0 < 10, "a killed writer's lock held the next write"
        assert a.call("get", key="hot") == f"after{r}"
