"""``Cache.cached``: a function's results cached, keyed by its name and arguments.

>>> from ziggurat import Cache
>>> c = Cache("doc-decorator", size="8MiB")
>>> @c.cached(ttl=60)
... def square(x):
...     return x * x
>>> square(4), square.key(4) == square.key(x=4)
(16, True)
>>> c.unlink()
"""

from __future__ import annotations

import functools
import inspect
from collections.abc import Callable, Iterable
from typing import TYPE_CHECKING, Any, TypeVar, cast

from ziggurat.args import tags_arg, ttl_arg
from ziggurat.keys import call_key

if TYPE_CHECKING:
    from ziggurat.access import CacheAccess

__all__ = ["TagsArg", "cached"]

F = TypeVar("F", bound=Callable[..., Any])
#: The ``tags`` of ``cached``: tags, or a function of the arguments returning them.
TagsArg = Iterable[str] | Callable[..., Iterable[str]] | None


def cached(
    cache: CacheAccess,
    ttl: float | None = None,
    tags: TagsArg = None,
    *,
    key: Callable[..., str] | None = None,
    neg_ttl: float | None = None,
    stale_ttl: float | None = None,
) -> Callable[[F], F]:
    """``Cache.cached``'s body (its documentation is there)."""
    m = "Cache.cached"
    ttl_arg(ttl, cache.ttl, "ttl", m)
    ttl_arg(neg_ttl, None, "neg_ttl", m)
    ttl_arg(stale_ttl, None, "stale_ttl", m)
    if key is not None and not callable(key):
        raise TypeError(f"{m}(): key must be a function of the arguments returning a str")
    if tags is not None and not callable(tags):
        tags = tags_arg(tags, m)

    def decorate(fn: F) -> F:
        prefix = f"{fn.__module__}.{fn.__qualname__}:"

        def make_key(args: tuple[Any, ...], kwargs: dict[str, Any]) -> str:
            if key is not None:
                k = key(*args, **kwargs)
                if not isinstance(k, str):
                    raise TypeError(f"{m}(): key function returned {type(k).__name__}, not str")
                return prefix + k
            return call_key(fn, args, kwargs)

        def make_tags(args: tuple[Any, ...], kwargs: dict[str, Any]) -> tuple[str, ...]:
            if tags is None:
                return ()
            if callable(tags):
                return tags_arg(tags(*args, **kwargs), m)
            return tags

        def key_of(*args: Any, **kwargs: Any) -> str:
            return make_key(args, kwargs)

        def invalidate(*args: Any, **kwargs: Any) -> bool:
            return cache.delete(make_key(args, kwargs))

        if inspect.iscoroutinefunction(fn):

            @functools.wraps(fn)
            async def awrapper(*args: Any, **kwargs: Any) -> Any:
                return await cache.afetch(
                    make_key(args, kwargs),
                    lambda: fn(*args, **kwargs),
                    ttl=ttl,
                    tags=make_tags(args, kwargs),
                    neg_ttl=neg_ttl,
                    stale_ttl=stale_ttl,
                )

            awrapper.key = key_of  # type: ignore[attr-defined]
            awrapper.invalidate = invalidate  # type: ignore[attr-defined]
            return cast(F, awrapper)

        @functools.wraps(fn)
        def wrapper(*args: Any, **kwargs: Any) -> Any:
            return cache.fetch(
                make_key(args, kwargs),
                lambda: fn(*args, **kwargs),
                ttl=ttl,
                tags=make_tags(args, kwargs),
                neg_ttl=neg_ttl,
                stale_ttl=stale_ttl,
            )

        wrapper.key = key_of  # type: ignore[attr-defined]
        wrapper.invalidate = invalidate  # type: ignore[attr-defined]
        return cast(F, wrapper)

    return decorate
