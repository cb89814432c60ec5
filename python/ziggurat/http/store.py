"""How responses live on a ``Cache``: keys, variants, the stored record, purge.

The key scheme and the stored-response format are the ``ziggurat-http`` crate's (its
``key`` and ``stored`` modules), so that every front end reads what another stored:
a key is ``zh2:`` + scheme + ``://`` + host + a space + raw path and query; a value is
the crate's versioned bytes, either a stored response or, under the key of a URL whose
responses vary, a variant record naming the ``Vary`` fields and a random generation.
Each variant lives under the key + generation + a digest of the request's values of
those fields. Purging a URL deletes the entry under its key: the variants of the old
generation can no longer be reached, and a new record gets a new generation. Bytes
that decode to no entry (another version, cut short) are a miss.

Each process decodes a stored response once: the engine keeps its ``Hit`` by the
identity of the value the process's L1 hands back.

>>> base_key("https", "example.com", b"/a?b=1")
b'zh2:https://example.com /a?b=1'
"""

from __future__ import annotations

import os
from collections.abc import Callable
from typing import Any, NamedTuple

from ziggurat import _native
from ziggurat.http import rules

__all__ = [
    "MAX_URL_KEY",
    "Stored",
    "base_key",
    "decode",
    "encode",
    "lock_key",
    "purge",
    "purge_key",
    "purge_mark",
    "snapshot",
    "url_key",
    "value_of",
    "variant_key",
]

_UNREAD: Any = object()
# Segment keys are at most 4096 bytes; longer URLs are keyed by a digest.
MAX_URL_KEY: int = _native.MAX_URL_KEY
# The directives that forbid any stale use (the crate's list, read once: a stale check is a
# set intersection, with no crossing).
_STALE_FORBIDDING = frozenset(_native.HTTP_STALE_FORBIDDING)
# A variant record, decoded: the Vary names, the generation, until when a variant lives.
Variants = tuple[tuple[str, ...], str, float]


class Stored(NamedTuple):
    """A stored response and what its freshness and validation need.

    ``headers`` are the stored fields (hop-by-hop and ``Connection``-listed fields,
    ``Age``, the tag header and fields the app marked ``private="…"``/``no-cache="…"``
    removed; a targeted field meant for this cache alone is kept, and never sent);
    ``initial_age`` is the corrected initial age at ``response_time``; ``flags`` holds
    directive names that matter at reuse (``no-cache``, ``must-revalidate``,
    ``proxy-revalidate``, ``s-maxage``).

    >>> s = Stored(200, ((b"content-type", b"text/plain"),), b"hi", 99.0, 100.0, 5.0, 60.0,
    ...            0.0, 0.0, frozenset(), None, None, (), (), ("posts",))
    >>> s.age(110.0), s.may_serve_stale()
    (15.0, True)
    """

    status: int
    headers: tuple[tuple[bytes, bytes], ...]
    body: bytes
    request_time: float
    response_time: float
    initial_age: float
    lifetime: float
    swr: float
    sie: float
    flags: frozenset[str]
    etag: bytes | None
    last_modified: bytes | None
    vary: tuple[str, ...]
    vary_values: tuple[bytes | None, ...]
    tags: tuple[str, ...]
    # The value bytes it was decoded from (empty for one built in this process).
    value: bytes = b""

    def age(self, now: float) -> float:
        """Current age in seconds at ``now`` (RFC 9111 §4.2.3; see the class example)."""
        return self.initial_age + max(0.0, now - self.response_time)

    def may_serve_stale(self) -> bool:
        """Whether any stale use is allowed at all (RFC 9111 §4.2.4; see the class
        example)."""
        return not (self.flags & _STALE_FORBIDDING)


def encode(s: Stored) -> bytes:
    """The value bytes of ``s`` (the crate's stored-response format).

    >>> s = Stored(200, (), b"hi", 0.0, 0.0, 0.0, 60.0, 0.0, 0.0, frozenset(), None, None,
    ...            (), (), ())
    >>> decode(encode(s)).body, decode(b"not a response")
    (b'hi', None)
    """
    return _native.http_encode(
        s.status,
        s.headers,
        s.body,
        s[3:9],
        sorted(s.flags),
        s.etag,
        s.last_modified,
        s.vary,
        s.vary_values,
        s.tags,
    )


