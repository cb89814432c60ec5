"""Timing helpers shared by the benchmarks.

Every figure is a median over repetitions that are interleaved round-robin across the
cases of one table, so that drift on a noisy machine hits every case alike. Each
repetition runs a loop whose count was calibrated beforehand to take about
``Settings.rep_seconds``. The garbage collector is off while a loop runs.
"""

from __future__ import annotations

import gc
import os
import platform
import statistics
import time
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass, field
from typing import Any

perf_counter_ns = time.perf_counter_ns


@dataclass
class Settings:
    """How long and how often to measure."""

    reps: int = 7
    rep_seconds: float = 0.3
    quick: bool = False
    # first-read benchmark: reads per repetition and per backend
    first_read_iters: int = 1000
    # throughput benchmark: seconds per repetition
    mix_seconds: float = 0.6
    # miss-ratio benchmark: requests per trace
    trace_requests: int = 2_000_000
    # memory benchmark: entries written
    memory_entries: int = 1_000_000
    # goals that compare two cases closely: short alternating rounds (see ``alternate``)
    pair_rounds: int = 41
    pair_seconds: float = 0.05

    @classmethod
    def make(cls, quick: bool) -> Settings:
        if quick:
            return cls(
                reps=3,
                rep_seconds=0.04,
                quick=True,
                first_read_iters=200,
                mix_seconds=0.15,
                trace_requests=300_000,
                memory_entries=1_000_000,
                pair_rounds=7,
                pair_seconds=0.01,
            )
        return cls()


class GcOff:
    """Context manager: collect, then keep the garbage collector off."""

    def __enter__(self) -> None:
        self._was = gc.isenabled()
        gc.collect()
        gc.disable()

    def __exit__(self, *exc: object) -> None:
        if self._was:
            gc.enable()


# --- loop shapes --------------------------------------------------------------------------
# Each returns the elapsed nanoseconds of ``loops`` passes over ``args``. They are kept
# tiny and alike so that the loop overhead is the same for every backend of a table.


def loop_call(f: Callable[[Any], Any], args: Sequence[Any], loops: int) -> int:
    with GcOff():
        t0 = perf_counter_ns()
        for _ in range(loops):
            for a in args:
                f(a)
        return perf_counter_ns() - t0


def loop_call_decode(
    f: Callable[[Any], Any], decode: Callable[[Any], Any], args: Sequence[Any], loops: int
) -> int:
    with GcOff():
        t0 = perf_counter_ns()
        for _ in range(loops):
            for a in args:
                decode(f(a))
        return perf_counter_ns() - t0


def loop_set(f: Callable[[Any, Any], Any], args: Sequence[Any], value: Any, loops: int) -> int:
    with GcOff():
        t0 = perf_counter_ns()
        for _ in range(loops):
            for a in args:
                f(a, value)
        return perf_counter_ns() - t0


def loop_set_encode(
    f: Callable[[Any, Any], Any],
    encode: Callable[[Any], Any],
    args: Sequence[Any],
    value: Any,
    loops: int,
) -> int:
    with GcOff():
        t0 = perf_counter_ns()
        for _ in range(loops):
            for a in args:
                f(a, encode(value))
        return perf_counter_ns() - t0


def loop_call0(f: Callable[[], Any], args: Sequence[Any], loops: int) -> int:
    """``f()`` once per item of ``args``: the same loop as ``loop_call`` without the argument."""
    with GcOff():
        t0 = perf_counter_ns()
        for _ in range(loops):
            for _a in args:
                f()
        return perf_counter_ns() - t0


def loop_mix(
    get: Callable[[Any], Any],
    set_: Callable[[Any, Any], Any],
    ops: Sequence[tuple[Any, bool]],
    value: Any,
    loops: int,
) -> int:
    """A precomputed list of (key, is_set): ``set_(key, value)`` or ``get(key)``."""
    with GcOff():
        t0 = perf_counter_ns()
        for _ in range(loops):
            for k, w in ops:
                if w:
                    set_(k, value)
                else:
                    get(k)
        return perf_counter_ns() - t0


def loop_mix_codec(
    get: Callable[[Any], Any],
    set_: Callable[[Any, Any], Any],
    loads: Callable[[Any], Any],
    dumps: Callable[[Any], Any],
    ops: Sequence[tuple[Any, bool]],
    value: Any,
    loops: int,
) -> int:
    """``loop_mix`` for a store of bytes: ``set_(key, dumps(value))``, ``loads(get(key))``."""
    with GcOff():
        t0 = perf_counter_ns()
        for _ in range(loops):
            for k, w in ops:
                if w:
                    set_(k, dumps(value))
                else:
                    loads(get(k))
        return perf_counter_ns() - t0


# --- cases and interleaving ---------------------------------------------------------------


@dataclass
class Case:
    """One row of a latency table: ``run(loops)`` returns elapsed ns for ``loops * ops`` ops."""

    name: str
    run: Callable[[int], int]
    ops: int
    loops: int = 1
    samples: list[float] = field(default_factory=list)  # ns per op, one per repetition
    note: str = ""

    def calibrate(self, seconds: float) -> None:
        """Pick ``loops`` so that one repetition takes about ``seconds`` (also warms up)."""
        loops = 1
        while True:
            ns = self.run(loops)
            if ns >= 20_000_000 or loops >= 1 << 24:
                break
            loops *= 4 if ns < 5_000_000 else 2
        per_loop = ns / loops
        self.loops = max(1, round(seconds * 1e9 / per_loop))


