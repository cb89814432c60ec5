"""The middleware's settings, checked once when the middleware is built.

>>> o = Options.build("CacheMiddleware", allowed_hosts=["example.com"], max_body=65536)
>>> o.max_body, o.host_allowed("example.com:8000"), o.host_allowed("evil.test")
(65536, True, False)
"""

from __future__ import annotations

import functools
from collections.abc import Iterable
from dataclasses import dataclass, field
from typing import Any

from ziggurat import _native

__all__ = [
    "DEFAULT_BYPASS_HEADERS",
    "DEFAULT_TARGETED_FIELDS",
    "DEFAULT_TARGETED_FORWARD",
    "Options",
]

# The defaults and limits of the settings, the crate's (every front end reads them).
_D = _native.HTTP_DEFAULTS
# Request headers that apps (or their frameworks) reflect into pages and links but that a
# key on scheme + host + path does not cover: a request carrying one is neither looked up
# nor stored (see the poisoning notes in docs/http.md).
DEFAULT_BYPASS_HEADERS: tuple[str, ...] = tuple(_D["bypass_headers"])

_KNOWN = (
    "allowed_hosts",
    "max_body",
    "request_directives",
    "tag_header",
    "cache_status",
    "default_ttl",
    "heuristic",
    "store_set_cookie",
    "store_auth_must_revalidate",
    "bypass_headers",
    "bypass_cookies",
    "key_headers",
    "hit_for_miss",
    "revalidate_keep",
    "purge_token",
    "purge_clients",
    "targeted_fields",
    "targeted_forward",
    "stale_if_error",
    "app_timeout",
    "surrogate_control",
)
# RFC 9213: the targeted cache-control fields this cache obeys, first match wins. Its own
# field speaks to it alone and is removed before the response leaves; CDN-Cache-Control
# is forwarded, for a CDN in front of the app (RFC 9213 §3).
DEFAULT_TARGETED_FIELDS: tuple[str, ...] = tuple(_D["targeted_fields"])
DEFAULT_TARGETED_FORWARD: tuple[str, ...] = tuple(_D["targeted_forward"])
# The Edge Architecture note's field for surrogates (reverse proxies and CDNs): with the
# surrogate_control option, the last targeted field read.
_SURROGATE = _D["surrogate_field"].encode()


def _refuse(who: str, arg: str, setting: str, value: str) -> None:
    """Raises ValueError when the crate says ``value`` cannot hold for ``setting``."""
    why = _native.http_setting_problem(setting, value)
    if why is None:
        return
    say = {
        "header": f"must be a header name (str), got {value!r}",
        "short": f"must be None (PURGE off) or a str of at least {_D['min_purge_token']} "
        "characters",
        "underscore": f"names a header with '_' ({value!r}); requests with '_' in a header "
        "name bypass the cache: use the '-' spelling",
        "cache-control": "names targeted fields (RFC 9213) such as 'CDN-Cache-Control'; "
        "Cache-Control itself is always read",
    }[why]
    raise ValueError(f"{who}(): {arg} {say}")


def _names(who: str, arg: str, value: Any) -> tuple[str, ...]:
    if isinstance(value, (str, bytes)) or not isinstance(value, Iterable):
        raise TypeError(f"{who}(): {arg} must be a list of str, got {value!r}")
    out = []
    for v in value:
        if not isinstance(v, str) or not v or not v.isascii():
            raise ValueError(
                f"{who}(): every item of {arg} must be a non-empty ASCII str, got {v!r}"
            )
        out.append(v.strip().lower())
    return tuple(out)


def _seconds(who: str, arg: str, value: Any, *, none_ok: bool) -> float | None:
    if value is None and none_ok:
        return None
    if isinstance(value, bool) or not isinstance(value, (int, float)):
        raise TypeError(f"{who}(): {arg} must be a number of seconds, got {value!r}")
    if not (0 < value < float("inf")):
        raise ValueError(f"{who}(): {arg} must be a finite number of seconds > 0, got {value!r}")
    return float(value)


