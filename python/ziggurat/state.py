"""``CacheState``: what every mode of a cache shares, below the ``Cache`` that assembles it:
the Python attributes ``factory.build`` sets beside the native part, the hooks a mode fills
(``_join``, ``_detach``), whether the cache is open, and whether it has its segment.

>>> from ziggurat import Cache
>>> c = Cache("doc-state", size="8MiB"); isinstance(c, CacheState), c.closed
(True, False)
>>> c.unlink()

The modes (``degraded``, ``clustered``, ``closed``) and the helpers ``Cache`` uses are written
against this class, so that none of them needs the module of ``Cache``.
"""

from __future__ import annotations

from ziggurat import _native
from ziggurat._native import Cache as CacheCore
from ziggurat._native import ZigguratError
from ziggurat.cluster.reader import Reader
from ziggurat.cluster.tier import ClusterTier
from ziggurat.host import Host
from ziggurat.loader import LoaderStats, Loads
from ziggurat.options import CacheOptions
from ziggurat.serializers import Serializer

__all__ = ["CacheState", "closed_error"]


def closed_error(name: str) -> ZigguratError:
    """The error of any call to the closed cache ``name``.

    >>> print(closed_error("api"))
    the cache 'api' is closed; open a new Cache to use it again
    """
    return ZigguratError(f"the cache {name!r} is closed; open a new Cache to use it again")


class CacheState(CacheCore):
    """The Python half of a cache, over its native part: the options it runs with, its
    host's segments, its loads and its cluster tier.

    >>> from ziggurat import Cache
    >>> c = Cache("doc-cache-state", size="8MiB", ttl=5); c.ttl, c.degraded_mode
    (5.0, 'passthrough')
    >>> c.unlink()
    """

    name: str
    ttl: float
    neg_ttl: float | None
    stale_ttl: float | None
    jitter: float
    refresh_ahead: float
    loader_timeout: float
    serializer: Serializer
    copy: str
    debug: bool
    version: int | str | None
    degraded_mode: str
    degraded_ttl: float
    closed: bool
    loader_stats: LoaderStats
    _core: CacheCore
    _host: Host
    _loads: Loads
    _tier: ClusterTier | None
    _reader: Reader | None

    def _join(self, o: CacheOptions) -> None:
        """What the cache's mode adds once the cache is built (a cluster tier)."""

    def _detach(self) -> None:
        """What the cache's mode stops when the cache is closed."""

    def _check_open(self) -> None:
        if self.closed:
            raise closed_error(self.name)

    @property
    def degraded(self) -> bool:
        """Whether the cache runs without its shared segment (see ``degraded_reason``):
        it could not be opened, or an operation stopped on data it could not handle
        (a damaged file, ``degraded_cause`` "damaged"), after which reads miss and writes
        raise ``SegmentError``.

        >>> from ziggurat import Cache
        >>> c = Cache("doc-degraded", size="8MiB"); c.degraded
        False
        >>> c.unlink()
        """
        return self._host.main is None or self._host.failure(2) is not None

    @property
    def degraded_reason(self) -> str | None:
        """Why the shared segment cannot be used (None while it can)."""
        return self._host.reason

    @property
    def degraded_cause(self) -> str | None:
        """``degraded_reason`` as a short name: missing_directory, not_writable, other_owner,
        no_space, damaged, incompatible, locked or io."""
        return self._host.cause

    @property
    def _segment(self) -> _native.Segment | None:
        return self._host.main
