"""What every framework backend needs from the Cache the same way: one ``Cache`` per name
and options per process, the option names a backend may pass on, the TTL beyond which a
framework's timeout means "forever", and keys that fit the segment however long the
framework makes them.

    >>> c = shared_cache("doc-shared", {"size": "8MiB"}, ValueError)
    >>> c is shared_cache("doc-shared", {"size": "8MiB"}, ValueError)
    True
    >>> len(fitting_key(b"k" * 10_000))
    321
    >>> c.unlink()
"""

from __future__ import annotations

import hashlib
import inspect
import threading
from collections.abc import Callable
from typing import Any

from ziggurat.args import MAX_KEY, MAX_TTL
from ziggurat.cache import Cache

__all__ = [
    "CACHE_OPTIONS",
    "MAX_KEY",
    "MAX_TTL",
    "fitting_key",
    "shared_cache",
    "with_fresh_objects",
]

#: The keyword options of ``Cache`` a backend passes on (its own timeout replaces ``ttl``).
CACHE_OPTIONS = frozenset(inspect.signature(Cache).parameters) - {"name", "ttl"}

_registry: dict[tuple[str, str], Cache] = {}
_registry_lock = threading.Lock()


def shared_cache(name: str, options: dict[str, Any], error: Callable[[str], Exception]) -> Cache:
    """The process's one ``Cache`` for this name and these options. Frameworks build a
    backend per thread, alias, app or region; opening the segments for each would map them
    again. A cache that was closed is opened anew. Bad options raise ``error(message)``,
    the message naming the cache, the options and what the Cache said.

    >>> try:
    ...     shared_cache("doc-shared-bad", {"size": "lots"}, LookupError)
    ... except LookupError as e:
    ...     print(str(e)[:38])
    cannot open the cache 'doc-shared-bad'
    """
    key = (name, repr(sorted(options.items(), key=lambda item: item[0])))
    with _registry_lock:
        cache = _registry.get(key)
        if cache is None or cache.closed:
            try:
                cache = Cache(name, **options)
            except (TypeError, ValueError) as e:
                raise error(f"cannot open the cache {name!r} with options {options!r}: {e}") from e
            _registry[key] = cache
        return cache


def with_fresh_objects(options: dict[str, Any]) -> dict[str, Any]:
    """``options`` with ``copy="decode"`` unless they choose a copy mode. Django's and
    cachelib's own backends hand out a fresh object per get, and code written for them
    changes what it reads back (Django's GZipMiddleware compresses a cached response in
    place): a backend standing in for them must do the same.

    >>> with_fresh_objects({}), with_fresh_objects({"copy": "shared"})
    ({'copy': 'decode'}, {'copy': 'shared'})
    """
    return {"copy": "decode", **options}


def fitting_key(raw: bytes) -> bytes:
    """``raw`` if the segment takes it, else its first 256 bytes and a 256-bit digest of the
    whole (the same key in every process).

    >>> fitting_key(b"short")
    b'short'
    """
    if len(raw) <= MAX_KEY:
        return raw
    return raw[:256] + b"#" + hashlib.blake2b(raw, digest_size=32).hexdigest().encode()
