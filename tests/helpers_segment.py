"""Shared helpers of the segment tests: imports, value encoding, forked children, workers.

Children are created with ``os.fork`` (never "spawn"): it is fast enough for hundreds of
SIGKILLs per test, and a child can use closures.  A child never uses a ``Segment`` object it
inherited from its parent: it attaches its own handle by name (``reopen``), as a separate
worker process would.  Children leave with ``os._exit`` so no pytest or atexit code runs
in them.
"""

from __future__ import annotations

import os
import pickle
import random
import select
import signal
import time
import traceback
import uuid
import zlib
from collections.abc import Callable, Sequence
from typing import Any

import pytest

try:
    from ziggurat import LockTimeout, Segment, SegmentError, ZigguratError
except ImportError:  # the package __init__ may not re-export yet: use the extension directly
    from ziggurat._native import (  # type: ignore[no-redef]
        LockTimeout,
        Segment,
        SegmentError,
        ZigguratError,
    )

__all__ = [
    "STRESS",
    "KiB",
    "LockTimeout",
    "MiB",
    "Segment",
    "SegmentError",
    "ZigguratError",
    "needs_crash_hook",
]

KiB = 1024
MiB = 1024 * 1024

#: Long runs (``make stress``) are selected with ``-m stress`` and enabled by this variable.
STRESS = os.environ.get("ZIGGURAT_STRESS") == "1"

#: Failpoints of ``Segment._crash_at``, in the order a write reaches them.
CRASH_POINTS = ("locked", "appended", "stamp_odd", "published", "evict")

#: ``Segment._crash_at`` exists in builds with the ``failpoints`` feature (``make build``,
#: ``bench/pgo.py develop``), not in the distributed wheel.
needs_crash_hook = pytest.mark.skipif(
    not hasattr(Segment, "_crash_at"),
    reason="built without the failpoints feature: use bench/pgo.py develop "
    "or maturin develop --features failpoints",
)


def new_name(prefix: str = "t") -> str:
    """A segment name unique to this run, valid for ``[A-Za-z0-9._-]{1,100}``."""
    return f"{prefix}-{uuid.uuid4().hex[:16]}"


def reopen(seg: Segment, **kwargs: Any) -> Segment:
    """Attach a new handle to the file of ``seg`` (as another worker process would)."""
    return Segment(seg.name, seg.size, directory=os.path.dirname(seg.path), **kwargs)


# --------------------------------------------------------------------------- values


def make_value(key: bytes, rng: random.Random, size: int | None = None) -> bytes:
    """A value that embeds its key and a CRC32 of everything before the CRC.

    Layout: ``len(key) u16 | key | payload | crc32(previous bytes) u32``.  A torn value
    (mix of two writes, partial copy, garbage) fails the CRC; a value stored under another
    key passes the CRC but names the wrong key.
    """
    if size is None:
        size = rng.choice((1, 7, 8, 31, 100, 500, 1500, 4000, 9000))
    body = len(key).to_bytes(2, "little") + key + rng.randbytes(size)
    return body + zlib.crc32(body).to_bytes(4, "little")


def check_value(key: bytes, value: bytes) -> str | None:
    """``None`` if ``value`` is an intact value made by ``make_value`` for ``key``.

    Otherwise "corrupt" (torn or garbage) or "foreign" (intact, but another key's value).
    """
    if not isinstance(value, bytes) or len(value) < 6:
        return "corrupt"
    body, crc = value[:-4], value[-4:]
    if zlib.crc32(body) != int.from_bytes(crc, "little"):
        return "corrupt"
    klen = int.from_bytes(body[:2], "little")
    if body[2 : 2 + klen] != key or len(body) < 2 + klen:
        return "foreign"
    return None


def as_key(key: str | bytes) -> bytes:
    """The bytes a key is stored under (str keys are UTF-8)."""
    return key.encode() if isinstance(key, str) else key


# --------------------------------------------------------------------------- tags


def tag_collides(seg: Segment, a: str, b: str) -> bool:
    """Whether invalidating ``b`` also invalidates entries tagged ``a`` in this segment.

    The engine keeps tag versions in a hashed table (research/engine-design.md §3.1, §6.8),
    so two distinct tags can share a cell and over-invalidate each other.  Probing bumps the
    version of ``b``: only use it on tags whose entries may be invalidated.
    """
    probe = b"__tag_probe__" + uuid.uuid4().bytes
    seg.set(probe, b"p", tags=[a])
    seg.invalidate_tag(b)
    collides = seg.get(probe) is None
    seg.delete(probe)
    return collides


def distinct_tags(seg: Segment, n: int, prefix: str = "tag") -> list[str]:
    """``n`` tag names, no two of which share a tag cell in ``seg`` (see ``tag_collides``)."""
    picked: list[str] = []
    i = 0
    while len(picked) < n:
        cand = f"{prefix}-{i}"
        i += 1
        if not any(tag_collides(seg, p, cand) or tag_collides(seg, cand, p) for p in picked):
            picked.append(cand)
    return picked


