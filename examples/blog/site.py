"""The blog itself, independent of the server interface: routes, pages, cache tags, purges.

Every page names its groups in the ``Cache-Tag`` header, and every change purges exactly
the groups it affects:

=================  ===============================================================
page               tags
=================  ===============================================================
``/``, ``/page/N``  ``lists``
``/posts/<slug>``  ``post:<id>``
``/archive``       ``archive``
``/tags/``         ``tags``
``/tags/<tag>``    ``tag:<tag>``
``/feed.atom``     ``feed``
``/about``         ``about``
=================  ===============================================================

- a new post purges ``lists``, ``archive``, ``feed``, ``tags`` and its tags' pages: no post
  page;
- an edit purges ``lists``, the tag pages of its old and new tags (and ``tags`` when they
  changed) and that post;
- a comment purges ``lists`` (they show comment counts) and that post only.
"""

from __future__ import annotations

import hashlib
import hmac
import os
import re
from dataclasses import dataclass, field
from typing import Any
from urllib.parse import quote

import jinja2
from markupsafe import Markup, escape
from pygments import highlight
from pygments.formatters import HtmlFormatter
from pygments.lexers import TextLexer, get_lexer_by_name
from pygments.util import ClassNotFound

from examples.blog.store import Post, Store

PAGE_SIZE = 5
# Browsers revalidate every time; the shared cache keeps pages an hour, purged on change.
CACHE_CONTROL = "public, max-age=0, s-maxage=3600"
_FENCE = re.compile(r"```([\w+-]*)\n(.*?)\n```", re.S)
_FORMATTER = HtmlFormatter(cssclass="code")


@dataclass
class Request:
    method: str
    path: str
    query: dict[str, str] = field(default_factory=dict)
    form: dict[str, str] = field(default_factory=dict)
    headers: dict[str, str] = field(default_factory=dict)


@dataclass
class Response:
    status: int
    body: bytes
    headers: list[tuple[str, str]] = field(default_factory=list)


def render_body(text: str) -> Markup:
    """Paragraphs and fenced code blocks, the code highlighted by pygments."""
    out: list[str] = []
    pos = 0
    for m in _FENCE.finditer(text):
        out.extend(_paragraphs(text[pos : m.start()]))
        try:
            lexer = get_lexer_by_name(m.group(1)) if m.group(1) else TextLexer()
        except ClassNotFound:
            lexer = TextLexer()
        out.append(highlight(m.group(2), lexer, _FORMATTER))
        pos = m.end()
    out.extend(_paragraphs(text[pos:]))
    return Markup("\n".join(out))


def _paragraphs(text: str) -> list[str]:
    return [f"<p>{escape(p.strip())}</p>" for p in text.split("\n\n") if p.strip()]


