"""``Hit``: a stored response as one process serves it while it is fresh.

Everything a fresh hit sends is the same on every request but two lines: ``Age`` and the
``ttl`` of ``Cache-Status``, which move with the age. So the status, the body and the
stored headers (with ``Content-Length``) are put in the adapter's own form once per stored
response and process, and the two moving lines once per second of age: between two
seconds, serving a hit is a comparison of the clock against the bounds of the current
second and a copy of a finished list.

>>> from ziggurat.http.store import Stored
>>> s = Stored(200, ((b"content-type", b"text/plain"),), b"hi", 99.0, 100.0, 5.0, 60.0,
...            0.0, 0.0, frozenset(), None, None, (), (), ())
>>> h = Hit(s, cache_status=True)
>>> h.tick(110.5), h.headers[-2:]
(True, [(b'age', b'15'), (b'cache-status', b'ziggurat; hit; ttl=44')])
>>> h.since, h.until
(110.0, 111.0)
>>> h.tick(155.0)
False
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from ziggurat.http.store import Stored

__all__ = ["Hit"]

Hdrs = list[tuple[bytes, bytes]]
_NEVER = float("-inf")


class Hit:
    """One stored response, ready to send while fresh (see the module docstring).

    ``status`` and ``headers`` are in the adapter's form (``emit_status`` and
    ``emit_headers`` convert them; ASGI's form is the stored one); ``raw`` is the same
    header list as bytes pairs. ``headers`` and ``raw`` hold for times in ``[since,
    until)``; ``tick`` moves them to another time. ``hidden`` names stored lines that are
    not sent. Adapters send copies: servers and outer
    middleware may change the list they get.

    >>> from ziggurat.http.store import Stored
    >>> s = Stored(204, (), b"", 0.0, 0.0, 0.0, 10.0, 0.0, 0.0, frozenset(), None, None,
    ...            (), (), ())
    >>> h = Hit(s, cache_status=False, emit_status=lambda code: f"{code} No Content")
    >>> h.tick(3.2), h.status, h.raw
    (True, '204 No Content', [(b'age', b'3')])
    """

    __slots__ = (
        "_emit",
        "_fixed",
        "_fixed_raw",
        "_stale_at",
        "_status_line",
        "body",
        "headers",
        "raw",
        "since",
        "status",
        "stored",
        "until",
    )

    def __init__(
        self,
        stored: Stored,
        *,
        cache_status: bool,
        hidden: frozenset[bytes] = frozenset(),
        emit_headers: Callable[[Hdrs], Any] | None = None,
        emit_status: Callable[[int], Any] | None = None,
    ) -> None:
        s = stored
        # ``hidden``: stored lines that never leave (the targeted fields for this cache).
        fixed: Hdrs = [(k, v) for k, v in s.headers if k not in hidden]
        if s.status not in (204, 304):
            fixed.append((b"content-length", b"%d" % len(s.body)))
        self.stored = s
        self.body = s.body
        self.status: Any = s.status if emit_status is None else emit_status(s.status)
        self._fixed_raw = fixed
        self._fixed: Any = fixed if emit_headers is None else emit_headers(fixed)
        self._emit = emit_headers
        self._status_line = cache_status
        # The time the response stops being fresh: past it the full rules decide (they may
        # still serve it stale). A response the app marked no-cache is never a plain hit.
        if "no-cache" in s.flags or s.lifetime <= s.initial_age:
            self._stale_at = _NEVER
        else:
            self._stale_at = s.response_time + (s.lifetime - s.initial_age)
        self.raw: Hdrs = fixed
        self.headers: Any = self._fixed
        # An empty interval: the first use ticks.
        self.since = self.until = 0.0

    def tick(self, now: float) -> bool:
        """Builds the lines for the second of age ``now`` falls in; False once the response
        is no longer fresh at ``now`` (see the module example)."""
        if not now < self._stale_at:
            return False
        s = self.stored
        age = s.age(now)
        whole = int(age)
        moving: Hdrs = [(b"age", b"%d" % whole)]
        if self._status_line:
            moving.append((b"cache-status", b"ziggurat; hit; ttl=%d" % (s.lifetime - age)))
        raw = [*self._fixed_raw, *moving]
        emit = self._emit
        # The lists first, then the bounds: a thread that reads the new bounds (under WSGI
        # a refresh thread may run next to the request thread) also finds the new lists.
        self.raw = raw
        self.headers = raw if emit is None else [*self._fixed, *emit(moving)]
        # Age is s.initial_age until response_time, then grows with the clock: it reaches
        # whole + 1 at the same instant on either side.
        self.until = min(s.response_time + (whole + 1 - s.initial_age), self._stale_at)
        if now >= s.response_time and whole > s.initial_age:
            self.since = s.response_time + (whole - s.initial_age)
        else:
            self.since = _NEVER
        return True
