"""The Cache's rules that the Python package applies on its own side (tag limits, option
defaults, mode names, metric labels), read once, at import, from the native module's table
of ziggurat-cache's rules, so that each has one home, shared with the Node.js package.

    >>> DEFAULTS.ttl, DEFAULTS.copy, MAX_TAGS
    (300.0, 'shared', 8)
    >>> RULES["modes.degraded"]
    ('passthrough', 'local', 'raise')
"""

from __future__ import annotations

from dataclasses import dataclass
from types import MappingProxyType
from typing import Any

from ziggurat import _native

__all__ = [
    "COPY_MODES",
    "DEFAULTS",
    "DEGRADED_MODES",
    "HUGE_PAGES_MODES",
    "MAX_TAGS",
    "MIN_TAG_BYTES",
    "RULES",
    "Defaults",
]

#: Every rule by its dotted name ("tags.max", "defaults.ttl", "steps.HIT", ...).
RULES: MappingProxyType[str, Any] = MappingProxyType(_native.rules())


@dataclass(frozen=True)
class Defaults:
    """The default of every option of ``Cache`` that has one besides None.

    >>> DEFAULTS.l1_items // DEFAULTS.l1_negative_share
    1000
    """

    ttl: float
    neg_ttl: float
    jitter: float
    refresh_ahead: float
    loader_timeout: float
    l1_items: int
    #: Without ``l1_negative_items``, L1 keeps ``l1_items // l1_negative_share`` cached misses.
    l1_negative_share: int
    avg_item_size: int
    lock_timeout: float
    degraded_ttl: float
    directory: str
    serializer: str
    copy: str
    degraded: str
    huge_pages: str
    redis_timeout: float
    stream_length: int


#: The option defaults, from the table.
DEFAULTS = Defaults(
    **{k[len("defaults.") :]: v for k, v in RULES.items() if k.startswith("defaults.")}
)
#: The most tags an entry carries.
MAX_TAGS: int = RULES["tags.max"]
#: The shortest tag (none is empty).
MIN_TAG_BYTES: int = RULES["tags.min_bytes"]
#: What a cache does when its shared segment cannot be used.
DEGRADED_MODES: tuple[str, ...] = RULES["modes.degraded"]
#: How L1 hands out what it keeps (the ``copy`` option).
COPY_MODES: tuple[str, ...] = RULES["modes.copy"]
#: Whether the segments' mappings ask for huge pages (the ``huge_pages`` option).
HUGE_PAGES_MODES: tuple[str, ...] = RULES["modes.huge_pages"]
