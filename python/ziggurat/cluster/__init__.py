"""The cluster tier (L3): Redis or Valkey under every host's segment, with an ordered,
authenticated invalidation stream between hosts. ``Cache(..., redis=..., secret=...)``
turns it on; see docs/cluster.md.

>>> from ziggurat.cluster import ClusterTier, Reader
"""

from ziggurat.cluster.reader import Reader
from ziggurat.cluster.tier import ClusterTier

__all__ = ["ClusterTier", "Reader"]
