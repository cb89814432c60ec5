"""The shape of the source tree that docs/design.md promises a contributor: no library file
longer than 600 lines, and the PyO3 crate the smallest of the three crates under Python
(the engine, the Cache's behaviour, the binding), since it only converts values and calls
the crates below it."""

from __future__ import annotations

from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
LIMIT = 600


def library_files() -> list[Path]:
    """Every file of the libraries: the crates' sources, the Python package, the Node.js
    package (tests, benchmarks and examples apart)."""
    files = [*ROOT.glob("crates/*/src/**/*.rs"), *ROOT.glob("python/ziggurat/**/*.py")]
    files += [*ROOT.glob("node/*.cjs"), *ROOT.glob("node/*.js"), *ROOT.glob("node/lib/*.cjs")]
    return sorted(files)


def lines(path: Path) -> int:
    return len(path.read_text(encoding="utf-8").splitlines())


def test_no_library_file_is_longer_than_600_lines() -> None:
    files = library_files()
    assert len(files) > 100, "the glob found the sources"
    long = {str(f.relative_to(ROOT)): lines(f) for f in files if lines(f) > LIMIT}
    assert long == {}, f"split these by concept (docs/design.md): {long}"


def test_the_pyo3_crate_is_the_smallest_of_the_three() -> None:
    size = {
        c: sum(lines(f) for f in (ROOT / "crates" / c / "src").rglob("*.rs"))
        for c in ("ziggurat-core", "ziggurat-cache", "ziggurat-py")
    }
    assert size["ziggurat-py"] < min(size["ziggurat-core"], size["ziggurat-cache"]), size
