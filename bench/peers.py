"""The peers: what a Python web app would use instead, behind one small interface.

Two kinds of backends:

* in-process caches (dict, functools.lru_cache, cachetools, cachebox, theine): built and
  filled inside the measuring process; they hold live objects, so a get has no decode.
* shared stores (lmdb and diskcache on /dev/shm, Redis on loopback, ziggurat.Segment): opened
  from a picklable *spec* so that another process (a writer, a second worker) can open the
  very same store; values are bytes, a get of a pickled object includes ``pickle.loads``.
"""

from __future__ import annotations

import contextlib
import functools
import importlib.metadata
import os
import shutil
import signal
import socket
import subprocess
import tempfile
import threading
import time
from collections.abc import Callable, Hashable
from typing import Any

SHM = "/dev/shm"


# --- shared stores ------------------------------------------------------------------------


class Store:
    """A shared store opened in this process: ``get(key)`` and ``set(key, value)``."""

    name: str
    get: Callable[[bytes], bytes | None]
    set: Callable[[bytes, bytes], Any]

    def close(self) -> None:
        pass


class LmdbStore(Store):
    """lmdb with default flags; a new read transaction per get, one write transaction per set.

    A fresh read transaction is what makes another process's commits visible, which is
    what a cross-process reader must do.
    """

    def __init__(self, path: str, map_size: int = 2 << 30) -> None:
        import lmdb

        self.name = "lmdb(/dev/shm)"
        self.env = env = lmdb.open(path, map_size=map_size, max_readers=256)
        begin = env.begin

        def get(key: bytes) -> bytes | None:
            with begin() as txn:
                return txn.get(key)  # type: ignore[no-any-return]

        def set_(key: bytes, value: bytes) -> None:
            with begin(write=True) as txn:
                txn.put(key, value)

        self.get = get
        self.set = set_

    def close(self) -> None:
        self.env.close()

    def file_bytes(self) -> tuple[int, int]:
        """(pages in use x page size, bytes allocated to the data file)."""
        info = self.env.info()
        stat = self.env.stat()
        used = (info["last_pgno"] + 1) * stat["psize"]
        st = os.stat(os.path.join(self.env.path(), "data.mdb"))
        return used, st.st_blocks * 512


class DiskcacheStore(Store):
    """diskcache.Cache with its defaults (SQLite in WAL mode) in a /dev/shm directory."""

    def __init__(self, path: str) -> None:
        import diskcache

        self.name = "diskcache(/dev/shm)"
        self.cache = diskcache.Cache(path)
        self.get = self.cache.get
        self.set = self.cache.set

    def close(self) -> None:
        self.cache.close()


class RedisStore(Store):
    """redis-py (hiredis parser when installed) over TCP loopback."""

    def __init__(self, port: int) -> None:
        import redis

        self.name = "redis tcp (hiredis)"
        self.client = redis.Redis(host="127.0.0.1", port=port)
        self.get = self.client.get
        self.set = self.client.set

    def close(self) -> None:
        self.client.close()


class SegmentStore(Store):
    """ziggurat.Segment attached by name."""

    def __init__(self, name: str, size: int, **kwargs: Any) -> None:
        cls = segment_class()
        if cls is None:
            raise RuntimeError("ziggurat.Segment is not importable: " + segment_unavailable())
        self.name = "ziggurat.Segment"
        self.seg = cls(name, size, **kwargs)
        self.get = self.seg.get
        self.set = self.seg.set

    def close(self) -> None:
        self.seg.close()

    def unlink(self) -> None:
        with contextlib.suppress(Exception):
            self.seg.unlink()


def open_store(spec: dict[str, Any]) -> Store:
    """Open the shared store described by ``spec`` (``{"kind": ..., ...}``)."""
    kind = spec["kind"]
    if kind == "lmdb":
        return LmdbStore(spec["path"])
    if kind == "diskcache":
        return DiskcacheStore(spec["path"])
    if kind == "redis":
        return RedisStore(spec["port"])
    if kind == "segment":
        kw = {k: v for k, v in spec.items() if k not in ("kind", "name", "size")}
        return SegmentStore(spec["name"], spec["size"], **kw)
    raise ValueError(f"unknown store kind {kind!r}")


# --- ziggurat.Segment ---------------------------------------------------------------------

_SEGMENT: list[Any] = []
_SEGMENT_ERR: list[str] = []


