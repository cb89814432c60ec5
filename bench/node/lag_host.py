"""A Python host of the cross-language lag benchmark (bench/node/lag.mjs): opens the cache
on its own directory, joined to the run's server, then

* ``reader``: spins on ``get(key)`` and prints ``<value> <CLOCK_MONOTONIC ns>`` the first
  time it reads each new value;
* ``writer``: for i in 1..n, ``set(key, i)``, prints ``<i> <ns>`` once it returned, then
  waits for a line on stdin (the other host saw it) and pauses 0 to 2 ms.

It prints ``ready`` once its stream reader has a place in the stream."""

from __future__ import annotations

import random
import sys
import time

from ziggurat import Cache

KEY = "lag:key"


def main() -> None:
    role, name, directory, url, secret, n = sys.argv[1:7]
    c = Cache(name, size="16MiB", directory=directory, redis=url, secret=secret, redis_timeout=1)
    tier = c._tier
    assert tier is not None
    while not tier.positioned():
        time.sleep(0.005)
    print("ready", flush=True)
    last, total = 0, int(n)
    if role == "reader":
        deadline = time.monotonic() + 60 + total * 0.02
        while last < total and time.monotonic() < deadline:
            v = c.get(KEY)
            if isinstance(v, int) and v > last:
                print(v, time.monotonic_ns(), flush=True)
                last = v
    else:
        sys.stdin.readline()  # go
        rnd = random.Random(5)
        for i in range(1, total + 1):
            c.set(KEY, i)
            print(i, time.monotonic_ns(), flush=True)
            sys.stdin.readline()
            time.sleep(rnd.uniform(0, 0.002))
    c.close()


if __name__ == "__main__":
    main()
