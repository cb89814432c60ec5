"""Whose segment files a process trusts, and what a local user sharing the directory can do.

Whoever can write a segment file chooses the bytes every process that reads it decodes
(a pickled value runs code), so a file is only used when this user owns it or it is
shared (mode 660) with a trusted group: for read-only views too. A process that can
merely open the file must not be able to hold up a ``recreate`` for longer than
``lock_timeout``, and a directory that lets every user rename or replace the files is
reported when a cache starts.

The ownership tests give files to ``nobody`` and need root; they are skipped otherwise.
"""

from __future__ import annotations

import fcntl
import json
import os
import pathlib
import pickle
import pwd
import subprocess
import sys
import warnings
from collections.abc import Iterator

import pytest
from helpers_segment import MiB, Segment, SegmentError, new_name
from ziggurat import Cache

NOBODY = 65534
as_root = pytest.mark.skipif(os.geteuid() != 0, reason="giving a file to another user needs root")
ME = pwd.getpwuid(os.geteuid()).pw_name
# Runs where a broken lock would hang: long enough for any machine, short of pytest's patience.
OUTER_TIMEOUT = 60


class Planted:
    """Runs code when unpickled: what another user's file could make a reader do."""

    def __reduce__(self) -> tuple[object, tuple[str]]:
        return (os.system, ("touch planted",))


def _files(d: str, name: str) -> list[str]:
    return [os.path.join(d, f) for f in os.listdir(d) if f.startswith(f"ziggurat.{name}.")]


def _give_away(paths: list[str], mode: int = 0o644) -> None:
    for p in paths:
        os.chown(p, NOBODY, NOBODY)
        os.chmod(p, mode)


def _zig(*args: str, cwd: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "ziggurat", *args, "--json"],
        capture_output=True,
        text=True,
        timeout=OUTER_TIMEOUT,
        cwd=cwd,
    )


# -- item: read-only opens keep the owner rule -----------------------------------------------


@as_root
def test_read_only_open_refuses_another_users_file(shm_dir: str) -> None:
    name = new_name()
    seg = Segment(name, 2 * MiB, directory=shm_dir)
    seg.set("k", pickle.dumps(Planted()))
    seg.close()
    _give_away(_files(shm_dir, name))
    with pytest.raises(SegmentError) as info:
        Segment(name, directory=shm_dir, read_only=True)
    e = info.value
    assert e.cause == "other_owner", e
    msg = str(e)
    assert f"{shm_dir}/ziggurat.{name}.v2" in msg
    assert f"user 'nobody' (uid {NOBODY})" in msg and f"user '{ME}'" in msg
    assert "run this process as that user" in msg


def _read_in_group(gid: int, name: str, directory: str) -> str:
    """Opens segment ``name`` read-only in a child process that is a member of ``gid``
    (root gives itself that group): what it read, or the refusal's cause."""
    code = (
        "import os, sys\n"
        f"os.setgroups([{gid}])\n"
        "from ziggurat import Segment, SegmentError\n"
        f"try: print(Segment({name!r}, directory={directory!r}, read_only=True).get('k'))\n"
        "except SegmentError as e: print(e.cause, e)\n"
    )
    r = subprocess.run(
        [sys.executable, "-c", code], capture_output=True, text=True, timeout=OUTER_TIMEOUT
    )
    return r.stdout.strip()


@as_root
def test_read_only_open_trusts_a_group_of_this_process_only_with_mode_660(shm_dir: str) -> None:
    name = new_name()
    Segment(name, 2 * MiB, directory=shm_dir).set("k", b"v")
    (path,) = _files(shm_dir, name)
    # nobody's own group, which the reading process is a member of.
    os.chown(path, NOBODY, NOBODY)
    os.chmod(path, 0o660)
    assert _read_in_group(NOBODY, name, shm_dir) == "b'v'"
    # Group-shared but writable by every user: anyone may have written it.
    os.chmod(path, 0o666)
    assert _read_in_group(NOBODY, name, shm_dir).startswith("other_owner")


@as_root
def test_a_file_whose_owner_is_not_in_its_group_is_refused(shm_dir: str) -> None:
    # In a directory with the setgid bit that others may write, any user's new file
    # takes the directory's group: nobody's file in root's group, mode 660, is not
    # shared by a member of that group.
    os.chmod(shm_dir, 0o2777)
    name = new_name()
    Segment(name, 2 * MiB, directory=shm_dir).set("k", pickle.dumps(Planted()))
    (path,) = _files(shm_dir, name)
    os.chown(path, NOBODY, os.getegid())
    os.chmod(path, 0o660)
    for kwargs in ({"group": os.getegid()}, {"read_only": True}):
        with pytest.raises(SegmentError) as info:
            Segment(name, directory=shm_dir, **kwargs)  # type: ignore[arg-type]
        assert info.value.cause == "other_owner", kwargs
        assert "its owner is not a member of that group" in str(info.value)


