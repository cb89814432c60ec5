"""Django's own cache test suite, run against ``ziggurat.contrib.django.ZigguratCache``.

Django's tests are not installed with Django; its source distribution carries them. The
source of the installed version is downloaded once with pip into ``.venv/django-src/``
(only its ``tests/cache`` package is unpacked) and reused. The project in
``tests/django_project/`` applies Django's test classes to the backend; Django's own runner
(``django-admin test``) runs them in a subprocess, with the segments in a private
directory under /dev/shm.
"""

from __future__ import annotations

import os
import re
import shutil
import subprocess
import sys
import tarfile
import uuid
from pathlib import Path

import pytest

django = pytest.importorskip("django")

ROOT = Path(__file__).resolve().parent.parent
PROJECT = Path(__file__).resolve().parent / "django_project"
SOURCES = ROOT / ".venv" / "django-src"

#: Tests of the run: 2 x BaseCacheTests (54 each), CacheMiddlewareTest (16), CacheUtils and
#: PrefixedCacheUtils (8 each), CacheHEADTest (2), CacheI18nTest and PrefixedCacheI18nTest
#: (6 each), TestWithTemplateResponse (3).
EXPECTED_RUN = 157
#: The only skips allowed: ziggurat evicts by its own policy, not by Django's MAX_ENTRIES and
#: CULL_FREQUENCY, so the culling aliases are left out and these tests skip themselves.
ALLOWED_SKIPS = {"test_cull", "test_zero_cull", "test_cull_delete_when_store_empty"}


def django_tests_dir() -> Path:
    """The ``tests`` directory of the installed Django's source, fetched on first use."""
    version = django.__version__
    base = SOURCES / f"django-{version}"
    tests = base / "tests"
    if (tests / "cache" / "tests.py").is_file():
        return tests
    SOURCES.mkdir(parents=True, exist_ok=True)
    sdist = SOURCES / f"django-{version}.tar.gz"
    if not sdist.is_file():
        proc = subprocess.run(
            [
                *(sys.executable, "-m", "pip", "download", "-q", "--no-deps"),
                *("--no-binary", ":all:", f"django=={version}", "-d", str(SOURCES)),
            ],
            capture_output=True,
            text=True,
            timeout=600,
        )
        if proc.returncode != 0 or not sdist.is_file():
            pytest.skip(f"cannot download the source of Django {version}: {proc.stderr[-2000:]}")
    wanted = f"django-{version}/tests/cache/"
    with tarfile.open(sdist) as tar:
        members = [m for m in tar.getmembers() if m.name.startswith(wanted) and m.isfile()]
        # The "data" filter refuses links and paths leaving the directory.
        tar.extractall(SOURCES, members=members, filter="data")
    return tests


def test_djangos_cache_suite_passes() -> None:
    """Every test of Django's cache suite that applies to the backend passes; the only
    skips are the culling tests."""
    tests = django_tests_dir()
    directory = Path(f"/dev/shm/zigdjango-{uuid.uuid4().hex}")
    directory.mkdir(mode=0o700)
    env = dict(os.environ)
    env["ZIGGURAT_DJANGO_DIR"] = str(directory)
    env["PYTHONPATH"] = os.pathsep.join(
        [str(PROJECT), str(tests), *filter(None, [env.get("PYTHONPATH")])]
    )
    env.pop("DJANGO_SETTINGS_MODULE", None)
    try:
        proc = subprocess.run(
            [
                *(sys.executable, "-m", "django", "test", "ziggurat_suite"),
                *("--settings=settings", "-v", "2", "--noinput"),
            ],
            cwd=PROJECT,
            env=env,
            capture_output=True,
            text=True,
            timeout=600,
        )
    finally:
        shutil.rmtree(directory, ignore_errors=True)
    out = proc.stdout + proc.stderr
    ran = re.search(r"^Ran (\d+) tests? in", out, re.MULTILINE)
    result = re.search(r"^(OK|FAILED)(?: \((.*)\))?$", out, re.MULTILINE)
    assert ran and result, f"no test summary in Django's output:\n{out[-5000:]}"
    assert proc.returncode == 0 and result.group(1) == "OK", out[-20000:]
    assert int(ran.group(1)) >= EXPECTED_RUN, out[-5000:]
    counts = {name: int(n) for name, n in re.findall(r"(\w+)=(\d+)", result.group(2) or "")}
    skipped = re.findall(r"^(test_\w+) \(([\w.]+)\)[^\n]*\.\.\. skipped (.*)$", out, re.MULTILINE)
    print(f"Django {django.__version__}: ran {ran.group(1)}, skipped {len(skipped)}:")
    for _name, where, reason in skipped:
        print(f"  {where}: {reason}")
    assert counts.get("skipped", 0) == len(skipped), out[-5000:]
    assert {name for name, _, _ in skipped} <= ALLOWED_SKIPS, skipped
