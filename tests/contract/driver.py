"""The contract suite's Python driver: a process that opens one ``Cache`` and runs the
commands the suite sends, one JSON object a line on stdin, each answered by one line on
stdout (``{"id", "ok"}`` or ``{"id", "error"}``), in the order they complete. Commands
run on threads of their own, so a loader held at a gate does not hold the others.

The commands and their fields are the suite's, written in no language: see
``harness.py``. A driver of another language answers the same lines the same way.
"""

from __future__ import annotations

import json
import os
import random
import sys
import threading
import time
from concurrent.futures import ThreadPoolExecutor
from typing import Any

from ziggurat import Cache, load_context

_out = threading.Lock()
_gates: dict[str, threading.Event] = {}
_gates_lock = threading.Lock()
_loads = 0
_loads_lock = threading.Lock()
cache: Cache | None = None

# The suite's option names, as this front end spells them.
_OPTIONS = {
    "size": "size",
    "ttl": "ttl",
    "neg_ttl": "neg_ttl",
    "stale_ttl": "stale_ttl",
    "loader_timeout": "loader_timeout",
    "directory": "directory",
    "degraded": "degraded",
    "l1_items": "l1_items",
    "lock_timeout": "lock_timeout",
    "redis": "redis",
    "secret": "secret",
    "redis_timeout": "redis_timeout",
    "stream_length": "stream_length",
    "cluster_single_flight": "cluster_single_flight",
}


def say(msg: dict[str, Any]) -> None:
    line = json.dumps(msg)
    with _out:
        sys.stdout.write(line + "\n")
        sys.stdout.flush()


def gate(name: str) -> threading.Event:
    with _gates_lock:
        return _gates.setdefault(name, threading.Event())


def now() -> int:
    # CLOCK_MONOTONIC, as every driver reads it: histories of several processes compare.
    return time.monotonic_ns()


def c() -> Cache:
    assert cache is not None, "open first"
    return cache


def fetch(cmd: dict[str, Any]) -> dict[str, Any]:
    loaded = False

    def loader() -> Any:
        nonlocal loaded
        global _loads
        loaded = True
        with _loads_lock:
            _loads += 1
        if "gate" in cmd:
            say({"event": "loading", "gate": cmd["gate"]})
            if not gate(cmd["gate"]).wait(30):
                raise TimeoutError(f"gate {cmd['gate']} never opened")
        if cmd.get("ms"):
            time.sleep(cmd["ms"] / 1000)
        if cmd.get("fail"):
            raise RuntimeError("the loader failed")
        # What the loader says of its result once it knows it (load_context()).
        if "said_tags" in cmd:
            load_context().set_tags(*cmd["said_tags"])
        if "said_ttl" in cmd:
            load_context().set_ttl(cmd["said_ttl"])
        if cmd.get("skip"):
            load_context().skip()
        return cmd.get("value")

    kw: dict[str, Any] = {}
    for k in ("ttl", "neg_ttl", "stale_ttl"):
        if k in cmd:
            kw[k] = cmd[k]
    if "tags" in cmd:
        kw["tags"] = cmd["tags"]
    v = c().fetch(cmd["key"], loader, **kw)
    return {"value": v, "loaded": loaded}


def mix(cmd: dict[str, Any]) -> list[list[Any]]:
    """A random mix of operations over a few keys and tags; the history of each as
    [op, key, argument, result, start_ns, end_ns]."""
    rng = random.Random(cmd["seed"])
    keys, tags, me = cmd["keys"], cmd["tags"], cmd["me"]
    out: list[list[Any]] = []
    ca = c()
    for i in range(cmd["n"]):
        op = rng.choices(
            ["set", "get", "delete", "invalidate", "set_tagged", "fetch", "clear"],
            weights=[30, 45, 8, 5, 7, 5, cmd.get("clears", 0)],
        )[0]
        key = rng.choice(keys)
        val = f"{me}:{i}"
        t0 = now()
        if op == "set":
            ca.set(key, val)
            res: Any = None
            arg: Any = val
        elif op == "set_tagged":
            tag = rng.choice(tags)
            ca.set(key, val, tags=[tag])
            res, arg = None, [val, tag]
        elif op == "get":
            res, arg = ca.get(key), None
        elif op == "delete":
            res, arg = ca.delete(key), None
        elif op == "invalidate":
            key = rng.choice(tags)
            ca.invalidate_tags(key)
            res, arg = None, None
        elif op == "clear":
            ca.clear()
            res, arg = None, None
        else:
            res, arg = ca.fetch(key, lambda v=val: v), val
        out.append([op, key, arg, res, t0, now()])
    return out


