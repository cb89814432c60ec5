"""Driving the contract suite's drivers (driver.py, driver.mjs), and checking what they
report against the promises.

A driver is a process of one front end that opens one ``Cache`` and answers commands,
one JSON line each way. The commands, in no language's spelling:

=====================  =============================================================
``open``               ``name``, ``options`` (size, ttl, neg_ttl, stale_ttl,
                       loader_timeout, directory, degraded, l1_items, lock_timeout)
``set``/``add``        ``key``, ``value``, ``ttl``, ``tags``
``get``/``get2``       ``key``: the value or null (``get2`` reads twice: L1 answers)
``delete``/``touch``   ``key`` (``touch``: ``ttl``): whether the key held a value
``incr``               ``key``, ``delta``, ``default``; ``incr_many``: ``n`` times +1
``invalidate``         ``tags``; ``clear``
``fetch``              ``key``, ``value`` (null: the loader finds nothing), ``gate``
                       (the loader says ``loading`` and waits for ``release``), ``ms``,
                       ``fail``, ``ttl``, ``neg_ttl``, ``stale_ttl``, ``tags``:
                       ``{value, loaded}``
``release``            ``gate``; ``loads``: how many loader calls this driver made
``burst``              ``key``, ``prefix``, ``n``: n sets, the last value written
``write_then_read``    ``other``, ``key``, ``value``: set other, set key, get key
``mix``                ``seed``, ``me``, ``keys``, ``tags``, ``n``, ``clears`` (weight
                       of ``clear``, against 100 for the rest): a random mix, its
                       history ``[op, key, arg, result, start_ns, end_ns]``
``sets_forever``       ``key``: sets until killed; ``stats``; ``exit``
=====================  =============================================================

A third language joins the suite with a driver that answers these lines.
"""

from __future__ import annotations

import bisect
import itertools
import json
import os
import queue
import shutil
import signal
import subprocess
import sys
import threading
import uuid
from collections import defaultdict
from collections.abc import Iterator
from pathlib import Path
from typing import Any

HERE = Path(__file__).resolve().parent
ROOT = HERE.parent.parent
LANGUAGES = ("python", "node")
# Every driver of one language, and every ordered pair: a promise between two processes
# holds whichever front end each one runs.
PAIRS = [(a, b) for a in LANGUAGES for b in LANGUAGES]


class DriverError(Exception):
    """A command a driver answered with an error."""


def node_addon_built() -> bool:
    return any((ROOT / "node").glob("ziggurat.*.node"))


def command(language: str) -> list[str]:
    if language == "python":
        return [sys.executable, str(HERE / "driver.py")]
    node = shutil.which("node")
    if node is None:
        raise RuntimeError("the Node.js driver needs Node.js 20 or later on the PATH")
    if not node_addon_built():
        raise RuntimeError("the Node.js driver needs the addon: run `make node-build`")
    return [node, str(HERE / "driver.mjs")]


class Driver:
    """One driver process. ``call`` sends a command and waits for its answer; ``start``
    sends one and returns a handle to wait on later (``result()``)."""

    def __init__(self, language: str) -> None:
        self.language = language
        self.proc = subprocess.Popen(
            command(language),
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            text=True,
            bufsize=1,
            cwd=ROOT,
        )
        self._ids = itertools.count(1)
        self._answers: dict[int, queue.Queue[dict[str, Any]]] = defaultdict(queue.Queue)
        self._events: queue.Queue[dict[str, Any]] = queue.Queue()
        self._lock = threading.Lock()
        ready = self._read_line()
        if ready is None or "ready" not in ready:
            raise RuntimeError(f"the {language} driver did not start: {ready!r}")
        self.pid: int = ready["ready"]
        self.opened: dict[str, Any] = {}
        self._reader = threading.Thread(target=self._read, daemon=True)
        self._reader.start()

    def __repr__(self) -> str:
        return f"<{self.language} driver {self.pid}>"

    def _read_line(self) -> dict[str, Any] | None:
        assert self.proc.stdout is not None
        line = self.proc.stdout.readline()
        return json.loads(line) if line else None

    def _read(self) -> None:
        while True:
            msg = self._read_line()
            if msg is None:
                return
            if "event" in msg:
                self._events.put(msg)
            else:
                with self._lock:
                    q = self._answers[msg["id"]]
                q.put(msg)

    def start(self, op: str, **fields: Any) -> Pending:
        i = next(self._ids)
        with self._lock:
            q = self._answers[i]
        assert self.proc.stdin is not None
        self.proc.stdin.write(json.dumps({"id": i, "op": op, **fields}) + "\n")
        self.proc.stdin.flush()
        return Pending(self, op, q)

    def call(self, op: str, timeout: float = 60.0, **fields: Any) -> Any:
        return self.start(op, **fields).result(timeout)

    def event(self, timeout: float = 30.0) -> dict[str, Any]:
        try:
            return self._events.get(timeout=timeout)
        except queue.Empty:
            raise AssertionError(f"{self}: no event in {timeout} s") from None

    def kill(self) -> None:
        self.proc.send_signal(signal.SIGKILL)
        self.proc.wait()

    def close(self) -> None:
        if self.proc.poll() is None:
            try:
                assert self.proc.stdin is not None
                self.proc.stdin.write('{"op": "exit"}\n')
                self.proc.stdin.flush()
                self.proc.wait(5)
            except (OSError, subprocess.TimeoutExpired):
                self.proc.kill()
                self.proc.wait()


