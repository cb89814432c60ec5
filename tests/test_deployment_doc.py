"""The examples of docs/deployment.md, each run or checked against what it configures.

The Compose file and the Kubernetes manifest are parsed and must give the cache's directory
the room the page says; the systemd units are read as systemd reads them; the Python line
opens a real cache in a directory of the test's; the `mount` command runs (as root) on a
scratch directory and must give a tmpfs that offers huge pages to a segment made there.
"""

from __future__ import annotations

import configparser
import os
import re
import shlex
import subprocess
from pathlib import Path

import pytest
import yaml
from ziggurat import Cache, Segment

PAGE = Path(__file__).resolve().parent.parent / "docs" / "deployment.md"
FENCE = re.compile(r"^```(\w*)\n(.*?)^```", re.S | re.M)


def blocks(lang: str) -> list[str]:
    return [code for kind, code in FENCE.findall(PAGE.read_text()) if kind == lang]


def test_every_block_of_the_page_is_checked_here() -> None:
    kinds = sorted(kind for kind, _ in FENCE.findall(PAGE.read_text()))
    assert kinds == ["ini", "ini", "python", "sh", "sh", "yaml", "yaml"], kinds


def test_compose_and_kubernetes_give_dev_shm_its_size() -> None:
    compose, k8s = (yaml.safe_load(b) for b in blocks("yaml"))
    assert compose["services"]["app"]["shm_size"] == "256m"
    spec = k8s["spec"]
    (mount,) = spec["containers"][0]["volumeMounts"]
    (volume,) = spec["volumes"]
    assert mount == {"name": volume["name"], "mountPath": "/dev/shm"}
    assert volume["emptyDir"] == {"medium": "Memory", "sizeLimit": "256Mi"}
    # The docker line asks for the same room as the two files.
    assert "--shm-size=256m" in shlex.split(blocks("sh")[0])


def _unit(text: str) -> configparser.ConfigParser:
    unit = configparser.ConfigParser(inline_comment_prefixes=("#",), interpolation=None)
    unit.optionxform = str  # type: ignore[assignment,method-assign]
    unit.read_string(text)
    return unit


def test_systemd_units_hold_what_the_page_says() -> None:
    service, mount = (_unit(b) for b in blocks("ini"))
    s = service["Service"]
    assert (s["User"], s["RuntimeDirectory"], s["RuntimeDirectoryMode"]) == ("www", "myapp", "0700")
    m = mount["Mount"]
    assert (m["What"], m["Type"], m["Where"]) == ("tmpfs", "tmpfs", "/run/myapp-cache")
    assert "huge=within_size" in m["Options"].split(",")
    # The command line of the page mounts the same thing.
    line = blocks("sh")[1].splitlines()[0]
    assert shlex.split(line)[-1] == m["Where"] and m["Options"] in line


def test_the_python_line_opens_a_cache_in_the_service_directory(tmp_path: Path) -> None:
    (code,) = blocks("python")
    directory = tmp_path / "myapp"
    directory.mkdir(mode=0o700)
    scope: dict[str, object] = {"Cache": Cache}
    exec(code.replace("/run/myapp", str(directory)), scope)
    files = sorted(p.name for p in directory.iterdir())
    assert files == ["ziggurat.api.neg.v2", "ziggurat.api.v2"], files
    c = Cache("api", directory=str(directory))
    try:
        c.set("k", 1)
        assert c.get("k") == 1 and c.degraded is False
    finally:
        c.unlink()


@pytest.mark.skipif(os.geteuid() != 0, reason="mounting a tmpfs needs root")
def test_the_mount_command_gives_huge_pages(tmp_path: Path) -> None:
    line = blocks("sh")[1].splitlines()[0]
    argv = shlex.split(line)
    where = tmp_path / "cache"
    where.mkdir()
    argv[-1] = str(where)
    # The page's service user may not exist here: the mount is made for this user instead.
    argv = [a.replace("uid=www", f"uid={os.geteuid()}") for a in argv]
    done = subprocess.run(argv, capture_output=True, text=True)
    if done.returncode != 0:
        pytest.skip(f"this machine refuses the mount: {done.stderr.strip()}")
    try:
        mounts = Path("/proc/mounts").read_text()
        (row,) = [r for r in mounts.splitlines() if r.split()[1] == str(where)]
        assert "huge=within_size" in row.split()[3]
        seg = Segment("deploydoc", "8MiB", directory=str(where))
        try:
            seg.set(b"k", b"v")
            assert seg.huge_pages()["offered"] is True, seg.huge_pages()
        finally:
            seg.unlink()
            seg.close()
    finally:
        # Lazily: the mapping goes when the segment object is collected.
        subprocess.run(["umount", "-l", str(where)], check=True)
