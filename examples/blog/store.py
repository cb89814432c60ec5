"""The blog's data: posts (with tags and code samples) and comments, in PostgreSQL or SQLite.

Every worker process opens its own connection to the same database; writes are short
transactions. The SQL is the same for both databases (see
:mod:`examples.shortener.connection`).
"""

from __future__ import annotations

import datetime as dt
import re
from dataclasses import dataclass

from examples.shortener.connection import Connection

SCHEMA = [
    """CREATE TABLE IF NOT EXISTS blog_posts (
        id {id_key},
        slug TEXT UNIQUE NOT NULL,
        title TEXT NOT NULL,
        body TEXT NOT NULL,
        tags TEXT NOT NULL,
        created TEXT NOT NULL,
        updated TEXT NOT NULL
    )""",
    """CREATE TABLE IF NOT EXISTS blog_comments (
        id {id_key},
        post_id BIGINT NOT NULL REFERENCES blog_posts(id),
        author TEXT NOT NULL,
        body TEXT NOT NULL,
        created TEXT NOT NULL
    )""",
    "CREATE INDEX IF NOT EXISTS blog_comments_post ON blog_comments(post_id)",
]


@dataclass
class Post:
    id: int
    slug: str
    title: str
    body: str
    tags: list[str]
    created: dt.datetime
    updated: dt.datetime
    comments: int = 0


@dataclass
class Comment:
    author: str
    body: str
    created: dt.datetime


def slugify(title: str) -> str:
    s = re.sub(r"[^a-z0-9]+", "-", title.lower()).strip("-")
    return s or "post"


def _tags(raw: str) -> list[str]:
    return sorted({t.strip().lower() for t in re.split(r"[,\s]+", raw) if t.strip()})


class Store:
    """The posts and comments of one database: an SQLite file (a path or ``sqlite:///path``)
    or PostgreSQL (``postgresql://...``), through one connection per process.

    >>> st = Store(":memory:")
    >>> st.add_post("Hello, world", "Text", "python, Caching").tags
    ['caching', 'python']
    >>> st.add_post("Hello world", "More", "").slug
    'hello-world-2'
    """

    def __init__(self, url: str) -> None:
        self.url = url
        self.db = Connection(url)
        self.db.create_schema(SCHEMA)

    @property
    def kind(self) -> str:
        """``"SQLite"`` or ``"PostgreSQL"``."""
        return self.db.kind

    def _post(self, row: tuple[object, ...]) -> Post:
        return Post(
            id=int(row[0]),  # type: ignore[call-overload]
            slug=str(row[1]),
            title=str(row[2]),
            body=str(row[3]),
            tags=[t for t in str(row[4]).split(",") if t],
            created=dt.datetime.fromisoformat(str(row[5])),
            updated=dt.datetime.fromisoformat(str(row[6])),
            comments=int(row[7]) if len(row) > 7 else 0,  # type: ignore[call-overload]
        )

    _COLS = (
        "p.id, p.slug, p.title, p.body, p.tags, p.created, p.updated, "
        "(SELECT COUNT(*) FROM blog_comments c WHERE c.post_id = p.id)"
    )

    def count(self) -> int:
        row = self.db.one("SELECT COUNT(*) FROM blog_posts")
        return int(row[0]) if row else 0

    def page(self, number: int, size: int) -> list[Post]:
        rows = self.db.all(
            f"SELECT {self._COLS} FROM blog_posts p ORDER BY p.created DESC, p.id DESC "
            "LIMIT ? OFFSET ?",
            (size, (number - 1) * size),
        )
        return [self._post(r) for r in rows]

    def all(self) -> list[Post]:
        rows = self.db.all(
            f"SELECT {self._COLS} FROM blog_posts p ORDER BY p.created DESC, p.id DESC"
        )
        return [self._post(r) for r in rows]

    def by_slug(self, slug: str) -> Post | None:
        row = self.db.one(f"SELECT {self._COLS} FROM blog_posts p WHERE p.slug = ?", (slug,))
        return self._post(row) if row else None

    def by_id(self, post_id: int) -> Post | None:
        row = self.db.one(f"SELECT {self._COLS} FROM blog_posts p WHERE p.id = ?", (post_id,))
        return self._post(row) if row else None

    def tagged(self, tag: str) -> list[Post]:
        return [p for p in self.all() if tag in p.tags]

    def all_tags(self) -> dict[str, int]:
        out: dict[str, int] = {}
        for p in self.all():
            for t in p.tags:
                out[t] = out.get(t, 0) + 1
        return dict(sorted(out.items()))

    def comments(self, post_id: int) -> list[Comment]:
        rows = self.db.all(
            "SELECT author, body, created FROM blog_comments WHERE post_id = ? ORDER BY id",
            (post_id,),
        )
        return [Comment(r[0], r[1], dt.datetime.fromisoformat(r[2])) for r in rows]

    def add_post(self, title: str, body: str, tags: str, when: dt.datetime | None = None) -> Post:
        when = when or dt.datetime.now(dt.timezone.utc).replace(microsecond=0)
        base = slugify(title)
        slug, n = base, 1
        while self.db.one("SELECT 1 FROM blog_posts WHERE slug = ?", (slug,)):
            n += 1
            slug = f"{base}-{n}"
        row = self.db.one(
            "INSERT INTO blog_posts (slug, title, body, tags, created, updated) "
            "VALUES (?, ?, ?, ?, ?, ?) RETURNING id",
            (slug, title, body, ",".join(_tags(tags)), when.isoformat(), when.isoformat()),
        )
        post = self.by_id(int(row[0]) if row else 0)
        assert post is not None
        return post

    def edit_post(self, post_id: int, title: str, body: str, tags: str) -> tuple[Post, Post] | None:
        """Returns the post before and after the edit."""
        before = self.by_id(post_id)
        if before is None:
            return None
        now = dt.datetime.now(dt.timezone.utc).replace(microsecond=0)
        self.db.execute(
            "UPDATE blog_posts SET title = ?, body = ?, tags = ?, updated = ? WHERE id = ?",
            (title, body, ",".join(_tags(tags)), now.isoformat(), post_id),
        )
        after = self.by_id(post_id)
        assert after is not None
        return before, after

    def add_comment(self, post_id: int, author: str, body: str) -> None:
        now = dt.datetime.now(dt.timezone.utc).replace(microsecond=0)
        self.db.execute(
            "INSERT INTO blog_comments (post_id, author, body, created) VALUES (?, ?, ?, ?)",
            (post_id, author, body, now.isoformat()),
        )

    def close(self) -> None:
        self.db.close()


