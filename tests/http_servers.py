"""Real servers for the HTTP cache tests: uvicorn (ASGI, Starlette) and gunicorn (WSGI,
Flask) started as subprocesses on free 127.0.0.1 ports, several workers each, sharing one
cache segment in a private directory; and, for the tests that call the ASGI middleware in
process, the scope such a server gives an app.
"""

from __future__ import annotations

import contextlib
import http.client
import json
import os
import shutil
import socket
import subprocess
import sys
import time
import uuid
from collections.abc import Iterator
from dataclasses import dataclass, field
from typing import Any
from urllib.parse import quote

HERE = os.path.dirname(os.path.abspath(__file__))
TOKEN = "purge-token-0123456789abcdef"
OPTS: dict[str, Any] = {
    "allowed_hosts": ["127.0.0.1", "localhost", "example.com"],
    "max_body": 4096,
    "purge_token": TOKEN,
}


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


@dataclass
class Resp:
    status: int
    headers: dict[str, list[str]]
    body: bytes

    def h(self, name: str) -> str | None:
        v = self.headers.get(name.lower())
        return v[0] if v else None

    @property
    def cache_status(self) -> str:
        return self.h("cache-status") or ""

    @property
    def text(self) -> str:
        return self.body.decode("latin-1")


@dataclass
class Server:
    kind: str
    port: int
    counts: str
    proc: subprocess.Popen[bytes]
    log: str
    seq: list[int] = field(default_factory=lambda: [0])

    def request(
        self,
        path: str,
        method: str = "GET",
        headers: dict[str, str] | list[tuple[str, str]] | None = None,
        body: bytes | None = None,
        timeout: float = 30,
    ) -> Resp:
        conn = http.client.HTTPConnection("127.0.0.1", self.port, timeout=timeout)
        try:
            conn.putrequest(method, path, skip_accept_encoding=True, skip_host=True)
            items = list(headers.items()) if isinstance(headers, dict) else list(headers or [])
            if not any(k.lower() == "host" for k, _ in items):
                items.insert(0, ("Host", f"127.0.0.1:{self.port}"))
            for k, v in items:
                conn.putheader(k, v.encode("latin-1") if isinstance(v, str) else v)
            if body is not None:
                conn.putheader("Content-Length", str(len(body)))
            conn.endheaders(body)
            r = conn.getresponse()
            data = r.read()
            hdrs: dict[str, list[str]] = {}
            for k, v in r.getheaders():
                hdrs.setdefault(k.lower(), []).append(v)
            return Resp(r.status, hdrs, data)
        finally:
            conn.close()

    def count(self, name: str) -> int:
        try:
            return os.path.getsize(os.path.join(self.counts, "count-" + name.replace("/", "_")))
        except FileNotFoundError:
            return 0

    def fail(self, name: str, how: str | None) -> None:
        path = os.path.join(self.counts, "fail-" + name.replace("/", "_"))
        if how is None:
            with contextlib.suppress(FileNotFoundError):
                os.unlink(path)
        else:
            with open(path, "w") as f:
                f.write(how)

    def spec(self, name: str, status: int, headers: list[tuple[str, str]]) -> None:
        """Makes ``/e/<name>`` answer ``status`` with exactly these headers."""
        path = os.path.join(self.counts, "spec-" + name.replace("/", "_"))
        with open(path, "w", encoding="utf-8") as f:
            json.dump({"status": status, "headers": headers}, f)

    def barrier(self, name: str, calls: int) -> None:
        """Makes calls of ``/e/<name>`` wait until ``calls`` calls have arrived."""
        with open(os.path.join(self.counts, "barrier-" + name.replace("/", "_")), "w") as f:
            f.write(str(calls))

    def open_gate(self, gate: str) -> None:
        open(os.path.join(self.counts, gate), "w").close()

    def name(self, prefix: str = "n") -> str:
        """A name no other test uses (every test gets fresh URLs)."""
        self.seq[0] += 1
        return f"{prefix}{self.seq[0]}-{uuid.uuid4().hex[:6]}"


