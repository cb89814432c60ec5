"""How a segment's costs grow with its size, with and without huge pages, against lmdb.

    python bench/bench_scale.py                          64M,256M,1G,4G,8G
    python bench/bench_scale.py --sizes 64M,256M,1G      some sizes
    python bench/bench_scale.py --quick                  64M and 256M, fewer reps (sanity run)
    python bench/bench_scale.py --dir /mnt/tmpfs         one directory of one's own (not root)

For every size and every kind of tmpfs (``huge=never``: 4 KiB pages; ``huge=always``:
2 MiB pages), ``ziggurat.Segment`` then lmdb (py-lmdb, default flags) are measured on the
same file system:

* create: opening a new store of that size; attach: opening it again from a second process
  (timed inside that process, the interpreter's start left out), and its first get;
* fill: keys ``b"k%010d"`` with 90-byte values, written until the segment holds as many
  entries as it keeps (the count stops growing: every new key evicts an old one); lmdb is
  given the same number of entries (10,000 per write transaction) in a map twice the size;
* get: random keys among those kept (a list drawn beforehand, larger than the CPU's caches
  at the large sizes), each key once per pass, in a tight Python loop over the store's
  bound method (lmdb: a read transaction per get, what another process's commit needs);
* set: overwrites of kept keys, then new keys (each evicting an old entry in the segment),
  a write transaction per set for lmdb;
* memory: file size / entries, allocated blocks / entries, and the measuring process's
  RSS growth over the fill / entries; how much of the file the kernel gave huge pages.

As root the two tmpfs are mounted by this script in a temporary directory and unmounted at
the end. Without root, only the directory given by ``--dir`` (default /dev/shm) is measured,
with whatever pages its file system gives.

Writes bench/scale.json, the plots docs/img/scale-*.svg, the report bench/scale.md and
that report's section of docs/benchmarks.md (``bench/run.py`` keeps that section when it
rewrites the page, and runs this benchmark as ``scale``). A ``--quick`` run writes under
bench/results/ instead, leaving the committed figures alone.
"""

from __future__ import annotations

import argparse
import contextlib
import datetime as dt
import gc
import json
import multiprocessing as mp
import os
import random
import re
import shutil
import signal
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable, Iterator, Sequence
from time import perf_counter_ns, thread_time_ns
from typing import Any

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(HERE)
if HERE not in sys.path:
    sys.path.insert(0, HERE)

import harness as h  # noqa: E402
import peers  # noqa: E402

MiB = 2**20
GiB = 2**30
SIZES = "64M,256M,1G,4G,8G"
QUICK_SIZES = "64M,256M"
VALUE_BYTES = 90
KEY_FORMAT = b"k%010d"  # 11-byte keys
LMDB_BATCH = 10_000  # puts per write transaction while filling lmdb
# Keys read per rep of the get loop. Every rep reads keys of its own, drawn beforehand, each
# once: no rep finds in the CPU's caches what an earlier rep brought there, so that a large
# segment is read from memory as a random get in production would.
SAMPLE = 100_000
QUICK_SAMPLE = 30_000
SET_KEYS = 20_000  # keys per set pass (at most a tenth of the entries kept)
GET_GOAL = 1.3  # get at the largest size / get at 64 MiB, huge pages

JSON_PATH = os.path.join(HERE, "scale.json")
REPORT_PATH = os.path.join(HERE, "scale.md")
RESULTS = os.path.join(HERE, "results")
IMG = os.path.join(ROOT, "docs", "img")
DOC = os.path.join(ROOT, "docs", "benchmarks.md")
TITLE = "## s) Size scaling: 64 MiB to 8 GiB, with and without huge pages"
GOAL_PREFIX = "size scaling: "

ZIG = "ziggurat.Segment"
LMDB = "lmdb"
BACKENDS = (ZIG, LMDB)
NO_HUGE = "4 KiB pages"
HUGE = "huge pages"


VALUE = bytes(range(VALUE_BYTES))


def parse_size(text: str) -> int:
    """``"64M"``, ``"1G"``, ``"512MiB"`` or a byte count."""
    m = re.fullmatch(r"\s*(\d+)\s*([KMG]?)(?:i?B)?\s*", text, re.IGNORECASE)
    if not m:
        raise argparse.ArgumentTypeError(f"--sizes: cannot read {text!r}; write 64M, 1G...")
    return int(m.group(1)) * {"": 1, "K": 2**10, "M": MiB, "G": GiB}[m.group(2).upper()]


def fmt_size(n: int) -> str:
    return f"{n // GiB} GiB" if n >= GiB and n % GiB == 0 else f"{n / MiB:g} MiB"


# --- what the kernel reports ------------------------------------------------------------------


def proc_kib(path: str, fields: Sequence[str]) -> dict[str, int]:
    """``fields`` (kB lines) of a /proc file, in bytes; absent fields are 0."""
    out = dict.fromkeys(fields, 0)
    try:
        with open(path) as f:
            for line in f:
                name, _, rest = line.partition(":")
                if name in out:
                    out[name] = int(rest.split()[0]) * 1024
    except OSError:
        pass
    return out


def process_memory() -> dict[str, int]:
    """RSS of this process, and the part of its mappings of shared files held by 2 MiB pages."""
    m = proc_kib("/proc/self/status", ("VmRSS", "RssAnon", "RssFile", "RssShmem"))
    m.update(proc_kib("/proc/self/smaps_rollup", ("ShmemPmdMapped", "FilePmdMapped")))
    return m


def shmem_huge() -> int:
    """Bytes of tmpfs held in huge pages, machine-wide."""
    return proc_kib("/proc/meminfo", ("ShmemHugePages",))["ShmemHugePages"]


def allocated(path: str) -> int:
    """Bytes allocated to ``path`` (a file, or every file of a directory)."""
    if os.path.isdir(path):
        return sum(allocated(os.path.join(path, n)) for n in os.listdir(path))
    return os.stat(path).st_blocks * 512