# --------------------------------------------------------------------------- children


class ChildFailed(AssertionError):
    """A forked child raised, died of a signal, or did not finish in time."""


def describe_status(code: int) -> str:
    """Human form of an ``os.waitstatus_to_exitcode`` result."""
    if code < 0:
        try:
            return f"killed by {signal.Signals(-code).name}"
        except ValueError:
            return f"killed by signal {-code}"
    return f"exit code {code}"


def fork_child(fn: Callable[..., object], *args: Any) -> int:
    """Run ``fn(*args)`` in a forked child; return its pid.

    The child exits 0 when ``fn`` returns, 70 when it raises (traceback on stderr).
    """
    pid = os.fork()
    if pid == 0:  # pragma: no cover - child
        code = 0
        try:
            fn(*args)
        except BaseException:
            traceback.print_exc()
            code = 70
        finally:
            os._exit(code)
    return pid


def wait_child(pid: int, timeout: float) -> int:
    """Reap ``pid``; return ``os.waitstatus_to_exitcode`` (negative: killed by a signal).

    Raises ``ChildFailed`` (after SIGKILLing it) if it is still running after ``timeout``.
    """
    deadline = time.monotonic() + timeout
    delay = 0.0005
    while True:
        wpid, status = os.waitpid(pid, os.WNOHANG)
        if wpid == pid:
            return os.waitstatus_to_exitcode(status)
        if time.monotonic() > deadline:
            os.kill(pid, signal.SIGKILL)
            os.waitpid(pid, 0)
            raise ChildFailed(f"child {pid} still running after {timeout} s (killed)")
        time.sleep(delay)
        delay = min(delay * 2, 0.02)


def _read_all(fd: int, deadline: float) -> bytes:
    chunks = []
    while True:
        left = deadline - time.monotonic()
        if left <= 0:
            raise TimeoutError
        ready, _, _ = select.select([fd], [], [], left)
        if not ready:
            raise TimeoutError
        chunk = os.read(fd, 1 << 16)
        if not chunk:
            return b"".join(chunks)
        chunks.append(chunk)


class Background:
    """A forked child computing ``fn(*args, stop_fd)``; the parent stops it and gets its result.

    ``stop_fd`` becomes readable (EOF) when the parent calls ``stop()``; the child polls it
    with ``should_stop``.  The result is sent back pickled.
    """

    def __init__(self, fn: Callable[..., object], *args: Any) -> None:
        self._stop_r, self._stop_w = os.pipe()
        self._res_r, res_w = os.pipe()
        pid = os.fork()
        if pid == 0:  # pragma: no cover - child
            code = 0
            try:
                os.close(self._stop_w)
                os.close(self._res_r)
                try:
                    out: tuple[str, Any] = ("ok", fn(*args, self._stop_r))
                except BaseException as exc:
                    out = ("exc", f"{type(exc).__name__}: {exc}\n{traceback.format_exc()}")
                data = pickle.dumps(out)
                view = memoryview(data)
                while view:
                    view = view[os.write(res_w, view) :]
            except BaseException:
                code = 71
            finally:
                os._exit(code)
        os.close(self._stop_r)
        os.close(res_w)
        self.pid = pid
        self._reaped = False

    def stop(self, timeout: float = 30.0) -> Any:
        """Ask the child to stop; return what ``fn`` returned, or raise ``ChildFailed``."""
        os.close(self._stop_w)
        deadline = time.monotonic() + timeout
        try:
            data = _read_all(self._res_r, deadline)
        except TimeoutError:
            os.kill(self.pid, signal.SIGKILL)
            os.waitpid(self.pid, 0)
            self._reaped = True
            raise ChildFailed(f"background child gave no result in {timeout} s") from None
        finally:
            os.close(self._res_r)
        self._reaped = True  # wait_child reaps it, or kills and reaps it
        code = wait_child(self.pid, max(1.0, deadline - time.monotonic()))
        if code != 0 or not data:
            raise ChildFailed(f"background child failed: {describe_status(code)}")
        kind, payload = pickle.loads(data)
        if kind != "ok":
            raise ChildFailed(f"background child raised {payload}")
        return payload

    def kill(self) -> None:
        """Best-effort cleanup after a failed test (no-op once the child was reaped)."""
        if self._reaped:
            return
        self._reaped = True
        try:
            os.kill(self.pid, signal.SIGKILL)
            os.waitpid(self.pid, 0)
        except (ProcessLookupError, ChildProcessError):
            pass


def should_stop(stop_fd: int) -> bool:
    """True once the parent of a ``Background`` child called ``stop()``."""
    return bool(select.select([stop_fd], [], [], 0)[0])