def run(cmd: dict[str, Any]) -> Any:
    global cache
    op = cmd["op"]
    if op == "open":
        opts = {_OPTIONS[k]: v for k, v in cmd.get("options", {}).items()}
        if isinstance(opts.get("redis"), list):
            # The seed nodes of a Redis Cluster: Python takes the application's cluster client.
            from redis.cluster import ClusterNode, RedisCluster

            nodes = [
                ClusterNode("127.0.0.1", int(u.rsplit(":", 1)[1].split("/")[0]))
                for u in opts["redis"]
            ]
            opts["redis"] = RedisCluster(startup_nodes=nodes, protocol=2)
        cache = Cache(cmd["name"], **opts)
        return {"pid": os.getpid(), "degraded": cache.degraded}
    if op == "set":
        kw: dict[str, Any] = {}
        if "ttl" in cmd:
            kw["ttl"] = cmd["ttl"]
        if "tags" in cmd:
            kw["tags"] = cmd["tags"]
        c().set(cmd["key"], cmd["value"], **kw)
        return None
    if op == "get":
        return c().get(cmd["key"])
    if op == "get2":
        c().get(cmd["key"])
        return c().get(cmd["key"])
    if op == "delete":
        return c().delete(cmd["key"])
    if op == "add":
        return c().add(cmd["key"], cmd["value"], **({"ttl": cmd["ttl"]} if "ttl" in cmd else {}))
    if op == "incr":
        return c().incr(cmd["key"], cmd.get("delta", 1), default=cmd.get("default"))
    if op == "incr_many":
        for _ in range(cmd["n"]):
            c().incr(cmd["key"], 1, default=0)
        return None
    if op == "touch":
        return c().touch(cmd["key"], cmd["ttl"])
    if op == "invalidate":
        c().invalidate_tags(*cmd["tags"])
        return None
    if op == "clear":
        c().clear()
        return None
    if op == "fetch":
        return fetch(cmd)
    if op == "release":
        gate(cmd["gate"]).set()
        return None
    if op == "loads":
        return _loads
    if op == "burst":
        last = None
        for i in range(cmd["n"]):
            last = f"{cmd['prefix']}:{i}"
            c().set(cmd["key"], last)
        return last
    if op == "write_then_read":
        # Another key first, then the key, then read it back: the Node.js L1 once kept
        # the words of the previous write for the second one.
        c().set(cmd["other"], cmd["value"])
        c().set(cmd["key"], cmd["value"])
        return c().get(cmd["key"])
    if op == "mix":
        return mix(cmd)
    if op == "sets_forever":
        # Writes until killed: values that tell their own length, so a torn one shows.
        i = 0
        while True:
            n = 1 + (i * 7919) % 3000
            c().set(cmd["key"], {"n": n, "pad": "x" * n})
            i += 1
    if op == "stats":
        return c().stats()
    if op == "l3":
        tier = c()._tier
        assert tier is not None, "the cache has no cluster tier"
        return {**c().stats()["l3"], "positioned": tier.positioned()}
    raise ValueError(f"unknown op {op!r}")


def serve(cmd: dict[str, Any]) -> None:
    try:
        say({"id": cmd.get("id"), "ok": run(cmd)})
    except Exception as e:  # answered to the suite, which fails the scenario on it
        say({"id": cmd.get("id"), "error": {"type": type(e).__name__, "message": str(e)}})


def main() -> None:
    pool = ThreadPoolExecutor(max_workers=16)
    say({"ready": os.getpid(), "language": "python"})
    for line in sys.stdin:
        cmd = json.loads(line)
        if cmd.get("op") == "exit":
            break
        pool.submit(serve, cmd)
    pool.shutdown(wait=False, cancel_futures=True)
    os._exit(0)


if __name__ == "__main__":
    main()
