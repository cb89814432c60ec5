"""Huge pages for a segment: taken where the directory's tmpfs offers them, required or
refused on request, and reported as the kernel really maps them (``/proc/self/smaps``).
Each test mounts its own small tmpfs with the ``huge=`` option it needs.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys

import pytest
from tmpfs_mounts import huge_pages_possible, tmpfs
from ziggurat import Cache, Segment
from ziggurat._native import SegmentError

MiB = 1 << 20
ZIGGURAT = [sys.executable, "-m", "ziggurat"]

needs_thp = pytest.mark.skipif(
    huge_pages_possible() is not None, reason=huge_pages_possible() or ""
)


@needs_thp
@pytest.mark.parametrize("huge", ["within_size", "always", "advise"])
def test_a_tmpfs_with_huge_pages_backs_the_segment(huge: str) -> None:
    # advise: the pages are huge only because the new file is first touched through a
    # mapping that asked for them, and every later mapping asks too.
    with tmpfs("64m", huge) as d:
        seg = Segment("hp", "16MiB", directory=d)
        r = seg.huge_pages()
        assert r["offered"] and r["mount"] == huge and r["remedy"] is None
        assert r["backed"] and r["backed_bytes"] >= 8 * MiB, r
        assert r["eligible_bytes"] >= r["backed_bytes"]
        # Another process's mapping of the same file is backed the same way.
        other = subprocess.run(
            [
                sys.executable,
                "-c",
                "import json, sys; from ziggurat import Segment; "
                "print(json.dumps(Segment('hp', directory=sys.argv[1]).huge_pages()))",
                d,
            ],
            capture_output=True,
            text=True,
            check=True,
        )
        assert json.loads(other.stdout)["backed"]
        seg.close()


@needs_thp
def test_off_refuses_them_and_require_takes_them() -> None:
    with tmpfs("64m", "within_size") as d:
        off = Segment("off", "16MiB", directory=d, huge_pages="off")
        assert off.huge_pages()["mode"] == "off"
        assert not off.huge_pages()["backed"]  # small pages, though the file is huge-paged
        req = Segment("req", "16MiB", directory=d, huge_pages="require")
        assert req.huge_pages()["backed"]
        c = Cache("cache", size="16MiB", directory=d, huge_pages="require")
        assert not c.degraded
        host = c.stats()["host"]["huge_pages"]
        assert host["backed"] and host["mode"] == "require"
        for x in (off, req, c):
            x.close()


def test_require_without_them_fails_with_the_cause_and_the_remedy() -> None:
    with tmpfs("64m", "never") as d:
        with pytest.raises(SegmentError) as e:
            Segment("s", "16MiB", directory=d, huge_pages="require")
        assert e.value.cause == "no_huge_pages"  # type: ignore[attr-defined]
        assert "huge=within_size" in str(e.value)
        assert os.listdir(d) == []  # the file made for the refused open is gone
        with pytest.warns(RuntimeWarning, match="not backed by huge pages"):
            c = Cache("c", size="16MiB", directory=d, huge_pages="require")
        assert c.degraded and c.degraded_cause == "no_huge_pages"
        assert os.listdir(d) == []
        # auto takes what there is: small pages, and says how to get huge ones.
        a = Cache("c", size="16MiB", directory=d)
        r = a.stats()["host"]["huge_pages"]
        assert not a.degraded and not r["backed"] and "huge=within_size" in r["remedy"]
        c.close()
        a.close()


def test_bad_huge_pages_argument() -> None:
    with pytest.raises(ValueError, match=r"^Cache\(\): huge_pages must be 'auto', 'require'"):
        Cache("x", huge_pages="yes")
    with pytest.raises(ValueError, match="huge_pages must be 'auto', 'require' or 'off'"):
        Segment("x", "4MiB", huge_pages="on")
    with pytest.raises(TypeError, match="huge_pages"):
        Segment("x", "4MiB", huge_pages=True)  # type: ignore[arg-type]


@needs_thp
def test_the_commands_show_them() -> None:
    with tmpfs("64m", "within_size") as d:
        c = Cache("shown", size="16MiB", directory=d)
        r = subprocess.run(
            [*ZIGGURAT, "stats", "shown", "--directory", d, "--json"],
            capture_output=True,
            text=True,
        )
        assert r.returncode == 0, r.stderr
        assert json.loads(r.stdout)["host"]["huge_pages"]["backed"]
        r = subprocess.run(
            [*ZIGGURAT, "ls", "--directory", d, "--json"], capture_output=True, text=True
        )
        assert [row["huge_pages"] for row in json.loads(r.stdout)["caches"]] == [True]
        c.close()