def run_forked(fn: Callable[..., Any], *args: Any, timeout: float = 60.0) -> Any:
    """Run ``fn(*args)`` in a forked child and return its (picklable) result.

    A crash of the child (SIGSEGV, SIGBUS, abort, panic) becomes a ``ChildFailed``
    assertion in the parent instead of killing the test run.
    """
    bg = Background(lambda _stop_fd: fn(*args))
    return bg.stop(timeout)


# --------------------------------------------------------------------------- workers


def mixed_worker(
    seg: Segment, keys: Sequence[bytes], seed: int, seconds: float, stop_fd: int
) -> dict[str, Any]:
    """Mixed set/get/delete/add/invalidate_tag on shared keys; check every value read.

    Returns counters; "corrupt"/"foreign" count values that fail ``check_value``.
    """
    del stop_fd
    s = reopen(seg)
    rng = random.Random(seed)
    tags = [f"mix-tag-{i}" for i in range(8)]
    out = {
        "ops": 0, "sets": 0, "adds": 0, "gets": 0, "hits": 0, "misses": 0,
        "corrupt": 0, "foreign": 0, "examples": [],
    }  # fmt: skip
    deadline = time.monotonic() + seconds
    while time.monotonic() < deadline:
        for _ in range(64):
            key = rng.choice(keys)
            r = rng.random()
            if r < 0.5:
                value = s.get(key)
                out["gets"] += 1
                if value is None:
                    out["misses"] += 1
                else:
                    out["hits"] += 1
                    err = check_value(key, value)
                    if err:
                        out[err] += 1
                        if len(out["examples"]) < 5:
                            out["examples"].append((err, key, value[:64]))
            elif r < 0.82:
                s.set(key, make_value(key, rng), tags=rng.sample(tags, rng.randrange(3)))
                out["sets"] += 1
            elif r < 0.95:
                s.delete(key)
            elif r < 0.99:
                if s.add(key, make_value(key, rng), ttl=rng.choice((None, 30.0))):
                    out["adds"] += 1
            else:
                s.invalidate_tag(rng.choice(tags))
            out["ops"] += 1
    s.close()
    return out


def storm_reader(seg: Segment, keys: Sequence[bytes], seed: int, stop_fd: int) -> dict[str, Any]:
    """Read random keys until stopped; check every value; record the two slowest ``get``s
    (one may be a descheduling of the reader on a loaded machine, not a wait)."""
    s = reopen(seg)
    rng = random.Random(seed)
    out: dict[str, Any] = {
        "gets": 0, "hits": 0, "corrupt": 0, "foreign": 0, "errors": 0,
        "max_get_s": 0.0, "second_get_s": 0.0, "examples": [],
    }  # fmt: skip
    max_ns = second_ns = 0
    clock = time.perf_counter_ns
    while not should_stop(stop_fd):
        for _ in range(256):
            key = rng.choice(keys)
            t0 = clock()
            try:
                value = s.get(key)
            except Exception as exc:
                out["errors"] += 1
                if len(out["examples"]) < 5:
                    out["examples"].append(("error", key, repr(exc)))
                continue
            dt = clock() - t0
            if dt > second_ns:
                max_ns, second_ns = max(max_ns, dt), min(max_ns, dt)
            out["gets"] += 1
            if value is not None:
                out["hits"] += 1
                err = check_value(key, value)
                if err:
                    out[err] += 1
                    if len(out["examples"]) < 5:
                        out["examples"].append((err, key, value[:64]))
    out["max_get_s"] = max_ns / 1e9
    out["second_get_s"] = second_ns / 1e9
    try:
        s.close()  # flushes this process's hit/miss counters into the segment
    except Exception as exc:
        out["errors"] += 1
        out["examples"].append(("close", b"", repr(exc)))
    return out


def storm_writer(seg: Segment, keys: Sequence[bytes], seed: int, ready_fd: int) -> None:
    """Write forever (until SIGKILLed): set, delete, add, tags, invalidate_tag.

    Writes one byte to ``ready_fd`` once attached, so the parent kills it mid-writes.
    Exits non-zero only if a write raises (which a repaired lock must never cause).
    """
    s = reopen(seg)
    rng = random.Random(seed)
    tags = [f"storm-tag-{i}" for i in range(4)]
    os.write(ready_fd, b"r")
    os.close(ready_fd)
    sizes = (1, 16, 100, 700, 3000, 12000, 40000)
    while True:
        key = rng.choice(keys)
        r = rng.random()
        if r < 0.75:
            s.set(key, make_value(key, rng, rng.choice(sizes)), tags=rng.sample(tags, 1))
        elif r < 0.9:
            s.delete(key)
        elif r < 0.99:
            s.add(key, make_value(key, rng, rng.choice(sizes)))
        else:
            s.invalidate_tag(rng.choice(tags))
