"""The connection to Redis or Valkey: made from a URL or an application's client, with
short timeouts and no retries, and a breaker that skips the server for a moment after it
failed, so no request waits on a server that is down or hung.

redis-py's defaults retry ten times with a 5-second socket timeout (one ``GET`` against a
stopped server took about a minute); valkey-py's have no timeout at all. A cache must
answer from the tiers it has instead, so every call here is bounded by ``timeout``, and
after a failure the link stays open (reporting a miss, or a write kept local) for
``retry_after`` seconds before it tries the server again.

>>> link = Link.of("redis://127.0.0.1:1/0", timeout=0.05, method="Cache")
>>> link.up
False
"""

from __future__ import annotations

import contextlib
from typing import Any
from urllib.parse import quote, urlsplit

from ziggurat._native import (
    CLUSTER_SCHEMES,
    ClusterDown,
    ClusterLink,
    ClusterReply,
    cluster_redacted,
    cluster_scrubbed,
)

__all__ = ["ClusterReply", "Down", "Link", "own_pool", "redacted", "scrubbed"]

#: Seconds the server is left alone after a failure.
_RETRY_AFTER = 1.0

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
    """The connection of one cache to its server: the data path's calls go through
    ziggurat-cluster's link (a connection per thread and process, the GIL released while
    it waits, a breaker), and ``client``, a redis-py or valkey-py client on the same server
    and credentials, serves the stream reader (see ``reader_client``).

    ``up`` tells whether the last call reached the server.
    """

    def __init__(self, native: ClusterLink, client: Any, timeout: float) -> None:
        self.native = native
        self.client = client
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
            import redis as redis_py

            try:
                native = ClusterLink([redis], False, timeout, _RETRY_AFTER)
                client = redis_py.Redis.from_url(redis, **_bounded(timeout))
            except ValueError as e:
                # Not chained: the cause's own text and frames may hold the URL.
                raise ValueError(
                    f"{method}(): redis URL {redacted(redis)!r} is not valid: "
                    f"{scrubbed(str(e), redis).split(' is not valid: ')[-1]}"
                ) from None
            return cls(native, client, timeout)
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
            return cls(_native_of(redis, timeout), _rebound(redis, timeout, timeout), timeout)
        raise TypeError(
            f"{method}(): redis must be a URL or a redis-py or valkey-py client, "
            f"not {type(redis).__name__}"
        )

    def reader_client(self, block_s: float) -> Any:
        """A client of its own for blocking stream reads: its socket timeout must outlast
        the block, which the data path's short timeout would cut.

        >>> c = Link.of("redis://127.0.0.1:1/0", timeout=0.05, method="C").reader_client(1.0)
        >>> c.connection_pool.connection_kwargs["socket_timeout"]
        2.0
        """
        return _rebound(self.client, block_s + 1.0, self.timeout)

    def call(self, fn: Any, *args: Any, **kwargs: Any) -> Any:
        """``fn(*args, **kwargs)``, a call of the application's kind of client, against the
        server; raises ``Down`` when it cannot be reached now. Errors the server answers
        with (a script's ``error_reply``) pass. The link's breaker and counters cover it."""
        if self.native.resting:
            raise Down("the server failed less than retry_after seconds ago")
        errors = _errors()
        try:
            r = fn(*args, **kwargs)
        except errors[1] as e:
            self.native.record(True)
            raise Down(f"timed out: {e}") from e
        except errors[0] as e:
            self.native.record(False)
            raise Down(f"unreachable: {e}") from e
        self.native.record(None)
        return r

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

    def close(self) -> None:
        """Closes the stream reader's client (the data path's connections close with
        their threads).

        >>> Link.of("redis://127.0.0.1:1/0", timeout=0.05, method="C").close()
        """
        with contextlib.suppress(Exception):
            self.client.close()


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

    >>> own_pool(Link.of("redis://127.0.0.1:1/0", timeout=0.05, method="C").client) is None
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


def _bounded(timeout: float) -> dict[str, Any]:
    from redis.backoff import NoBackoff
    from redis.retry import Retry

    return {
        "socket_timeout": timeout,
        "socket_connect_timeout": timeout,
        "retry": Retry(NoBackoff(), 0),
        "protocol": 2,
        "health_check_interval": 0,
    }


def _rebound(client: Any, timeout: float, connect_timeout: float) -> Any:
    """A client on the same server and credentials as ``client`` with our timeouts."""
    from redis.backoff import NoBackoff
    from redis.retry import Retry

    if own_pool(client) is None:
        # A Redis Cluster client: the same nodes and credentials, our timeouts.
        kwargs = dict(client.get_connection_kwargs())
        for k in ("host", "port", "retry", "connection_pool", "redis_connect_func"):
            kwargs.pop(k, None)
        kwargs.update(_bounded(timeout))
        kwargs["socket_connect_timeout"] = connect_timeout
        nodes = [type(n)(n.host, n.port) for n in client.get_nodes()]
        return type(client)(startup_nodes=nodes, **kwargs)
    pool = client.connection_pool
    kwargs = dict(pool.connection_kwargs)
    kwargs.update(_bounded(timeout))
    kwargs["socket_connect_timeout"] = connect_timeout
    kwargs.pop("retry", None)
    new_pool = type(pool)(connection_class=pool.connection_class, **kwargs)
    return type(client)(connection_pool=new_pool, retry=Retry(NoBackoff(), 0))


_ERRORS: tuple[tuple[type[BaseException], ...], tuple[type[BaseException], ...]] | None = None


def _errors() -> tuple[tuple[type[BaseException], ...], tuple[type[BaseException], ...]]:
    global _ERRORS
    if _ERRORS is None:
        import redis

        conn: list[type[BaseException]] = [redis.exceptions.ConnectionError, OSError]
        tmo: list[type[BaseException]] = [redis.exceptions.TimeoutError, TimeoutError]
        try:
            import valkey

            conn.append(valkey.exceptions.ConnectionError)
            tmo.append(valkey.exceptions.TimeoutError)
        except ImportError:
            pass
        _ERRORS = (tuple(conn), tuple(tmo))
    return _ERRORS