def decode(v: Any) -> Stored | Variants | None:
    """The entry value bytes hold: a ``Stored`` (its ``value`` the bytes), a variant
    record, or None (no bytes, or bytes of no entry: a miss). See ``encode``."""
    t = _native.http_decode(v)
    if t is None or len(t) == 3:
        return t
    return Stored._make(t)


def value_of(s: Stored) -> bytes:
    """The value bytes of ``s``, as stored or encoded now."""
    return s.value or encode(s)


def base_key(scheme: str, host: str, target: bytes) -> bytes:
    """The key of a URL: scheme, host, raw path and query; the host ends at a space.

    >>> base_key("http", "h", b"/x")
    b'zh2:http://h /x'
    >>> base_key("http", "h", b":8443/x") != base_key("http", "h:8443", b"/x")
    True
    """
    return _native.http_base_key(scheme, host, target)


def variant_key(base: bytes, generation: str, digest: str) -> bytes:
    """The key of one ``Vary`` variant of ``base``.

    >>> variant_key(b"zh2:http://h /x", "ab12", "d1")
    b'zh2:http://h /x\\x00vab12:d1'
    """
    return _native.http_variant_key(base, generation, digest)


def lock_key(key: bytes) -> bytes:
    """The key whose ``fetch`` lease coalesces the fills of ``key`` across processes.

    >>> lock_key(b"zh2:http://h /x")
    b'zh2L:http://h /x'
    """
    return _native.http_lock_key(key)


def url_key(url: str) -> bytes:
    """The key of an absolute URL, as the middleware computes it for a request.

    >>> url_key("https://Example.com/a?b")
    b'zh2:https://example.com /a?b'
    """
    if not isinstance(url, str):
        raise TypeError(f"purge(): url must be a str, not {type(url).__name__}")
    key = _native.http_url_key(url)
    if key is None:
        raise ValueError(
            f"purge(): url must be an absolute http(s) URL with a valid host, got {url!r}"
        )
    return key


def lookup(
    cache: Any,
    base: bytes,
    headers: rules.Headers,
    value: Any = _UNREAD,
    entry: Callable[[Any], Stored | Variants | None] = decode,
) -> tuple[Stored | None, bytes]:
    """The stored response matching the request (or None), and the key it lives under
    (the key to fill when there is none). ``value``: the entry under ``base`` if the
    caller already read it; ``entry`` decodes a value (the engine's remembers).

    >>> from ziggurat import Cache
    >>> c = Cache("doc-http-lookup", size="8MiB")
    >>> lookup(c, base_key("http", "h", b"/x"), [])
    (None, b'zh2:http://h /x')
    >>> c.unlink()
    """
    v = cache.get(base) if value is _UNREAD else value
    if v is None:
        return None, base
    e = entry(v)
    if isinstance(e, Stored):
        return (e if not e.vary else None), base
    if e is not None:
        names, generation, _ = e
        digest, values = rules.vary_digest(names, headers)
        vk = variant_key(base, generation, digest.decode("ascii"))
        s = entry(cache.get(vk))
        # The digest picks the entry; the values stored with it confirm it.
        if type(s) is Stored and s.vary == tuple(names) and s.vary_values == values:
            return s, vk
        return None, vk
    return None, base


class Unguarded:
    """The snapshot of a cache with no segment (it runs degraded): its fills store as
    plain writes, in the process-local store if any.

    >>> snapshot(object(), b"zh2:http://h /x")
    Unguarded()
    """

    def __repr__(self) -> str:
        return "Unguarded()"


# What ``snapshot`` returns: the segment's words, None (nothing may be stored against
# it: a write of the URL was in progress), or Unguarded.
Seen = tuple[int, int, int] | Unguarded | None


def purge_mark(base: bytes) -> bytes:
    """The key whose stamp only a purge of the URL keyed ``base`` moves (see ``purge_key``).

    >>> purge_mark(b"zh2:http://h /x")
    b'zh2P:http://h /x'
    """
    return _native.http_purge_mark(base)


def purge_key(cache: Any, base: bytes) -> bool:
    """Purges the URL keyed ``base`` (every variant, in every process of the host): the
    crate's keys in its order (the purge mark, so that a fill rendering meanwhile stores
    nothing, see ``save``; then the entry). Returns whether something was stored."""
    found = False
    for key in _native.http_purge_keys(base):
        found = bool(cache.delete(key))
    return found


