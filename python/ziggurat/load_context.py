"""What a loader may say of its own result: ``load_context()``, called inside the loader
that ``fetch``, ``afetch`` or ``@cached`` runs on a miss.

- ``set_ttl(seconds)``: the value is stored for that long, as given, instead of the
  call's TTL;
- ``set_tags(*tags)``: the value (or the cached miss of a ``None``) is stored with these
  tags instead of the call's, such as its author's, known only once it is loaded;
- ``skip()``: the value is returned but not stored (the next call loads again).

The rules are the Cache's, the same for every front end (Node.js's loaders get the same
three as ``ctx.setTtl``, ``ctx.setTags`` and ``ctx.skip``): what a loader chose is checked as
a write's argument, and a value with tags chosen after its load is stored only if no tag
was invalidated during the load.

>>> from ziggurat import Cache, load_context
>>> c = Cache("doc-load-context", size="8MiB")
>>> def load_post():
...     post = {"id": 7, "author": 3}
...     load_context().set_tags(f"author:{post['author']}")
...     return post
>>> c.fetch("post:7", load_post)["author"]
3
>>> c.invalidate_tags("author:3"); c.get("post:7") is None
True
>>> c.unlink()
"""

from __future__ import annotations

from contextvars import ContextVar

from ziggurat.args import tags_arg, ttl_arg
from ziggurat.rules import MAX_TAGS

__all__ = ["CURRENT", "LoadContext", "load_context"]


class LoadContext:
    """What the loader being run said of its result (see the module docstring).

    >>> ctx = LoadContext()
    >>> ctx.set_ttl(30); ctx.set_tags("author:3"); ctx.ttl, ctx.tags, ctx.said
    (30.0, ('author:3',), True)
    """

    __slots__ = ("said", "skipped", "tags", "ttl")

    def __init__(self) -> None:
        self.said = False
        self.ttl: float | None = None
        self.tags: tuple[str, ...] | None = None
        self.skipped = False

    def set_ttl(self, ttl: float) -> None:
        """Stores the loaded value for ``ttl`` seconds (> 0; ``math.inf``: no expiry), as
        given, instead of the call's TTL."""
        if ttl is None:
            raise TypeError("load_context().set_ttl(): ttl must be a number of seconds, not None")
        self.ttl = ttl_arg(ttl, None, "ttl", "load_context().set_ttl")
        self.said = True

    def set_tags(self, *tags: str) -> None:
        """Stores the loaded value (or the cached miss of ``None``) with ``tags`` instead of
        the call's (at most MAX_TAGS)."""
        out = tags_arg(tags, "load_context().set_tags")
        if not out:
            raise TypeError("load_context().set_tags(): give at least one tag")
        if len(out) > MAX_TAGS:
            raise ValueError(f"load_context().set_tags(): at most {MAX_TAGS} tags, got {len(out)}")
        self.tags = out
        self.said = True

    def skip(self) -> None:
        """Returns the loaded value without storing it (counted as a load)."""
        self.skipped = True
        self.said = True


#: The context of the loader running in this task or thread (None outside one). Set by the
#: native ``fetch`` around a sync loader, and by ``afetch`` around an awaited one.
CURRENT: ContextVar[LoadContext | None] = ContextVar("ziggurat_load_context", default=None)


def load_context() -> LoadContext:
    """The context of the loader running now, to say what becomes of its result.

    Raises ``RuntimeError`` outside a loader that ``fetch``, ``afetch`` or ``@cached`` runs.

    >>> load_context()
    Traceback (most recent call last):
    RuntimeError: load_context(): call it inside a loader run by fetch(), afetch() or @cached
    """
    ctx = CURRENT.get()
    if ctx is None:
        raise RuntimeError(
            "load_context(): call it inside a loader run by fetch(), afetch() or @cached"
        )
    return ctx