@as_root
@pytest.mark.parametrize("mode", [0o666, 0o662, 0o622])
def test_read_only_open_refuses_own_file_others_may_write(shm_dir: str, mode: int) -> None:
    name = new_name()
    Segment(name, 2 * MiB, directory=shm_dir).set("k", b"v")
    (path,) = _files(shm_dir, name)
    os.chmod(path, 0o644)  # readable by others, written by its owner only: a view is fine
    ro = Segment(name, directory=shm_dir, read_only=True)
    assert ro.get("k") == b"v"
    ro.close()
    os.chmod(path, mode)
    os.chown(path, -1, 65534)  # a group this process is not in (nogroup)
    with pytest.raises(SegmentError) as info:
        Segment(name, directory=shm_dir, read_only=True)
    assert info.value.cause == "incompatible"
    assert f"mode {mode:o}" in str(info.value) and "recreate=True" in str(info.value)


def test_read_only_open_of_a_fifo_fails_instead_of_waiting(shm_dir: str) -> None:
    name = new_name()
    os.mkfifo(os.path.join(shm_dir, f"ziggurat.{name}.v2"), 0o600)
    code = (
        "import sys; from ziggurat import Segment, SegmentError\n"
        f"try: Segment({name!r}, directory={shm_dir!r}, read_only=True)\n"
        "except SegmentError as e: print(e.cause, e)\n"
    )
    r = subprocess.run(
        [sys.executable, "-c", code], capture_output=True, text=True, timeout=OUTER_TIMEOUT
    )
    assert r.stdout.startswith("incompatible ") and "not a regular file" in r.stdout, r


@as_root
@pytest.mark.parametrize(
    "argv",
    [("stats",), ("get", "k"), ("verify",), ("top", "--count", "1")],
    ids=lambda a: a[0],
)
def test_cli_read_only_commands_refuse_another_users_cache(
    shm_dir: str, argv: tuple[str, ...]
) -> None:
    name = new_name()
    c = Cache(name, size="8MiB", directory=shm_dir)
    c._segment.set("k", pickle.dumps(Planted()))  # type: ignore[union-attr]
    c.close()
    _give_away(_files(shm_dir, name))
    command, *rest = argv
    r = _zig(command, name, *rest, "-d", shm_dir, cwd=shm_dir)
    assert r.returncode == 1 and r.stdout == "", r
    err = json.loads(r.stderr)
    assert err["cause"] == "other_owner"
    assert f"ziggurat.{name}.v2 is owned by user 'nobody'" in err["error"]
    assert not os.path.exists(os.path.join(shm_dir, "planted"))


@as_root
def test_cli_ls_reports_another_users_cache_without_reading_it(shm_dir: str) -> None:
    name = new_name()
    Cache(name, size="8MiB", directory=shm_dir).close()
    _give_away(_files(shm_dir, name))
    r = _zig("ls", "-d", shm_dir, cwd=shm_dir)
    (row,) = json.loads(r.stdout)["caches"]
    assert (row["status"], row["entries"]) == ("other_owner", None)
    assert "is owned by user 'nobody'" in row["error"]


# -- item: recreate waits at most lock_timeout for the file lock -----------------------------


@pytest.fixture
def damaged(shm_dir: str) -> Iterator[tuple[str, str]]:
    """A damaged segment file (name, path) another process holds a shared flock on."""
    name = new_name()
    Segment(name, 2 * MiB, directory=shm_dir).close()
    (path,) = _files(shm_dir, name)
    with open(path, "r+b") as f:
        f.seek(64)
        f.write(b"\xde\xad" * 64)
    holder = subprocess.Popen(
        [
            sys.executable,
            "-c",
            "import fcntl, os, sys\n"
            f"fd = os.open({path!r}, os.O_RDONLY); fcntl.flock(fd, fcntl.LOCK_SH)\n"
            "print('locked', flush=True); sys.stdin.read()",
        ],
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        text=True,
    )
    assert holder.stdout is not None and holder.stdout.readline() == "locked\n"
    try:
        yield name, path
    finally:
        assert holder.stdin is not None
        holder.stdin.close()
        holder.wait(timeout=OUTER_TIMEOUT)