def last_level_cache() -> str:
    """The size of the CPU's largest cache, as the kernel states it ("266240K"), or ""."""
    base = "/sys/devices/system/cpu/cpu0/cache"
    best = (0, "")
    with contextlib.suppress(OSError):
        for d in os.listdir(base):
            try:
                with open(os.path.join(base, d, "level")) as f:
                    level = int(f.read())
                with open(os.path.join(base, d, "size")) as f:
                    size = f.read().strip()
            except (OSError, ValueError):
                continue
            if level > best[0]:
                best = (level, size)
    return best[1]


def mount_options(directory: str) -> str:
    """The options of the file system ``directory`` is on (the longest matching mount)."""
    best, opts = "", "unknown"
    real = os.path.realpath(directory)
    try:
        with open("/proc/mounts") as f:
            for line in f:
                parts = line.split()
                mnt = parts[1].replace("\\040", " ")
                inside = real == mnt or real.startswith(mnt.rstrip("/") + "/")
                if inside and len(mnt) > len(best):
                    best, opts = mnt, f"{parts[2]} {parts[3]}"
    except OSError:
        pass
    return opts


# --- the file systems measured ----------------------------------------------------------------


class Mounts:
    """The directories measured, one per kind of pages: ``(label, directory, options)``.

    As root, two tmpfs are mounted under a temporary directory (unmounted by ``close``);
    otherwise the one directory given is used as it is.
    """

    def __init__(self, largest: int, directory: str | None) -> None:
        self.dirs: list[tuple[str, str, str]] = []
        self.mounted: list[str] = []
        self.root = ""
        self.note = ""
        if directory is None and os.geteuid() == 0:
            # a segment and lmdb never live at the same time; lmdb's map is twice the size
            limit = 2 * largest + 512 * MiB
            self.root = tempfile.mkdtemp(prefix="ziggurat-scale-")
            for label, huge in ((NO_HUGE, "never"), (HUGE, "always")):
                d = os.path.join(self.root, huge)
                os.mkdir(d)
                subprocess.run(
                    [
                        "mount",
                        "-t",
                        "tmpfs",
                        "-o",
                        f"size={limit},huge={huge},mode=0700",
                        "tmpfs",
                        d,
                    ],
                    check=True,
                )
                self.mounted.append(d)
                self.dirs.append((label, d, mount_options(d)))
            self.note = (
                "two tmpfs mounted for the run, `huge=never` and `huge=always` "
                f"(size={fmt_size(limit)} each)"
            )
        else:
            d = directory or peers.SHM
            opts = mount_options(d)
            label = HUGE if "huge=always" in opts or "huge=within_size" in opts else NO_HUGE
            self.dirs.append((label, d, opts))
            why = "as asked (--dir)" if directory else "not root: no tmpfs could be mounted"
            self.note = f"one directory only, {why}: {opts}"

    def close(self) -> None:
        for d in self.mounted:
            subprocess.run(["umount", d], check=False)
        self.mounted.clear()
        if self.root:
            shutil.rmtree(self.root, ignore_errors=True)


# --- timing -----------------------------------------------------------------------------------


def pass_ns(f: Callable[[Any], Any], keys: Sequence[Any]) -> tuple[float, float]:
    """``f(k)`` for each of ``keys``, gc off: (CPU ns of this thread, wall ns) per call.

    The CPU time leaves out the time this thread waited while other work had the CPU (this
    machine is shared); page walks and faults count, as they run on this thread.
    """
    with h.GcOff():
        c0, w0 = thread_time_ns(), perf_counter_ns()
        for k in keys:
            f(k)
        w1, c1 = perf_counter_ns(), thread_time_ns()
    return (c1 - c0) / len(keys), (w1 - w0) / len(keys)


def set_pass_ns(
    f: Callable[[Any, Any], Any], keys: Sequence[bytes], value: bytes
) -> tuple[float, float]:
    with h.GcOff():
        c0, w0 = thread_time_ns(), perf_counter_ns()
        for k in keys:
            f(k, value)
        w1, c1 = perf_counter_ns(), thread_time_ns()
    return (c1 - c0) / len(keys), (w1 - w0) / len(keys)


def collect(pairs: Sequence[tuple[float, float]]) -> dict[str, Any]:
    """Summary of the CPU figures, with the wall-clock ones under ``"wall"``."""
    cpu, wall = [p[0] for p in pairs], [p[1] for p in pairs]
    return {**h.summary(cpu), "samples": cpu, "wall": {**h.summary(wall), "samples": wall}}


def reps_of(run: Callable[[], tuple[float, float]], reps: int) -> dict[str, Any]:
    return collect([run() for _ in range(reps)])


def draw_kept(
    get: Callable[[bytes], Any], written: int, count: int, seed: int
) -> tuple[list[bytes], int]:
    """``count`` keys drawn at random among ``written`` that ``get`` still finds, and the
    number of draws that missed (entries evicted)."""
    rnd = random.Random(seed)
    keys: list[bytes] = []
    missed = 0
    with h.GcOff():
        while len(keys) < count:
            k = KEY_FORMAT % rnd.randrange(written)
            if get(k) is None:
                missed += 1
                if missed > 20 * count:
                    break
            else:
                keys.append(k)
    return keys, missed


# --- the second process -----------------------------------------------------------------------


def _attach_child(kind: str, where: str, directory: str, key: bytes, conn: Any) -> None:
    """Open the store again and time it (and its first get), from inside this process."""
    import lmdb

    cls = peers.segment_class()  # imports the extension: not part of the attach
    t0 = time.perf_counter_ns()
    if kind == ZIG:
        seg = cls(where, directory=directory)
        t1 = time.perf_counter_ns()
        ok = seg.get(key) is not None
        t2 = time.perf_counter_ns()
        seg.close()
    else:
        env = lmdb.open(where, map_size=0, max_readers=256)
        t1 = time.perf_counter_ns()
        with env.begin() as txn:
            ok = txn.get(key) is not None
        t2 = time.perf_counter_ns()
        env.close()
    conn.send((t1 - t0, t2 - t1, ok))


def attach_in_child(kind: str, where: str, directory: str, key: bytes) -> dict[str, Any]:
    sp = mp.get_context("spawn")
    conn, child = sp.Pipe()
    p = sp.Process(target=_attach_child, args=(kind, where, directory, key, child), daemon=True)
    p.start()
    child.close()
    try:
        if not conn.poll(300):
            raise RuntimeError(f"the attaching process of {kind} did not answer")
        open_ns, get_ns, ok = conn.recv()
    finally:
        p.join(30)
        if p.is_alive():
            p.kill()
            p.join()
    return {"attach_s": open_ns / 1e9, "first_get_s": get_ns / 1e9, "first_get_hit": ok}


