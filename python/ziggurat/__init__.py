"""ziggurat: a multi-level cache for web applications that run as many worker processes.

    >>> from ziggurat import Cache
    >>> cache = Cache("doctest", size="8MiB", ttl=60)
    >>> cache.set("greeting", {"text": "hello"})
    >>> cache.get("greeting")
    {'text': 'hello'}
    >>> cache.unlink()

Tiers: L1 (live objects in each process, validated on every hit against version stamps in
shared memory), L2 (one shared-memory segment per host, see ``Segment``), and a loader
underneath (``Cache.fetch``).
"""

from ziggurat._native import LockTimeout, SegmentError, ZigguratError
from ziggurat._native import Segment as Segment
from ziggurat.cache import Cache, MutationError, Namespace
from ziggurat.load_context import LoadContext, load_context
from ziggurat.loader import LoadTimeout
from ziggurat.serializers import Serializer

__all__ = [
    "Cache",
    "LoadContext",
    "LoadTimeout",
    "LockTimeout",
    "MutationError",
    "Namespace",
    "Segment",
    "SegmentError",
    "Serializer",
    "ZigguratError",
    "load_context",
]
__version__ = "0.1.0"
