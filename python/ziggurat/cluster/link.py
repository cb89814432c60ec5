"""The connection to Redis or Valkey: made from a URL or an application's client, with
short timeouts and no retries, and a breaker that skips the server for a moment after it
failed, so no request waits on a server that is down or hung.

The connection is ziggurat-cluster's (Rust). redis-py's defaults retry ten times with a
5-second socket timeout (one ``GET`` against a stopped server took about a minute);
valkey-py's have no timeout at all. A cache must answer from the tiers it has instead, so
every call is bounded by ``timeout``, and after a failure the link stays open (reporting a
miss, or a write kept local) for ``retry_after`` seconds before it tries the server again.
A URL needs no Redis client library; an application's client is read for its settings.

>>> link = Link.of("redis://127.0.0.1:1/0", timeout=0.05, method="Cache")
>>> link.up
False
"""

from __future__ import annotations

from typing import Any
from urllib.parse import quote, urlsplit

from ziggurat._native import (
    CLUSTER_RETRY_AFTER_S,
    CLUSTER_SCHEMES,
    ClusterDown,
    ClusterLink,
    ClusterReply,
    cluster_redacted,
    cluster_scrubbed,
)

__all__ = ["ClusterReply", "Down", "Link", "own_pool", "redacted", "scrubbed"]

#: Seconds the server is left alone after a failure (the crate's).
_RETRY_AFTER = CLUSTER_RETRY_AFTER_S

_SCHEMES: tuple[str, ...] = CLUSTER_SCHEMES


def redacted(url: str) -> str:
    """``url`` with its passwords hidden, for messages and logs: the one in its user
    information and any ``password=`` query parameter (redis-py reads both; a ``unix://``
    URL can carry one only in the query). Never raises, whatever the URL (the rule is
    ziggurat-cluster's).

    >>> redacted("redis://app:hunter2@10.0.0.5:6379/0")
    'redis://app:***@10.0.0.5:6379/0'
    >>> redacted("unix:///run/redis.sock?db=0&password=hunter2")
    'unix:///run/redis.sock?db=0&password=***'
    """
    return cluster_redacted(url)


def scrubbed(text: str, url: str) -> str:
    """``text`` (an error's message, say) with every password of ``url`` (see
    ``redacted``) replaced by ``***``, as written in the URL and decoded.

    >>> scrubbed("AUTH hunter2 refused", "redis://:hunter2@h/0")
    'AUTH *** refused'
    """
    return cluster_scrubbed(text, url)


#: The server cannot be used now (unreachable, timed out, or within ``retry_after`` of
#: such a failure): the caller falls back to the host's tiers. Raised by the link's calls.
Down = ClusterDown


class Link:
    """The connection of one cache to its server: ziggurat-cluster's link (a connection
    per thread and process, the GIL released while it waits, a breaker). A redis-py or
    valkey-py client given as ``redis=`` lends its server, database, credentials and TLS;
    its own connections are not used.

    ``up`` tells whether the last call reached the server.
    """

    def __init__(self, native: ClusterLink, timeout: float) -> None:
        self.native = native
        self.timeout = timeout

    @property
    def up(self) -> bool:
        """Whether the last call reached the server."""
        return self.native.up

    @property
    def errors(self) -> int:
        """Calls that failed for want of the server (timeouts aside)."""
        return self.native.errors

    @property
    def timeouts(self) -> int:
        """Calls that timed out."""
        return self.native.timeouts

    @classmethod
    def of(cls, redis: object, *, timeout: float, method: str) -> Link:
        """A link from a URL or a client; bad input raises naming ``method``'s argument.

        >>> Link.of("http://x", timeout=0.1, method="Cache")
        Traceback (most recent call last):
        ...
        ValueError: Cache(): redis must be a redis://, rediss:// or unix:// URL, got 'http://x'
        """
        if isinstance(redis, str):
            parts = urlsplit(redis)
            if parts.scheme not in _SCHEMES or not (parts.hostname or parts.path):
                raise ValueError(
                    f"{method}(): redis must be a redis://, rediss:// or unix:// URL, "
                    f"got {redacted(redis)!r}"
                )
            try:
                native = ClusterLink([redis], False, timeout, _RETRY_AFTER)
            except ValueError as e:
                # The crate's message names the URL with its passwords hidden.
                raise ValueError(f"{method}(): {e}") from None
            return cls(native, timeout)
        if callable(getattr(redis, "execute_command", None)) and callable(
            getattr(redis, "register_script", None)
        ):
            if type(redis).__module__.split(".")[0] not in ("redis", "valkey") or hasattr(
                redis, "__aenter__"
            ):
                raise TypeError(
                    f"{method}(): redis must be a URL or a synchronous redis-py or valkey-py "
                    f"client, not {type(redis).__module__}.{type(redis).__name__}"
                )
            return cls(_native_of(redis, timeout), timeout)
        raise TypeError(
            f"{method}(): redis must be a URL or a redis-py or valkey-py client, "
            f"not {type(redis).__name__}"
        )

    def command(self, *args: Any) -> Any:
        """The server's raw reply to one command, on this thread's own connection (a
        forked child makes its own); raises ``Down``, or ``ClusterReply`` for an error
        the server answered.

        >>> Link.of("redis://127.0.0.1:1/0", timeout=0.05, method="C").command("PING")
        Traceback (most recent call last):
        ...
        ziggurat._native.ClusterDown: unreachable: Connection refused (os error 111)
        """
        return self.native.command(*args)

    def script(self, source: str) -> Script:
        """A server-side script called through this link (see ``Script``)."""
        return Script(self, source)