def asgi_scope(target: bytes, headers: list[tuple[Any, Any]]) -> dict[str, Any]:
    """The scope of a GET of ``target`` (path and query) with these header lines, as a
    server on 127.0.0.1:8000 gives it to an ASGI app."""
    path, _, query = target.partition(b"?")
    return {
        "type": "http",
        "method": "GET",
        "scheme": "http",
        "path": path.decode("latin-1"),
        "raw_path": path,
        "query_string": query,
        "headers": headers,
        "client": ("127.0.0.1", 5000),
        "server": ("127.0.0.1", 8000),
    }


def url(name: str, *headers: str, **params: str | int | float) -> str:
    """``/e/<name>`` with header lines ``h`` and other query parameters."""
    q = [("h", h) for h in headers] + [(k, str(v)) for k, v in params.items()]
    qs = "&".join(f"{k}={quote(v, safe='')}" for k, v in q)
    return f"/e/{name}" + (f"?{qs}" if qs else "")


def _wait_ready(srv: Server, deadline: float, path: str) -> None:
    while time.monotonic() < deadline:
        if srv.proc.poll() is not None:
            break
        try:
            if srv.request(path, timeout=2).status < 500:
                return
        except OSError:
            pass
        time.sleep(0.1)
    with open(srv.log, "rb") as f:
        out = f.read().decode(errors="replace")
    raise RuntimeError(f"{srv.kind} server did not start:\n{out[-3000:]}")


@contextlib.contextmanager
def serving(
    kind: str,
    cmd: list[str],
    port: int,
    base: str,
    *,
    cwd: str,
    env: dict[str, str],
    ready: str = "/",
    counts: str = "",
) -> Iterator[Server]:
    """Runs the server command ``cmd`` (listening on ``port``) with its output in
    ``base/server.log``, once ``GET ready`` answers; then stops it (SIGTERM, SIGKILL after
    15 s) and removes ``base``. A server that exits or stays silent for 60 s raises with the
    end of its log."""
    log = os.path.join(base, "server.log")
    with open(log, "wb") as out:
        proc = subprocess.Popen(cmd, cwd=cwd, env=env, stdout=out, stderr=subprocess.STDOUT)
    srv = Server(kind, port, counts or base, proc, log)
    try:
        _wait_ready(srv, time.monotonic() + 60, ready)
        yield srv
    finally:
        stop(proc)
        shutil.rmtree(base, ignore_errors=True)


def stop(proc: subprocess.Popen[Any]) -> None:
    """Stops a server as its users would: SIGTERM, then SIGKILL after 15 s."""
    proc.terminate()
    try:
        proc.wait(15)
    except subprocess.TimeoutExpired:
        proc.kill()
        proc.wait(5)


@contextlib.contextmanager
def running(
    kind: str, workers: int, opts: dict[str, Any] | None = None, cache_dir: str | None = None
) -> Iterator[Server]:
    """A server of ``kind`` ("asgi": uvicorn + Starlette, "wsgi": gunicorn + Flask)."""
    base = f"/dev/shm/zighttp-{uuid.uuid4().hex}"
    os.mkdir(base, 0o700)
    counts = os.path.join(base, "counts")
    os.mkdir(counts)
    port = free_port()
    env = dict(os.environ)
    env.update(
        ZIG_HTTP_CACHE="http-" + uuid.uuid4().hex[:12],
        ZIG_HTTP_DIR=cache_dir or base,
        ZIG_HTTP_COUNTS=counts,
        ZIG_HTTP_OPTS=json.dumps(opts if opts is not None else OPTS),
        PYTHONPATH=HERE + os.pathsep + env.get("PYTHONPATH", ""),
    )
    if kind == "asgi":
        cmd = [sys.executable, "-m", "uvicorn", "http_apps:asgi_app", "--host", "127.0.0.1"]
        cmd += ["--port", str(port), "--workers", str(workers), "--log-level", "warning"]
        cmd += ["--no-access-log"]
    else:
        cmd = [sys.executable, "-m", "gunicorn", "http_apps:wsgi_app", "-b", f"127.0.0.1:{port}"]
        cmd += ["-w", str(workers), "--log-level", "warning", "--timeout", "60"]
    with serving(kind, cmd, port, base, cwd=HERE, env=env, ready="/e/ready", counts=counts) as srv:
        yield srv


def server_log(srv: Server) -> str:
    with open(srv.log, "rb") as f:
        return f.read().decode(errors="replace")
