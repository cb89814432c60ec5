"""The host tier of one cache: its two shared segments (the values and the cached misses),
or why it runs without them, a failure met in use noted once, and failed writes logged
and counted.

    >>> from ziggurat import Cache
    >>> h = Host.open(Cache.options("doc-host", "8MiB"))
    >>> h.reason is None, h.main is not None
    (True, True)
    >>> h.unlink()
"""

from __future__ import annotations

import logging
import warnings
from typing import Any

from ziggurat._native import (
    Segment,
    SegmentError,
    ZigguratError,
    degraded_refusal,
    degraded_warning,
    open_pair,
)
from ziggurat.options import CacheOptions

__all__ = ["Host", "open_segments"]

log = logging.getLogger("ziggurat")

#: Directories whose start-up notice (``Segment.directory_notice``) was given.
_NOTICED_DIRECTORIES: set[str] = set()
#: Directories where a default size was fitted to the free space (said once too).
_FITTED_DIRECTORIES: set[str] = set()


def _warn(msg: str, stacklevel: int) -> None:
    log.warning(msg)
    warnings.warn(msg, RuntimeWarning, stacklevel=stacklevel + 1)


def open_segments(o: CacheOptions) -> tuple[Segment, Segment, str | None]:
    """Opens (or creates) the cache's two segment files: both, or neither (an error);
    with the default size, what fits the directory, and the notice that says so."""
    main, neg, notice = open_pair(
        o.segment_name,
        o.size_bytes,
        o.neg_bytes,
        avg_item_size=o.avg_item_size,
        **o.segment_args(),
    )
    return main, neg, notice


class Host:
    """The segments of one cache in this process, and what went wrong with them."""

    def __init__(self, o: CacheOptions, main: Segment | None, neg: Segment | None) -> None:
        self.name = o.name
        self.main = main
        self.neg = neg
        #: Why the segment cannot be used (None while it can).
        self.reason: str | None = None
        #: The same as a short name (the segment error's ``cause``: missing_directory,
        #: not_writable, other_owner, no_space, damaged, incompatible, locked, io).
        self.cause: str | None = None
        self.write_errors = 0
        self.store_failures = 0
        self._logged: set[tuple[str, Any]] = set()

    @classmethod
    def open(cls, o: CacheOptions, stacklevel: int = 1) -> Host:
        """The segments of the cache ``o`` describes; without them (degraded), the reason,
        logged and warned about, or ``SegmentError`` for ``degraded="raise"``. Warnings
        name the caller ``stacklevel`` frames up."""
        try:
            main, neg, fitted = open_segments(o)
        except (ZigguratError, OSError) as e:
            cause = getattr(e, "cause", None) or "io"
            if o.degraded == "raise":
                err = SegmentError(degraded_refusal(f"Cache({o.name!r})", str(e)))
                err.cause = cause  # type: ignore[attr-defined]
                raise err from e
            host = cls(o, None, None)
            host.reason = str(e)
            host.cause = cause
            local_ttl = None if o.degraded == "passthrough" else o.degraded_ttl
            _warn(degraded_warning(repr(o.name), str(e), local_ttl), stacklevel + 1)
            return host
        if fitted is not None and o.directory not in _FITTED_DIRECTORIES:
            _FITTED_DIRECTORIES.add(o.directory)
            _warn(fitted, stacklevel + 1)
        notice = main.directory_notice
        if notice is not None and o.directory not in _NOTICED_DIRECTORIES:
            # Once per directory and process: every cache there shares the risk.
            _NOTICED_DIRECTORIES.add(o.directory)
            _warn(f"ziggurat cache {o.name!r}: {notice}", stacklevel + 1)
        if main.size != main.requested_size:
            _warn(
                f"ziggurat cache {o.name!r}: the segment at {main.path} was created "
                f"with other parameters (a {main.size}-byte file, where size="
                f"{o.size_bytes or 'the default'} and avg_item_size={o.avg_item_size} make a "
                f"{main.requested_size}-byte one); it is used as it is, and "
                "stats() shows its real size. To use the new parameters, remove the old "
                "files once no process uses them (Cache.unlink()), or open the cache under "
                "a new version=",
                stacklevel + 1,
            )
        return cls(o, main, neg)

    def failure(self, stacklevel: int = 1) -> str | None:
        """Why the segments cannot be used, if they cannot. A segment that stopped while
        in use (it contained a panic of the engine) is noted once, as an open that
        failed is: reason, cause and a warning (naming the caller ``stacklevel`` up)."""
        if self.reason is not None:
            return self.reason
        for seg in (self.main, self.neg):
            why = seg.failure if seg is not None else None
            if why is not None and seg is not None:
                self.reason = f"segment file {seg.path}: {why}"
                self.cause = "damaged"
                _warn(
                    f"ziggurat cache {self.name!r} stopped using its shared segment "
                    f"({self.reason}): reads miss and writes fail until the file is "
                    "removed once no process uses it (Cache.unlink(), or `ziggurat rm`) and "
                    "the processes restart",
                    stacklevel + 1,
                )
                return self.reason
        return None

    def write_failed(self, what: str, key: Any, e: BaseException) -> None:
        """Called by the native core too. A failed ``set`` is raised to its caller as
        well; a failed store of a loaded value is not (the value is still returned).
        Each kind of failure is logged once per key, so a hot key cannot flood the log."""
        if what == "decode":
            tag = "undecodable value"
        elif what == "stale":
            tag = "loader failed, stale value served instead"
        else:
            self.failure(2)
            self.write_errors += 1
            if what == "store":
                self.store_failures += 1
            tag = f"failed {what}"
        if len(self._logged) < 10_000 and (what, key) not in self._logged:
            self._logged.add((what, key))
            log.warning("ziggurat cache %r: %s of key %r: %s", self.name, tag, key, e)

    def stats(self) -> dict[str, Any]:
        """The host's counters (``stats()["host"]``), read from the segments."""
        if self.main is None or self.neg is None:
            return {"l2": {}, "negative_l2": {}}
        l2: dict[str, Any] = dict(self.main.stats())
        total = l2["hits"] + l2["misses"]
        l2["hit_ratio"] = l2["hits"] / total if total else 0.0
        return {
            "l2": l2,
            "negative_l2": self.neg.stats(),
            "huge_pages": self.main.huge_pages(),
        }

    def close(self) -> None:
        """Detaches this process from both segments."""
        for s in (self.main, self.neg):
            if s is not None:
                s.close()

    def unlink(self) -> None:
        """Removes both segment files (those still open here)."""
        for s in (self.main, self.neg):
            if s is not None and not s.closed:
                s.unlink()