class Blog:
    """One blog: a database file, the cache whose tags it purges, an admin token."""

    def __init__(self, store: Store, cache: Any, admin_token: str, title: str = "Ziggurat notes"):
        self.store = store
        self.cache = cache
        self.admin_token = admin_token
        self.title = title
        here = os.path.join(os.path.dirname(os.path.abspath(__file__)), "templates")
        self.env = jinja2.Environment(
            loader=jinja2.FileSystemLoader(here),
            autoescape=jinja2.select_autoescape(["html", "xml"]),
        )
        self.env.filters["body"] = render_body
        self.env.globals.update(blog_title=self.title, code_css=_FORMATTER.get_style_defs(".code"))

    # -- responses -------------------------------------------------------------------------

    def _page(
        self,
        template: str,
        groups: list[str],
        status: int = 200,
        ctype: str = "text/html; charset=utf-8",
        **ctx: Any,
    ) -> Response:
        body = self.env.get_template(template).render(**ctx).encode()
        etag = '"' + hashlib.blake2b(body, digest_size=10).hexdigest() + '"'
        headers = [
            ("Content-Type", ctype),
            ("Cache-Control", CACHE_CONTROL),
            ("ETag", etag),
            ("Cache-Tag", ", ".join(groups)),
        ]
        return Response(status, body, headers)

    def _redirect(self, location: str) -> Response:
        return Response(303, b"", [("Location", location), ("Cache-Control", "no-store")])

    def _text(self, status: int, text: str) -> Response:
        return Response(
            status, text.encode(), [("Content-Type", "text/plain"), ("Cache-Control", "no-store")]
        )

    # -- routing -------------------------------------------------------------------------

    def handle(self, req: Request) -> Response:
        p = req.path
        if req.method in ("GET", "HEAD"):
            if p == "/":
                return self.list_page(1)
            if m := re.fullmatch(r"/page/(\d{1,6})", p):
                return self.list_page(int(m.group(1)))
            if m := re.fullmatch(r"/posts/([a-z0-9-]+)", p):
                return self.post_page(m.group(1))
            if p == "/archive":
                return self._page("archive.html", ["archive"], posts=self.store.all())
            if p == "/tags/":
                return self._page("tags.html", ["tags"], tags=self.store.all_tags())
            if m := re.fullmatch(r"/tags/([a-z0-9_-]+)", p):
                tag = m.group(1)
                return self._page("tag.html", [f"tag:{tag}"], tag=tag, posts=self.store.tagged(tag))
            if p == "/feed.atom":
                return self._page(
                    "feed.xml", ["feed"], ctype="application/atom+xml", posts=self.store.page(1, 20)
                )
            if p == "/about":
                return self._page("about.html", ["about"])
            return self._text(404, "not found")
        if req.method == "POST":
            if m := re.fullmatch(r"/posts/([a-z0-9-]+)/comments", p):
                return self.comment(m.group(1), req.form)
            if p == "/admin/posts":
                return self.new_post(req)
            if m := re.fullmatch(r"/admin/posts/(\d+)", p):
                return self.edit_post(int(m.group(1)), req)
            return self._text(404, "not found")
        return self._text(405, "method not allowed")

    # -- pages ---------------------------------------------------------------------------

    def list_page(self, number: int) -> Response:
        total = self.store.count()
        pages = max(1, -(-total // PAGE_SIZE))
        if number < 1 or number > pages:
            return self._text(404, "no such page")
        posts = self.store.page(number, PAGE_SIZE)
        return self._page("list.html", ["lists"], posts=posts, number=number, pages=pages)

    def post_page(self, slug: str) -> Response:
        post = self.store.by_slug(slug)
        if post is None:
            return self._text(404, "no such post")
        comments = self.store.comments(post.id)
        return self._page("post.html", [f"post:{post.id}"], post=post, comments=comments)

    # -- changes -------------------------------------------------------------------------

    def _admin(self, req: Request) -> bool:
        given = req.headers.get("x-admin-token", "") or req.form.get("token", "")
        return hmac.compare_digest(given.encode(), self.admin_token.encode())

    def new_post(self, req: Request) -> Response:
        if not self._admin(req):
            return self._text(403, "forbidden")
        f = req.form
        if not f.get("title") or not f.get("body"):
            return self._text(400, "title and body are required")
        post = self.store.add_post(f["title"], f["body"], f.get("tags", ""))
        self.cache.invalidate_tags("lists", "archive", "feed", "tags", *_tag_groups(post))
        return self._redirect(f"/posts/{quote(post.slug)}")

    def edit_post(self, post_id: int, req: Request) -> Response:
        if not self._admin(req):
            return self._text(403, "forbidden")
        f = req.form
        old = self.store.by_id(post_id)
        if old is None:
            return self._text(404, "no such post")
        before, after = self.store.edit_post(
            post_id,
            f.get("title") or old.title,
            f.get("body") or old.body,
            f.get("tags", ",".join(old.tags)),
        ) or (old, old)
        groups = {"lists", f"post:{post_id}", *_tag_groups(before), *_tag_groups(after)}
        if before.tags != after.tags:
            groups.add("tags")
        self.cache.invalidate_tags(*sorted(groups))
        return self._redirect(f"/posts/{quote(after.slug)}")

    def comment(self, slug: str, form: dict[str, str]) -> Response:
        post = self.store.by_slug(slug)
        if post is None:
            return self._text(404, "no such post")
        author, body = form.get("author", "").strip()[:80], form.get("body", "").strip()[:4000]
        if not author or not body:
            return self._text(400, "author and comment are required")
        self.store.add_comment(post.id, author, body)
        self.cache.invalidate_tags("lists", f"post:{post.id}")
        return self._redirect(f"/posts/{quote(post.slug)}#comments")


def _tag_groups(post: Post) -> list[str]:
    return [f"tag:{t}" for t in post.tags]
