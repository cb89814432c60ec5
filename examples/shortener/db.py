"""The shortener's link store: SQLite or PostgreSQL (see :mod:`examples.shortener.connection`).

Every query a worker sends to the database goes through :class:`Database`, which counts
them, so the demo can show how many queries each cache mode saves.

``SHORTENER_DATABASE_URL`` chooses the store:

* ``sqlite:///path/to/links.db`` (or a bare path): an embedded SQLite file.
* ``postgresql://user:password@host:port/dbname``: PostgreSQL through psycopg 3.

``latency`` (seconds, default 0) makes each query also wait that long, the way a synchronous
driver waits for a database across the network; it lets a local database stand in for a
remote one when comparing cache modes.
"""

from __future__ import annotations

import time
from collections.abc import Iterable

from .connection import Connection, sqlite_path

__all__ = ["TABLE", "Database", "SlugTaken", "seed", "sqlite_path"]

TABLE = "shortener_links"


def _schema(conn: Connection) -> str:
    # SQLite: the slug is the table's key itself, with no separate rowid index.
    rowid = " WITHOUT ROWID" if conn.kind == "SQLite" else ""
    return (
        f"CREATE TABLE IF NOT EXISTS {TABLE} (slug TEXT PRIMARY KEY, target TEXT NOT NULL)" + rowid
    )


class SlugTaken(Exception):
    """A link with this slug already exists."""


class Database:
    """One connection to the link store, with a per-process query counter.

    A worker process opens one ``Database`` and uses it from its event loop thread only.
    """

    def __init__(self, url: str, latency: float = 0.0) -> None:
        if latency < 0:
            raise ValueError("Database: latency must be >= 0 seconds")
        self.url = url
        self.latency = latency
        self.reads = 0
        self.writes = 0
        self._conn = Connection(url)
        self._conn.create_schema([_schema(self._conn)])

    @property
    def kind(self) -> str:
        return self._conn.kind

    @property
    def queries(self) -> int:
        return self.reads + self.writes

    def get_target(self, slug: str) -> str | None:
        """The target of ``slug``, or ``None`` if there is no such link (one query)."""
        self.reads += 1
        self._wait()
        row = self._conn.one(f"SELECT target FROM {TABLE} WHERE slug = ?", (slug,))
        return None if row is None else str(row[0])

    def create(self, slug: str, target: str) -> None:
        """Insert a new link; raise :class:`SlugTaken` if the slug exists (one query)."""
        self.writes += 1
        self._wait()
        try:
            self._conn.execute(f"INSERT INTO {TABLE} (slug, target) VALUES (?, ?)", (slug, target))
        except self._conn.integrity_errors as exc:
            raise SlugTaken(slug) from exc

    def update(self, slug: str, target: str) -> bool:
        """Change the target of an existing link; ``False`` if there is none (one query)."""
        self.writes += 1
        self._wait()
        sql = f"UPDATE {TABLE} SET target = ? WHERE slug = ?"
        return self._conn.execute(sql, (target, slug)) > 0

    def _wait(self) -> None:
        if self.latency:
            time.sleep(self.latency)

    def close(self) -> None:
        self._conn.close()


def seed(url: str, links: Iterable[tuple[str, str]]) -> int:
    """Create the links table anew and fill it in one transaction; return the row count."""
    conn = Connection(url)
    try:
        with conn.transaction():
            conn.execute(f"DROP TABLE IF EXISTS {TABLE}")
            conn.create_schema([_schema(conn)])
            return conn.insert_many(TABLE, ("slug", "target"), links)
    finally:
        conn.close()