def segment_class() -> Any:
    """``ziggurat.Segment`` if the extension is built and exports it, else None."""
    if not _SEGMENT and not _SEGMENT_ERR:
        try:
            try:
                from ziggurat import Segment
            except ImportError:
                from ziggurat._native import Segment
            _SEGMENT.append(Segment)
        except Exception as e:  # the engine may not be built yet
            _SEGMENT_ERR.append(f"{type(e).__name__}: {e}")
    return _SEGMENT[0] if _SEGMENT else None


def segment_unavailable() -> str:
    segment_class()
    return _SEGMENT_ERR[0] if _SEGMENT_ERR else ""


def extension_build() -> str:
    """How the extension measured was optimized (``ziggurat._native.BUILD``)."""
    try:
        from ziggurat import _native
    except ImportError:
        return "not built"
    return str(getattr(_native, "BUILD", "release"))


# --- ziggurat.Cache -----------------------------------------------------------------------


def cache_class() -> Any:
    """``ziggurat.Cache`` if the package imports, else None (then ``segment_unavailable``)."""
    if segment_class() is None:
        return None
    try:
        from ziggurat import Cache
    except Exception as e:
        _SEGMENT_ERR.append(f"{type(e).__name__}: {e}")
        return None
    return Cache


def open_cache(spec: dict[str, Any], **overrides: Any) -> Any:
    """A ``ziggurat.Cache`` on the segment named by ``spec`` (see ``Scratch.cache``).

    ``overrides`` change per-process options (``l1_items``, ``copy``...); every process that
    opens the same spec shares one L2.
    """
    cls = cache_class()
    if cls is None:
        raise RuntimeError("ziggurat.Cache is not importable: " + segment_unavailable())
    kw = {k: v for k, v in spec.items() if k not in ("kind", "name")}
    kw.update(overrides)
    return cls(spec["name"], **kw)


# --- scratch space ------------------------------------------------------------------------


class Scratch:
    """Temporary directories and segment names under /dev/shm, removed on ``cleanup``."""

    def __init__(self) -> None:
        base = SHM if os.path.isdir(SHM) else None
        self.root = tempfile.mkdtemp(prefix="ziggurat-bench-", dir=base)
        self.tag = f"bench{os.getpid()}"
        self._segments: list[dict[str, Any]] = []
        self._caches: list[dict[str, Any]] = []
        self._n = 0

    def path(self, what: str) -> str:
        self._n += 1
        p = os.path.join(self.root, f"{what}-{self._n}")
        os.makedirs(p, exist_ok=True)
        return p

    def lmdb(self) -> dict[str, Any]:
        return {"kind": "lmdb", "path": self.path("lmdb")}

    def diskcache(self) -> dict[str, Any]:
        return {"kind": "diskcache", "path": self.path("diskcache")}

    def segment(self, size: int, **kwargs: Any) -> dict[str, Any]:
        self._n += 1
        spec = {"kind": "segment", "name": f"{self.tag}-{self._n}", "size": size, **kwargs}
        self._segments.append(spec)
        return spec

    def cache(self, size: int, **kwargs: Any) -> dict[str, Any]:
        """Spec of a fresh ``ziggurat.Cache`` (its L2 segments are removed on ``cleanup``)."""
        self._n += 1
        spec = {"kind": "cache", "name": f"{self.tag}-c{self._n}", "size": size, **kwargs}
        self._caches.append(spec)
        return spec

    def cleanup(self) -> None:
        if self._caches and cache_class() is not None:
            for spec in self._caches:
                with contextlib.suppress(Exception):
                    open_cache(spec, l1_items=0).unlink()
        cls = segment_class()
        for spec in self._segments:
            if cls is None:
                break
            with contextlib.suppress(Exception):
                s = open_store(spec)
                assert isinstance(s, SegmentStore)
                s.unlink()
        shutil.rmtree(self.root, ignore_errors=True)


# --- redis-server -------------------------------------------------------------------------


def _die_with_parent() -> None:
    """In the child before exec: get SIGTERM if the benchmark process dies (Linux)."""
    try:
        import ctypes

        libc = ctypes.CDLL(None, use_errno=True)
        libc.prctl(1, signal.SIGTERM)  # PR_SET_PDEATHSIG
    except Exception:
        pass


def free_port() -> int:
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