class Pending:
    """A command sent, its answer to come."""

    def __init__(self, driver: Driver, op: str, q: queue.Queue[dict[str, Any]]) -> None:
        self.driver, self.op, self._q = driver, op, q

    def result(self, timeout: float = 60.0) -> Any:
        try:
            msg = self._q.get(timeout=timeout)
        except queue.Empty:
            raise AssertionError(
                f"{self.driver}: {self.op} did not answer in {timeout} s"
            ) from None
        if "error" in msg:
            e = msg["error"]
            raise DriverError(f"{self.driver}: {self.op}: {e['type']}: {e['message']}")
        return msg["ok"]


class Deployment:
    """Drivers of the given languages on one cache in a private directory (one host)."""

    def __init__(self, languages: tuple[str, ...], **options: Any) -> None:
        self.name = f"contract-{uuid.uuid4().hex[:12]}"
        self.directory = f"/dev/shm/zigcontract-{uuid.uuid4().hex}"
        os.mkdir(self.directory, 0o700)
        self.options = {"size": "64MiB", "directory": self.directory, **options}
        self.drivers: list[Driver] = []
        for language in languages:
            self.add(language)

    def add(self, language: str, **options: Any) -> Driver:
        d = Driver(language)
        self.drivers.append(d)
        d.opened = d.call("open", name=self.name, options={**self.options, **options})
        return d

    def close(self) -> None:
        for d in self.drivers:
            d.close()
        shutil.rmtree(self.directory, ignore_errors=True)


def deployment(*languages: str, **options: Any) -> Iterator[Deployment]:
    dep = Deployment(languages, **options)
    try:
        yield dep
    finally:
        dep.close()


# -- checking a history ------------------------------------------------------------------
#
# Each operation is [op, key, arg, result, start, end] in ns of one shared clock. A read is
# stale when some write of its key lies wholly between the write of the value it returned
# and the read itself (the read began after that later write returned). A miss needs an
# explanation: a delete, clear or invalidation that could come after every write that
# returned before the read, or no write before it at all.

WRITES = ("set", "set_tagged")
NEVER = 1 << 62


class Writes:
    """The plain writes of one key (which surely stored), to ask whether one lies wholly
    between two instants."""

    def __init__(self, ops: list[list[Any]]) -> None:
        sets = sorted((h for h in ops if h[0] in WRITES), key=lambda h: h[4])
        self.starts = [h[4] for h in sets]
        # The least end among the writes from each position on (by start).
        self.min_end = [NEVER] * (len(sets) + 1)
        for i in range(len(sets) - 1, -1, -1):
            self.min_end[i] = min(sets[i][5], self.min_end[i + 1])
        self.first_end = self.min_end[0]

    def between(self, after: int, before: int) -> bool:
        """Whether a write began after ``after`` and returned before ``before``."""
        return self.min_end[bisect.bisect_right(self.starts, after)] < before


class Checked:
    """What ``check`` found: reads checked and each violation, described."""

    def __init__(self) -> None:
        self.reads = 0
        self.stale: list[str] = []
        self.lost: list[str] = []


def _writers(history: list[list[Any]]) -> dict[str, list[Any]]:
    """Each value (unique) and the operation that wrote it."""
    out: dict[str, list[Any]] = {}
    for h in history:
        if h[0] == "set":
            out[h[2]] = h
        elif h[0] == "set_tagged":
            out[h[2][0]] = h
        elif h[0] == "fetch" and h[3] == h[2]:
            out[h[2]] = h  # a load whose value its caller got
    return out


def check(history: list[list[Any]]) -> Checked:
    """Checks a history of ``mix`` runs (see above)."""
    out = Checked()
    by_key: dict[str, list[list[Any]]] = defaultdict(list)
    invalidations: list[list[Any]] = []
    tagged: dict[str, set[str]] = defaultdict(set)  # tag -> keys set with it
    clears = [h for h in history if h[0] == "clear"]
    for h in history:
        if h[0] == "invalidate":
            invalidations.append(h)
        elif h[0] != "clear":
            by_key[h[1]].append(h)
        if h[0] == "set_tagged":
            tagged[h[2][1]].add(h[1])
    written_by = _writers(history)
    for key, ops in by_key.items():
        writes = Writes(ops)
        # A clear erases every key, as a delete of each.
        deletes = [h for h in ops if h[0] == "delete"] + clears
        own = [h for h in invalidations if key in tagged[h[1]]]
        for h in ops:
            res = h[3]
            if not (h[0] == "get" or (h[0] == "fetch" and res != h[2])):
                continue
            out.reads += 1
            rs, re_ = h[4], h[5]
            if res is None:
                if writes.first_end < rs and not any(
                    e[4] < re_ and not writes.between(e[5], rs) for e in deletes + own
                ):
                    out.lost.append(
                        f"{key}: a miss at {rs} that no delete or invalidation explains"
                    )
                continue
            w = written_by.get(res) if isinstance(res, str) else None
            if w is None:
                out.stale.append(f"{key}: read {res!r}, which no write made")
                continue
            later = writes.between(w[5], rs) or any(e[4] > w[5] and e[5] < rs for e in deletes)
            if not later and w[0] == "set_tagged":
                later = any(e[1] == w[2][1] and e[4] > w[5] and e[5] < rs for e in own)
            if later:
                out.stale.append(f"{key}: read {res!r} after a later write had returned")
    return out
