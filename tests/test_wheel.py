"""The package as users get it: the wheel and the sdist that `make wheel` and `make sdist` build.

The wheel is built by the command of `make wheel` (the profile-guided build of bench/pgo.py),
into a temporary directory. The wheel is installed by pip into fresh virtualenvs whose
PATH has no Rust toolchain, and exercised from a directory outside the source tree: two
processes share one cache through it. The sdist is checked for the crates it must carry and
built back into a wheel.
"""

from __future__ import annotations

import functools
import json
import os
import platform
import re
import shutil
import subprocess
import sys
import tarfile
import time
import zipfile
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent
# maturin and auditwheel come with the test environment (requirements-dev.txt).
TOOLS = Path(sys.executable).parent
ARCH = platform.machine()
# The tag `make wheel` asks maturin for: the glibc floor docs/packaging.md states.
TAG_GLIBC = (2, 34)
BUILD_TIMEOUT = 1800
MANYLINUX = ("--compatibility", "manylinux_2_34")

pytestmark = [pytest.mark.wheel, pytest.mark.timeout(BUILD_TIMEOUT + 600)]


def run(
    args: list[str | Path], *, cwd: Path, env: dict[str, str] | None = None, timeout: float = 300
) -> str:
    """Runs a command; on failure the assertion shows what it printed."""
    proc = subprocess.run(
        [str(a) for a in args],
        cwd=cwd,
        env=env,
        capture_output=True,
        text=True,
        timeout=timeout,
        check=False,
    )
    assert proc.returncode == 0, (
        f"{' '.join(map(str, args))} exited {proc.returncode}\n{proc.stdout}\n{proc.stderr}"
    )
    return proc.stdout + proc.stderr


def env_without_rust() -> dict[str, str]:
    """The environment of a user who has Python only: no cargo or rustc on PATH.

    PYTHONPATH and VIRTUAL_ENV go too, so nothing from the source tree or the test
    environment can be imported by accident.
    """
    env = {
        k: v
        for k, v in os.environ.items()
        if k not in ("PYTHONPATH", "PYTHONHOME", "VIRTUAL_ENV") and not k.startswith("PIP_")
    }
    dirs = [
        d
        for d in env.get("PATH", "").split(os.pathsep)
        if d and not any(os.path.exists(os.path.join(d, tool)) for tool in ("cargo", "rustc"))
    ]
    env["PATH"] = os.pathsep.join(dirs)
    env["PIP_DISABLE_PIP_VERSION_CHECK"] = "1"
    assert shutil.which("cargo", path=env["PATH"]) is None
    assert shutil.which("rustc", path=env["PATH"]) is None
    return env


def python_version(exe: str) -> tuple[int, int] | None:
    """(major, minor) of an interpreter, or None when it does not run (a dangling shim)."""
    try:
        proc = subprocess.run(
            [exe, "-c", "import sys; print(*sys.version_info[:2])"],
            capture_output=True,
            text=True,
            timeout=30,
            check=False,
        )
    except OSError:
        return None
    if proc.returncode != 0:
        return None
    major, minor = proc.stdout.split()
    return int(major), int(minor)


@functools.cache
def interpreters() -> dict[str, str]:
    """The interpreters the wheel is installed into, by version.

    The one running the tests, and the oldest and newest CPython 3.10+ found on PATH: the
    same abi3 wheel must load in each.
    """
    found = {f"{v[0]}.{v[1]}": sys.executable for v in [sys.version_info[:2]]}
    others: dict[tuple[int, int], str] = {}
    for minor in range(10, 15):
        exe = shutil.which(f"python3.{minor}")
        version = python_version(exe) if exe else None
        if exe and version == (3, minor):
            others[version] = exe
    for v in sorted(others)[:1] + sorted(others)[-1:]:
        found.setdefault(f"{v[0]}.{v[1]}", others[v])
    return found


def wheel_tag(wheel: Path) -> str:
    """The platform tag in a wheel's file name."""
    return wheel.name.removesuffix(".whl").split("-")[-1]


