"""App calls the middleware stopped waiting for (``app_timeout``) that still run.

When ``app_timeout`` passes and a stale response answers instead, the app call goes on:
a thread cannot be stopped, and an ASGI task that awaits a sync view in a thread pool
ends only when that thread does. Left alone, every later request for the URL would start
another call beside it, so a slow origin would see as many concurrent calls as requests.
Instead, while an abandoned call of a URL runs, its fill lock holds the ``ERROR`` marker
in the shared cache: every process of the host answers the URL with its stale response
(where stale-if-error allows) without calling the app, until the call ends. A process
abandons at most ``MAX_ABANDONED`` calls at once; past that, it waits for the app as if
there were no ``app_timeout``.

>>> calls = Abandoned()
>>> calls.admit()
True
"""

from __future__ import annotations

import logging
import threading
from typing import Any

from ziggurat import _native
from ziggurat.http.outcome import ERROR

__all__ = ["HOLD_TTL", "MAX_ABANDONED", "Abandoned", "calls"]

log = logging.getLogger("ziggurat.http")

# Abandoned calls one process lets run at once (the crate's figure, as every front end's).
MAX_ABANDONED: int = _native.HTTP_DEFAULTS["max_abandoned"]
# How long the marker holds the URL if the process dies before its call ends (seconds).
HOLD_TTL: float = _native.HTTP_DEFAULTS["abandoned_hold"]


class Abandoned:
    """The abandoned calls of this process, by fill lock key.

    >>> from ziggurat import Cache
    >>> c = Cache("doc-abandoned", size="8MiB")
    >>> a = Abandoned()
    >>> a.start(c, b"zh2L:http://h /slow")
    >>> c.get(b"zh2L:http://h /slow"), a.running
    ('E', 1)
    >>> a.end(c, b"zh2L:http://h /slow")
    >>> c.get(b"zh2L:http://h /slow"), a.running
    (None, 0)
    >>> c.unlink()
    """

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._by_key: dict[bytes, int] = {}
        self.running = 0

    def admit(self) -> bool:
        """Whether one more call may be abandoned now (else: wait for the app)."""
        with self._lock:
            return self.running < MAX_ABANDONED

    def start(self, cache: Any, lock: bytes) -> None:
        """A call of the URL whose fill lock is ``lock`` was abandoned: hold the URL for
        stale answers until ``end``."""
        with self._lock:
            self.running += 1
            self._by_key[lock] = self._by_key.get(lock, 0) + 1
        try:
            cache.set(lock, ERROR, ttl=HOLD_TTL)
        except Exception as e:  # the cache never fails the request
            log.warning("ziggurat.http: holding %r for an abandoned call failed: %r", lock, e)

    def end(self, cache: Any, lock: bytes) -> None:
        """The abandoned call ended: the URL's next request may call the app again."""
        with self._lock:
            self.running -= 1
            left = self._by_key.get(lock, 1) - 1
            if left:
                self._by_key[lock] = left
            else:
                self._by_key.pop(lock, None)
        if not left:
            try:
                cache.delete(lock)
            except Exception as e:
                log.warning("ziggurat.http: releasing %r failed: %r", lock, e)


# The process's one registry (every middleware instance of the process shares the cap).
calls = Abandoned()