def _attempt(code: str) -> str:
    r = subprocess.run(
        [sys.executable, "-c", code], capture_output=True, text=True, timeout=OUTER_TIMEOUT
    )
    assert r.returncode == 0, r.stderr
    return r.stdout


def test_recreate_gives_up_on_a_locked_file_after_lock_timeout(
    shm_dir: str, damaged: tuple[str, str]
) -> None:
    name, path = damaged
    before = pathlib.Path(path).read_bytes()
    out = _attempt(
        "from ziggurat import Segment, SegmentError\n"
        f"try: Segment({name!r}, 2 << 20, directory={shm_dir!r}, recreate=True, lock_timeout=0.2)\n"
        "except SegmentError as e: print(e.cause, e)\n"
    )
    assert out.startswith("locked "), out
    assert f"cannot replace segment file {path}" in out
    assert "pid " in out and "lock_timeout (0.200 s)" in out
    assert pathlib.Path(path).read_bytes() == before  # left as it was


def test_recreate_cache_runs_degraded_when_the_file_stays_locked(
    shm_dir: str, damaged: tuple[str, str]
) -> None:
    name, path = damaged
    out = _attempt(
        "import warnings; warnings.simplefilter('ignore')\n"
        "from ziggurat import Cache\n"
        f"c = Cache({name!r}, '2MiB', directory={shm_dir!r}, recreate=True, lock_timeout=0.2)\n"
        "print(c.degraded_cause, c.degraded_reason)\n"
    )
    assert out.startswith("locked ") and path in out, out


def test_recreate_replaces_the_file_once_the_lock_is_released(shm_dir: str) -> None:
    name = new_name()
    Segment(name, 2 * MiB, directory=shm_dir).close()
    (path,) = _files(shm_dir, name)
    os.chmod(path, 0o644)  # loose: replaced by recreate
    fd = os.open(path, os.O_RDONLY)
    try:
        fcntl.flock(fd, fcntl.LOCK_SH)
        out = _attempt(
            "from ziggurat import Segment, SegmentError\n"
            f"try: Segment({name!r}, 2 << 20, directory={shm_dir!r}, recreate=True, "
            "lock_timeout=0.05)\n"
            "except SegmentError as e: print(e.cause, e)\n"
        )
        assert out.startswith("locked ") and f"pid {os.getpid()} (" in out, out
        fcntl.flock(fd, fcntl.LOCK_UN)
        seg = Segment(name, 2 * MiB, directory=shm_dir, recreate=True, lock_timeout=0.05)
        assert os.stat(path).st_mode & 0o777 == 0o600
        seg.close()
    finally:
        os.close(fd)


# -- item: a directory others may rewrite, and a squatted name --------------------------------


def _started(directory: str) -> list[str]:
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        c = Cache(new_name(), "2MiB", directory=directory)
    c.unlink()
    return [str(w.message) for w in caught if "sticky bit" in str(w.message)]


@pytest.mark.parametrize("mode", [0o777, 0o1777, 0o700])
def test_directory_writable_by_everyone_without_sticky_bit_is_reported(
    shm_dir: str, mode: int
) -> None:
    d = os.path.join(shm_dir, f"d{mode:o}")
    os.mkdir(d)
    os.chmod(d, mode)
    seg = Segment(new_name(), 2 * MiB, directory=d)
    notice = seg.directory_notice
    seg.unlink()
    notes = _started(d)
    if mode == 0o777:
        assert notice is not None and f"directory {d} is writable by every user" in notice
        assert "RuntimeDirectory=" in notice and "chmod +t" in notice
        assert len(notes) == 1 and notice in notes[0]
        assert _started(d) == []  # once per directory and process
    else:
        assert notice is None and notes == []


@as_root
def test_squatted_name_degrades_with_a_cause_naming_file_owner_and_remedy(shm_dir: str) -> None:
    name = new_name()
    # Another user took the name first, with a segment of its own.
    Cache(name, "8MiB", directory=shm_dir).close()
    _give_away(_files(shm_dir, name), 0o600)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        c = Cache(name, "8MiB", directory=shm_dir)
    try:
        assert c.degraded and c.degraded_cause == "other_owner"
        why = c.degraded_reason
        assert why is not None
        assert f"{shm_dir}/ziggurat.{name}.v2" in why and "user 'nobody'" in why
        assert "taken the name first" in why and "RuntimeDirectory=" in why
    finally:
        c.close()
