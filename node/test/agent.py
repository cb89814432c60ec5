"""A Python worker process the Node.js tests drive over stdin/stdout, one JSON
command per line, one JSON answer per line (the same commands as agent.mjs)."""

import json
import sys
import time

from ziggurat import Cache

name = sys.argv[1]
size = sys.argv[2] if len(sys.argv) > 2 else "16MiB"
timeout = float(sys.argv[3]) if len(sys.argv) > 3 else 20.0
cache = Cache(name, size=size, loader_timeout=timeout)


def run(c):
    op = c["op"]
    if op == "set":
        cache.set(c["key"], c["value"], **({"ttl": c["ttl"]} if "ttl" in c else {}))
        return True
    if op == "get":
        return cache.get(c["key"])
    if op == "get2":
        cache.get(c["key"])
        return cache.get(c["key"])
    if op == "getOrSet":

        def load():
            cache.incr("loads:" + c["key"], default=0)
            time.sleep(c["ms"] / 1000)
            return c["value"]

        return cache.fetch(c["key"], load)
    if op == "incr":
        return cache.incr(c["key"], c.get("delta", 1), default=0)
    if op == "add":
        return cache.add(c["key"], c["value"])
    if op == "invalidate":
        cache.invalidate_tags(*c["tags"])
        return True
    if op == "clear":
        cache.clear()
        return True
    if op == "setTagged":
        cache.set(c["key"], c["value"], tags=c["tags"])
        return True
    if op == "nsSet":
        cache.namespace(c["ns"]).set(c["key"], c["value"])
        return True
    if op == "nsGet":
        return cache.namespace(c["ns"]).get(c["key"])
    if op == "nsClear":
        cache.namespace(c["ns"]).clear()
        return True
    if op == "pickled":
        cache.set(c["key"], (1, 2))  # a tuple: pickled by serializer="auto"
        return True
    if op == "bytes":
        cache.set(c["key"], bytes.fromhex(c["hex"]))
        return True
    if op == "isBytes":
        v = cache.get(c["key"])
        return isinstance(v, bytes) and v.hex() == c["hex"]
    raise ValueError(f"unknown op {op}")


print(json.dumps({"ready": __import__("os").getpid()}), flush=True)
for line in sys.stdin:
    c = json.loads(line)
    try:
        print(json.dumps({"id": c.get("id"), "ok": run(c)}), flush=True)
    except Exception as e:  # reported to the test, which fails on it
        print(json.dumps({"id": c.get("id"), "error": f"{type(e).__name__}: {e}"}), flush=True)