# --- one store at one size ----------------------------------------------------------------------


def measure_ops(
    get: Callable[[bytes], Any],
    set_: Callable[[bytes, bytes], Any],
    sample: list[bytes],
    next_key: int,
    set_keys: int,
    reps: int,
) -> dict[str, Any]:
    """get over ``sample`` (``reps + 1`` slices: a warm-up, then one per rep), then overwrites
    of sampled keys, then new keys from ``next_key`` on."""
    value = VALUE
    out: dict[str, Any] = {}
    per = len(sample) // (reps + 1)
    slices = [sample[i * per : (i + 1) * per] for i in range(reps + 1)]
    pass_ns(get, slices[0])  # warms the code (and its data: not read again)
    # the same loop calling a builtin, rep for rep beside the gets: what Python itself costs
    gets: list[tuple[float, float]] = []
    floors: list[tuple[float, float]] = []
    for keys in slices[1:]:
        gets.append(pass_ns(get, keys))
        floors.append(pass_ns(len, keys))
    out["get_ns"] = collect(gets)
    out["loop_floor_ns"] = collect(floors)
    with h.GcOff():
        out["sample_hits"] = sum(get(k) is not None for k in sample)
    over = iter(slices[1:])
    out["set_overwrite_ns"] = reps_of(lambda: set_pass_ns(set_, next(over)[:set_keys], value), reps)
    fresh = iter(range(next_key, 1 << 62))

    def new_pass() -> tuple[float, float]:
        keys = [KEY_FORMAT % next(fresh) for _ in range(set_keys)]
        return set_pass_ns(set_, keys, value)

    out["set_new_ns"] = reps_of(new_pass, reps)
    return out


def check_memory(need: int, what: str) -> None:
    """Refuse to fill a store that the machine's free memory cannot hold: a tmpfs file larger
    than that would push other processes out (or wake the OOM killer)."""
    avail = proc_kib("/proc/meminfo", ("MemAvailable",))["MemAvailable"]
    if avail and avail < need + 2 * GiB:
        raise RuntimeError(
            f"{what} needs {fmt_bytes(need)} of tmpfs and only {fmt_bytes(avail)} of memory "
            "is available (2 GiB are kept free): run fewer or smaller --sizes"
        )


