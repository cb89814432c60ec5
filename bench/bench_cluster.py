"""ziggurat.Cache with its cluster tier (L3: Redis under every host), two hosts on one machine.

Two hosts are two ``Cache``s with the same name and Redis URL but their own directories
(their own segments), as docs/cluster.md describes; a host's processes are processes that open
the cache on the host's directory. Every benchmark uses the private redis-server of the run.

Benchmarks (names for ``run.py --only``):

* ``cluster_l3``     host B reads values host A wrote (L1 and L2 miss, L3 hit) against
                     redis-py ``GET`` + ``pickle.loads`` of the same bytes
* ``cluster_set``    ``Cache.set`` with L3 against redis-py ``SET`` of the pickled value
* ``cluster_lag``    invalidation lag: a write returns on host A, a spinning reader on host B
                     sees the new value
* ``cluster_apply``  events applied per second by one host's stream reader (a backlog)
* ``cluster_l1l2``   L1 and L2 hits with L3 configured against the same without it

The timing helpers, interleaving and report plumbing are those of bench_segment.
"""

from __future__ import annotations

import contextlib
import cProfile
import functools
import io
import os
import pickle
import pstats
import random
import signal
import subprocess
import sys
import time
import types
from collections.abc import Callable
from typing import Any

import bench_segment as bs
import harness as h
import peers

Goal = bs.Goal
Section = bs.Section
SECRET = "bench-cluster-secret-0123456789"
SIZE = "64MiB"
CACHE = "ziggurat.Cache"
N_KEYS = bs.N_KEYS


def kib_obj(i: int) -> dict[str, Any]:
    """The '1 KiB dict': a record with a text body, about 1,050 bytes pickled."""
    return {"id": i, "title": f"post {i}", "body": ("lorem ipsum " * 84)[: 1000 - len(str(i))]}


VALUES: dict[str, Callable[[int], dict[str, Any]]] = {
    "small dict (~90 B)": bs.small_obj,
    "1 KiB dict": kib_obj,
}


# --- hosts ----------------------------------------------------------------------------------


def redis_url(ctx: bs.Ctx) -> str | None:
    if ctx.redis is None or not ctx.redis.available:
        return None
    return f"redis://127.0.0.1:{ctx.redis.port}/0"


def host_spec(ctx: bs.Ctx, name: str, label: str, **kw: Any) -> dict[str, Any]:
    """What a process needs to open cache ``name`` as host ``label`` (picklable)."""
    return {
        "name": name,
        "directory": ctx.scratch.path(f"host-{label}"),
        "redis": redis_url(ctx),
        **kw,
    }


def cache_name(ctx: bs.Ctx, what: str) -> str:
    return f"{ctx.scratch.tag}-{what}-{random.randrange(1 << 30):x}"


def open_host(spec: dict[str, Any], wait: bool = True, **over: Any) -> Any:
    """The Cache of one host; with ``wait``, once its reader has a place in the stream
    (before that, values read from Redis are returned but not kept: see
    ``ClusterTier.positioned``)."""
    cls = peers.cache_class()
    if cls is None:
        raise RuntimeError("ziggurat.Cache is not importable: " + peers.segment_unavailable())
    kw = {k: v for k, v in spec.items() if k not in ("name",)}
    if kw.get("redis") is not None:
        kw.setdefault("secret", SECRET)
    kw.setdefault("size", SIZE)
    kw.update(over)
    c = cls(spec["name"], **kw)
    if wait and kw.get("redis") is not None:
        until(c._tier.positioned, 10, "the host's stream reader to take a position")
    return c


def until(check: Callable[[], bool], within: float, what: str, pause: float = 0.001) -> None:
    deadline = time.monotonic() + within
    while not check():
        if time.monotonic() > deadline:
            raise RuntimeError(f"timed out after {within:g} s waiting for {what}")
        time.sleep(pause)


def seq_key(name: str) -> bytes:
    return b"{zg2:" + name.encode() + b"}:seq"


def settle(client: Any, name: str, *caches: Any, within: float = 30) -> int:
    """Waits until each cache's host has applied every event in the stream; the last seq."""
    target = int(client.get(seq_key(name)) or 0)
    for c in caches:
        until(lambda c=c: c.stats()["l3"]["last_seq"] >= target, within, "the reader to settle")
    return target


def redis_client(ctx: bs.Ctx) -> Any:
    import redis

    assert ctx.redis is not None
    return redis.Redis(host="127.0.0.1", port=ctx.redis.port)


def skipped(ctx: bs.Ctx, section: str, title: str, goals: list[Goal]) -> Section | None:
    """A section that says why it was not measured, or None when it can be."""
    if not ctx.has_segment or peers.cache_class() is None:
        note = ctx.segment_note().replace("ziggurat.Segment", CACHE)
    elif redis_url(ctx) is None:
        note = ctx.redis_note()
    else:
        return None
    return Section(section, title, "* " + note, {"skipped": note}, goals)


def _hold_host(spec: dict[str, Any], conn: Any) -> None:
    """A process of a host that does nothing but stand for (and win) the reader's lease:
    the other processes of the host then run no reader, as in a host where one worker
    reads the stream for all."""
    from ziggurat.cluster.tier import W

    c = open_host(spec)
    try:
        until(lambda: c._core.app_load(W.LEASE) == os.getpid(), 10, "the lease")
        conn.send("ready")
        # "cpu" asks for the process's CPU time so far (its reader's work, as the other
        # threads sleep); anything else stops it
        while conn.recv() == "cpu":
            conn.send(time.process_time_ns())
    finally:
        c.close()


class Holder:
    """A spawned ``_hold_host`` process, stopped by ``stop``."""

    def __init__(self, spec: dict[str, Any]) -> None:
        mp = bs.spawn()
        self.conn, child = mp.Pipe()
        self.proc = mp.Process(target=_hold_host, args=(spec, child), daemon=True)
        self.proc.start()
        if not self.conn.poll(60) or self.conn.recv() != "ready":
            self.stop()
            raise RuntimeError("the reader-holding process did not start")

    def cpu_ns(self) -> int:
        """The holding process's CPU time so far, ns."""
        self.conn.send("cpu")
        return int(self.conn.recv())

    def stop(self) -> None:
        with contextlib.suppress(OSError):
            self.conn.send("stop")
        self.proc.join(10)
        if self.proc.is_alive():
            self.proc.kill()
            self.proc.join(5)


