"""The stream reader's blocking reads of the event stream, on a connection of their own.

The reader wakes once for every event any host writes, its own host's included, and in a
busy host most events are its own. Through redis-py's client each wake-up would take a
connection from the pool and give it back, through the client's retry and observability
wrappers and its reply callbacks: about as much CPU as the rest of the wake-up, on a host
whose cores its workers need. A ``Tail`` keeps one connection with the reader client's
settings (protocol 2: the reply parsed here is RESP2's) and sends one prepared ``XREAD`` on
it; a Redis Cluster client (which routes by slot) is used as it is.

>>> from ziggurat.cluster.link import Link
>>> tail = Tail(Link.of("redis://127.0.0.1:1/0", timeout=0.05, method="C"), b"s", 10, 1.0)
>>> tail.client.connection_pool.connection_kwargs["socket_timeout"]
2.0
>>> tail.close()
"""

from __future__ import annotations

from typing import Any

from ziggurat.cluster.link import Link, own_pool

__all__ = ["Tail"]

#: One entry of the stream: its id and its fields.
Entry = tuple[bytes, dict[bytes, bytes]]


class Tail:
    """Blocking reads of stream ``key`` (at most ``count`` entries, waiting up to
    ``block_s`` for one) for one reader (see the module). ``client`` is the reader's own
    client, for its other commands. A read that raises leaves the connection in an unknown
    state: the reader then closes this ``Tail`` and makes a new one."""

    def __init__(self, link: Link, key: bytes, count: int, block_s: float) -> None:
        self.client = link.reader_client(block_s)
        self._pool = own_pool(self.client)
        self._key, self._count, self._block_ms = key, count, int(block_s * 1000)
        self._conn: Any = None
        # The command but for its last argument (the id), which is all that changes.
        args = [b"XREAD", b"COUNT", b"%d" % count, b"BLOCK", b"%d" % self._block_ms]
        args += [b"STREAMS", key]
        self._head = b"*8\r\n" + b"".join(b"$%d\r\n%s\r\n" % (len(a), a) for a in args)

    def read(self, after: str) -> list[Entry]:
        """The entries after id ``after``; an empty list when none came within the block.
        Raises what the connection raises (wrap it in ``Link.call``).

        >>> tail = Tail(Link.of("redis://127.0.0.1:1/0", timeout=0.05, method="C"), b"s", 10, 0.1)
        >>> tail.read("0-0")
        Traceback (most recent call last):
        ...
        redis.exceptions.ConnectionError: Error 111 connecting to 127.0.0.1:1. Connection refused.
        """
        if self._pool is None:
            resp = self.client.xread({self._key: after}, count=self._count, block=self._block_ms)
            return [(eid, fields) for _stream, entries in resp or () for eid, fields in entries]
        if self._conn is None:
            self._conn = self._pool.connection_class(**self._pool.connection_kwargs)
        sid = after.encode()
        self._conn.send_packed_command(
            [b"%s$%d\r\n%s\r\n" % (self._head, len(sid), sid)], check_health=False
        )
        out: list[Entry] = []
        for _stream, entries in self._conn.read_response() or ():
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
