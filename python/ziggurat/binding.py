"""How the Python ``Cache`` classes serve the native cache's methods: the definitions
written only to document a native method, the quick entries of ``get`` and ``fetch``
installed on each class, the class of a cache in a given mode, and the view of the native
methods past the Python ones.

    >>> from ziggurat import Cache
    >>> type(Cache.get).__name__, Cache.get.__objclass__ is Cache
    ('method_descriptor', True)
"""

from __future__ import annotations

import types
from collections.abc import Callable
from typing import Any, TypeVar

from ziggurat import _native
from ziggurat._native import Cache as CacheCore

__all__ = ["NativeView", "install_native", "native_method", "variant"]

F = TypeVar("F", bound=Callable[..., Any])
C = TypeVar("C", bound=CacheCore)


def native_method(f: F) -> F:
    """Marks a method the native class implements: its definition documents it, and is
    removed once the class exists (``install_native``), so that calls reach the native
    method directly."""
    f.__native__ = True  # type: ignore[attr-defined]
    return f


#: The methods with a native quick entry (``quick.rs``).
QUICK = ("get", "fetch", "incr")


def install_native(cls: type[CacheCore], docs: dict[str, str]) -> None:
    """Makes ``cls`` serve the native methods: the documentation-only definitions go (their
    text kept in ``docs``, a module's ``__test__``, so that their examples still run), and
    ``get``, ``fetch`` and ``incr`` become the native quick entries, as descriptors of
    ``cls`` itself (CPython's specialized call of a method descriptor checks the instance's
    exact type), each unless ``cls`` defines it in Python."""
    for name, f in list(vars(cls).items()):
        if getattr(f, "__native__", False):
            docs[f"{cls.__qualname__}.{name}"] = f.__doc__ or ""
            delattr(cls, name)
    quick = [n for n in QUICK if not isinstance(getattr(cls, n), types.FunctionType)]
    _native.install_quick(cls, quick)


_VARIANTS: dict[tuple[type, type], type[Any]] = {}


def variant(cls: type[C], mixin: type) -> type[C]:
    """``cls`` with ``mixin``'s methods first: the class of a cache that runs in the mode
    ``mixin`` implements. Made once per pair; it keeps ``cls``'s names."""
    out: type[C] | None = _VARIANTS.get((cls, mixin))
    if out is None:
        attrs = {"__module__": cls.__module__, "__qualname__": cls.__qualname__}
        out = type(cls.__name__, (mixin, cls), attrs)
        _VARIANTS[(cls, mixin)] = out
    return out


class NativeView:
    """The native methods of one cache, past the Python methods that wrap or replace them:
    the cluster tier writes this host's tiers through it (``cache.set`` of a clustered
    cache writes Redis first).

    >>> from ziggurat import Cache
    >>> c = Cache("doc-native-view", size="8MiB"); c._core.set("k", 1); c._core.get("k")
    1
    >>> c.unlink()
    """

    def __init__(self, cache: CacheCore) -> None:
        self._cache = cache

    def __getattr__(self, name: str) -> Any:
        method = getattr(CacheCore, name).__get__(self._cache)
        setattr(self, name, method)  # looked up once per name
        return method