class Follower:
    """``ziggurat follow`` for one host: the command a deployment runs beside its workers so
    that the stream is followed by a process that does nothing else."""

    def __init__(self, spec: dict[str, Any]) -> None:
        cmd = [sys.executable, "-m", "ziggurat", "follow", spec["name"]]
        cmd += ["-d", spec["directory"], "--redis", spec["redis"], "--json"]
        self.proc = subprocess.Popen(
            cmd,
            env={**os.environ, "ZIGGURAT_SECRET": SECRET},
            stdout=subprocess.PIPE,
            stderr=subprocess.DEVNULL,
            text=True,
        )

    def following(self, timeout: float = 60) -> None:
        """Waits until the command follows the stream (it waits for the cache's files)."""
        assert self.proc.stdout is not None
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            line = self.proc.stdout.readline()
            if not line:
                break
            if '"following"' in line:
                return
        raise RuntimeError("ziggurat follow did not start following")

    def stop(self) -> None:
        if self.proc.poll() is None:
            self.proc.send_signal(signal.SIGTERM)
            try:
                self.proc.wait(10)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait(5)


def median_ratio(xs: list[float], ys: list[float]) -> float:
    return h.paired(xs, ys)


def close_all(xs: list[Any]) -> None:
    for x in xs:
        with contextlib.suppress(Exception):
            x.close()


# --- 1) L3 hit ----------------------------------------------------------------------------

#: One round of reads, per read: wall ns, this thread's CPU ns, the server's µs per call.
Sample = tuple[float, float, float]


def timed_reads(r: Any, read: Callable[[Any], Any], keys: list[Any], command: str | None) -> Sample:
    """``read`` of each key once (or any one-key operation); the server's own time comes
    from its command stats (reset just before), so what the wall time adds to it is the
    client and the trip. ``command`` None: no server involved."""
    if command is not None:
        r.config_resetstat()
    with h.GcOff():
        c0 = time.thread_time_ns()
        t0 = h.perf_counter_ns()
        for k in keys:
            read(k)
        ns = h.perf_counter_ns() - t0
        cpu = time.thread_time_ns() - c0
    st = r.info("commandstats").get(f"cmdstat_{command}", {}) if command is not None else {}
    n = len(keys)
    return ns / n, cpu / n, float(st.get("usec_per_call", 0.0))


L3_TITLE = "n) Cluster tier: L3 hit (a value another host wrote) against redis-py GET"


def interleaved(
    r: Any, ops: list[tuple[Callable[[Any], Any], list[Any], str | None]], n: int
) -> list[Sample]:
    """Item ``i`` of every op for ``i`` in ``range(n)``, the ops one after another in an
    order that rotates with ``i``: each op meets the machine in the same state (its
    round trip to the server is bimodal, for seconds at a time). Per op: mean wall ns,
    mean CPU ns of this thread, and the server's µs per call of its command (ops that
    send the same command share that figure)."""
    k = len(ops)
    wall = [0] * k
    cpu = [0] * k
    orders = [h.rotate(list(range(k)), j) for j in range(k)]
    pc = h.perf_counter_ns
    tt = time.thread_time_ns
    r.config_resetstat()
    with h.GcOff():
        for i in range(n):
            for j in orders[i % k]:
                f, items, _cmd = ops[j]
                x = items[i]
                c0 = tt()
                t0 = pc()
                f(x)
                t1 = pc()
                c1 = tt()
                wall[j] += t1 - t0
                cpu[j] += c1 - c0
    st = r.info("commandstats")
    out = []
    for j, (_f, _items, cmd) in enumerate(ops):
        per_call = st.get(f"cmdstat_{cmd}", {}).get("usec_per_call", 0.0) if cmd else 0.0
        out.append((wall[j] / n, cpu[j] / n, float(per_call)))
    return out


