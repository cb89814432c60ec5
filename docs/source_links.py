"""MkDocs hook: links from a page to files of the source tree, outside the site; and the
docstrings' doctest examples shown as code in the generated reference.

The pages are read on GitHub as well as on the site, so they link to the source tree the way
GitHub resolves it (``[examples/blog](../examples/blog)``, ``../README.md#stats``). The
site has no copy of those files: a link to a file that exists becomes its path in code
(the reader finds it in the repository), a link to ``README.md`` goes to the page that now
holds the heading it names (the README's sections moved into the site), and a link to a
path that does not exist is a warning, which ``mkdocs build --strict`` turns into a
failure, as it does for a broken link between pages.

    >>> _split("../README.md#stats")
    ('../README.md', 'stats')
"""

from __future__ import annotations

import logging
import os
import posixpath
import re
from typing import Any

from markdown import Markdown
from markdown.extensions import Extension
from markdown.extensions.toc import slugify
from markdown.preprocessors import Preprocessor
from mkdocs.plugins import event_priority

log = logging.getLogger("mkdocs.plugins.source_links")

_LINK = re.compile(r"(?<!!)\[([^\]\n]+)\]\(([^)\s]+)\)")
_FENCE = re.compile(r"^\s*(```|~~~)")
_HEADING = re.compile(r"^(#{1,6}) (.+?)\s*#*\s*$")
_CODE = re.compile(r"`[^`\n]*`")


def _split(target: str) -> tuple[str, str]:
    path, _, anchor = target.partition("#")
    return path, anchor


def _anchors(files: Any) -> dict[str, str]:
    """Every heading's anchor on the site -> the page (its path in docs_dir) that has it."""
    found: dict[str, str] = {}
    for f in files.documentation_pages():
        fenced = False
        with open(f.abs_src_path, encoding="utf-8") as src:
            for line in src:
                if _FENCE.match(line):
                    fenced = not fenced
                    continue
                m = None if fenced else _HEADING.match(line)
                if m:
                    text = re.sub(r"[`*]|\[([^\]]*)\]\([^)]*\)", r"\1", m.group(2))
                    found.setdefault(slugify(text, "-"), f.src_uri)
    return found


def _outside(markdown: str, page: Any, config: Any, files: Any) -> str:
    docs = os.path.abspath(config["docs_dir"])
    root = os.path.dirname(docs)
    here = os.path.dirname(page.file.src_uri)
    anchors: dict[str, str] | None = None

    def rewrite(m: re.Match[str]) -> str:
        nonlocal anchors
        label, target = m.group(1), m.group(2)
        if re.match(r"^[a-z][a-z0-9+.-]*:", target) or target.startswith(("#", "/")):
            return m.group(0)
        path, anchor = _split(target)
        full = os.path.normpath(os.path.join(docs, here, path))
        if full == docs or full.startswith(docs + os.sep):
            return m.group(0)  # a page of the site: MkDocs checks it
        rel = os.path.relpath(full, root)
        if not os.path.exists(full):
            log.warning("%s links to %s, which does not exist", page.file.src_uri, rel)
            return m.group(0)
        if rel == "README.md":
            anchors = anchors if anchors is not None else _anchors(files)
            dest = anchors.get(anchor, "index.md") if anchor else "index.md"
            if anchor and anchor not in anchors:
                log.warning("%s links to README.md#%s: no page has it", page.file.src_uri, anchor)
            new = posixpath.relpath(dest, here or ".") + (f"#{anchor}" if anchor else "")
            return f"[{label}]({new})"
        shown = f"`{rel}`"
        return shown if label.strip("`") == rel else f"{label} ({shown})"

    out: list[str] = []
    fenced = False
    for line in markdown.split("\n"):
        if _FENCE.match(line):
            fenced = not fenced
        elif not fenced:
            # Links inside inline code are text, not links.
            parts = _CODE.split(line)
            codes = _CODE.findall(line)
            line = "".join(
                _LINK.sub(rewrite, p) + (codes[i] if i < len(codes) else "")
                for i, p in enumerate(parts)
            )
        out.append(line)
    return "\n".join(out)


def on_page_markdown(markdown: str, page: Any, config: Any, files: Any) -> str:
    return _outside(markdown, page, config, files)


class _DoctestFences(Preprocessor):
    """Fences each run of doctest lines (``>>>`` and the output up to a blank line) as
    ``pycon`` code. The docstrings hold doctest examples (``make test`` runs them); as plain
    Markdown, their ``>>>`` would be nested quotes and their outputs' brackets links."""

    def run(self, lines: list[str]) -> list[str]:
        out: list[str] = []
        fenced = False
        session: list[str] = []
        for line in [*lines, ""]:
            if session and line.strip():
                session.append(line)
                continue
            if session:
                # An indented example (as in a module docstring) would be an indented code
                # block around the fence: the fence goes at the margin, the lines dedented.
                cut = len(session[0]) - len(session[0].lstrip())
                out += ["```pycon", *(x[cut:] if not x[:cut].strip() else x for x in session)]
                out += ["```"]
                session = []
            if _FENCE.match(line):
                fenced = not fenced
            if not fenced and line.lstrip().startswith(">>> "):
                session = [line]
            else:
                out.append(line)
        return out[:-1] if out and out[-1] == "" and (not lines or lines[-1] != "") else out


class _DoctestExtension(Extension):
    def extendMarkdown(self, md: Markdown) -> None:
        md.preprocessors.register(_DoctestFences(md), "doctest_fences", 35)


@event_priority(100)  # before mkdocstrings reads the extensions for its own renderer
def on_config(config: Any) -> Any:
    config["markdown_extensions"].append(_DoctestExtension())
    return config
