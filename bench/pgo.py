"""The profile-guided build of the extension (``make build``, ``make wheel``).

A release build compiles every branch as if all were equally likely. This one is built
three times over, so that the code a cache runs on every call is laid out and inlined for
that use::

    python bench/pgo.py develop          # as `maturin develop --release --features failpoints`
    python bench/pgo.py wheel ARGS...    # as `maturin build --release ARGS...`

1. An instrumented build (``-Cprofile-generate``) in ``target/pgo/instrumented``.
2. The workload below (``train``) runs in a child process against that build: the
   Cache's common calls, each many times (L1 and L2 hits, misses, ``fetch``, writes,
   counters, tags, namespaces, the async methods), so that the build counts which
   branches and calls are hot.
3. ``llvm-profdata`` merges the counts, and the release build in ``target/pgo/optimized``
   reads them (``-Cprofile-use``).

The workload is not the benchmark: it calls the public API the way an application does,
on its own keys and values. What it changes is measured in docs/packaging.md.
``llvm-profdata`` must come from the LLVM that rustc uses (``rustup component add
llvm-tools``); without it this prints why and makes a plain release build.

Example::

    $ .venv/bin/python bench/pgo.py develop
    pgo: instrumented build
    pgo: trained (1 profiles)
    pgo: optimized build
"""

from __future__ import annotations

import asyncio
import hashlib
import os
import shutil
import subprocess
import sys
import tempfile
import zipfile
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parent.parent
PGO = ROOT / "target" / "pgo"
BIN = Path(sys.executable).parent


def say(msg: str) -> None:
    print(f"pgo: {msg}", flush=True)


def profdata_tool() -> Path | None:
    """The ``llvm-profdata`` of rustc's own LLVM (another version cannot read its counts)."""
    try:
        sysroot = subprocess.run(
            ["rustc", "--print", "sysroot"], capture_output=True, text=True, check=True
        ).stdout.strip()
        info = subprocess.run(["rustc", "-vV"], capture_output=True, text=True, check=True).stdout
    except (OSError, subprocess.CalledProcessError):
        return None
    host = next(
        (x.split(":", 1)[1].strip() for x in info.splitlines() if x.startswith("host:")), ""
    )
    tool = Path(sysroot) / "lib" / "rustlib" / host / "bin" / "llvm-profdata"
    return tool if tool.is_file() else None


def maturin_env(target_dir: Path | None, flags: str | None) -> dict[str, str]:
    """The environment `make` gives maturin (the venv first on PATH), with rustc's flags."""
    env = dict(os.environ)
    env["VIRTUAL_ENV"] = str(BIN.parent)
    env["PATH"] = f"{BIN}{os.pathsep}{env.get('PATH', '')}"
    if target_dir is not None:
        env["CARGO_TARGET_DIR"] = str(target_dir)
    if flags:
        env["RUSTFLAGS"] = f"{env.get('RUSTFLAGS', '')} {flags}".strip()
    return env


def maturin(args: list[str], env: dict[str, str]) -> None:
    subprocess.run([str(BIN / "maturin"), *args], cwd=ROOT, env=env, check=True)


def instrumented_package(wheel_args: list[str], profiles: Path, into: Path) -> None:
    """Builds the instrumented extension and puts it, with the package's Python files, in
    ``into/ziggurat``."""
    out = PGO / "instrumented" / "wheels"
    shutil.rmtree(out, ignore_errors=True)
    env = maturin_env(PGO / "instrumented", f"-Cprofile-generate={profiles}")
    maturin(["build", "--release", "-q", *wheel_args, "-o", str(out)], env)
    # The build's own instrumented programs (build scripts, proc macros) wrote counts
    # there too: only the workload's count.
    shutil.rmtree(profiles, ignore_errors=True)
    profiles.mkdir(parents=True)
    pkg = into / "ziggurat"
    shutil.copytree(
        ROOT / "python" / "ziggurat", pkg, ignore=shutil.ignore_patterns("*.so", "__pycache__")
    )
    (wheel,) = out.glob("*.whl")
    with zipfile.ZipFile(wheel) as z:
        (name,) = [
            n for n in z.namelist() if n.startswith("ziggurat/_native") and n.endswith(".so")
        ]
        (pkg / Path(name).name).write_bytes(z.read(name))


def profile(wheel_args: list[str]) -> Path | None:
    """Steps 1 and 2, then the merge: the profile to build with, or None (no tool)."""
    tool = profdata_tool()
    if tool is None:
        say(
            "llvm-profdata of rustc's LLVM not found (rustup component add llvm-tools): "
            "plain release build"
        )
        return None
    profiles = PGO / "profiles"
    merged = PGO / "merged.profdata"
    say("instrumented build")
    with tempfile.TemporaryDirectory(prefix="ziggurat-pgo-") as tmp:
        instrumented_package(wheel_args, profiles, Path(tmp))
        env = dict(os.environ)
        env["PYTHONPATH"] = tmp
        env["LLVM_PROFILE_FILE"] = str(profiles / "%m-%p.profraw")
        subprocess.run([sys.executable, __file__, "train", tmp], env=env, check=True)
    raw = sorted(profiles.glob("*.profraw"))
    if not raw:
        raise SystemExit("pgo: the workload wrote no profile")
    subprocess.run([str(tool), "merge", "-o", str(merged), *map(str, raw)], check=True)
    # Named by its content: rustc's flags name the file, and cargo rebuilds when they
    # change, not when the file does (a crate left as it was would keep an old profile).
    digest = hashlib.sha256(merged.read_bytes()).hexdigest()[:16]
    for old in PGO.glob("profile-*.profdata"):
        old.unlink()
    named = merged.rename(PGO / f"profile-{digest}.profdata")
    say(f"trained ({len(raw)} profiles)")
    return named