def bench_cluster_l3(ctx: bs.Ctx) -> Section:
    goal_txt = "≤ ×1.0 redis GET + pickle.loads"
    goals_none = [Goal(f"Cache L3 hit, {v}", "—", goal_txt, None) for v in VALUES]
    sk = skipped(ctx, "cluster_l3", L3_TITLE, goals_none)
    if sk is not None:
        return sk
    st = ctx.settings
    batch = 300 if st.quick else 2000
    name = cache_name(ctx, "l3")
    spec_a = host_spec(ctx, name, "a", serializer="pickle")
    spec_b = host_spec(ctx, name, "b", serializer="pickle")
    r = redis_client(ctx)
    loads = pickle.loads
    opened: list[Any] = [r]
    samples: dict[tuple[str, str], list[Sample]] = {}
    profile_text = ""
    counters = {"hits": 0, "fills": 0, "reads": 0}
    try:
        a = open_host(spec_a)
        b = open_host(spec_b)
        opened += [a, b]

        tier = b._tier
        tags_key = tier.tags_key
        ex = tier.link.command
        pool = r.connection_pool
        kept = pool.connection_class(**pool.connection_kwargs)
        opened.append(types.SimpleNamespace(close=kept.disconnect))

        def script_read(vk: bytes) -> Any:
            return ex("EVALSHA", tier._read.sha, 2, vk, tags_key)

        def get_loads(k: bytes) -> Any:
            return loads(r.get(k))

        def get_kept(k: bytes) -> Any:
            kept.send_command("GET", k)
            return loads(kept.read_response())

        # the read script is in the server's cache once host B has read through it
        b.get("warm-up key")
        for rnd in range(-1, st.reps):  # round -1 warms up and is not kept
            for vname, make in VALUES.items():
                tag = f"{vname[:5]}:{rnd}"
                objs = [make(i) for i in range(batch)]
                l3_keys = [f"l3:{tag}:{i:06d}" for i in range(batch)]
                sc_keys = [f"sc:{tag}:{i:06d}" for i in range(batch)]
                rg_keys = [f"rg:{tag}:{i:06d}".encode() for i in range(batch)]
                for k1, k2, o in zip(l3_keys, sc_keys, objs, strict=True):
                    a.set(k1, o)
                    a.set(k2, o)
                p = r.pipeline(transaction=False)
                for k, o in zip(rg_keys, objs, strict=True):
                    p.set(k, pickle.dumps(o, protocol=5))
                p.execute()
                vkeys = [tier.prefix + b"v:" + k.encode() for k in sc_keys]
                settle(r, name, b)
                before = b.stats()["l3"]
                got = interleaved(
                    r,
                    [
                        (get_loads, rg_keys, "get"),
                        (b.get, l3_keys, "evalsha"),
                        (script_read, vkeys, "evalsha"),
                        (get_kept, rg_keys, "get"),
                    ],
                    batch,
                )
                after = b.stats()["l3"]
                if rnd >= 0:
                    for kind, sample in zip(("redis", "l3", "script", "kept"), got, strict=True):
                        samples.setdefault((vname, kind), []).append(sample)
                    counters["hits"] += after["hits"] - before["hits"]
                    counters["fills"] += after["fills"] - before["fills"]
                    counters["reads"] += batch
                bad = sum(b.get(k) != o for k, o in zip(l3_keys, objs, strict=True))
                bad += get_loads(rg_keys[-1]) != objs[-1]
                bad += get_kept(rg_keys[-1]) != objs[-1]
                if bad or not script_read(vkeys[-1]):
                    raise RuntimeError(f"{bad} values read back wrong")
        # one more round of L3 hits (small dicts) under cProfile, for the where-it-goes list
        keys = [f"pr:{i:06d}" for i in range(batch)]
        for i, k in enumerate(keys):
            a.set(k, bs.small_obj(i))
        settle(r, name, b)
        prof = cProfile.Profile()
        g = b.get
        prof.enable()
        for k in keys:
            g(k)
        prof.disable()
        buf = io.StringIO()
        pstats.Stats(prof, stream=buf).sort_stats("cumulative").print_stats(22)
        profile_text = buf.getvalue()
    finally:
        close_all(opened)
    rows = []
    goals = []
    data: dict[str, Any] = {"batch": batch, "counters": counters, "profile": profile_text}
    for vname in VALUES:
        rs = [x[0] for x in samples[(vname, "redis")]]
        ls = [x[0] for x in samples[(vname, "l3")]]
        rq = median_ratio(ls, rs)
        for kind, label in (
            ("redis", "redis-py GET + pickle.loads"),
            ("l3", "Cache.get on host B: L1 miss, L2 miss, L3 hit"),
            ("script", "the read script alone, sent as the tier sends it: no check, no decode"),
            ("kept", "GET + pickle.loads sent as the tier sends its script (a kept connection)"),
        ):
            xs = samples[(vname, kind)]
            sm = h.summary([x[0] for x in xs])
            cpu = h.median(x[1] for x in xs)
            srv = h.median(x[2] for x in xs) * 1000
            rows.append(
                [
                    vname,
                    label,
                    h.fmt_ns(sm["median"]),
                    h.fmt_spread(sm),
                    h.fmt_ns(cpu),
                    h.fmt_ns(srv),
                    h.fmt_ns(sm["median"] - cpu - srv),
                ]
            )
            data[f"{vname}|{kind}"] = {**sm, "cpu_ns": cpu, "server_ns": srv, "samples": xs}
        rows.append(
            [vname, "ratio (median of the per-round ratios)", h.fmt_ratio(rq), "", "", "", ""]
        )
        goals.append(
            Goal(
                f"Cache L3 hit (L1 and L2 miss), {vname}, vs redis-py GET + pickle.loads",
                f"{h.fmt_ratio(rq)} ({h.fmt_ns(h.median(ls))} vs {h.fmt_ns(h.median(rs))})",
                "≤ ×1.0",
                rq <= 1.0,
            )
        )
    md = [
        f"Host A did `Cache.set` of {batch:,} fresh keys per round (untimed); once host B's "
        "stream reader had applied their events, host B read each key once with "
        "`Cache.get`: a miss in its L1 and in its segment, then one script call to Redis "
        "that returns the value if its tags are current, the MAC check, `pickle.loads`, "
        "and the copy of the value into B's segment (B's reader has a position in the "
        "stream, so the value is kept). The yardstick reads the same pickled bytes, "
        "written beforehand under fresh keys, with redis-py `GET` and `pickle.loads` on "
        'the same server and connection settings. Both hosts use `serializer="pickle"`. '
        "The third row sends the tier's read script by hand to values host A wrote, as the "
        "tier sends it (ziggurat-cluster's link, through `Link.command`: the redis crate's "
        "client in Rust, a connection of its own per thread, the GIL released while it "
        "waits), and does nothing with "
        "the answer; the fourth sends `GET` the same way. The reads of the four rows are "
        "interleaved one by one (key i of each row, in an order that rotates with i), so "
        "that each row meets the machine in the same state: its round trip to the local "
        "server is bimodal (about 30 µs or about 100 µs, for seconds at a time). Each "
        f"round reads {batch:,} keys per row; the table gives the median over "
        f"{st.reps} rounds of the mean per read, and the goal is the median of the "
        "per-round ratios.",
        "",
        h.md_table(
            [
                "value",
                "read",
                "median",
                "spread",
                "client CPU",
                "server per call",
                "rest (wire, wake-ups)",
            ],
            rows,
            "llrrrrr",
        ),
        "",
        f"* host B's L3 counters over the timed reads: {counters['hits']:,} hits and "
        f"{counters['fills']:,} values kept in its segment for {counters['reads']:,} reads.",
        "* client CPU: this thread's CPU time per read (`time.thread_time_ns`, the kernel's "
        "socket work included); server per call: `usec_per_call` of the command in the "
        "server's `INFO commandstats`, reset before each round (the L3 row and the script "
        "row send the same script, and share the figure); the rest is the wire and the "
        "wake-ups of both sides (2 vCPUs, so often a halted vCPU to wake).",
        "",
        "Where the time goes. The wire and the wake-ups are the same for every read. "
        "redis-py's client takes a connection from its pool and gives it back around every "
        "command, inside retry and observability wrappers, and parses the reply in Python: "
        "compare the first and the last rows, the same `GET`. The tier's read runs in "
        "ziggurat-cluster (Rust) from the miss to the value's bytes, on a connection it keeps "
        "per thread: a few µs of Lua on the server (the read script checks "
        "the value's tag versions, one `HGET` for a value with no tag of its own, then "
        "returns the stored string whole), the MAC check (keyed BLAKE2b) and parsing of "
        "expiry and tags, the copy of the bytes as read into the "
        "segment (`fill`, no second encoding) and the `seen` stamp taken before the read; "
        "Python runs `pickle.loads` on the bytes. "
        "One more "
        f"round of {batch:,} L3 hits under cProfile, by cumulative time:",
        "",
        "```",
        *profile_lines(profile_text),
        "```",
    ]
    return Section("cluster_l3", L3_TITLE, "\n".join(md), data, goals)


