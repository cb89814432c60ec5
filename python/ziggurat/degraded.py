"""How a cache runs without its shared segment (``degraded="passthrough"`` or ``"local"``):
``add``, ``incr`` and ``touch``, atomic across processes with a segment, are made atomic
within this process only, over the native ``get`` and ``set``.

>>> import warnings
>>> from ziggurat import Cache
>>> with warnings.catch_warnings(record=True):  # the warning that the segment is missing
...     c = Cache("doc-degraded-mode", size="8MiB", directory="/nonexistent", degraded="local")
>>> c.degraded, c.incr("n", default=0), c.incr("n")
(True, 1, 2)
"""

from __future__ import annotations

import logging
import threading
from collections.abc import Iterable
from typing import TYPE_CHECKING, Any

from ziggurat import _native
from ziggurat.args import check_key, int_arg, tags_arg, ttl_arg

if TYPE_CHECKING:
    from ziggurat.options import CacheOptions
    from ziggurat.state import CacheState

    _Base = CacheState
else:
    _Base = object

__all__ = ["Degraded"]

log = logging.getLogger("ziggurat")

# Marks "absent" where None is a valid cached value.
_MISSING: Any = object()


class Degraded(_Base):
    """The methods of a cache without a segment that differ from the native ones."""

    _local: threading.Lock

    def _join(self, o: CacheOptions) -> None:
        self._local = threading.Lock()
        if o.link is not None:
            log.warning(
                "ziggurat cache %r: no shared segment, so no cluster tier either (%s)",
                self.name,
                self.degraded_reason,
            )

    def add(
        self,
        key: str | bytes,
        value: Any,
        *,
        ttl: float | None = None,
        tags: Iterable[str] = (),  # type: ignore[override]
    ) -> bool:
        self._check_open()
        check_key(key, "Cache.add")
        with self._local:
            if self.get(key, _MISSING) is not _MISSING:
                return False
            self.set(key, value, ttl=ttl, tags=tags)
            return True

    def incr(
        self,
        key: str | bytes,
        delta: int = 1,
        *,
        default: int | None = None,
        tags: Iterable[str] = (),  # type: ignore[override]
    ) -> int:
        self._check_open()
        m = "Cache.incr"
        int_arg(delta, "delta", m)
        if default is not None:
            int_arg(default, "default", m)
        tg = tags_arg(tags, m)
        check_key(key, m)
        with self._local:
            cur = self.get(key, _MISSING)
            created = cur is _MISSING
            if created:
                if default is None:
                    raise KeyError(key)
                cur = default
            if isinstance(cur, bool) or not isinstance(cur, int):
                raise TypeError(f"{m}(): the value of {key!r} is not an integer")
            n = cur + delta
            if not -(2**63) <= n < 2**63:
                raise OverflowError(f"{m}(): {_native.incr_overflow(repr(key))}")
            self.set(key, n, tags=tg if created else ())
            return n

    def touch(self, key: str | bytes, ttl: float | None = None) -> bool:
        self._check_open()
        t = ttl_arg(ttl, self.ttl, "ttl", "Cache.touch")
        check_key(key, "Cache.touch")
        with self._local:
            cur = self.get(key, _MISSING)
            if cur is _MISSING:
                return False
            self.set(key, cur, ttl=t)
            return True
