"""The shortener's link store: SQLite by default, PostgreSQL when asked for.

Every query a worker sends to the database goes through :class:`Database`, which counts
them, so the demo can show how many queries each cache mode saves.

``SHORTENER_DATABASE_URL`` chooses the store:

* ``sqlite:///path/to/links.db`` (or a bare path): an embedded SQLite file.
* ``postgresql://user:password@host:port/dbname``: PostgreSQL through psycopg 3.

``latency`` (seconds, default 0) makes each query also wait that long, the way a synchronous
driver waits for a database across the network; it lets an embedded SQLite file stand in for
a remote database when comparing cache modes.
"""

from __future__ import annotations

import contextlib
import sqlite3
import time
from collections.abc import Iterable
from typing import Any
from urllib.parse import urlsplit

TABLE = "shortener_links"
SCHEMA = f"CREATE TABLE IF NOT EXISTS {TABLE} (slug TEXT PRIMARY KEY, target TEXT NOT NULL)"


class SlugTaken(Exception):
    """A link with this slug already exists."""


class Database:
    """One connection to the link store, with a per-process query counter.

    A worker process opens one ``Database`` and uses it from its event loop thread only.
    """

    def __init__(self, url: str, latency: float = 0.0) -> None:
        if latency < 0:
            raise ValueError("latency must be >= 0 seconds")
        self.url = url
        self.latency = latency
        self.reads = 0
        self.writes = 0
        scheme = urlsplit(url).scheme
        if scheme in ("postgresql", "postgres"):
            self._backend: _Backend = _Postgres(url)
        elif scheme in ("sqlite", ""):
            self._backend = _SQLite(sqlite_path(url))
        else:
            raise ValueError(f"unsupported database URL {scheme!r}: use sqlite or postgresql")

    @property
    def kind(self) -> str:
        return self._backend.kind

    @property
    def queries(self) -> int:
        return self.reads + self.writes

    def get_target(self, slug: str) -> str | None:
        """The target of ``slug``, or ``None`` if there is no such link (one query)."""
        self.reads += 1
        self._wait()
        return self._backend.get_target(slug)

    def create(self, slug: str, target: str) -> None:
        """Insert a new link; raise :class:`SlugTaken` if the slug exists (one query)."""
        self.writes += 1
        self._wait()
        self._backend.create(slug, target)

    def update(self, slug: str, target: str) -> bool:
        """Change the target of an existing link; ``False`` if there is none (one query)."""
        self.writes += 1
        self._wait()
        return self._backend.update(slug, target)

    def _wait(self) -> None:
        if self.latency:
            time.sleep(self.latency)

    def close(self) -> None:
        self._backend.close()


def sqlite_path(url: str) -> str:
    """The file path in ``sqlite:///relative`` / ``sqlite:////absolute`` or a bare path."""
    if url.startswith("sqlite:///"):
        return url[len("sqlite:///") :]
    return url


def seed(url: str, links: Iterable[tuple[str, str]]) -> int:
    """Create the links table anew and fill it in one transaction; return the row count."""
    scheme = urlsplit(url).scheme
    if scheme in ("postgresql", "postgres"):
        return _Postgres.seed(url, links)
    return _SQLite.seed(sqlite_path(url), links)


class _Backend:
    kind = ""

    def get_target(self, slug: str) -> str | None:
        raise NotImplementedError

    def create(self, slug: str, target: str) -> None:
        raise NotImplementedError

    def update(self, slug: str, target: str) -> bool:
        raise NotImplementedError

    def close(self) -> None:
        raise NotImplementedError


class _SQLite(_Backend):
    kind = "SQLite"

    def __init__(self, path: str) -> None:
        # Autocommit (isolation_level=None): each write is its own transaction. The file is
        # in WAL mode (set by seed), so readers in other processes never wait for a writer.
        self._conn = sqlite3.connect(path, isolation_level=None, check_same_thread=False)
        self._conn.execute("PRAGMA busy_timeout = 5000")
        self._conn.execute("PRAGMA journal_mode = WAL")
        self._conn.execute(SCHEMA + " WITHOUT ROWID")

    @staticmethod
    def seed(path: str, links: Iterable[tuple[str, str]]) -> int:
        conn = sqlite3.connect(path, isolation_level=None)
        try:
            conn.execute("PRAGMA journal_mode = WAL")
            conn.execute(f"DROP TABLE IF EXISTS {TABLE}")
            conn.execute(SCHEMA + " WITHOUT ROWID")
            conn.execute("BEGIN")
            cur = conn.executemany(f"INSERT INTO {TABLE} (slug, target) VALUES (?, ?)", links)
            count = cur.rowcount
            conn.execute("COMMIT")
            return count
        finally:
            conn.close()

    def get_target(self, slug: str) -> str | None:
        row = self._conn.execute(f"SELECT target FROM {TABLE} WHERE slug = ?", (slug,)).fetchone()
        return None if row is None else str(row[0])

    def create(self, slug: str, target: str) -> None:
        try:
            self._conn.execute(f"INSERT INTO {TABLE} (slug, target) VALUES (?, ?)", (slug, target))
        except sqlite3.IntegrityError as exc:
            raise SlugTaken(slug) from exc

    def update(self, slug: str, target: str) -> bool:
        cur = self._conn.execute(f"UPDATE {TABLE} SET target = ? WHERE slug = ?", (target, slug))
        return cur.rowcount > 0

    def close(self) -> None:
        self._conn.close()


class _Postgres(_Backend):
    kind = "PostgreSQL"

    def __init__(self, url: str) -> None:
        psycopg = _psycopg()
        self._errors = psycopg.errors
        self._conn = psycopg.connect(url, autocommit=True)
        # Workers start together: a concurrent CREATE may lose the race, and that is fine.
        with contextlib.suppress(psycopg.errors.UniqueViolation, psycopg.errors.DuplicateTable):
            self._conn.execute(SCHEMA)

    @staticmethod
    def seed(url: str, links: Iterable[tuple[str, str]]) -> int:
        psycopg = _psycopg()
        count = 0
        with psycopg.connect(url) as conn, conn.cursor() as cur:
            # One transaction: the `with conn` block commits at its end.
            cur.execute(f"DROP TABLE IF EXISTS {TABLE}")
            cur.execute(SCHEMA)
            with cur.copy(f"COPY {TABLE} (slug, target) FROM STDIN") as copy:
                for row in links:
                    copy.write_row(row)
                    count += 1
        return count

    def get_target(self, slug: str) -> str | None:
        row = self._conn.execute(f"SELECT target FROM {TABLE} WHERE slug = %s", (slug,)).fetchone()
        return None if row is None else str(row[0])

    def create(self, slug: str, target: str) -> None:
        try:
            self._conn.execute(
                f"INSERT INTO {TABLE} (slug, target) VALUES (%s, %s)", (slug, target)
            )
        except self._errors.UniqueViolation as exc:
            raise SlugTaken(slug) from exc

    def update(self, slug: str, target: str) -> bool:
        cur = self._conn.execute(f"UPDATE {TABLE} SET target = %s WHERE slug = %s", (target, slug))
        return cur.rowcount > 0

    def close(self) -> None:
        self._conn.close()


def _psycopg() -> Any:
    try:
        import psycopg
    except ImportError as exc:  # pragma: no cover - depends on the environment
        raise RuntimeError(
            "SHORTENER_DATABASE_URL names PostgreSQL, which needs psycopg: "
            "pip install 'psycopg[binary]'"
        ) from exc
    return psycopg