# --- 2) set -------------------------------------------------------------------------------

SET_TITLE = "o) Cluster tier: Cache.set with L3 against redis-py SET"


def setter(set_: Callable[[Any, Any], Any], value: Any) -> Callable[[Any], Any]:
    """``set_(key, value)`` as a one-argument call, for ``timed_reads``."""
    return lambda key: set_(key, value)


def bench_cluster_set(ctx: bs.Ctx) -> Section:
    goal_txt = "≤ ×1.3 redis SET + pickle.dumps"
    goals_none = [Goal(f"Cache.set with L3, {v}", "—", goal_txt, None) for v in VALUES]
    sk = skipped(ctx, "cluster_set", SET_TITLE, goals_none)
    if sk is not None:
        return sk
    r = redis_client(ctx)
    dumps = pickle.dumps
    opened: list[Any] = [r]
    holder: Holder | None = None
    inside: dict[str, tuple[int, int]] = {}
    samples: dict[tuple[str, str], list[Sample]] = {}
    # per value, per round: the reader-holding process's CPU per L3 set (one event each)
    holder_cpu: dict[str, list[float]] = {}
    n_ops = 300 if ctx.settings.quick else 2000
    # one key set per value size: every row overwrites keys that hold a value of its size
    key_sets = {v: [f"w:{v[:5]}:{i:06d}" for i in range(N_KEYS)] for v in VALUES}
    try:
        spec = host_spec(ctx, cache_name(ctx, "set"), "a", serializer="pickle")
        # Another process of host A holds the stream reader: this process only writes.
        holder = Holder(spec)
        c = open_host(spec)
        from ziggurat.cluster.tier import W

        assert c._core.app_load(W.LEASE) != os.getpid()
        own = open_host(host_spec(ctx, cache_name(ctx, "set-own"), "a2", serializer="pickle"))
        local_p = open_host(
            host_spec(ctx, cache_name(ctx, "set-nol3"), "a3", redis=None, serializer="pickle")
        )
        opened += [c, own, local_p]
        plans = []
        for vname, make in VALUES.items():
            obj = make(7)
            keys = key_sets[vname]
            ks = (keys * (n_ops // len(keys) + 1))[:n_ops]
            bks = [k.encode() for k in ks]
            for x in (c, own, local_p):
                for k in keys:
                    x.set(k, obj)
            for k in bks:
                r.set(k, dumps(obj))

            def rset(k: bytes, o: Any = obj) -> None:
                r.set(k, dumps(o))

            ops: list[tuple[Callable[[Any], Any], list[Any], str | None]] = [
                (rset, bks, "set"),
                (setter(c.set, obj), ks, "evalsha"),
                (setter(local_p.set, obj), ks, None),
            ]
            plans.append(
                (vname, ops, functools.partial(timed_reads, r, setter(own.set, obj), ks, "evalsha"))
            )
        for rnd in range(-1, ctx.settings.reps):  # round -1 warms up and is not kept
            for vname, ops, own_run in plans:
                assert holder is not None
                held0 = holder.cpu_ns()
                got = interleaved(r, ops, n_ops)
                held = (holder.cpu_ns() - held0) / n_ops
                # the writer that also reads the stream runs apart: its reader thread's
                # work would land on the other rows' sets
                own_got = own_run()
                if rnd >= 0:
                    for kind, sample in zip(
                        ("redis", "l3", "nol3", "own"), [*got, own_got], strict=True
                    ):
                        samples.setdefault((vname, kind), []).append(sample)
                    holder_cpu.setdefault(vname, []).append(held)
        # one more pass of L3 sets: the server's time per command, those the script calls
        # included (the server counts them too)
        small = VALUES["small dict (~90 B)"](7)
        r.config_resetstat()
        for k in key_sets["small dict (~90 B)"]:
            c.set(k, small)
        inside = {
            name.removeprefix("cmdstat_"): (v["calls"], v["usec"])
            for name, v in r.info("commandstats").items()
            if name.startswith("cmdstat_") and v["calls"] >= N_KEYS // 20
        }
        for vname, make in VALUES.items():
            for k in key_sets[vname][:10]:
                if c.get(k) != make(7) or pickle.loads(r.get(k.encode())) != make(7):
                    raise RuntimeError("a value set through L3 read back wrong")
        published = c.stats()["l3"]["events_published"]
    finally:
        close_all(opened)
        if holder is not None:
            holder.stop()
    labels = {
        "redis": "redis-py SET + pickle.dumps",
        "l3": f"{CACHE}.set with L3 (another process of the host reads the stream)",
        "own": f"{CACHE}.set with L3 (this process also runs the host's stream reader)",
        "nol3": f"{CACHE}.set without L3 (L1 + L2 only)",
    }
    rows = []
    goals = []
    data: dict[str, Any] = {
        "events_published": published,
        "ops_per_rep": n_ops,
        "server_commands": inside,
        "holder_cpu_ns": {v: h.median(xs) for v, xs in holder_cpu.items()},
    }
    held_txt = ", ".join(f"{h.fmt_ns(h.median(xs))} ({v})" for v, xs in holder_cpu.items())
    per_set = [
        [cmd, f"{calls / N_KEYS:g}", h.fmt_ns(usec * 1000 / N_KEYS)]
        for cmd, (calls, usec) in sorted(inside.items(), key=lambda x: -x[1][1])
    ]
    for vname in VALUES:
        base = [x[0] for x in samples[(vname, "redis")]]
        for kind, label in labels.items():
            xs = samples[(vname, kind)]
            s = [x[0] for x in xs]
            sm = h.summary(s)
            rq = h.paired(s, base)
            cpu = h.median(x[1] for x in xs)
            srv = h.median(x[2] for x in xs) * 1000
            rows.append(
                [
                    vname,
                    label,
                    h.fmt_ns(sm["median"]),
                    h.fmt_ratio(rq),
                    h.fmt_spread(sm),
                    h.fmt_ns(cpu),
                    h.fmt_ns(srv) if kind != "nol3" else "—",
                ]
            )
            data[f"{vname}|{kind}"] = {**sm, "cpu_ns": cpu, "server_ns": srv, "samples": xs}
        l3s = [x[0] for x in samples[(vname, "l3")]]
        rq = h.paired(l3s, base)
        goals.append(
            Goal(
                f"Cache.set with L3, {vname}, vs redis-py SET + pickle.dumps",
                f"{h.fmt_ratio(rq)} ({h.fmt_ns(h.median(l3s))} vs {h.fmt_ns(h.median(base))})",
                "≤ ×1.3",
                rq <= 1.3,
            )
        )
    md = [
        f"Median over {ctx.settings.reps} rounds of the mean ns per set ({n_ops:,} sets per "
        f"row and round), overwriting {N_KEYS:,} existing keys in turn. The sets of the "
        "yardstick, of the first L3 row and of the row without L3 are interleaved one by "
        "one, as the reads of the L3 hit table; the second L3 row runs after them in each "
        "round, since its reader thread works on after each of its sets. "
        "Client CPU and server per call as in the L3 hit table. With L3 a set "
        'encodes the value (`serializer="pickle"`), signs it, runs one script in Redis '
        "that stores it and appends its event to the stream, then updates the host's "
        "segment and this process's L1. The yardstick is redis-py `SET` of "
        "`pickle.dumps(value)` on the same server. × is the median of the per-round "
        "ratios to the yardstick. In the first L3 row, another process of host A holds the "
        "stream reader (as in a host with several workers); in the second, the writing "
        "process is the host's only one, so its reader thread (Rust, without the GIL) "
        "wakes for each of its own events (it skips them, reading only their place in the "
        "sequence) and competes for the CPU.",
        "",
        h.md_table(
            ["value", "set", "median", "× redis SET", "spread", "client CPU", "server per call"],
            rows,
            "llrrrrr",
        ),
        "",
        "The machine's round trip to its local server is bimodal (about 30 µs or about 100 "
        "µs, for seconds at a time; the wire and wake-ups): when it is fast, the CPU "
        "columns decide the ratio. The client's CPU per set is about what redis-py's `SET` "
        "costs: the tier's own work (two MACs, the value's copy into the host's segment, "
        "as encoded for Redis) runs in Rust, and sends its script on a connection it keeps "
        "per thread rather than through redis-py's pool (see the L3 hit table). "
        "Beyond the round trip, a set with L3 pays for the write "
        "script on the server (it "
        "reads the tags' versions, writes the value with them, takes the next "
        "sequence number and appends the event to the stream with a trim), two MACs "
        "(value and event) and the copy into the host's segment; a larger value adds its "
        "bytes to the MAC and to the script's string work. When the writing process also "
        "runs the host's stream reader, the reader thread wakes for every event the "
        "process itself wrote to read and skip it; that row runs apart "
        "from the others (in whatever state the machine is in then), so its ratio is "
        "less exact than theirs. The process that holds host A's reader in the first L3 "
        f"row used {held_txt} of CPU per set of that row (each set's event wakes its "
        "blocked read): on this machine's 2 CPUs it competes with the writer and the "
        "server.",
        "",
        f"The server's time per `Cache.set` of a small dict, over {N_KEYS:,} more sets "
        "(`INFO commandstats`, which counts the commands a script calls as well as the "
        "script; `evalsha` includes the others):",
        "",
        h.md_table(["command", "calls per set", "server time per set"], per_set, "lrr"),
        "",
        "What `evalsha` takes beyond the commands it calls is the script itself: the "
        "call into Lua with its keys and arguments, and the Lua work around the commands "
        "(building the value's tag prefix and concatenating it to the body); only `add` "
        "and `fill` read the old value first. Each event also wakes every host's blocked "
        "stream reader (`xread`, listed when it was called at least once per 20 sets): "
        "the server serves the read and sets it up again, and the reader process, "
        "competing with the writer and the server for the 2 CPUs, moves past the event. "
        "A reader whose read brought only its own host's events waits a millisecond "
        "before the next, so that a writing host's reader wakes about once per "
        "millisecond of writes rather than once per write.",
    ]
    return Section(
        "cluster_set", SET_TITLE, "\n".join(md), {"timings": data, "keys": N_KEYS}, goals
    )


# --- 3) invalidation lag ------------------------------------------------------------------

LAG_TITLE = "p) Cluster tier: invalidation lag between two hosts"
LAG_KEY = "lag:key"


def _lag_writer(spec: dict[str, Any], n: int, written: Any, seen: Any, tw: Any, conn: Any) -> None:
    """Host A: set(k, i), note the time it returned, wait until host B has seen i."""
    c = open_host(spec)
    rnd = random.Random(5)
    try:
        conn.send("ready")
        conn.recv()
        for i in range(1, n + 1):
            c.set(LAG_KEY, i)
            tw[i] = time.monotonic()
            written.value = i
            deadline = time.monotonic() + 5
            while seen.value < i and time.monotonic() < deadline:
                time.sleep(0.00005)
            # a pause of its own, so writes do not fall in step with the reader's loop
            time.sleep(rnd.uniform(0, 0.002))
        conn.send("done")
        conn.recv()
    finally:
        c.close()


def _lag_spinner(
    spec: dict[str, Any], n: int, seen: Any, tr: Any, conn: Any, settle_s: float
) -> None:
    """Host B: spin on get(k) and note when each new value is first seen."""
    c = open_host(spec)
    try:
        conn.send("ready")
        g = c.get
        last = 0
        deadline = time.monotonic() + 60 + n * 0.02
        mono = time.monotonic
        while last < n and mono() < deadline:
            v = g(LAG_KEY)
            if v is not None and v > last:
                tr[v] = mono()
                last = v
                seen.value = v
        # the reader publishes its lag percentiles after its next wake-up
        time.sleep(settle_s)
        conn.send((last, c.stats()["l3"]))
        conn.recv()
    finally:
        c.close()


def lag_run(ctx: bs.Ctx, n: int, reader_elsewhere: bool) -> dict[str, Any]:
    """One run of ``n`` changes; ``reader_elsewhere``: host B's stream is followed by
    ``ziggurat follow``, else by a thread of the spinning process."""
    mp = bs.spawn()
    name = cache_name(ctx, "lag")
    spec_a = host_spec(ctx, name, "a")
    spec_b = host_spec(ctx, name, "b")
    holders: list[Holder | Follower] = []
    procs = []
    written = mp.Value("q", 0, lock=False)
    seen = mp.Value("q", 0, lock=False)
    tw = mp.Array("d", n + 1, lock=False)
    tr = mp.Array("d", n + 1, lock=False)
    try:
        # host A's reader runs in a process of its own too: the writer only writes
        holders.append(Holder(spec_a))
        follower = Follower(spec_b) if reader_elsewhere else None
        if follower is not None:
            holders.append(follower)
        wc, wchild = mp.Pipe()
        sc, schild = mp.Pipe()
        w = mp.Process(target=_lag_writer, args=(spec_a, n, written, seen, tw, wchild))
        s = mp.Process(target=_lag_spinner, args=(spec_b, n, seen, tr, schild, 1.6))
        procs += [w, s]
        w.start()
        s.start()
        for conn in (wc, sc):
            if not conn.poll(60) or conn.recv() != "ready":
                raise RuntimeError("a lag process did not start")
        if follower is not None:
            # The spinner's own thread followed until the command started; it stands
            # aside at its next read of the stream (within its 0.5 s block).
            follower.following()
            time.sleep(1.0)
        wc.send("go")
        if not sc.poll(120 + n * 0.05):
            raise RuntimeError("the spinning reader did not finish")
        last, l3 = sc.recv()
        if not wc.poll(10):
            raise RuntimeError("the writer did not finish")
        wc.recv()
        wc.send("stop")
        sc.send("stop")
        for p in procs:
            p.join(20)
    finally:
        for p in procs:
            if p.is_alive():
                p.kill()
                p.join(5)
        for hd in holders:
            hd.stop()
    if last < n:
        raise RuntimeError(f"host B saw {last} of {n} changes")
    lags = [(tr[i] - tw[i]) * 1e9 for i in range(1, n + 1)]
    return {"lags_ns": lags, "l3": l3}


def lag_fmt(ns: float) -> str:
    """A lag, which can be below zero (see the lag section)."""
    return h.fmt_ns(ns) if ns >= 0 else bs.fmt_signed(ns)


def pctl(xs: list[float], q: float) -> float:
    s = sorted(xs)
    return s[min(len(s) - 1, int(q * len(s)))]


def bench_cluster_lag(ctx: bs.Ctx) -> Section:
    goal_txt = "p99 ≤ 5 ms"
    goals_none = [Goal("Invalidation lag between two hosts, p99", "—", goal_txt, None)]
    sk = skipped(ctx, "cluster_lag", LAG_TITLE, goals_none)
    if sk is not None:
        return sk
    n = 200 if ctx.settings.quick else 1000
    runs = {
        "host B: `ziggurat follow` follows the stream; the spinning process does not": True,
        "host B: one process (its stream reader thread shares the CPU with the spinner)": False,
    }
    out: dict[str, dict[str, Any]] = {}
    for label, elsewhere in runs.items():
        out[label] = lag_run(ctx, n, elsewhere)
    rows = []
    data: dict[str, Any] = {"changes": n}
    for label, res in out.items():
        lags = res["lags_ns"]
        l3 = res["l3"]
        rows.append(
            [
                label,
                lag_fmt(pctl(lags, 0.5)),
                lag_fmt(pctl(lags, 0.99)),
                lag_fmt(max(lags)),
                f"{l3['lag_p50_ms']:.2f} ms / {l3['lag_p99_ms']:.2f} ms",
            ]
        )
        data[label] = {
            "p50_ns": pctl(lags, 0.5),
            "p99_ns": pctl(lags, 0.99),
            "max_ns": max(lags),
            "stats_l3": l3,
            "lags_ns": lags,
        }
    main = out[next(iter(runs))]["lags_ns"]
    one = out[list(runs)[1]]["lags_ns"]
    p99 = pctl(main, 0.99)
    md = [
        f"{n:,} changes of one key. A writer process of host A does `set(k, i)` and notes "
        "`time.monotonic()` as soon as it returns; a process of host B spins on `get(k)` "
        "and notes when it first returns `i` (CLOCK_MONOTONIC is the same clock for every "
        "process of the machine). The writer waits until B has seen `i`, then pauses "
        "0–2 ms at random before the next change. The lag covers B's stream reader waking "
        "from its blocking XREAD, checking the event's MAC and deleting the key from B's "
        "segment (which voids the spinner's L1 copy), then the spinner's L2 miss and its "
        "read of the new value from Redis. Host A's stream reader runs in a process of "
        'its own. The last column is what host B\'s `stats()["l3"]` reported at the end: '
        "the reader's own figure, from the stream entry's id (milliseconds of the server's "
        "clock) to the event's application, over the last 2,000 events: the id is in whole "
        "milliseconds, so that figure runs up to 1 ms above the event's real age, and it "
        "leaves out the spinner's read from Redis. In the first row, host B runs "
        "`ziggurat follow` beside the spinner, as a deployment whose workers run CPU-bound "
        "requests would (the spinner's own stand-by thread then stays aside). A lag below "
        "zero is real: host B's "
        "reader, woken by the event the script wrote, and B's read of the new value "
        "finished before host A's writer had its reply and ran again to note the time.",
        "",
        h.md_table(
            ["setup", "p50", "p99", "max", 'stats()["l3"] lag_p50_ms / lag_p99_ms'],
            rows,
            "lrrrr",
        ),
        "",
        "The machine has 2 CPUs for redis-server, the writer, the spinner (a full CPU) and "
        "the stream readers. The reader is a thread of ziggurat-cluster's that never takes "
        "the GIL, so in the spinning process it runs beside the spinner's Python (an "
        "earlier reader in Python waited for the interpreter's 5 ms switch interval there); "
        "`ziggurat follow` (one per host, beside the workers) keeps it off the workers' "
        "CPUs altogether.",
    ]
    goals = [
        Goal(
            "Invalidation lag between two hosts, write returned → other host reads the new "
            "value, p99 (host B runs `ziggurat follow` beside a CPU-bound process)",
            f"{lag_fmt(p99)} (p50 {lag_fmt(pctl(main, 0.5))})",
            goal_txt,
            p99 <= 5e6,
        ),
        Goal(
            "The same without `ziggurat follow`: host B's stream reader is a thread of the "
            "CPU-bound process",
            f"{lag_fmt(pctl(one, 0.99))} (p50 {lag_fmt(pctl(one, 0.5))})",
            goal_txt,
            pctl(one, 0.99) <= 5e6,
        ),
    ]
    return Section("cluster_lag", LAG_TITLE, "\n".join(md), data, goals)


# --- 4) events applied per second ----------------------------------------------------------

APPLY_TITLE = "q) Cluster tier: events applied per second by one host"


def _catch_up(spec: dict[str, Any], target: int, conn: Any) -> None:
    """Host B reopened after a backlog: how fast its reader applies it."""
    from ziggurat.cluster.tier import W

    c = open_host(spec, wait=False)
    try:
        # The reader's position, one word of the segment: `stats()` would read the
        # process's memory map for its huge-page figures at every poll, a CPU's worth of
        # work beside the reader on a 2-CPU machine.
        seq = functools.partial(c._core.app_load, W.SEQ)
        s0 = seq()
        t_first = s_first = None
        deadline = time.monotonic() + 300
        while time.monotonic() < deadline:
            s = seq()
            now = time.perf_counter()
            if t_first is None and s > s0:
                t_first, s_first = now, s
            if s >= target:
                break
            time.sleep(0.0005)
        t_last = time.perf_counter()
        st = c.stats()["l3"]
        c._reader.stop()
        conn.send(
            {
                "s0": s0,
                "s_first": s_first,
                "t_first": t_first,
                "t_last": t_last,
                "last_seq": st["last_seq"],
                "gap_clears": st["gap_clears"],
            }
        )
    finally:
        c.close()


def catch_up(spec: dict[str, Any], target: int) -> dict[str, Any]:
    mp = bs.spawn()
    conn, child = mp.Pipe()
    p = mp.Process(target=_catch_up, args=(spec, target, child), daemon=True)
    p.start()
    try:
        if not conn.poll(330):
            raise RuntimeError("host B did not catch up")
        res: dict[str, Any] = conn.recv()
    finally:
        p.join(20)
        if p.is_alive():
            p.kill()
            p.join(5)
    if res["last_seq"] < target or res["t_first"] is None:
        raise RuntimeError(f"host B applied up to {res['last_seq']} of {target}")
    if res["gap_clears"]:
        raise RuntimeError("host B cleared after a gap: the stream was trimmed past it")
    return res


def profile_lines(text: str) -> list[str]:
    """The table rows of a pstats listing, paths cut to the package-relative part."""
    out = []
    started = False
    for line in text.splitlines():
        if line.strip().startswith("ncalls"):
            started = True
        if started and line.strip():
            for marker in ("/ziggurat/", "/site-packages/", "/lib/python3"):
                i = line.find(marker)
                if i >= 0:
                    j = line.rfind(" ", 0, i)
                    line = line[: j + 1] + line[i + 1 :]
                    break
            out.append(line)
    return out


def bench_cluster_apply(ctx: bs.Ctx) -> Section:
    goal_txt = "≥ 100,000 events/s"
    goals_none = [Goal("Events applied per second by one host", "—", goal_txt, None)]
    sk = skipped(ctx, "cluster_apply", APPLY_TITLE, goals_none)
    if sk is not None:
        return sk
    st = ctx.settings
    n = 5_000 if st.quick else 40_000
    reps = 2 if st.quick else 3
    name = cache_name(ctx, "apply")
    spec_a = host_spec(ctx, name, "a")
    spec_b = host_spec(ctx, name, "b")
    r = redis_client(ctx)
    rates: list[float] = []
    pub_rates: list[float] = []
    try:
        # Host B takes a place in the stream, then stops: the events wait for it.
        b = open_host(spec_b)
        b.close()
        for rep in range(reps):
            a = open_host(spec_a)
            try:
                d = a.delete
                t0 = time.perf_counter()
                for i in range(n):
                    d(f"d:{rep}:{i:07d}")
                pub_rates.append(n / (time.perf_counter() - t0))
            finally:
                a.close()
            target = int(r.get(seq_key(name)))
            res = catch_up(spec_b, target)
            rates.append((target - res["s_first"]) / (res["t_last"] - res["t_first"]))
    finally:
        r.close()
    med = h.median(rates)
    per_event_us = 1e6 / med
    md = [
        f"Host B took a place in the stream and stopped; host A then published {n:,} events "
        "as fast as one process can (`Cache.delete` of distinct absent keys, one script "
        "call each); then host B opened the cache again in a new process and its stream "
        "reader caught up with the backlog: `XREAD` of up to 1,000 entries per call, for "
        "each one the MAC check, the sequence check and the delete in B's segment, then "
        "the position written to the segment once per read. The rate counts from the first "
        "event applied to "
        'the last (polling `stats()["l3"]["last_seq"]` every 0.5 ms), so the process\'s '
        f"start is not in it. Median of {reps} runs.",
        "",
        h.md_table(
            ["measure", "median", "runs"],
            [
                [
                    "events applied per second by host B's reader",
                    h.fmt_int(med),
                    ", ".join(h.fmt_int(x) for x in rates),
                ],
                ["µs per event applied", f"{per_event_us:.1f} µs", ""],
                [
                    "events published per second by one process (Cache.delete)",
                    h.fmt_int(h.median(pub_rates)),
                    ", ".join(h.fmt_int(x) for x in pub_rates),
                ],
            ],
            "lrr",
        ),
        "",
        "The reader is a thread of ziggurat-cluster's (Rust, no GIL): per event it checks "
        "the MAC (a keyed BLAKE2b per secret) and the sequence, notes the write time and "
        "deletes the key from the segment. The position (up to four words of the segment, "
        "each loaded and compare-and-swapped) and the applied count are written once per "
        "`XREAD` batch, after its events (a reader that dies within a batch applies its "
        "deletes, tag moves and clears again, which is harmless).",
    ]
    goals = [
        Goal(
            "Events applied per second by one host's stream reader (deletes)",
            f"{h.fmt_int(med)}/s ({per_event_us:.1f} µs each)",
            goal_txt,
            med >= 100_000,
        )
    ]
    data = {
        "events": n,
        "rates": rates,
        "publish_rates": pub_rates,
    }
    return Section("cluster_apply", APPLY_TITLE, "\n".join(md), data, goals)


# --- 5) L1 and L2 hits with and without L3 -------------------------------------------------

L12_TITLE = "r) Cluster tier: L1 and L2 hits cost the same with L3 configured"


def bench_cluster_l1l2(ctx: bs.Ctx) -> Section:
    goal_txt = "≤ ×1.05 without L3"
    goals_none = [Goal(f"Cache {t} hit with L3 vs without", "—", goal_txt, None) for t in "12"]
    sk = skipped(ctx, "cluster_l1l2", L12_TITLE, goals_none)
    if sk is not None:
        return sk
    keys = [f"u:{i:06d}" for i in range(N_KEYS)]
    objs = [bs.small_obj(i) for i in range(N_KEYS)]
    opened: list[Any] = []
    cases: dict[tuple[str, bool], h.Case] = {}
    try:
        for tier, l1 in (("L1", 10_000), ("L2", 0)):
            for with_l3 in (False, True):
                spec = host_spec(
                    ctx,
                    cache_name(ctx, f"hit{tier}"),
                    f"{tier}{with_l3}",
                    **({} if with_l3 else {"redis": None}),
                )
                c = open_host(spec, l1_items=l1)
                opened.append(c)
                for k, o in zip(keys, objs, strict=True):
                    c.set(k, o)
                bad = sum(c.get(k) != o for k, o in zip(keys, objs, strict=True))
                if bad:
                    raise RuntimeError(f"{bad} values read back wrong")
                cases[(tier, with_l3)] = h.Case(
                    f"{tier}{with_l3}", lambda n, g=c.get: h.loop_call(g, keys, n), N_KEYS
                )
        counts = [x.stats()["process"] for x in opened]
        h.interleave(list(cases.values()), ctx.settings)
        after = [x.stats()["process"] for x in opened]
        l3_reads = [x.stats()["l3"]["hits"] + x.stats()["l3"]["misses"] for x in opened[1::2]]
    finally:
        close_all(opened)
    rows = []
    goals = []
    data: dict[str, Any] = {}
    for tier in ("L1", "L2"):
        base = cases[(tier, False)].samples
        for with_l3 in (False, True):
            s = cases[(tier, with_l3)].samples
            sm = h.summary(s)
            label = f"{tier} hit, " + ("with L3 (redis=, its reader idle)" if with_l3 else "no L3")
            rows.append(
                [label, h.fmt_ns(sm["median"]), h.fmt_ratio(h.paired(s, base)), h.fmt_spread(sm)]
            )
            data[label] = {**sm, "samples": s}
        rq = h.paired(cases[(tier, True)].samples, base)
        goals.append(
            Goal(
                f"Cache {tier} hit with L3 configured vs without",
                f"{h.fmt_ratio(rq)} ({h.fmt_ns(h.median(cases[(tier, True)].samples))})",
                goal_txt,
                rq <= 1.05,
            )
        )
    hits = [
        (a["l1"]["hits"] - b["l1"]["hits"], a["l2"]["hits"] - b["l2"]["hits"])
        for a, b in zip(after, counts, strict=True)
    ]
    md = [
        f"Median ns per get of a small dict, cycling over {N_KEYS:,} keys, in four caches: "
        "with and without `redis=`, L1 on (every get an L1 hit) and `l1_items=0` (every get "
        "an L2 hit, decode included). With L3 the keys were written through Redis; reads "
        "that hit L1 or L2 never reach it. × is the median of the per-round ratios to the "
        "same tier without L3 (the two run back to back in each round).",
        "",
        h.md_table(["get", "median", "× no L3", "spread"], rows, "lrrr"),
        "",
        "* hits over the timed loops (L1, L2) per cache, in the table's order: "
        + "; ".join(f"{a:,} / {b:,}" for a, b in hits)
        + f"; reads that reached Redis, the untimed checks included: {sum(l3_reads):,}.",
    ]
    return Section("cluster_l1l2", L12_TITLE, "\n".join(md), data, goals)


BENCHMARKS: dict[str, Callable[[bs.Ctx], Section]] = {
    "cluster_l3": bench_cluster_l3,
    "cluster_set": bench_cluster_set,
    "cluster_lag": bench_cluster_lag,
    "cluster_apply": bench_cluster_apply,
    "cluster_l1l2": bench_cluster_l1l2,
}
NEEDS_REDIS = set(BENCHMARKS)
