"""What the engine hands its adapters: the answers (``Reply``, ``Pass``), the markers a
fill leaves for the requests that waited on it, and the request headers the app never
sees. No I/O.

>>> Reply(200, add_status(True, [], b"ziggurat; hit"), b"x").headers
[(b'cache-status', b'ziggurat; hit')]
"""

from __future__ import annotations

import time
from collections.abc import Callable, Iterable
from dataclasses import dataclass
from typing import TYPE_CHECKING

from ziggurat import _native

if TYPE_CHECKING:
    from ziggurat.http.fill import Fill

__all__ = [
    "CLIENT_CONDITIONALS",
    "ERROR",
    "JUST_STORED",
    "MARKER_TTL",
    "NOT_FOR_APP",
    "PASSED",
    "PURGE_TOKEN",
    "STORED",
    "STREAMED",
    "TEE",
    "Hdrs",
    "Pass",
    "Reply",
    "add_status",
    "for_app",
    "now",
]

Hdrs = list[tuple[bytes, bytes]]

# The client's validators: answered by the cache, never forwarded (the stored response's
# own go to the app instead).
CLIENT_CONDITIONALS = frozenset(_native.HTTP_CLIENT_CONDITIONALS)
# The header that authorises a PURGE. It is the cache's secret: never passed to the app,
# under either spelling (a WSGI bridge maps "purge_token" to the same environ key).
PURGE_TOKEN: bytes = _native.HTTP_DEFAULTS["purge_token_header"]
NOT_FOR_APP = (PURGE_TOKEN, PURGE_TOKEN.replace(b"-", b"_"))
# Waiters read the fill's result right after it lands: the marker only needs to outlive that.
MARKER_TTL: float = _native.HTTP_DEFAULTS["marker_ttl"]
STORED, ERROR, TEE = "S", "E", "T"
# How the app's response leaves (the crate's numbers, see ``Engine.client_headers``):
# passed, streamed (stored at its end if it fits), just stored.
PASSED, STREAMED, JUST_STORED = range(3)
# The clock of stored times: the wall clock, as Date and Expires are wall-clock times. The
# C function itself, not a wrapper: the hit path reads it on every request.
now: Callable[[], float] = time.time


@dataclass(slots=True)
class Reply:
    """A complete response the middleware sends itself.

    >>> Reply(504, [(b"content-type", b"text/plain")], b"not in cache").status
    504
    """

    status: int
    headers: Hdrs
    body: bytes
    # Set when a stale response is served under stale-while-revalidate: the fill that
    # refreshes it in the background.
    refresh: Fill | None = None


@dataclass(slots=True)
class Pass:
    """Forward to the app untouched; ``status`` is the Cache-Status member to add.

    >>> Pass(b"ziggurat; fwd=method", unsafe=True).unsafe
    True
    """

    status: bytes
    unsafe: bool = False
    # A HEAD forwarded while a GET response is stored for it (stale, or the request asked
    # for validation): a 200 to it updates or removes that response (RFC 9111 §4.3.5).
    head: Fill | None = None


def for_app(headers: Iterable[tuple[bytes, bytes]]) -> Hdrs | None:
    """The request headers without the cache's own (``Purge-Token``), or None when there
    are none to remove (the list can go to the app as it is).

    >>> for_app([(b"host", b"h"), (b"purge-token", b"secret")])
    [(b'host', b'h')]
    >>> print(for_app([(b"host", b"h")]))
    None
    """
    # A tuple: its names are compared, not hashed, so a scope whose names the full rules
    # could not read (not bytes) still reaches the app.
    names = NOT_FOR_APP
    for k, _ in headers:
        if k in names:
            return [(k, v) for k, v in headers if k not in names]
    return None


def add_status(on: bool, headers: Hdrs, value: bytes) -> Hdrs:
    """``headers`` with the ``Cache-Status`` line ``value`` appended when ``on``.

    >>> add_status(False, [], b"ziggurat; hit")
    []
    """
    if on:
        headers.append((b"cache-status", value))
    return headers
