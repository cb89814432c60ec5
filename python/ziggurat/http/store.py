"""How responses live on a ``Cache``: keys, variants, the stored record, purge.

Keys are bytes: ``zh2:`` + scheme + ``://`` + host + a space + raw path and query (the
configured key headers act as an implicit ``Vary``). The space cannot occur in a validated
host, so no host and target can make the key of another host and target. GET and HEAD
share a key. The entry under that key is either the stored response itself (a response
without ``Vary``), or a variant record naming the ``Vary`` headers and a random
generation; each variant then lives under the key + generation + a digest of the
request's values of those headers. Purging a URL deletes the entry under its key: the
variants of the old generation can no longer be reached, and a new record gets a new
generation.

Stored values are plain tuples, so every process (and every serializer) reads them back
the same way; the L1 of each process holds them as live objects, so a hit decodes nothing.

>>> base_key("https", "example.com", b"/a?b=1")
b'zh2:https://example.com /a?b=1'
"""

from __future__ import annotations

import hashlib
import os
from typing import Any, NamedTuple
from urllib.parse import urlsplit

from ziggurat import _native
from ziggurat.http import rules

__all__ = ["MAX_KEY", "Stored", "base_key", "lock_key", "purge", "url_key", "variant_key"]

_PREFIX = b"zh2:"
# Ends the host in a key: a validated host holds no space (rules.normalise_host).
_HOST_END = b" "
_UNREAD: Any = object()
# Segment keys are at most 4096 bytes; longer URLs are keyed by a digest.
MAX_KEY = 2048
# The directives that forbid any stale use (the crate's list, read once: a stale check is a
# set intersection, with no crossing).
_STALE_FORBIDDING = frozenset(_native.HTTP_STALE_FORBIDDING)


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

    def age(self, now: float) -> float:
        """Current age in seconds at ``now`` (RFC 9111 §4.2.3; see the class example)."""
        return self.initial_age + max(0.0, now - self.response_time)

    def may_serve_stale(self) -> bool:
        """Whether any stale use is allowed at all (RFC 9111 §4.2.4; see the class
        example)."""
        return not (self.flags & _STALE_FORBIDDING)


def _to_tuple(s: Stored) -> Stored:
    # Stored as the named tuple itself (pickled by the cache's serializer): each process's
    # L1 then hands back the same object on every hit, with nothing to convert.
    return s


def _from_value(v: Any) -> Stored | None:
    return v if type(v) is Stored else None


def _bound(key: bytes) -> bytes:
    if len(key) <= MAX_KEY:
        return key
    return _PREFIX + b"#" + hashlib.sha256(key).hexdigest().encode()


def base_key(scheme: str, host: str, target: bytes) -> bytes:
    """The key of a URL: scheme, host, raw path and query; the host ends at a space.

    >>> base_key("http", "h", b"/x")
    b'zh2:http://h /x'
    >>> base_key("http", "h", b":8443/x") != base_key("http", "h:8443", b"/x")
    True
    """
    return _bound(
        _PREFIX + scheme.encode("ascii") + b"://" + host.encode("ascii") + _HOST_END + target
    )


def variant_key(base: bytes, generation: str, digest: bytes) -> bytes:
    """The key of one ``Vary`` variant of ``base``.

    >>> variant_key(b"zh2:http://h /x", "ab12", b"d1")
    b'zh2:http://h /x\\x00vab12:d1'
    """
    return _bound(base + b"\x00v" + generation.encode("ascii") + b":" + digest)


def lock_key(key: bytes) -> bytes:
    """The key whose ``fetch`` lease coalesces the fills of ``key`` across processes.

    >>> lock_key(b"zh2:http://h /x")
    b'zh2L:http://h /x'
    """
    return b"zh2L" + key[3:] if key.startswith(_PREFIX) else b"zh2L:" + key