def snapshot(cache: Any, base: bytes) -> Seen:
    """What a fill of the URL keyed ``base`` must find unchanged to store its response,
    taken before the app is called: the URL's purge mark, the segment's epoch and its
    count of tag invalidations (the response's tags are known only once it ends). See
    ``save``."""
    seen = getattr(cache, "seen", None)
    if seen is None or getattr(cache, "degraded", True):
        return Unguarded()
    result: Seen = seen(purge_mark(base))
    return result


def _put(
    cache: Any, base: bytes, key: bytes, value: bytes, ttl: float, tags: tuple[str, ...], seen: Seen
) -> bool:
    """One write of a fill: plain when unguarded, else only while ``seen`` holds."""
    if isinstance(seen, Unguarded):
        cache.set(key, value, ttl=ttl, tags=tags)
        return True
    if seen is None:
        return False
    return bool(cache.fill(key, value, ttl, tags, seen, None, purge_mark(base)))


def save(
    cache: Any, base: bytes, s: Stored, ttl: float, now: float, seen: Seen | object = _UNREAD
) -> tuple[Stored, bool]:
    """Stores ``s`` for ``ttl`` seconds under ``base`` (or a variant of it); the
    middleware's ``Fill`` builds ``s``. ``seen``: the fill's ``snapshot``, taken before
    the app rendered ``s`` (default: taken now). Nothing is stored when a purge of the
    URL, a clear or, for a response with tags, a tag invalidation came since: a page
    rendered from older data never outlives a purge that returned during its render.
    Returns ``s`` with its value bytes, and whether it was stored.

    >>> from ziggurat import Cache
    >>> c = Cache("doc-http-save", size="8MiB")
    >>> s = Stored(200, (), b"hi", 0.0, 0.0, 0.0, 60.0, 0.0, 0.0, frozenset(), None, None,
    ...            ("accept",), (b"text/html",), ())
    >>> save(c, b"zh2:http://h /x", s, 60.0, 0.0)[1]
    True
    >>> lookup(c, b"zh2:http://h /x", [(b"accept", b"text/html")])[0].body
    b'hi'
    >>> lookup(c, b"zh2:http://h /x", [(b"accept", b"text/plain")])[0] is None
    True
    >>> seen = snapshot(c, b"zh2:http://h /y")
    >>> _ = purge_key(c, b"zh2:http://h /y")  # a purge returns while the page renders
    >>> save(c, b"zh2:http://h /y", s._replace(vary=()), 60.0, 0.0, seen)[1]
    False
    >>> c.unlink()
    """
    if seen is _UNREAD:
        seen = snapshot(cache, base)
    assert seen is None or isinstance(seen, (tuple, Unguarded))
    value = encode(s)
    # The crate says what to write: the response, or its variant then the record that
    # makes it reachable (both against the URL's purge mark: a purge between them leaves
    # the variant under a generation no record names).
    record = cache.get(base) if s.vary else None
    writes = _native.http_save_writes(
        base,
        value,
        ttl,
        now,
        record if isinstance(record, bytes) else None,
        os.urandom(6),
        not isinstance(seen, Unguarded),
    )
    stored = True
    for key, v, t, tags in writes:
        if not _put(cache, base, key, v, t, tuple(tags), seen):
            stored = False
            break
    return s._replace(value=value), stored


def replace(
    cache: Any,
    base: bytes,
    key: bytes,
    value: bytes,
    ttl: float,
    tags: tuple[str, ...],
    seen: Seen,
) -> bool:
    """Rewrites a stored response of the URL keyed ``base`` in place (after a 304
    freshened it), unless a purge came since ``seen`` (see ``save``); ``key`` is the key
    ``lookup`` returned for it, ``value`` its new bytes. Returns whether it stored."""
    return _put(cache, base, key, value, ttl, tags, seen)


def purge(cache: Any, url: str) -> bool:
    """Removes the stored responses of ``url`` (GET and HEAD, every ``Vary`` variant) on
    every process of the host. Returns whether something was stored.

    >>> from ziggurat import Cache
    >>> c = Cache("doc-http-purge", size="8MiB")
    >>> purge(c, "https://example.com/posts/")
    False
    >>> c.unlink()
    """
    return purge_key(cache, url_key(url))
