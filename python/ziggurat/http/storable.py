"""Whether the cache may store a response, and what it keeps of it (RFC 9111 §3, §3.2 and
§4.2, RFC 9213): the rules a fill applies to the app's response head, without I/O. The
decisions are the ``ziggurat-http`` crate's; this module gives them their Python names.

>>> from ziggurat.http.options import Options
>>> o = Options()
>>> m = decide(o, 302, [(b"cache-control", b"max-age=60"), (b"location", b"/x")], Request())
>>> m.lifetime, m.headers
(60.0, ((b'cache-control', b'max-age=60'), (b'location', b'/x')))
>>> decide(o, 500, [], Request()), decide(Options(default_ttl=60), 500, [], Request())
('no-freshness', 'no-freshness')
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import NamedTuple

from ziggurat import _native
from ziggurat.http.options import Options

__all__ = ["MAX_HTTP_TTL", "STALE_FORBIDDING", "Meta", "Request", "decide"]

Hdrs = Sequence[tuple[bytes, bytes]]
MAX_HTTP_TTL: float = _native.MAX_HTTP_TTL
# RFC 9111 §4.2.4, §5.2.2.2, §5.2.2.8, §5.2.2.10: a response with one of these is never
# served stale (nor under stale-while-revalidate or stale-if-error).
STALE_FORBIDDING = frozenset(_native.HTTP_STALE_FORBIDDING)


@dataclass(frozen=True)
class Request:
    """What storing a response needs to know of the request that asked for it.

    >>> Request(method="HEAD").method
    'HEAD'
    """

    method: str = "GET"
    headers: Hdrs = ()
    directives: dict[str, str | None] = field(default_factory=dict)
    has_auth: bool = False
    # In place of the options' own (``Options.key_headers``).
    key_headers: tuple[str, ...] = ()
    time: float = 0.0


class Meta(NamedTuple):
    """What is stored of a response besides its status and body, and for how long."""

    headers: tuple[tuple[bytes, bytes], ...]
    lifetime: float
    initial_age: float
    swr: float
    sie: float
    flags: frozenset[str]
    etag: bytes | None
    last_modified: bytes | None
    vary: tuple[str, ...]
    vary_values: tuple[bytes | None, ...]
    tags: tuple[str, ...]
    ttl: float


def decide(opts: Options, status: int, headers: Hdrs, req: Request, now: float = 0.0) -> str | Meta:
    """Why the response to ``req`` cannot be stored (the ``Cache-Status`` detail), or what
    to store of it (see the module example).

    >>> decide(Options(), 200, [(b"cache-control", b"must-understand, no-store, max-age=9")],
    ...        Request()).lifetime
    9.0
    >>> decide(Options(), 201, [(b"cache-control", b"must-understand, max-age=9")], Request())
    'must-understand'
    """
    r = _native.http_decide(opts.native, req, status, headers, now)
    return r[1] if isinstance(r[1], str) else Meta._make(r[1])