def without_out(args: list[str]) -> list[str]:
    """maturin's arguments minus the output directory (the instrumented wheel has its own)."""
    kept: list[str] = []
    skip = False
    for a in args:
        if skip:
            skip = False
        elif a in ("-o", "--out"):
            skip = True
        elif not a.startswith("--out="):
            kept.append(a)
    return kept


#: The development build carries the tests' crash-injection hook (``Segment._crash_at``);
#: the wheel does not.
DEVELOP_FEATURES = ["--features", "failpoints"]


def build(mode: str, args: list[str]) -> None:
    wheel_args = without_out(args) if mode == "wheel" else DEVELOP_FEATURES
    merged = profile(wheel_args)
    flags = None if merged is None else f"-Cprofile-use={merged}"
    target = None if merged is None else PGO / "optimized"
    env = maturin_env(target, flags)
    if merged is not None:
        env["ZIGGURAT_BUILD"] = "pgo"  # ziggurat._native.BUILD
    say("optimized build" if merged else "release build")
    if mode == "develop":
        maturin(["develop", "--release", "-q", *DEVELOP_FEATURES], env)
    else:
        maturin(["build", "--release", *args], env)


# --- the workload ---------------------------------------------------------------------------


def record(i: int) -> dict[str, Any]:
    return {"id": i, "name": f"user {i}", "email": f"u{i}@example.org", "active": i % 3 > 0}


def train(where: str) -> None:
    """The Cache's common calls, against the instrumented build found first on the path."""
    import ziggurat

    if not ziggurat.__file__ or not ziggurat.__file__.startswith(where):
        raise SystemExit(f"pgo: trained the wrong build ({ziggurat.__file__})")
    with tempfile.TemporaryDirectory(prefix="ziggurat-pgo-", dir="/dev/shm") as d:
        for serializer in ("auto", "pickle"):
            with (
                ziggurat.Cache("app", directory=d, serializer=serializer) as a,
                ziggurat.Cache("app", directory=d, serializer=serializer, l1_items=0) as b,
            ):
                rounds(a, b)
        with ziggurat.Cache("async", directory=d) as c:
            asyncio.run(async_rounds(c))


def rounds(a: Any, b: Any) -> None:
    """`a` keeps an L1 (every process by default), `b` none: its reads go to L2."""
    keys = [f"user:{i}" for i in range(2000)]
    bkeys = [k.encode() for k in keys[:200]]
    for r in range(6):
        for i, k in enumerate(keys):
            a.set(k, record(i), ttl=60, tags=("users",) if i % 8 == 0 else ())
        for _ in range(5):
            for k in keys:
                a.get(k)
                b.get(k)
        for k in bkeys:
            b.set(k, b"payload" * 4)
            a.get(k)
        for i, k in enumerate(keys[:500]):
            b.set(k, record(-i))  # a's L1 copies go stale: a reads L2 again
            a.get(k)
        for i in range(3000):
            k = f"page:{r}:{i}"
            a.get(k, None)
            a.fetch(k, lambda i=i: record(i))
            a.fetch(k, lambda: None)
            b.fetch(f"{k}:b", lambda i=i: record(i))
            a.fetch(f"gone:{r}:{i}", lambda: None)
            a.get(f"gone:{r}:{i}")
            if i % 4 == 0:
                a.delete(k)
        a.set("hits", 0)
        for i in range(3000):
            # Counters are a call of every request (rate limits, views): as hot as a get.
            a.incr("hits")
            a.incr(f"views:{i % 50}", 2, default=0)
        for i in range(300):
            a.decr(f"stock:{i % 20}", default=100)
            a.add(f"lock:{r}:{i}", 1, ttl=5)
            a.touch(f"page:{r}:{i}", 120)
            _ = f"page:{r}:{i}" in a
        a.set_many({f"bulk:{i}": record(i) for i in range(100)})
        a.get_many([f"bulk:{i}" for i in range(100)])
        a.delete_many([f"bulk:{i}" for i in range(50)])
        a.invalidate_tags("users")
        ns = a.namespace(f"tenant{r % 2}")
        for i in range(200):
            ns.set(f"k{i}", i)
            ns.get(f"k{i}")
        a.stats()


async def async_rounds(c: Any) -> None:
    async def load(i: int) -> dict[str, Any]:
        return record(i)

    for r in range(3):
        for i in range(500):
            k = f"a:{r}:{i}"
            await c.aget(k)
            await c.afetch(k, lambda i=i: load(i))
            await c.afetch(k, lambda i=i: load(i))
            await c.aset(f"{k}:s", record(i))
        await c.aget_many([f"a:{r}:{i}" for i in range(100)])


def main(argv: list[str]) -> None:
    if len(argv) >= 2 and argv[0] == "train":
        train(argv[1])
    elif argv[:1] in (["develop"], ["wheel"]):
        build(argv[0], argv[1:])
    else:
        raise SystemExit(__doc__)


if __name__ == "__main__":
    main(sys.argv[1:])
