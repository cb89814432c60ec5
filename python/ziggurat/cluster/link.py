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
import os
import threading
import time
import weakref
from typing import Any
from urllib.parse import urlsplit

from ziggurat._native import CLUSTER_SCHEMES, cluster_redacted, cluster_scrubbed

__all__ = ["Down", "Link", "own_pool", "redacted", "scrubbed"]

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


class Down(Exception):
    """The server cannot be used now (unreachable, timed out, or within ``retry_after`` of
    such a failure): the caller falls back to the host's tiers.

    >>> isinstance(Down("refused"), Exception)
    True
    """


class Link:
    """A client for the data path and the means to make a second one for the stream reader.

    ``up`` tells whether the last call reached the server.
    """

    def __init__(self, client: Any, timeout: float, retry_after: float = 1.0) -> None:
        self.client = client
        self.timeout = timeout
        self.retry_after = retry_after
        self._down_until = 0.0
        self._lock = threading.Lock()
        self.up = False
        self.errors = 0
        self.timeouts = 0
        # A Redis Cluster client routes each command to its slot's node: its scripts go
        # through it. A client of one server lends its connection settings to a connection
        # per thread that the hot path keeps (see ``command``).
        self._pool = own_pool(client)
        self._mine = threading.local()
        self._kept: weakref.WeakSet[Any] = weakref.WeakSet()

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
                client = redis_py.Redis.from_url(redis, **_bounded(timeout))
            except ValueError as e:
                # Not chained: the cause's own text and frames may hold the URL.
                raise ValueError(
                    f"{method}(): redis URL {redacted(redis)!r} is not valid: "
                    f"{scrubbed(str(e), redis)}"
                ) from None
            return cls(client, timeout)
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
            return cls(_rebound(redis, timeout, timeout), timeout)
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
        """``fn(*args, **kwargs)`` against the server; raises ``Down`` when it cannot be
        reached now. Errors the server answers with (a script's ``error_reply``) pass."""
        if self._down_until and time.monotonic() < self._down_until:
            raise Down("the server failed less than retry_after seconds ago")
        errors = _errors()
        try:
            r = fn(*args, **kwargs)
        except errors[1] as e:
            self._fail(timeout=True)
            raise Down(f"timed out: {e}") from e
        except errors[0] as e:
            self._fail(timeout=False)
            raise Down(f"unreachable: {e}") from e
        self.up = True
        self._down_until = 0.0
        return r

    def command(self, *args: Any) -> Any:
        """The server's raw reply to one command, sent on this thread's own connection.

        redis-py's client takes a connection from its pool and gives it back around every
        command, with retry and observability wrappers: as much CPU as the rest of a cache
        hit from Redis. The hot path keeps one connection per thread
        instead (per process too: a forked child makes its own), with the same settings as
        the pool's. A command that fails half-way closes it (redis-py does that on any
        error but an error reply), so the next command cannot read a stale reply; the next
        call connects again. A thread's connection closes when the thread ends, so a
        server that starts a thread per request (``ThreadingMixIn``) connects once per
        request; worker threads that live on (gunicorn's gthread, asyncio's default
        executor) keep theirs. Raises what the connection raises; wrap it in ``call``.

        >>> Link.of("redis://127.0.0.1:1/0", timeout=0.05, method="C").command("PING")
        Traceback (most recent call last):
        ...
        redis.exceptions.ConnectionError: Error 111 connecting to 127.0.0.1:1. Connection refused.
        """
        if self._pool is None:
            return self.client.execute_command(*args)
        mine = self._mine
        conn = getattr(mine, "conn", None)
        if conn is None or mine.pid != os.getpid():
            pool = self._pool
            conn = pool.connection_class(**pool.connection_kwargs)
            mine.conn, mine.pid, mine.ready = conn, os.getpid(), False
            self._kept.add(conn)
        elif mine.ready:
            # What the pool checks when it lends a connection: a socket that has something
            # to read between commands was closed by the server (a restart, an idle
            # timeout) or holds a stray reply; either way, start a new one.
            try:
                if conn.can_read():
                    conn.disconnect()
            except Exception:
                conn.disconnect()
        mine.ready = False
        conn.send_command(*args, check_health=False)
        try:
            reply = conn.read_response()
        except _reply_errors():
            mine.ready = True  # an error the server answered: the connection is sound
            raise
        mine.ready = True
        return reply

    def script(self, source: str) -> Script:
        """A server-side script called through this link (see ``Script``)."""
        return Script(self, source)

    def _fail(self, timeout: bool) -> None:
        with self._lock:
            self.up = False
            if timeout:
                self.timeouts += 1
            else:
                self.errors += 1
            self._down_until = time.monotonic() + self.retry_after

    def close(self) -> None:
        """Closes the data path's connections.

        >>> Link.of("redis://127.0.0.1:1/0", timeout=0.05, method="C").close()
        """
        with contextlib.suppress(Exception):
            self.client.close()
        for conn in list(self._kept):
            with contextlib.suppress(Exception):
                conn.disconnect()


class Script:
    """A Lua script run by its SHA1 with ``EVALSHA``, loaded again when the server answers
    ``NOSCRIPT`` (after a restart, a failover or ``SCRIPT FLUSH``). Sent with
    ``Link.command``: redis-py's own script object checks and copies its arguments on
    every call, several microseconds that a cache hit cannot spare.

    >>> Link.of("redis://127.0.0.1:1/0", timeout=0.05, method="C").script("return 1").sha
    'e0e1f9fabfc9d4800c877a703b823ac0578ff8db'
    """

    def __init__(self, link: Link, source: str) -> None:
        import hashlib

        self.link = link
        self.source = source
        self.sha = hashlib.sha1(source.encode()).hexdigest()

    def __call__(self, keys: list[bytes], args: list[Any]) -> Any:
        """Runs the script (raises ``Down`` like ``Link.call``)."""
        return self.link.call(self._run, keys, args)

    def _run(self, keys: list[bytes], args: list[Any]) -> Any:
        link = self.link
        try:
            return link.command("EVALSHA", self.sha, len(keys), *keys, *args)
        except Exception as e:
            if type(e).__name__ != "NoScriptError":
                raise
            link.client.script_load(self.source)
            return link.command("EVALSHA", self.sha, len(keys), *keys, *args)


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
_REPLY_ERRORS: tuple[type[BaseException], ...] | None = None


def _reply_errors() -> tuple[type[BaseException], ...]:
    """The exceptions that carry an error the server answered (the connection is sound)."""
    global _REPLY_ERRORS
    if _REPLY_ERRORS is None:
        import redis

        found: list[type[BaseException]] = [redis.exceptions.ResponseError]
        try:
            import valkey

            found.append(valkey.exceptions.ResponseError)
        except ImportError:
            pass
        _REPLY_ERRORS = tuple(found)
    return _REPLY_ERRORS


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
