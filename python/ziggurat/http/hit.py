"""``Hit``: a stored response as one process serves it while it is fresh.

Everything a fresh hit sends is the same on every request but two lines: ``Age`` and the
``ttl`` of ``Cache-Status``, which move with the age. So the lines are made (by the
crate's ``fresh_hit``, as every front end makes them) and put in the adapter's own form
once per second of age: between two seconds, serving a hit is a comparison of the clock
against the bounds of the current second and a copy of a finished list.

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

from ziggurat import _native
from ziggurat.http.store import Stored, value_of

__all__ = ["Hit"]

Hdrs = list[tuple[bytes, bytes]]


class Hit:
    """One stored response, ready to send while fresh (see the module docstring).

    ``status`` and ``headers`` are in the adapter's form (``emit_status`` and
    ``emit_headers`` convert them; ASGI's form is the stored one); ``raw`` is the same
    header list as bytes pairs. ``headers`` and ``raw`` hold for times in ``[since,
    until)``; ``tick`` moves them to another time (the lines and their bounds are the
    crate's ``fresh_hit``). ``hidden`` names stored lines that are not sent. Adapters send
    copies: servers and outer middleware may change the list they get.

    >>> from ziggurat.http.store import Stored
    >>> s = Stored(204, (), b"", 0.0, 0.0, 0.0, 10.0, 0.0, 0.0, frozenset(), None, None,
    ...            (), (), ())
    >>> h = Hit(s, cache_status=False, emit_status=lambda code: f"{code} No Content")
    >>> h.tick(3.2), h.status, h.raw
    (True, '204 No Content', [(b'age', b'3')])
    """

    __slots__ = (
        "_emit",
        "_hidden",
        "_status_line",
        "_value",
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
        self.stored = s
        self._value = value_of(s)
        self.body = s.body
        self.status: Any = s.status if emit_status is None else emit_status(s.status)
        # ``hidden``: stored lines that never leave (the targeted fields for this cache).
        self._hidden = sorted(hidden)
        self._emit = emit_headers
        self._status_line = cache_status
        self.raw: Hdrs = []
        self.headers: Any = []
        # An empty interval: the first use ticks.
        self.since = self.until = 0.0

    def tick(self, now: float) -> bool:
        """Builds the lines for the second of age ``now`` falls in; False once the response
        is no longer fresh at ``now`` (see the module example)."""
        r = _native.http_fresh_hit(self._value, now, self._hidden, self._status_line)
        if r is None:
            return False
        raw, since, until = r
        emit = self._emit
        # The lists first, then the bounds: a thread that reads the new bounds (under WSGI
        # a refresh thread may run next to the request thread) also finds the new lists.
        self.raw = raw
        self.headers = raw if emit is None else emit(raw)
        self.until = until
        self.since = since
        return True