@functools.cache
def wheel_build(out: Path) -> tuple[Path, str]:
    """The wheel built into `out` by the command of `make wheel`, and what the build said."""
    start = time.monotonic()
    make_wheel = [sys.executable, ROOT / "bench" / "pgo.py", "wheel", "--features", "abi3"]
    said = run([*make_wheel, *MANYLINUX, "-o", out], cwd=ROOT, timeout=BUILD_TIMEOUT)
    print(f"wheel built in {time.monotonic() - start:.1f}s")
    (built,) = out.glob("*.whl")
    return built, said


@pytest.fixture(scope="module")
def wheel(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """The wheel, built by the command of `make wheel` (minus its output directory)."""
    return wheel_build(tmp_path_factory.mktemp("wheels"))[0]


@pytest.fixture(scope="module")
def sdist(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """The sdist, built by the command of `make sdist`."""
    out = tmp_path_factory.mktemp("sdist")
    run([TOOLS / "maturin", "sdist", "-o", out], cwd=ROOT)
    (built,) = out.glob("*.tar.gz")
    return built


def test_wheel_is_abi3_for_310_and_manylinux(wheel: Path) -> None:
    name = wheel.name.removesuffix(".whl").split("-")
    assert name[0] == "ziggurat"
    assert name[2:4] == ["cp310", "abi3"], wheel.name
    assert wheel_tag(wheel) == f"manylinux_{TAG_GLIBC[0]}_{TAG_GLIBC[1]}_{ARCH}"

    # auditwheel reads the symbol versions the library really needs: the tag it finds
    # must be no newer than the one on the wheel.
    shown = run([TOOLS / "auditwheel", "show", wheel], cwd=wheel.parent)
    found = re.search(r'platform tag:\s+"manylinux_(\d+)_(\d+)_(\w+)"', shown)
    assert found, shown
    assert found[3] == ARCH
    assert (int(found[1]), int(found[2])) <= TAG_GLIBC, shown


def test_wheel_holds_the_package_and_its_metadata(wheel: Path) -> None:
    with zipfile.ZipFile(wheel) as zf:
        names = set(zf.namelist())
        dist_info = next(n.split("/")[0] for n in names if ".dist-info/" in n)
        metadata = zf.read(f"{dist_info}/METADATA").decode()
        entry_points = zf.read(f"{dist_info}/entry_points.txt").decode()

    source = ROOT / "python"
    expected = {
        p.relative_to(source).as_posix()
        for p in (source / "ziggurat").rglob("*")
        if p.is_file() and p.suffix in (".py", ".pyi", ".typed")
    }
    package = {n for n in names if n.startswith("ziggurat/")}
    native = {n for n in package if n.endswith(".so")}
    # One extension, named for the stable ABI: no interpreter-specific build slipped in.
    assert native == {"ziggurat/_native.abi3.so"}
    assert package - native == expected

    assert "Requires-Python: >=3.10" in metadata
    assert re.search(r"^Requires-Dist: orjson>=3\.9$", metadata, re.M)
    extras = set(re.findall(r"^Provides-Extra: (\S+)$", metadata, re.M))
    assert extras == {
        "msgpack",
        "orjson",
        "django",
        "flask",
        "dogpile",
        "redis",
        "prometheus",
        "otel",
        "cli",
    }
    assert re.search(r"^ziggurat\s*=\s*ziggurat\.cli:main$", entry_points, re.M), entry_points
    assert re.search(
        r"^ziggurat\s*=\s*ziggurat\.contrib\.dogpile:ZigguratBackend$", entry_points, re.M
    )


# Run by the venv's interpreter from a directory outside the source tree. The child is
# forked before the parent writes, so it can only see the write through the shared segment.
SMOKE = r"""
import json, os, sys
import ziggurat
import ziggurat.http  # the response cache needs no extra
from ziggurat import Cache

directory = sys.argv[1]
loads = []

def load():
    loads.append(os.getpid())
    return {"loaded": True}

with Cache("wheel-smoke", size="4MiB", directory=directory) as cache:
    go_r, go_w = os.pipe()
    pid = os.fork()
    if pid == 0:
        os.close(go_w)
        os.read(go_r, 1)
        seen = cache.get("from-parent")
        fetched = cache.fetch("loaded-once", load)
        cache.set("from-child", {"pid": os.getpid()})
        ok = seen == {"n": 1} and fetched == {"loaded": True} and not loads
        os._exit(0 if ok else 1)
    os.close(go_r)
    cache.set("from-parent", {"n": 1})
    # hits and every other call (misses, keywords, bad input) take different ways in
    try:
        cache.get(["a list"])
        refused = ""
    except TypeError as e:
        refused = str(e)
    calls = [
        cache.get("from-parent", "d"),
        cache.get(key="from-parent"),
        cache.get("absent", 6),
        cache.get(key="absent", default=5),
        refused,
        cache.fetch(key="kw-fetch", loader=lambda: 7, ttl=5),
        cache.fetch("kw-fetch", lambda: 8),
    ]
    first = cache.fetch("loaded-once", load)
    # An application's serializer is called by the extension on every read below L1 and
    # every write (through PyObject_Vectorcall where the interpreter exports it, else a
    # tuple): values, and its errors, must come through either way.
    with Cache("wheel-pickle", size="4MiB", directory=directory, serializer="pickle",
               l1_items=0) as pc:
        pc.set("p", {"t": (1, 2), "s": {3}})
        pickled = pc.get("p") == {"t": (1, 2), "s": {3}} and pc.get("p") is not pc.get("p")
        try:
            pc.set("bad", lambda: 0)
            unpicklable = ""
        except TypeError as e:
            unpicklable = str(e)
    os.write(go_w, b"x")
    _, status = os.waitpid(pid, 0)
    print(json.dumps({
        "file": ziggurat.__file__,
        "native": ziggurat._native.__file__,
        "build": ziggurat._native.BUILD,
        "prefix": sys.prefix,
        "version": list(sys.version_info[:2]),
        "get": cache.get("from-parent"),
        "calls": calls,
        "fetch": first,
        "pickled": pickled,
        "unpicklable": unpicklable,
        "loads": len(loads),
        "child_exit": os.waitstatus_to_exitcode(status),
        "from_child": cache.get("from-child"),
        "child_pid": pid,
    }))
"""


@pytest.mark.parametrize("version", sorted(interpreters()))
def test_wheel_installs_and_runs_without_rust(
    wheel: Path, version: str, tmp_path: Path, shm_dir: str
) -> None:
    env = env_without_rust()
    venv = tmp_path / "venv"
    run([interpreters()[version], "-m", "venv", venv], cwd=tmp_path, env=env)
    python = venv / "bin" / "python"
    # Binary wheels only: pip has no toolchain to build anything with here.
    run(
        [python, "-m", "pip", "install", "-q", "--only-binary", ":all:", wheel],
        cwd=tmp_path,
        env=env,
    )
    script = tmp_path / "smoke.py"
    script.write_text(SMOKE)
    work = tmp_path / "elsewhere"
    work.mkdir()

    out = json.loads(run([python, script, shm_dir], cwd=work, env=env).splitlines()[-1])

    assert ".".join(map(str, out["version"])) == version
    assert Path(out["prefix"]).resolve() == venv.resolve()
    for key in ("file", "native"):
        installed = Path(out[key]).resolve()
        assert installed.is_relative_to(venv.resolve()), out[key]
        assert not installed.is_relative_to(ROOT), out[key]
    assert Path(out["native"]).name == "_native.abi3.so"
    # The profile-guided build when the toolchain has rustc's llvm-profdata, as CI installs.
    said = wheel_build(wheel.parent)[1]
    optimized = "pgo: optimized build" in said
    assert optimized or "plain release build" in said, said
    assert out["build"] == ("pgo" if optimized else "release")
    assert out["get"] == {"n": 1}
    assert out["calls"] == [
        {"n": 1},
        {"n": 1},
        6,
        5,
        "Cache.get(): key must be str or bytes, not list",
        7,
        7,
    ]
    assert out["fetch"] == {"loaded": True}
    assert out["pickled"] is True
    assert "cannot serialize the value" in out["unpicklable"], out["unpicklable"]
    assert "PicklingError" in out["unpicklable"], out["unpicklable"]
    assert out["loads"] == 1
    assert out["child_exit"] == 0, "the forked child did not see the parent's write and load"
    assert out["from_child"] == {"pid": out["child_pid"]}
    assert sorted(os.listdir(shm_dir)) == [
        "ziggurat.wheel-pickle.neg.v2",
        "ziggurat.wheel-pickle.v2",
        "ziggurat.wheel-smoke.neg.v2",
        "ziggurat.wheel-smoke.v2",
    ]

    # The console script is installed with the package.
    script_file = venv / "bin" / "ziggurat"
    assert os.access(script_file, os.X_OK)
    assert "ziggurat.cli" in script_file.read_text()


def test_sdist_carries_the_crates_and_no_binary(sdist: Path) -> None:
    with tarfile.open(sdist) as tf:
        names = {n.split("/", 1)[1] for n in tf.getnames() if "/" in n}
    for needed in ("pyproject.toml", "Cargo.toml", "Cargo.lock", "README.md", "PKG-INFO"):
        assert needed in names, needed
    for crate in ("ziggurat-core", "ziggurat-cache", "ziggurat-http", "ziggurat-py"):
        assert f"crates/{crate}/Cargo.toml" in names, crate
        sources = {p.relative_to(ROOT).as_posix() for p in (ROOT / "crates" / crate).rglob("*.rs")}
        assert sources <= names, sources - names
    assert "python/ziggurat/__init__.py" in names
    assert not [n for n in names if n.endswith(".so")], "a compiled extension is in the sdist"


def test_sdist_builds_into_a_wheel(sdist: Path) -> None:
    # A directory of its own under target/ keeps this build's cargo artefacts apart from the
    # source tree's (its crates have other paths) and warm from one run to the next.
    base = ROOT / "target" / "sdist-check"
    src = base / "src"
    shutil.rmtree(src, ignore_errors=True)
    src.mkdir(parents=True)
    with tarfile.open(sdist) as tf:
        # The "data" filter refuses links and paths that leave src.
        tf.extractall(src, filter="data")
    (unpacked,) = src.iterdir()
    # maturin writes every file of the sdist with one fixed old mtime, and cargo decides
    # what to rebuild by mtimes: stamped now, the project's crates are rebuilt every run
    # (their dependencies stay built), never taken stale from an earlier run.
    for f in unpacked.rglob("*"):
        os.utime(f)
    out = base / "wheels"
    shutil.rmtree(out, ignore_errors=True)
    env = {k: v for k, v in os.environ.items() if k != "PYTHONPATH"}
    env["CARGO_TARGET_DIR"] = str(base / "target")
    # The build backend of the test environment (the pinned maturin) rather than a download;
    # the backend runs the maturin command it finds on PATH.
    env["PATH"] = os.pathsep.join([str(TOOLS), env.get("PATH", "")])
    pip_wheel = [sys.executable, "-m", "pip", "wheel", "-q", "--no-deps", "--no-build-isolation"]
    run(
        [*pip_wheel, "-w", out, unpacked],
        cwd=base,
        env=env,
        timeout=BUILD_TIMEOUT,
    )
    (built,) = out.glob("*.whl")
    assert built.name.startswith("ziggurat-")
    # Built from source for this interpreter alone (no stable ABI: see docs/packaging.md).
    py = f"cp{sys.version_info.major}{sys.version_info.minor}"
    assert f"-{py}-{py}-" in built.name
    with zipfile.ZipFile(built) as zf:
        names = set(zf.namelist())
    assert any(n.startswith("ziggurat/_native.cpython-") for n in names), names
    assert "ziggurat/cache.py" in names