def bench_segment(size: int, directory: str, reps: int, sample_n: int) -> dict[str, Any]:
    cls = peers.segment_class()
    if cls is None:
        raise RuntimeError("ziggurat.Segment is not importable: " + peers.segment_unavailable())
    check_memory(size, f"a {fmt_size(size)} segment")
    name = f"scale{os.getpid()}-{size}"
    gc.collect()
    mem0, huge0 = process_memory(), shmem_huge()
    t0 = time.perf_counter()
    seg = cls(name, size, directory=directory)
    r: dict[str, Any] = {"create_s": time.perf_counter() - t0}
    try:
        set_, stats = seg.set, seg.stats
        # a chunk is about 3% of what the segment can hold: the fill stops within 3% of the
        # point where the count of entries stops growing
        chunk = max(32_768, size // 128 // 32)
        written = prev = 0
        t0 = time.perf_counter()
        with h.GcOff():
            while True:
                for i in range(written, written + chunk):
                    set_(KEY_FORMAT % i, VALUE)
                written += chunk
                entries = stats()["entries"]
                if entries - prev < chunk // 50 or written > 4 * size // 100:
                    break
                prev = entries
        r["fill_s"] = time.perf_counter() - t0
        r["written"] = written
        mem1, huge1 = process_memory(), shmem_huge()
        st = dict(stats())
        r["stats"] = st
        r["entries"] = st["entries"]
        r["file_bytes"] = seg.size
        r["allocated_bytes"] = allocated(seg.path)
        r["rss_delta"] = mem1["VmRSS"] - mem0["VmRSS"]
        r["memory_before"], r["memory_after"] = mem0, mem1
        r["huge_bytes"] = max(0, huge1 - huge0)
        r["pmd_mapped"] = mem1["ShmemPmdMapped"]
        sample, missed = draw_kept(seg.get, written, (reps + 1) * sample_n, size)
        r["sample"], r["sample_missed_draws"] = len(sample), missed
        r.update(attach_in_child(ZIG, name, directory, sample[0]))
        r.update(measure_ops(seg.get, set_, sample, written, set_keys(r["entries"]), reps))
        r["stats_end"] = dict(stats())
    finally:
        seg.close()
        with contextlib.suppress(Exception):
            cls(name, directory=directory).unlink()
    return r


def set_keys(entries: int) -> int:
    return max(1000, min(SET_KEYS, entries // 10))


def bench_lmdb(size: int, entries: int, directory: str, reps: int, sample_n: int) -> dict[str, Any]:
    # lmdb takes some 120 B per entry with these keys and values
    check_memory(entries * 120, f"lmdb with {entries:,} entries")
    path = tempfile.mkdtemp(prefix="ziggurat-scale-lmdb-", dir=directory)
    map_size = 2 * size
    gc.collect()
    mem0, huge0 = process_memory(), shmem_huge()
    t0 = time.perf_counter()
    lm = peers.LmdbStore(path, map_size=map_size)
    r: dict[str, Any] = {"create_s": time.perf_counter() - t0, "map_size": map_size}
    try:
        begin = lm.env.begin
        t0 = time.perf_counter()
        with h.GcOff():
            for j in range(0, entries, LMDB_BATCH):
                with begin(write=True) as txn:
                    # putmulti: the puts of a batch in one call (the loop in C)
                    txn.cursor().putmulti(
                        (KEY_FORMAT % i, VALUE) for i in range(j, min(entries, j + LMDB_BATCH))
                    )
        r["fill_s"] = time.perf_counter() - t0
        r["written"] = r["entries"] = entries
        mem1, huge1 = process_memory(), shmem_huge()
        used, _blocks = lm.file_bytes()
        r["file_bytes"], r["allocated_bytes"] = used, allocated(path)
        r["rss_delta"] = mem1["VmRSS"] - mem0["VmRSS"]
        r["memory_before"], r["memory_after"] = mem0, mem1
        r["huge_bytes"] = max(0, huge1 - huge0)
        r["pmd_mapped"] = mem1["ShmemPmdMapped"]
        sample, missed = draw_kept(lm.get, entries, (reps + 1) * sample_n, size)
        r["sample"], r["sample_missed_draws"] = len(sample), missed
        r.update(attach_in_child(LMDB, path, directory, sample[0]))
        r.update(measure_ops(lm.get, lm.set, sample, entries, set_keys(entries), reps))
    finally:
        lm.close()
        shutil.rmtree(path, ignore_errors=True)
    return r


# --- the run ------------------------------------------------------------------------------------


def run_scale(
    doc: dict[str, Any],
    sizes: Sequence[int],
    *,
    reps: int,
    sample_n: int,
    directory: str | None,
    progress: Callable[[dict[str, Any]], None] = lambda doc: None,
) -> None:
    """Measure every size on every directory into ``doc`` (``{}`` at first: a run cut short
    leaves there what it measured); ``progress(doc)`` after each store."""
    started = dt.datetime.now(dt.timezone.utc)
    mounts = Mounts(max(sizes), directory)
    doc.update(
        {
            "meta": {
                "date": started.strftime("%Y-%m-%d %H:%M UTC"),
                "machine": h.machine_facts(),
                "last_level_cache": last_level_cache(),
                "build": peers.extension_build(),
                "versions": {k: v for k, v in peers.versions().items() if "lmdb" in k},
                "sizes": list(sizes),
                "reps": reps,
                "sample": sample_n,
                "value_bytes": VALUE_BYTES,
                "key_bytes": len(KEY_FORMAT % 0),
                "filesystems": [{"label": lab, "options": o} for lab, _d, o in mounts.dirs],
                "filesystem_note": mounts.note,
                "loadavg_start": list(os.getloadavg()),
                "complete": False,
            },
            "results": [],
        }
    )
    t_start = time.perf_counter()
    try:
        for size in sizes:
            for label, d, _opts in mounts.dirs:
                for backend in BACKENDS:
                    print(
                        f"[scale] {fmt_size(size)}, {label}, {backend} ...",
                        file=sys.stderr,
                        flush=True,
                    )
                    t0 = time.perf_counter()
                    row: dict[str, Any] = {"size": size, "pages": label, "backend": backend}
                    try:
                        if backend == ZIG:
                            row.update(bench_segment(size, d, reps, sample_n))
                        else:
                            zig = find(doc, size, label, ZIG)
                            if zig is None or "entries" not in zig:
                                raise RuntimeError("no segment figures to match at this size")
                            row.update(bench_lmdb(size, zig["entries"], d, reps, sample_n))
                    except Exception as e:
                        row["error"] = f"{type(e).__name__}: {e}"
                        print(f"[scale] failed: {row['error']}", file=sys.stderr, flush=True)
                    row["seconds"] = time.perf_counter() - t0
                    doc["results"].append(row)
                    print(
                        f"[scale] {row['seconds']:.0f} s: "
                        + (summary_line(row) if "error" not in row else row["error"]),
                        file=sys.stderr,
                        flush=True,
                    )
                    progress(doc)
        doc["meta"]["complete"] = True
    finally:
        mounts.close()
        doc["meta"]["seconds"] = time.perf_counter() - t_start
        doc["meta"]["loadavg_end"] = list(os.getloadavg())


def summary_line(r: dict[str, Any]) -> str:
    return (
        f"{r['entries']:,} entries, get {r['get_ns']['median']:.0f} ns, "
        f"set {r['set_overwrite_ns']['median']:.0f}/{r['set_new_ns']['median']:.0f} ns, "
        f"{r['file_bytes'] / r['entries']:.0f} B/entry"
    )


def find(doc: dict[str, Any], size: int, pages: str, backend: str) -> dict[str, Any] | None:
    for r in doc["results"]:
        if r["size"] == size and r["pages"] == pages and r["backend"] == backend:
            return r  # type: ignore[no-any-return]
    return None


def ok_rows(doc: dict[str, Any]) -> Iterator[dict[str, Any]]:
    return (r for r in doc["results"] if "error" not in r)


# --- goals ------------------------------------------------------------------------------------


def goals(doc: dict[str, Any]) -> list[dict[str, Any]]:
    """``{"measure", "value", "goal", "ok"}`` of the two goals (``ok`` None: not measured)."""
    sizes = sorted({r["size"] for r in ok_rows(doc)})
    out = []
    ratio_goal = f"≤ ×{GET_GOAL}"
    measure = GOAL_PREFIX + "random get at the largest size / at 64 MiB, huge pages"
    small = find(doc, 64 * MiB, HUGE, ZIG)
    big = find(doc, sizes[-1], HUGE, ZIG) if sizes else None
    if small and big and "error" not in small and "error" not in big and big is not small:
        x = big["get_ns"]["median"] / small["get_ns"]["median"]
        value = f"×{x:.2f} ({fmt_size(big['size'])}: {big['get_ns']['median']:.0f} ns)"
        # the goal is stated for 8 GiB: a shorter run does not say whether it is met
        full = big["size"] >= 8 * GiB
        if not full:
            value += f"; the run stopped at {fmt_size(big['size'])}"
        out.append(
            {
                "measure": measure,
                "value": value,
                "goal": ratio_goal,
                "ok": x <= GET_GOAL if full else None,
            }
        )
    else:
        out.append({"measure": measure, "value": "—", "goal": ratio_goal, "ok": None})
    worst: tuple[float, str] | None = None
    for r in ok_rows(doc):
        if r["backend"] != ZIG:
            continue
        lm = find(doc, r["size"], r["pages"], LMDB)
        if lm is None or "error" in lm:
            continue
        x = r["get_ns"]["median"] / lm["get_ns"]["median"]
        if worst is None or x > worst[0]:
            worst = (x, f"{fmt_size(r['size'])}, {r['pages']}")
    measure = GOAL_PREFIX + "random get vs lmdb on the same tmpfs, at every size (worst)"
    if worst is None:
        out.append({"measure": measure, "value": "—", "goal": "< ×1.0 lmdb", "ok": None})
    else:
        out.append(
            {
                "measure": measure,
                "value": f"×{worst[0]:.2f} ({worst[1]})",
                "goal": "< ×1.0 lmdb",
                "ok": worst[0] < 1.0,
            }
        )
    return out


def status(ok: bool | None) -> str:
    return "not measured" if ok is None else ("meets" if ok else "**misses**")


# --- the report ---------------------------------------------------------------------------------


def fmt_s(s: float) -> str:
    if s < 1e-3:
        return f"{s * 1e6:.0f} µs"
    if s < 1:
        return f"{s * 1e3:.1f} ms"
    return f"{s:.1f} s"


def fmt_bytes(n: float) -> str:
    if n >= GiB:
        return f"{n / GiB:.2f} GiB"
    return f"{n / MiB:.0f} MiB"


def med(r: dict[str, Any], what: str, wall: bool = False) -> float:
    """Median of ``what``: CPU time, or with ``wall`` the wall clock."""
    return float(r[what]["wall"]["median"] if wall else r[what]["median"])


def render(doc: dict[str, Any], command: str, img_prefix: str = "img/", title: bool = True) -> str:
    """The report of ``doc`` in Markdown (with its heading unless ``title`` is False)."""
    m = doc["meta"]
    mach = m["machine"]
    sizes = sorted({r["size"] for r in doc["results"]})
    pages = [f["label"] for f in m["filesystems"]]
    run = ", ".join(fmt_size(s) for s in sizes) or "none"
    out = [TITLE, ""] if title else []
    if not m.get("complete") or not sizes or max(sizes) < 8 * GiB:
        out += [f"**Partial run: only {run} were measured.**", ""]
    out += [
        "How creation, attach, get, set and memory grow with the segment's size, on tmpfs "
        "with 4 KiB pages and with 2 MiB (huge) pages, with lmdb measured on the same file "
        "system in the same run as the yardstick. Generated by `bench/bench_scale.py` "
        "(`make bench-scale`, also run by `make bench`); raw figures in bench/scale.json.",
        "",
        f"* command: `{command}`",
        f"* date: {m['date']}; took {m.get('seconds', 0):.0f} s; sizes run: {run}",
        f"* machine: {mach['nproc']} CPUs usable ({mach['cpu']}), {mach['memory']} RAM, "
        f"{mach['system']} {mach['kernel']}, {mach['implementation']} {mach['python']}; "
        "a shared machine: other work ran on its 2 cores during the run"
        + (f"; last-level cache {cache}" if (cache := llc_text(m)) else ""),
        f"* load average (1 min) at start / end: {m['loadavg_start'][0]:.2f} / "
        f"{m.get('loadavg_end', [0.0])[0]:.2f}",
        f"* extension: {m['build']} build; lmdb {m['versions'].get('lmdb', '?')} (py-lmdb, "
        "default flags)",
        f"* file systems: {m['filesystem_note']}",
        f'* method: keys `b"k%010d"` ({m["key_bytes"]} B), values of {m["value_bytes"]} B. '
        "The segment (default options) is filled until its count of entries stops growing "
        "(each new key then evicts an old one); lmdb is given as many entries, 10,000 per "
        "write transaction, in a map of twice the size. get: random keys among those kept, "
        f"drawn beforehand, {m['sample']:,} per rep, each rep reading keys of its own once "
        "(so no rep finds in the CPU's caches what an earlier one brought there); the loop is "
        "Python calling the store's bound method (`ziggurat._native.Segment.get`; lmdb: a "
        "read transaction per get, as another process's reader must), so each figure "
        "includes the loop's own cost, given as 'loop floor' (the same loop calling `len`). "
        "set: overwrites of kept keys, then new keys (which evict in the segment), a write "
        f"transaction per set for lmdb. Medians of {m['reps']} reps, spread min–max. The "
        "figures are CPU time of the measuring thread per op (`time.thread_time_ns`, page "
        "walks and faults included), which leaves out the time other work on this shared "
        "machine held the CPU; the wall-clock medians of the same get reps follow them.",
        "",
        "![random get, ns per op, vs size](" + img_prefix + "scale-get.svg)",
        "",
    ]
    g = goals(doc)
    out.append(
        h.md_table(
            ["goal", "measured", "target", "status"],
            [[x["measure"][len(GOAL_PREFIX) :], x["value"], x["goal"], status(x["ok"])] for x in g],
            "lrrl",
        )
    )
    header = ["size"]
    cols: list[tuple[str, str]] = []
    for b in BACKENDS:
        for p in pages:
            header.append(f"{'ziggurat' if b == ZIG else 'lmdb'}, {p}")
            cols.append((b, p))
    if len(pages) == 2:
        header.append("ziggurat huge / 4 KiB")
    header += ["ziggurat / lmdb (" + ", ".join(pages) + ")", "loop floor"]
    base = find(doc, min(sizes), HUGE, ZIG) if sizes else None
    for wall in (False, True):
        out += [
            "",
            "Random get, ns per op, wall clock (median), the same reps:"
            if wall
            else "Random get, ns of CPU time per op (median; spread below):",
            "",
        ]
        rows = []
        for s in sizes:
            row = [fmt_size(s)]
            for b, p in cols:
                row.append(cell(find(doc, s, p, b), "get_ns", wall))
            if len(pages) == 2:
                a, b_ = find(doc, s, HUGE, ZIG), find(doc, s, NO_HUGE, ZIG)
                row.append(ratio_cell(a, b_, "get_ns", wall))
            row.append(
                " / ".join(
                    ratio_cell(find(doc, s, p, ZIG), find(doc, s, p, LMDB), "get_ns", wall)
                    for p in pages
                )
            )
            floors = [med(r, "loop_floor_ns", wall) for r in ok_rows(doc) if r["size"] == s]
            row.append(f"{h.median(floors):.0f} ns" if floors else "—")
            rows.append(row)
        out.append(h.md_table(header, rows))
    if base and "error" not in base and len(sizes) > 1:
        out += [
            "",
            "ziggurat with huge pages, get at each size / at "
            f"{fmt_size(base['size'])}: "
            + ", ".join(
                f"{fmt_size(s)} ×{med(r, 'get_ns') / med(base, 'get_ns'):.2f}"
                for s in sizes
                if (r := find(doc, s, HUGE, ZIG)) and "error" not in r
            ),
        ]
    out += [
        "",
        "![set, ns per op, vs size](" + img_prefix + "scale-set.svg)",
        "",
        "Set, ns of CPU time per op (median): overwrite of a kept key / new key",
        "",
    ]
    rows = []
    for s in sizes:
        row = [fmt_size(s)]
        for b, p in cols:
            r = find(doc, s, p, b)
            if r is None or "error" in r:
                row.append("—")
            else:
                row.append(f"{med(r, 'set_overwrite_ns'):.0f} / {med(r, 'set_new_ns'):.0f}")
        rows.append(row)
    out.append(h.md_table(header[: 1 + len(cols)], rows))
    out += [
        "",
        "![bytes per entry vs size](" + img_prefix + "scale-memory.svg)",
        "",
        "Entries and memory. B/entry: file size (lmdb: pages in use) / entries; allocated: the "
        "file's blocks on tmpfs / entries; RSS: growth of the filling process's RSS over the "
        "fill / entries (the pages of the file it touched); huge: the share of the file the "
        "kernel holds in 2 MiB pages (tmpfs ShmemHugePages growth over the fill / allocated).",
        "",
    ]
    rows = []
    for s in sizes:
        for p in pages:
            for b in BACKENDS:
                r = find(doc, s, p, b)
                if r is None or "error" in r:
                    rows.append([fmt_size(s), p, b, r.get("error", "—") if r else "—"] + ["—"] * 8)
                    continue
                n = r["entries"]
                rows.append(
                    [
                        fmt_size(s),
                        p,
                        b,
                        f"{n:,}",
                        f"{r['file_bytes'] / n:.0f}",
                        f"{r['allocated_bytes'] / n:.0f}",
                        f"{r['rss_delta'] / n:.0f}",
                        f"{min(1.0, r['huge_bytes'] / max(1, r['allocated_bytes'])):.0%}",
                        fmt_s(r["create_s"]),
                        fmt_s(r["attach_s"]),
                        fmt_s(r["first_get_s"]),
                        f"{r['fill_s']:.1f} s ({r['fill_s'] / r['written'] * 1e9:.0f} ns/set)",
                    ]
                )
    out.append(
        h.md_table(
            [
                "size",
                "pages",
                "store",
                "entries",
                "B/entry",
                "allocated/entry",
                "RSS/entry",
                "huge",
                "create",
                "attach",
                "first get",
                "fill",
            ],
            rows,
            "lllrrrrrrrrr",
        )
    )
    out += [
        "",
        "![create and attach time vs size](" + img_prefix + "scale-open.svg)",
        "",
        "* create: opening a new store of that size in this process; attach: opening it "
        "again in a second process (timed inside it, the interpreter's start left out) and "
        "that process's first get of a kept key; fill: keys written in order by one process "
        "(the segment: until full, lmdb: its batches), wall clock per write.",
    ]
    llc = llc_bytes(m)
    if llc and sizes:
        inside = [fmt_size(x) for x in sizes if x <= llc]
        if inside:
            out.append(
                f"* {', '.join(inside)} fit in this machine's last-level cache "
                f"({llc_text(m)}): there most random gets "
                "find the index and the record in that cache; in a larger segment they are "
                "read from memory, and with 4 KiB pages the page tables too."
            )
    spreads = []
    for r in ok_rows(doc):
        sp = r["get_ns"]
        spreads.append(
            f"{fmt_size(r['size'])}/{r['pages']}/{'z' if r['backend'] == ZIG else 'l'} "
            f"{sp['min']:.0f}–{sp['max']:.0f}"
        )
    if spreads:
        out.append("* get spread (z: ziggurat, l: lmdb), ns: " + "; ".join(spreads) + ".")
    misses = [
        f"{fmt_size(r['size'])}/{r['pages']}/{r['backend']}: "
        f"{r['sample_hits']:,} of {r['sample']:,}"
        for r in ok_rows(doc)
        if r["sample_hits"] != r["sample"]
    ]
    out.append(
        "* every sampled key was still present after the get reps (all gets were hits)."
        if not misses
        else "* sampled keys still present after the get reps: " + "; ".join(misses) + "."
    )
    errs = [
        f"{fmt_size(r['size'])}/{r['pages']}/{r['backend']}: {r['error']}"
        for r in doc["results"]
        if "error" in r
    ]
    if errs:
        out.append("* failed: " + "; ".join(errs) + ".")
    return "\n".join(out)


def llc_bytes(meta: dict[str, Any]) -> int:
    m = re.fullmatch(r"(\d+)K", meta.get("last_level_cache", ""))
    return int(m.group(1)) * 1024 if m else 0


def llc_text(meta: dict[str, Any]) -> str:
    """The last-level cache's size in MiB ("260 MiB"), or ""."""
    m = re.fullmatch(r"(\d+)K", meta.get("last_level_cache", ""))
    return f"{int(m.group(1)) / 1024:g} MiB" if m else ""


def cell(r: dict[str, Any] | None, what: str, wall: bool = False) -> str:
    if r is None or "error" in r:
        return "—"
    return f"{med(r, what, wall):.0f}"


def ratio_cell(
    a: dict[str, Any] | None, b: dict[str, Any] | None, what: str, wall: bool = False
) -> str:
    if a is None or b is None or "error" in a or "error" in b:
        return "—"
    return f"×{med(a, what, wall) / med(b, what, wall):.2f}"


# --- plots ---------------------------------------------------------------------------------------


def plots(doc: dict[str, Any], img_dir: str, fmt: str = "svg") -> list[str]:
    """The plots of ``doc`` in ``img_dir`` (SVG, or ``fmt``); their paths."""
    import matplotlib

    matplotlib.use("agg")
    import matplotlib.pyplot as plt

    # the same figures give the same file: no date, fixed ids
    plt.rcParams["svg.hashsalt"] = "ziggurat-scale"
    plt.rcParams["svg.fonttype"] = "none"
    os.makedirs(img_dir, exist_ok=True)
    pages = [f["label"] for f in doc["meta"]["filesystems"]]
    sizes = sorted({r["size"] for r in ok_rows(doc)})
    style = {
        (ZIG, HUGE): ("tab:blue", "-", "o"),
        (ZIG, NO_HUGE): ("tab:blue", "--", "s"),
        (LMDB, HUGE): ("tab:orange", "-", "o"),
        (LMDB, NO_HUGE): ("tab:orange", "--", "s"),
    }

    def series(
        b: str, p: str, f: Callable[[dict[str, Any]], float]
    ) -> tuple[list[int], list[float]]:
        xs, ys = [], []
        for s in sizes:
            r = find(doc, s, p, b)
            if r is not None and "error" not in r:
                xs.append(s // MiB)
                ys.append(f(r))
        return xs, ys

    def axes(title: str, ylabel: str) -> Any:
        fig, ax = plt.subplots(figsize=(9, 4.2))
        ax.set_xscale("log", base=2)
        ax.set_xticks([s // MiB for s in sizes], [fmt_size(s) for s in sizes])
        ax.minorticks_off()
        ax.set_xlabel("segment size (lmdb: same entries)")
        ax.set_ylabel(ylabel)
        ax.set_title(title)
        ax.grid(True, alpha=0.3)
        return fig, ax

    def save(fig: Any, ax: Any, name: str, log: bool = False) -> str:
        ax.legend(fontsize=8, loc="upper left", bbox_to_anchor=(1.02, 1.0))
        if log:
            # creation and attach differ by orders of magnitude
            ax.set_yscale("log")
        else:
            ax.set_ylim(bottom=0)
        fig.tight_layout()
        path = os.path.join(img_dir, name.replace(".svg", "." + fmt))
        fig.savefig(path, format=fmt, metadata={"Date": None} if fmt == "svg" else None)
        plt.close(fig)
        return path

    paths = []
    label = {ZIG: "ziggurat", LMDB: "lmdb"}
    fig, ax = axes("Random get (90-byte values)", "ns of CPU time per get (median)")
    for b in BACKENDS:
        for p in pages:
            c, ls, mk = style[(b, p)]
            ax.plot(
                *series(b, p, lambda r: med(r, "get_ns")),
                c,
                ls=ls,
                marker=mk,
                label=f"{label[b]}, {p}",
            )
    paths.append(save(fig, ax, "scale-get.svg"))

    fig, ax = axes("Set (90-byte values)", "ns of CPU time per set (median)")
    for b in BACKENDS:
        for p in pages:
            c, ls, mk = style[(b, p)]
            ax.plot(
                *series(b, p, lambda r: med(r, "set_overwrite_ns")),
                c,
                ls=ls,
                marker=mk,
                label=f"{label[b]}, {p}, overwrite",
            )
            ax.plot(
                *series(b, p, lambda r: med(r, "set_new_ns")),
                c,
                ls=ls,
                marker="x",
                alpha=0.6,
                label=f"{label[b]}, {p}, new key",
            )
    paths.append(save(fig, ax, "scale-set.svg"))

    fig, ax = axes("Memory per entry (11-byte keys, 90-byte values)", "bytes per entry")
    for b in BACKENDS:
        for p in pages:
            c, ls, mk = style[(b, p)]
            ax.plot(
                *series(b, p, lambda r: r["file_bytes"] / r["entries"]),
                c,
                ls=ls,
                marker=mk,
                label=f"{label[b]}, {p}, file / entries",
            )
    for p in pages:
        c, ls, _mk = style[(ZIG, p)]
        ax.plot(
            *series(ZIG, p, lambda r: r["rss_delta"] / r["entries"]),
            "tab:green",
            ls=":" if p == HUGE else "-.",
            marker="^",
            label=f"ziggurat, {p}, RSS growth / entries",
        )
    paths.append(save(fig, ax, "scale-memory.svg"))

    fig, ax = axes("Opening a store", "ms (log scale)")
    for b in BACKENDS:
        for p in pages:
            c, ls, mk = style[(b, p)]
            ax.plot(
                *series(b, p, lambda r: r["create_s"] * 1e3),
                c,
                ls=ls,
                marker=mk,
                label=f"{label[b]}, {p}, create",
            )
            ax.plot(
                *series(b, p, lambda r: r["attach_s"] * 1e3),
                c,
                ls=ls,
                marker="x",
                alpha=0.6,
                label=f"{label[b]}, {p}, attach (second process)",
            )
    paths.append(save(fig, ax, "scale-open.svg", log=True))
    return paths


# --- the page ------------------------------------------------------------------------------------


def splice(report: str, doc_goals: list[dict[str, Any]], path: str = DOC) -> None:
    """Puts ``report`` in place of this section of docs/benchmarks.md (new: before the A/B
    section, else before the software versions), and this benchmark's rows of the page's
    Goals table in place of the old ones."""
    with open(path) as f:
        page = f.read()
    start = page.find(TITLE)
    if start >= 0:
        nxt = page.find("\n## ", start + len(TITLE))
        end = len(page) if nxt < 0 else nxt + 1
    else:
        end = -1
        for anchor in ("## Hot paths of two builds (A/B)", "## Software versions"):
            end = page.find(anchor)
            if end >= 0:
                break
        if end < 0:
            end = len(page)
        start = end
    page = page[:start] + report.rstrip() + "\n\n" + page[end:]
    # the Goals table: drop this benchmark's rows, append the new ones at its end
    lines = page.split("\n")
    try:
        g = lines.index("## Goals")
    except ValueError:
        g = -1
    if g >= 0:
        i = g + 1
        while i < len(lines) and not lines[i].startswith("|"):
            i += 1
        j = i
        while j < len(lines) and lines[j].startswith("|"):
            j += 1
        table = [x for x in lines[i:j] if not x.startswith("| " + GOAL_PREFIX)]
        table += goal_rows(doc_goals)
        lines[i:j] = table
        page = "\n".join(lines)
    with open(path, "w") as f:
        f.write(page)


def goal_rows(doc_goals: list[dict[str, Any]]) -> list[str]:
    return [
        f"| {x['measure']} | {x['value']} | {x['goal']} | {status(x['ok'])} |" for x in doc_goals
    ]


def command_line(argv: Sequence[str]) -> str:
    rel = os.path.relpath(sys.executable, ROOT)
    py = rel if not rel.startswith("..") else "python"
    return " ".join([py, "bench/bench_scale.py", *argv])


def write_outputs(doc: dict[str, Any], quick: bool) -> tuple[str, str]:
    """bench/scale.json and bench/scale.md (a quick run: under bench/results/), and the plots
    (docs/img/; a quick run: bench/results/img/). Returns (json path, report path)."""
    if quick:
        os.makedirs(RESULTS, exist_ok=True)
        jpath = os.path.join(RESULTS, "scale-quick.json")
        mpath = os.path.join(RESULTS, "scale-quick.md")
        img, prefix = os.path.join(RESULTS, "img"), "img/"
    else:
        jpath, mpath, img, prefix = JSON_PATH, REPORT_PATH, IMG, "img/"
    with open(jpath, "w") as f:
        json.dump(doc, f, indent=1, default=str)
    if any(True for _ in ok_rows(doc)):
        plots(doc, img)
    with open(mpath, "w") as f:
        f.write(render(doc, doc["command"], prefix) + "\n")
    return jpath, mpath


def load() -> dict[str, Any] | None:
    """The last full run (bench/scale.json), or None."""
    try:
        with open(JSON_PATH) as f:
            return json.load(f)  # type: ignore[no-any-return]
    except (OSError, ValueError):
        return None


def report_text() -> str | None:
    """The last full run's section (bench/scale.md), as ``bench/run.py`` puts it in the page."""
    try:
        with open(REPORT_PATH) as f:
            return f.read().rstrip()
    except OSError:
        return None


# --- bench/run.py's entry -----------------------------------------------------------------------


def bench_scale(ctx: Any) -> Any:
    """``bench/run.py``'s ``scale``: the sizes of a full (or quick) run; a Section whose
    Markdown is the report."""
    import bench_segment as bs

    quick = bool(ctx.settings.quick)
    argv = ["--quick"] if quick else []
    doc = measure(argv)
    write_outputs(doc, quick)
    g = goals(doc)
    return bs.Section(
        "scale",
        TITLE[3:],
        render(doc, doc["command"], title=False),
        {"json": os.path.relpath(JSON_PATH, ROOT)},
        [bs.Goal(x["measure"], x["value"], x["goal"], x["ok"]) for x in g],
    )


BENCHMARKS: dict[str, Callable[[Any], Any]] = {"scale": bench_scale}


def parse(argv: Sequence[str]) -> argparse.Namespace:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawTextHelpFormatter)
    p.add_argument(
        "--sizes",
        default="",
        help=f"comma-separated sizes (default {SIZES}; --quick: {QUICK_SIZES})",
    )
    p.add_argument("--quick", action="store_true", help="64M and 256M, 3 reps, fewer keys")
    p.add_argument("--reps", type=int, default=0, help="reps per figure (default 5, quick 3)")
    p.add_argument("--dir", default=None, help="measure this directory only (no mounts)")
    p.add_argument("--no-doc", action="store_true", help="write bench/scale.json and plots only")
    a = p.parse_args(argv)
    text = a.sizes or (QUICK_SIZES if a.quick else SIZES)
    a.size_list = sorted({parse_size(x) for x in text.split(",") if x.strip()})
    if not a.size_list or min(a.size_list) < MiB:
        p.error("--sizes: give sizes of 1M or more, e.g. --sizes 64M,256M,1G")
    if a.dir is not None and not os.path.isdir(a.dir):
        p.error(f"--dir: {a.dir!r} is not a directory")
    a.reps = a.reps or (3 if a.quick else 5)
    return a


def measure(argv: Sequence[str], doc: dict[str, Any] | None = None) -> dict[str, Any]:
    """Run the benchmark as ``argv`` asks, into ``doc`` (a new dict if None)."""
    a = parse(argv)
    try:
        import lmdb  # noqa: F401  (the peer every figure is compared with)
    except ImportError:
        # Without the peer the page would get a table with no ratio in it.
        raise SystemExit(
            "bench/bench_scale.py: the peer lmdb is not installed; "
            "pip install -r requirements-bench.txt (make bench-scale does)"
        ) from None
    doc = {} if doc is None else doc
    doc["command"] = command_line(list(argv))
    partial_path = os.path.join(RESULTS, "scale-partial.json")
    os.makedirs(RESULTS, exist_ok=True)

    def progress(doc: dict[str, Any]) -> None:
        # kept after each store, so that a run cut short still leaves its figures
        with open(partial_path, "w") as f:
            json.dump(doc, f, indent=1, default=str)

    run_scale(
        doc,
        a.size_list,
        reps=a.reps,
        sample_n=QUICK_SAMPLE if a.quick else SAMPLE,
        directory=a.dir,
        progress=progress,
    )
    return doc


def _raise_exit(signum: int, _frame: Any) -> None:
    raise SystemExit(128 + signum)


def main(argv: Sequence[str]) -> int:
    a = parse(argv)
    signal.signal(signal.SIGTERM, _raise_exit)  # unmount on the way out
    doc: dict[str, Any] = {}
    try:
        measure(argv, doc)
    except (KeyboardInterrupt, SystemExit):
        # a run cut short: what it measured is written, labelled partial
        if doc.get("results"):
            write_outputs(doc, a.quick)
            if not a.quick and not a.no_doc:
                with open(REPORT_PATH) as f:
                    splice(f.read(), goals(doc))
        raise
    jpath, mpath = write_outputs(doc, a.quick)
    print(
        f"[scale] {os.path.relpath(jpath, ROOT)}, {os.path.relpath(mpath, ROOT)}", file=sys.stderr
    )
    if not a.quick and not a.no_doc:
        with open(mpath) as f:
            splice(f.read(), goals(doc))
        print(f"[scale] section of {os.path.relpath(DOC, ROOT)} rewritten", file=sys.stderr)
    for g in goals(doc):
        print(
            f"[scale] {g['measure']}: {g['value']} ({g['goal']}): {status(g['ok'])}",
            file=sys.stderr,
        )
    return 0 if all("error" not in r for r in doc["results"]) else 1


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