def interleave(cases: Sequence[Case], settings: Settings) -> None:
    """Calibrate every case, then run ``settings.reps`` rounds, one rep of each case per round.

    The order rotates from round to round so no case always runs first or last.
    """
    for c in cases:
        c.calibrate(settings.rep_seconds)
    n = len(cases)
    for r in range(settings.reps):
        for i in range(n):
            c = cases[(i + r) % n]
            ns = c.run(c.loops)
            c.samples.append(ns / (c.loops * c.ops))


def alternate(a: Case, b: Case, settings: Settings) -> list[tuple[float, float]]:
    """``settings.pair_rounds`` short reps of ``a`` and ``b`` back to back (which runs first
    alternates): ns per op of each, round by round.

    For a goal that compares two cases closely (a difference of a few tenths of either), the
    pair of reps must see the same machine. ``interleave`` runs a whole table between two
    reps of a case, so a pair may straddle a change of the machine's speed (this one has
    noisy neighbours whose load comes and goes over seconds). Here a round takes twice
    ``settings.pair_seconds``, and the median over many rounds leaves out the few that
    straddle one. The reps' ``loops`` are calibrated again to ``pair_seconds``;
    ``a.samples`` and ``b.samples`` are left as they were.
    """
    a.calibrate(settings.pair_seconds)
    b.calibrate(settings.pair_seconds)
    out = []
    for r in range(settings.pair_rounds):
        pair = {}
        for c in (a, b) if r % 2 == 0 else (b, a):
            pair[c.name] = c.run(c.loops) / (c.loops * c.ops)
        out.append((pair[a.name], pair[b.name]))
    return out


def paired(
    xs: Sequence[float],
    ys: Sequence[float],
    f: Callable[[float, float], float] = lambda x, y: x / y,
) -> float:
    """Median over rounds of ``f(x, y)``, pairing the reps of one round.

    With ``interleave``, the reps of one round ran close in time (cases next to each other
    in the list run one after the other), so a drift of the machine's speed that lasts longer
    than a round cancels out of the per-round ratio or difference.
    """
    return median(f(x, y) for x, y in zip(xs, ys, strict=True))


def rotate(items: Sequence[Any], r: int) -> list[Any]:
    """``items`` rotated left by ``r`` (round-robin order for repetition ``r``)."""
    if not items:
        return []
    r %= len(items)
    return list(items[r:]) + list(items[:r])


# --- statistics and formatting ------------------------------------------------------------


def median(xs: Iterable[float]) -> float:
    return float(statistics.median(list(xs)))


def summary(samples: Sequence[float]) -> dict[str, float]:
    return {
        "median": median(samples),
        "min": float(min(samples)),
        "max": float(max(samples)),
        "n": len(samples),
    }


def timer_floor_ns(n: int = 20_000) -> float:
    """Median cost of two back-to-back ``perf_counter_ns`` calls (subtracted from single shots)."""
    pc = perf_counter_ns
    xs = []
    with GcOff():
        for _ in range(n):
            t0 = pc()
            t1 = pc()
            xs.append(t1 - t0)
    return median(xs)


def fmt_ns(ns: float | None) -> str:
    if ns is None:
        return "—"
    if ns < 1_000:
        return f"{ns:.0f} ns"
    if ns < 10_000:
        return f"{ns / 1e3:.2f} µs"
    if ns < 1_000_000:
        return f"{ns / 1e3:.1f} µs"
    return f"{ns / 1e6:.2f} ms"


def fmt_spread(s: dict[str, float] | None) -> str:
    if not s:
        return "—"
    return f"{fmt_ns(s['min'])}–{fmt_ns(s['max'])}"


def fmt_ratio(x: float | None) -> str:
    if x is None:
        return "—"
    if x >= 100:
        return f"×{x:,.0f}"
    if x >= 10:
        return f"×{x:.1f}"
    return f"×{x:.2f}"


def fmt_int(x: float | None) -> str:
    return "—" if x is None else f"{x:,.0f}"


def md_table(header: Sequence[str], rows: Iterable[Sequence[Any]], align: str = "") -> str:
    """A Markdown table; ``align`` holds one of 'l'/'r' per column (default: first l, rest r)."""
    header = list(header)
    if not align:
        align = "l" + "r" * (len(header) - 1)
    lines = ["| " + " | ".join(header) + " |"]
    lines.append("|" + "|".join("---:" if a == "r" else "---" for a in align) + "|")
    for row in rows:
        lines.append("| " + " | ".join(str(x) for x in row) + " |")
    return "\n".join(lines)


# --- machine facts ------------------------------------------------------------------------


def cpu_model() -> str:
    try:
        with open("/proc/cpuinfo") as f:
            for line in f:
                if line.startswith("model name"):
                    return line.split(":", 1)[1].strip()
    except OSError:
        pass
    return platform.processor() or "unknown"


def machine_facts() -> dict[str, Any]:
    try:
        usable = len(os.sched_getaffinity(0))
    except AttributeError:
        usable = os.cpu_count() or 0
    mem = ""
    try:
        with open("/proc/meminfo") as f:
            for line in f:
                if line.startswith("MemTotal"):
                    mem = f"{int(line.split()[1]) / 2**20:.1f} GiB"
                    break
    except OSError:
        pass
    return {
        "nproc": usable,
        "cpu": cpu_model(),
        "memory": mem,
        "python": platform.python_version(),
        "implementation": platform.python_implementation(),
        "kernel": platform.release(),
        "system": platform.system(),
    }
