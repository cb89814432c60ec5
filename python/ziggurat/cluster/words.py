"""The words the cluster tier keeps in the host's segment (``W``), and the host-wide
figures read from them (``host_figures``): every process of the host, the stream reader
and the command line read the same words.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from ziggurat._native import CLUSTER_FIGURES as FIGURES
from ziggurat._native import CLUSTER_WORDS as _WORDS

__all__ = ["W", "host_figures"]


class W:
    """Indices of the words the tier keeps in the segment (zero in a new file): the
    table of ziggurat-cluster (its ``words`` module, which says what each holds; see
    docs/format.md), by name.

    >>> W.LEASE, W.JOINED
    (0, 20)
    """

    LEASE: int = _WORDS["LEASE"]
    BEAT: int = _WORDS["BEAT"]
    SEQ: int = _WORDS["SEQ"]
    ID_MS: int = _WORDS["ID_MS"]
    ID_SEQ: int = _WORDS["ID_SEQ"]
    HOST: int = _WORDS["HOST"]
    DIRTY: int = _WORDS["DIRTY"]
    APPLIED: int = _WORDS["APPLIED"]
    GAP_CLEARS: int = _WORDS["GAP_CLEARS"]
    LAG_P50: int = _WORDS["LAG_P50"]
    LAG_P99: int = _WORDS["LAG_P99"]
    PUBLISHED: int = _WORDS["PUBLISHED"]
    POSITIONED: int = _WORDS["POSITIONED"]
    GEN: int = _WORDS["GEN"]
    FENCE: int = _WORDS["FENCE"]
    REPLAYS: int = _WORDS["REPLAYS"]
    FOLLOWER: int = _WORDS["FOLLOWER"]
    FOLLOWER_AT: int = _WORDS["FOLLOWER_AT"]
    CLEARED: int = _WORDS["CLEARED"]
    CLOCK: int = _WORDS["CLOCK"]
    JOINED: int = _WORDS["JOINED"]


def host_figures(load: Callable[[int], int]) -> dict[str, Any]:
    """The host-wide figures of the tier, from the words it keeps in the segment (``load``
    reads word ``i``: a ``Cache``'s core, or a read-only attach of the segment).

    >>> host_figures(lambda i: 0)["events_applied"], host_figures(lambda i: 0)["lag_p99_ms"]
    (0, 0.0)
    """
    # The table is ziggurat-cluster's: every front end shows the same figures.
    return {name: load(word) / unit if unit != 1 else load(word) for name, word, unit in FIGURES}