class Script:
    """A Lua script run by its SHA1 with ``EVALSHA``, loaded again when the server answers
    ``NOSCRIPT`` (after a restart, a failover or ``SCRIPT FLUSH``).

    >>> Link.of("redis://127.0.0.1:1/0", timeout=0.05, method="C").script("return 1").sha
    'e0e1f9fabfc9d4800c877a703b823ac0578ff8db'
    """

    def __init__(self, link: Link, source: str) -> None:
        import hashlib

        self.link = link
        self.source = source
        self.sha = hashlib.sha1(source.encode()).hexdigest()

    def __call__(self, keys: list[bytes], args: list[Any]) -> Any:
        """Runs the script (raises ``Down``, or ``ClusterReply`` for an error the server
        answered)."""
        return self.link.native.script(self.sha, self.source, keys, args)


def own_pool(client: Any) -> Any:
    """The pool whose settings a connection of our own takes (one server's client), or
    None for a Redis Cluster client, which routes each command to its slot's node.

    >>> import redis
    >>> own_pool(redis.Redis(port=1)) is None
    False
    """
    pool = getattr(client, "connection_pool", None)
    if pool is None or callable(getattr(client, "get_nodes", None)):
        return None
    return pool


def _native_of(client: Any, timeout: float) -> ClusterLink:
    """The crate's link to the server of a redis-py or valkey-py client, with its
    credentials, database and TLS (a Redis Cluster client: its nodes)."""
    pool = own_pool(client)
    kw = dict(client.get_connection_kwargs() if pool is None else pool.connection_kwargs)
    conn_class = getattr(pool, "connection_class", None)
    tls = bool(kw.get("ssl")) or (conn_class is not None and "SSL" in conn_class.__name__)
    username, password = kw.get("username"), kw.get("password")
    provider = kw.get("credential_provider")
    if provider is not None:
        got = provider.get_credentials()
        username, password = (got[0], got[1]) if len(got) == 2 else (None, got[0])
    login = [("username", username), ("password", password), ("db", kw.get("db") or 0)]
    if tls and kw.get("ssl_ca_certs"):
        login.append(("ssl_ca_certs", kw["ssl_ca_certs"]))
    query = "&".join(f"{k}={quote(str(v), safe='')}" for k, v in login if v)
    if pool is None:
        nodes = [(n.host, int(n.port)) for n in client.get_nodes()]
    elif kw.get("path"):
        urls = [f"unix://{quote(kw['path'])}?{query}"]
        return ClusterLink(urls, False, timeout, _RETRY_AFTER)
    else:
        nodes = [(kw.get("host") or "localhost", int(kw.get("port") or 6379))]
    scheme = "rediss" if tls else "redis"
    urls = [f"{scheme}://{_host(h)}:{p}?{query}" for h, p in nodes]
    return ClusterLink(urls, pool is None, timeout, _RETRY_AFTER)


def _host(host: str) -> str:
    """A host as a URL writes it (an IPv6 address in brackets)."""
    return f"[{host}]" if ":" in host else host