class RedisServer:
    """A private redis-server on 127.0.0.1 with persistence off; stopped by ``stop()``.

    ``available`` is False (and ``reason`` says why) when redis-server is not installed
    or does not start; the benchmarks then skip their Redis rows with that note.
    """

    def __init__(self) -> None:
        self.proc: subprocess.Popen[bytes] | None = None
        self.port = 0
        self.reason = ""
        self.version = ""
        self._dir = ""
        self._lock = threading.Lock()

    @property
    def available(self) -> bool:
        return self.proc is not None

    def start(self) -> bool:
        exe = shutil.which("redis-server")
        if exe is None:
            self.reason = "redis-server is not installed"
            return False
        try:
            out = subprocess.run([exe, "--version"], capture_output=True, text=True, timeout=10)
            self.version = out.stdout.strip()
        except Exception:
            self.version = "unknown"
        self._dir = tempfile.mkdtemp(prefix="ziggurat-bench-redis-")
        for _attempt in range(3):
            self.port = free_port()
            args = [
                exe,
                "--bind",
                "127.0.0.1",
                "--port",
                str(self.port),
                "--save",
                "",
                "--appendonly",
                "no",
                "--daemonize",
                "no",
                "--dir",
                self._dir,
                "--loglevel",
                "warning",
            ]
            self.proc = subprocess.Popen(
                args,
                stdout=subprocess.DEVNULL,
                stderr=subprocess.DEVNULL,
                preexec_fn=_die_with_parent,
            )
            if self._wait_ready():
                return True
            self.stop()
        self.reason = "redis-server did not start"
        return False

    def _wait_ready(self, timeout: float = 5.0) -> bool:
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            if self.proc is None or self.proc.poll() is not None:
                return False
            try:
                with socket.create_connection(("127.0.0.1", self.port), timeout=0.2) as s:
                    s.sendall(b"PING\r\n")
                    if s.recv(16).startswith(b"+PONG"):
                        return True
            except OSError:
                pass
            time.sleep(0.02)
        return False

    def spec(self) -> dict[str, Any]:
        return {"kind": "redis", "port": self.port}

    def stop(self) -> None:
        with self._lock:
            proc, self.proc = self.proc, None
            if proc is not None and proc.poll() is None:
                proc.send_signal(signal.SIGTERM)
                try:
                    proc.wait(timeout=5)
                except subprocess.TimeoutExpired:
                    proc.kill()
                    proc.wait(timeout=5)
            if self._dir:
                shutil.rmtree(self._dir, ignore_errors=True)

    def __enter__(self) -> RedisServer:
        self.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self.stop()


# --- in-process caches --------------------------------------------------------------------

InProc = tuple[str, Callable[[Hashable], Any], Callable[[Hashable, Any], Any] | None, str]


def in_process_caches(items: dict[Any, Any], capacity: int) -> list[InProc]:
    """(name, get, set or None, note) for each in-process cache, filled with ``items``.

    ``capacity`` is the bound given to every bounded cache (larger than ``items``: no
    eviction happens during the latency tests).
    """
    import cachebox
    import cachetools
    import theine

    out: list[InProc] = []

    d = dict(items)
    out.append(("dict", d.get, d.__setitem__, "yardstick"))

    src = dict(items)
    lru = functools.lru_cache(maxsize=capacity)(src.__getitem__)
    for k in items:
        lru(k)
    out.append(("functools.lru_cache", lru, None, "hit; no put API"))

    ct = cachetools.LRUCache(maxsize=capacity)
    ct.update(items)
    out.append(("cachetools.LRUCache", ct.get, ct.__setitem__, "not thread-safe"))

    ctt = cachetools.TTLCache(maxsize=capacity, ttl=3600)
    ctt.update(items)
    out.append(("cachetools.TTLCache", ctt.get, ctt.__setitem__, "not thread-safe"))

    cb = cachebox.LRUCache(capacity)
    cb.update(items)
    out.append(("cachebox.LRUCache", cb.get, cb.insert, "per process"))

    cbt = cachebox.TTLCache(capacity, 3600)
    cbt.update(items)
    out.append(("cachebox.TTLCache", cbt.get, cbt.insert, "per process"))

    th = theine.Cache(capacity)
    for k, v in items.items():
        th.set(k, v)
    out.append(("theine.Cache", th.get, th.set, "W-TinyLFU; get returns (value, ok)"))
    return out


# --- versions -----------------------------------------------------------------------------

PEER_PACKAGES = (
    "lmdb",
    "diskcache",
    "redis",
    "hiredis",
    "cachebox",
    "cachetools",
    "theine",
    "theine-core",
    "libcachesim",
    "numpy",
    "ziggurat",
)


def versions() -> dict[str, str]:
    out = {}
    for p in PEER_PACKAGES:
        try:
            out[p] = importlib.metadata.version(p)
        except importlib.metadata.PackageNotFoundError:
            out[p] = "not installed"
    try:
        import lmdb

        out["liblmdb"] = ".".join(str(x) for x in lmdb.version())
    except Exception:
        pass
    return out
