"""The stream reader's blocking reads of the event stream, on a connection of their own.

The reader wakes once for every event any host writes, its own host's included, and in a
busy host most events are its own. Through redis-py's client each wake-up would take a
connection from the pool and give it back, through the client's retry and observability
wrappers and its reply callbacks: about as much CPU as the rest of the wake-up, on a host
whose cores its workers need. A ``Tail`` keeps one connection with the reader client's
settings and sends ``XREAD`` on it directly; a Redis Cluster client (which routes by slot)
is used as it is.

>>> from ziggurat.cluster.link import Link
>>> tail = Tail(Link.of("redis://127.0.0.1:1/0", timeout=0.05, method="C"), 1.0)
>>> tail.client.connection_pool.connection_kwargs["socket_timeout"]
2.0
>>> tail.close()
"""

from __future__ import annotations

from typing import Any

from ziggurat.cluster.link import Link, _reply_errors

__all__ = ["Tail"]

#: One entry of the stream: its id and its fields.
Entry = tuple[bytes, dict[bytes, bytes]]


class Tail:
    """Blocking reads of one stream for one reader (see the module). ``client`` is the
    reader's own client, for its other commands."""

    def __init__(self, link: Link, block_s: float) -> None:
        self.client = link.reader_client(block_s)
        pool = getattr(self.client, "connection_pool", None)
        cluster = callable(getattr(self.client, "get_nodes", None))
        self._pool = None if cluster else pool
        self._conn: Any = None
        self._head: tuple[tuple[bytes, int, int], bytes] = ((b"", 0, 0), b"")

    def read(self, key: bytes, after: str, count: int, block_ms: int) -> list[Entry]:
        """The entries of stream ``key`` after id ``after`` (at most ``count``), waiting up
        to ``block_ms`` for one; an empty list when none came. Raises what the connection
        raises (wrap it in ``Link.call``).

        >>> tail = Tail(Link.of("redis://127.0.0.1:1/0", timeout=0.05, method="C"), 0.1)
        >>> tail.read(b"s", "0-0", 10, 100)
        Traceback (most recent call last):
        ...
        redis.exceptions.ConnectionError: Error 111 connecting to 127.0.0.1:1. Connection refused.
        """
        if self._pool is None:
            resp = self.client.xread({key: after}, count=count, block=block_ms)
            return [(eid, fields) for _stream, entries in resp or () for eid, fields in entries]
        conn = self._conn
        if conn is None:
            conn = self._pool.connection_class(**self._pool.connection_kwargs)
            self._conn = conn
        head = self._head
        if head[0] != (key, count, block_ms):
            head = self._head = ((key, count, block_ms), _xread_head(key, count, block_ms))
        sid = after.encode()
        try:
            conn.send_packed_command(
                [b"%s$%d\r\n%s\r\n" % (head[1], len(sid), sid)], check_health=False
            )
            resp = conn.read_response()
        except _reply_errors():
            raise  # the server answered: the connection is sound
        except BaseException:
            # Half a reply may be left on the socket: the next read starts on a new one.
            self._conn = None
            conn.disconnect()
            raise
        out: list[Entry] = []
        for _stream, entries in resp or ():
            for eid, flat in entries:
                it = iter(flat or ())
                out.append((eid, dict(zip(it, it, strict=False))))
        return out

    def close(self) -> None:
        """Closes the connection and the client."""
        conn, self._conn = self._conn, None
        if conn is not None:
            conn.disconnect()
        self.client.close()


def _xread_head(key: bytes, count: int, block_ms: int) -> bytes:
    """The command ``XREAD COUNT count BLOCK block_ms STREAMS key`` in the protocol's
    encoding, but for its last argument (the id), which is all that changes between reads.

    >>> _xread_head(b"ev", 10, 500)[:24]
    b'*8\\r\\n$5\\r\\nXREAD\\r\\n$5\\r\\nCOUNT'
    """
    args = [b"XREAD", b"COUNT", b"%d" % count, b"BLOCK", b"%d" % block_ms, b"STREAMS", key]
    return b"*8\r\n" + b"".join(b"$%d\r\n%s\r\n" % (len(a), a) for a in args)
