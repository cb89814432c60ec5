"""Flask-Caching's own backend tests, run against ``ziggurat.contrib.flask.ZigguratCache``.

Flask-Caching's tests are not installed with it; its source distribution carries them. The
source of the installed version is downloaded once with pip into
``.venv/flask-caching-src/`` (only its ``tests/`` directory is unpacked) and reused. Its
generic backend class, ``GenericCacheTests`` of ``tests/test_backend_cache.py``, every
backend of Flask-Caching passes, is subclassed here with a fixture making a fresh
``ZigguratCache`` per test.
"""

from __future__ import annotations

import importlib.util
import subprocess
import sys
import tarfile
import time
import uuid
from collections.abc import Callable, Iterator
from pathlib import Path
from types import ModuleType
from typing import Any

import pytest

flask_caching = pytest.importorskip("flask_caching")
from importlib.metadata import version as _version  # noqa: E402

from ziggurat.contrib.flask import ZigguratCache  # noqa: E402

ROOT = Path(__file__).resolve().parent.parent
SOURCES = ROOT / ".venv" / "flask-caching-src"
VERSION = _version("Flask-Caching")


def flask_caching_tests() -> ModuleType:
    """Flask-Caching's ``tests/test_backend_cache.py``, fetched on first use. Its
    ``conftest.py`` (servers for the Redis and Memcached classes) is not loaded."""
    base = SOURCES / f"flask_caching-{VERSION}"
    path = base / "tests" / "test_backend_cache.py"
    if not path.is_file():
        SOURCES.mkdir(parents=True, exist_ok=True)
        sdist = SOURCES / f"flask_caching-{VERSION}.tar.gz"
        if not sdist.is_file():
            proc = subprocess.run(
                [
                    *(sys.executable, "-m", "pip", "download", "-q", "--no-deps"),
                    *("--no-binary", ":all:", f"Flask-Caching=={VERSION}", "-d", str(SOURCES)),
                ],
                capture_output=True,
                text=True,
                timeout=600,
            )
            if proc.returncode != 0 or not sdist.is_file():
                pytest.skip(
                    f"cannot download the source of Flask-Caching {VERSION}: {proc.stderr[-2000:]}",
                    allow_module_level=True,
                )
        wanted = f"flask_caching-{VERSION}/tests/"
        with tarfile.open(sdist) as tar:
            members = [m for m in tar.getmembers() if m.name.startswith(wanted) and m.isfile()]
            # The "data" filter refuses links and paths leaving the directory.
            tar.extractall(SOURCES, members=members, filter="data")
    spec = importlib.util.spec_from_file_location("flask_caching_backend_tests", path)
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


GenericCacheTests: Any = flask_caching_tests().GenericCacheTests


class TestZigguratFlaskCaching(GenericCacheTests):  # type: ignore[misc]
    """Every test of Flask-Caching's generic backend class, none skipped."""

    # The entries' deadlines are kept by the segment's clock, which a test cannot move:
    # the timeout test really sleeps (3 seconds).
    _can_use_fast_sleep = False
    _guaranteed_deletes = True

    @pytest.fixture
    def make_cache(self, shm_dir: str) -> Iterator[Callable[..., ZigguratCache]]:
        made: list[ZigguratCache] = []

        def make(**kwargs: Any) -> ZigguratCache:
            kwargs.setdefault("key_prefix", "flask_cache_")
            backend = ZigguratCache(
                f"flask-suite-{uuid.uuid4().hex[:12]}",
                options={"size": "8MiB", "directory": shm_dir},
                **kwargs,
            )
            made.append(backend)
            return backend

        yield make
        for backend in made:
            backend.cache.unlink()

    @pytest.fixture
    def sleep(self) -> Callable[[float], None]:
        return time.sleep


def test_the_generic_suite_is_complete() -> None:
    """The subclass carries every test of the generic class (none renamed away)."""
    names = {n for n in dir(GenericCacheTests) if n.startswith("test_")}
    assert len(names) >= 12, names
    assert names <= {n for n in dir(TestZigguratFlaskCaching) if n.startswith("test_")}
