"""The processes a demo starts (app servers, Valkey, wrk), and how the demo itself ends.

Each child runs in a process group of its own, so it is stopped as a whole and a Ctrl-C in
the terminal reaches the demo alone (which then stops its children); and the kernel sends it
SIGTERM if the demo dies without cleaning up, so no server outlives a killed demo.

>>> import sys
>>> p = start([sys.executable, "-c", "pass"], "/dev/null")
>>> p.wait()
0
"""

from __future__ import annotations

import ctypes
import os
import signal
import subprocess

__all__ = ["die_with_parent", "end_on_signals", "start"]


def die_with_parent() -> None:
    """In a child, before exec: on Linux, have the kernel send SIGTERM if the demo dies
    without cleaning up (SIGKILL), so no server or wrk outlives it."""
    try:
        libc = ctypes.CDLL(None, use_errno=True)
        libc.prctl(1, signal.SIGTERM)  # 1 = PR_SET_PDEATHSIG
    except (OSError, AttributeError):
        pass


def start(
    cmd: list[str],
    log_path: str | os.PathLike[str],
    *,
    cwd: str | os.PathLike[str] | None = None,
    env: dict[str, str] | None = None,
) -> subprocess.Popen[bytes]:
    """Starts ``cmd`` as a child (see the module), its output appended to ``log_path``."""
    with open(log_path, "ab") as log:
        return subprocess.Popen(
            cmd,
            cwd=cwd,
            env=env,
            stdin=subprocess.DEVNULL,
            stdout=log,
            stderr=subprocess.STDOUT,
            start_new_session=True,
            preexec_fn=die_with_parent,
        )


def _raise_interrupt(signum: int, frame: object) -> None:
    raise KeyboardInterrupt


def end_on_signals() -> None:
    """Ctrl-C (even from a shell that ignores it), SIGTERM and SIGHUP (the terminal went
    away) all end the demo through the same clean-up: a ``KeyboardInterrupt``."""
    signal.signal(signal.SIGINT, signal.default_int_handler)
    signal.signal(signal.SIGTERM, _raise_interrupt)
    signal.signal(signal.SIGHUP, _raise_interrupt)