_SAMPLES = [
    (
        "python",
        "def fib(n):\n    a, b = 0, 1\n    for _ in range(n):\n"
        "        a, b = b, a + b\n    return a",
    ),
    (
        "rust",
        "fn main() {\n    let v: Vec<u32> = (1..=10).collect();\n"
        '    println!("{}", v.iter().sum::<u32>());\n}',
    ),
    ("sql", "SELECT tag, COUNT(*)\nFROM post_tags\nGROUP BY tag\nORDER BY 2 DESC;"),
    ("bash", 'for f in *.log; do\n  gzip -9 "$f"\ndone'),
]
_TOPICS = ["caching", "python", "rust", "databases", "http", "shell", "performance"]


def seed(url: str, posts: int = 14, fresh: bool = False) -> None:
    """Creates the schema and, if the blog is empty, ``posts`` posts over several months.

    ``url`` is an SQLite file path (or ``sqlite:///path``) or a ``postgresql://`` URL.
    ``fresh`` drops the blog's tables (``blog_posts``, ``blog_comments``) first.
    """
    if fresh:
        conn = Connection(url)
        try:
            conn.execute("DROP TABLE IF EXISTS blog_comments")
            conn.execute("DROP TABLE IF EXISTS blog_posts")
        finally:
            conn.close()
    st = Store(url)
    try:
        with st.db.transaction():
            if st.count():
                return
            start = dt.datetime(2026, 1, 5, 9, 0, tzinfo=dt.timezone.utc)
            for i in range(posts):
                lang, code = _SAMPLES[i % len(_SAMPLES)]
                tags = f"{_TOPICS[i % len(_TOPICS)]}, {_TOPICS[(i * 3 + 1) % len(_TOPICS)]}"
                body = (
                    f"Notes number {i + 1}: what we learned this week.\n\n"
                    f"A short example in {lang}:\n\n```{lang}\n{code}\n```\n\n"
                    "That is all for now."
                )
                when = start + dt.timedelta(days=9 * i)
                st.add_post(f"Week {i + 1}: {lang} notes", body, tags, when)
    finally:
        st.close()