def url_key(url: str) -> bytes:
    """The key of an absolute URL, as the middleware computes it for a request.

    >>> url_key("https://Example.com/a?b")
    b'zh2:https://example.com /a?b'
    """
    if not isinstance(url, str):
        raise TypeError(f"purge(): url must be a str, not {type(url).__name__}")
    parts = urlsplit(url)
    host = rules.normalise_host(parts.netloc.encode("latin-1", "replace"))
    if parts.scheme not in ("http", "https") or host is None:
        raise ValueError(
            f"purge(): url must be an absolute http(s) URL with a valid host, got {url!r}"
        )
    target = (parts.path or "/").encode("latin-1", "replace")
    if parts.query or url.endswith("?"):
        target += b"?" + parts.query.encode("latin-1", "replace")
    return base_key(parts.scheme, host, target)


def lookup(
    cache: Any, base: bytes, headers: rules.Headers, value: Any = _UNREAD
) -> tuple[Stored | None, bytes]:
    """The stored response matching the request (or None), and the key it lives under
    (the key to fill when there is none). ``value``: the entry under ``base`` if the
    caller already read it.

    >>> from ziggurat import Cache
    >>> c = Cache("doc-http-lookup", size="8MiB")
    >>> lookup(c, base_key("http", "h", b"/x"), [])
    (None, b'zh2:http://h /x')
    >>> c.unlink()
    """
    v = cache.get(base) if value is _UNREAD else value
    if v is None:
        return None, base
    s = _from_value(v)
    if s is not None:
        return (s if not s.vary else None), base
    if type(v) is tuple and len(v) == 4 and v[0] == "V1":
        names, generation = v[1], v[2]
        digest, values = rules.vary_digest(names, headers)
        vk = variant_key(base, generation, digest)
        s = _from_value(cache.get(vk))
        # The digest picks the entry; the values stored with it confirm it.
        if s is not None and s.vary == tuple(names) and s.vary_values == values:
            return s, vk
        return None, vk
    return None, base


def save(cache: Any, base: bytes, s: Stored, ttl: float, now: float) -> None:
    """Stores ``s`` for ``ttl`` seconds under ``base`` (or a variant of it); the
    middleware's ``Fill`` builds ``s``.

    >>> from ziggurat import Cache
    >>> c = Cache("doc-http-save", size="8MiB")
    >>> s = Stored(200, (), b"hi", 0.0, 0.0, 0.0, 60.0, 0.0, 0.0, frozenset(), None, None,
    ...            ("accept",), (b"text/html",), ())
    >>> save(c, b"zh2:http://h /x", s, 60.0, 0.0)
    >>> lookup(c, b"zh2:http://h /x", [(b"accept", b"text/html")])[0].body
    b'hi'
    >>> lookup(c, b"zh2:http://h /x", [(b"accept", b"text/plain")])[0] is None
    True
    >>> c.unlink()
    """
    tags = s.tags
    if not s.vary:
        cache.set(base, _to_tuple(s), ttl=ttl, tags=tags)
        return
    rec = cache.get(base)
    if type(rec) is tuple and len(rec) == 4 and rec[0] == "V1" and tuple(rec[1]) == s.vary:
        generation, until = rec[2], float(rec[3])
    else:
        generation, until = os.urandom(6).hex(), 0.0
    vk = variant_key(base, generation, _variant_digest(s))
    cache.set(vk, _to_tuple(s), ttl=ttl, tags=tags)
    if until < now + ttl or rec is None:
        cache.set(base, ("V1", s.vary, generation, now + ttl), ttl=ttl)


def _variant_digest(s: Stored) -> bytes:
    pseudo: list[tuple[bytes, bytes]] = []
    for name, value in zip(s.vary, s.vary_values, strict=True):
        if value is not None:
            pseudo.append((name.encode("latin-1"), value))
    digest, _ = rules.vary_digest(s.vary, pseudo)
    return digest


def replace(cache: Any, key: bytes, s: Stored, ttl: float) -> None:
    """Rewrites a stored response in place (after a 304 freshened it); ``key`` is the key
    ``lookup`` returned for it."""
    cache.set(key, _to_tuple(s), ttl=ttl, tags=s.tags)


def purge(cache: Any, url: str) -> bool:
    """Removes the stored responses of ``url`` (GET and HEAD, every ``Vary`` variant) on
    every process of the host. Returns whether something was stored.

    >>> from ziggurat import Cache
    >>> c = Cache("doc-http-purge", size="8MiB")
    >>> purge(c, "https://example.com/posts/")
    False
    >>> c.unlink()
    """
    return bool(cache.delete(url_key(url)))