@dataclass(frozen=True)
class Options:
    """Settings of ``CacheMiddleware`` and ``WSGICacheMiddleware`` (see docs/http.md).

    >>> Options.build("CacheMiddleware", tag_header="Surrogate-Key").tag_header
    b'surrogate-key'
    """

    allowed_hosts: tuple[str, ...] = tuple(_D["allowed_hosts"])
    max_body: int = _D["max_body"]
    request_directives: bool = True
    tag_header: bytes = _D["tag_header"].encode()
    cache_status: bool = True
    default_ttl: float | None = None
    heuristic: bool = False
    store_set_cookie: bool = False
    store_auth_must_revalidate: bool = False
    bypass_headers: frozenset[bytes] = field(
        default_factory=lambda: frozenset(h.encode() for h in DEFAULT_BYPASS_HEADERS)
    )
    bypass_cookies: tuple[str, ...] = ()
    key_headers: tuple[str, ...] = ()
    hit_for_miss: float = _D["hit_for_miss"]
    revalidate_keep: float = _D["revalidate_keep"]
    purge_token: str | None = None
    purge_clients: tuple[str, ...] = tuple(_D["purge_clients"])
    targeted_fields: tuple[bytes, ...] = tuple(n.encode() for n in DEFAULT_TARGETED_FIELDS)
    targeted_forward: frozenset[bytes] = frozenset(n.encode() for n in DEFAULT_TARGETED_FORWARD)
    stale_if_error: float | None = None
    app_timeout: float | None = None
    surrogate_control: bool = False

    def __post_init__(self) -> None:
        # Surrogate-Control is read as the last targeted field, and never leaves.
        if self.surrogate_control and _SURROGATE not in self.targeted_fields:
            object.__setattr__(self, "targeted_fields", (*self.targeted_fields, _SURROGATE))

    @classmethod
    def build(cls, who: str, **kw: Any) -> Options:
        """Checks keyword options; ``who`` names the caller in error messages."""
        unknown = sorted(set(kw) - set(_KNOWN))
        if unknown:
            raise TypeError(
                f"{who}(): unknown option(s) {', '.join(unknown)}; known: {', '.join(_KNOWN)}"
            )
        out: dict[str, Any] = {}
        if "allowed_hosts" in kw:
            out["allowed_hosts"] = _names(who, "allowed_hosts", kw["allowed_hosts"])
        if "max_body" in kw:
            mb = kw["max_body"]
            if isinstance(mb, bool) or not isinstance(mb, int) or mb < 0:
                raise ValueError(
                    f"{who}(): max_body must be an int number of bytes >= 0, got {mb!r}"
                )
            out["max_body"] = mb
        for flag in (
            "request_directives",
            "cache_status",
            "heuristic",
            "store_set_cookie",
            "store_auth_must_revalidate",
            "surrogate_control",
        ):
            if flag in kw:
                if not isinstance(kw[flag], bool):
                    raise TypeError(f"{who}(): {flag} must be True or False, got {kw[flag]!r}")
                out[flag] = kw[flag]
        if "tag_header" in kw:
            th = kw["tag_header"]
            if not isinstance(th, str):
                raise ValueError(f"{who}(): tag_header must be a header name (str), got {th!r}")
            _refuse(who, "tag_header", "tag_header", th)
            out["tag_header"] = th.strip().lower().encode()
        for arg in ("default_ttl", "stale_if_error", "app_timeout"):
            if arg in kw:
                out[arg] = _seconds(who, arg, kw[arg], none_ok=True)
        for arg in ("hit_for_miss", "revalidate_keep"):
            if arg in kw:
                out[arg] = _seconds(who, arg, kw[arg], none_ok=False)
        if "bypass_headers" in kw:
            names = _names(who, "bypass_headers", kw["bypass_headers"])
            out["bypass_headers"] = frozenset(n.encode() for n in names)
        if "bypass_cookies" in kw:
            # Cookie names are case-sensitive: keep them as given.
            cookies = kw["bypass_cookies"]
            _names(who, "bypass_cookies", cookies)
            out["bypass_cookies"] = tuple(c.strip() for c in cookies)
        if "key_headers" in kw:
            keyed = _names(who, "key_headers", kw["key_headers"])
            for name in keyed:
                # A request carrying a header with '_' is never looked up nor stored, so
                # such a header could never be part of a key.
                _refuse(who, "key_headers", "key_headers", name)
            out["key_headers"] = keyed
        if "purge_token" in kw:
            tok = kw["purge_token"]
            if tok is not None and not isinstance(tok, str):
                raise ValueError(f"{who}(): purge_token must be None (PURGE off) or a str")
            if tok is not None:
                _refuse(who, "purge_token", "purge_token", tok)
            out["purge_token"] = tok
        if "purge_clients" in kw:
            out["purge_clients"] = _names(who, "purge_clients", kw["purge_clients"])
        for arg in ("targeted_fields", "targeted_forward"):
            if arg in kw:
                names = _names(who, arg, kw[arg])
                for n in names:
                    _refuse(who, arg, "targeted", n)
                out[arg] = tuple(n.encode() for n in names)
        if "targeted_forward" in out:
            out["targeted_forward"] = frozenset(out["targeted_forward"])
        return cls(**out)

    @property
    def hidden_fields(self) -> frozenset[bytes]:
        """Targeted fields stored but removed before a response leaves (those of
        ``targeted_fields`` not in ``targeted_forward``).

        >>> sorted(Options().hidden_fields)
        [b'ziggurat-cache-control']
        """
        return frozenset(self.targeted_fields) - self.targeted_forward

    @functools.cached_property
    def native(self) -> Any:
        """These options as the ``ziggurat-http`` crate reads them (built once).

        >>> Options().native.classify("GET", "http", b"localhost", b"/", [])[:3]
        (0, 'localhost', b'zh2:http://localhost /')
        """
        return _native.HttpOptions(
            list(self.targeted_fields),
            self.heuristic,
            self.default_ttl,
            self.stale_if_error or 0.0,
            self.revalidate_keep,
            self.tag_header,
            self.store_set_cookie,
            self.max_body,
            self.request_directives,
            sorted(self.bypass_headers),
            [c.encode("latin-1") for c in self.bypass_cookies],
            list(self.allowed_hosts),
            self.purge_token is not None,
            self.store_auth_must_revalidate,
            sorted(self.key_headers),
        )

    def host_allowed(self, host: str) -> bool:
        """Whether a (normalised) ``host[:port]`` is in ``allowed_hosts``.

        An entry ``".example.com"`` allows the domain and its subdomains, ``"*"`` any host.

        >>> Options(allowed_hosts=(".example.com",)).host_allowed("a.example.com")
        True
        """
        return _native.http_host_allowed(host, list(self.allowed_hosts))
