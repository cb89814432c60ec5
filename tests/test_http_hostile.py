"""Requests that try to poison the HTTP cache, under real servers: header names with "_"
that a bridge to WSGI reads as bypassed headers, request targets that are not a path,
PURGE requests naming many tags, the purge token on its way to the app, and responses to
requests with ``Authorization``. Then, in process, a request made to hold a worker: many
``Cache-Control`` lines.

The app is one WSGI callable that builds its links from ``X-Forwarded-Host`` (as
frameworks do behind a proxy), names the requesting user and its own path, and logs every
``Purge-Token`` it is given. It runs behind ``CacheMiddleware`` through asgiref's
``WsgiToAsgi`` under uvicorn with h11, and behind ``WSGICacheMiddleware`` under gunicorn.
The servers import this module (``ZIG_HOSTILE_CACHE`` set); pytest imports it for the tests.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import os
import socket
import statistics
import sys
import time
import uuid
from collections.abc import Iterator
from typing import Any
from urllib.parse import parse_qs, quote

import pytest
from http_servers import HERE, TOKEN, Resp, Server, asgi_scope, free_port, serving
from ziggurat.http import CacheMiddleware, WSGICacheMiddleware

pytestmark = pytest.mark.timeout(180)

OPTS: dict[str, Any] = {
    "allowed_hosts": ["127.0.0.1", "localhost", "example.com"],
    "purge_token": TOKEN,
}


# -- the app (in the servers) -----------------------------------------------------------------


def origin(environ: dict[str, Any], start_response: Any) -> list[bytes]:
    """Answers any path; a path that does not start with "/" gets a 404, as a router's
    would. Query: ``cc`` the Cache-Control value, ``tag`` the Cache-Tag value."""
    token = environ.get("HTTP_PURGE_TOKEN")
    if token is not None:
        fd = os.open(os.environ["ZIG_HOSTILE_LOG"], os.O_WRONLY | os.O_APPEND | os.O_CREAT)
        try:
            os.write(fd, f"{environ['REQUEST_METHOD']} {environ['PATH_INFO']} {token}\n".encode())
        finally:
            os.close(fd)
    path = environ.get("PATH_INFO", "")
    q = parse_qs(environ.get("QUERY_STRING", ""))
    link_host = environ.get("HTTP_X_FORWARDED_HOST") or environ.get("HTTP_HOST", "")
    user = environ.get("HTTP_AUTHORIZATION", "nobody")
    status = "200 OK" if path.startswith("/") else "404 Not Found"
    headers = [
        ("Content-Type", "text/html"),
        ("Cache-Control", q.get("cc", ["max-age=60"])[0]),
    ]
    if "tag" in q:
        headers.append(("Cache-Tag", q["tag"][0]))
    body = f'path={path} user={user} <a href="http://{link_host}/next">next</a>'.encode("latin-1")
    headers.append(("Content-Length", str(len(body))))
    start_response(status, headers)
    return [body]


def _apps() -> tuple[Any, Any]:
    from asgiref.wsgi import WsgiToAsgi
    from ziggurat import Cache

    cache = Cache(
        os.environ["ZIG_HOSTILE_CACHE"], size="16MiB", directory=os.environ["ZIG_HOSTILE_DIR"]
    )
    opts = json.loads(os.environ["ZIG_HOSTILE_OPTS"])
    return (
        CacheMiddleware(WsgiToAsgi(origin), cache, **opts),
        WSGICacheMiddleware(origin, cache, **opts),
    )


asgi_app, wsgi_app = _apps() if os.environ.get("ZIG_HOSTILE_CACHE") else (None, None)


# -- servers and requests ---------------------------------------------------------------------


@contextlib.contextmanager
def hostile_server(kind: str, opts: dict[str, Any], *server_args: str) -> Iterator[Server]:
    """uvicorn with h11 ("asgi") or gunicorn ("wsgi"), one worker, serving this module."""
    base = f"/dev/shm/zighostile-{uuid.uuid4().hex}"
    os.mkdir(base, 0o700)
    port = free_port()
    env = dict(os.environ)
    env.update(
        ZIG_HOSTILE_CACHE="hostile-" + uuid.uuid4().hex[:12],
        ZIG_HOSTILE_DIR=base,
        ZIG_HOSTILE_OPTS=json.dumps(opts),
        ZIG_HOSTILE_LOG=os.path.join(base, "tokens.log"),
        PYTHONPATH=HERE + os.pathsep + env.get("PYTHONPATH", ""),
    )
    if kind == "asgi":
        cmd = [sys.executable, "-m", "uvicorn", "test_http_hostile:asgi_app", "--http", "h11"]
        cmd += ["--host", "127.0.0.1", "--port", str(port), "--log-level", "warning"]
    else:
        cmd = [sys.executable, "-m", "gunicorn", "test_http_hostile:wsgi_app"]
        cmd += ["-b", f"127.0.0.1:{port}", "-w", "1", "--log-level", "warning"]
    with serving(kind, [*cmd, *server_args], port, base, cwd=HERE, env=env, ready="/ready") as s:
        yield s


def tokens_seen(srv: Server) -> str:
    """Every Purge-Token the app was given, one line each."""
    try:
        with open(os.path.join(srv.counts, "tokens.log")) as f:
            return f.read()
    except FileNotFoundError:
        return ""


def raw_request(srv: Server, head: bytes) -> Resp:
    """Sends ``head`` (request line and header lines, CRLF-separated, without the blank
    line) as bytes on a new connection, and reads the response."""
    with socket.create_connection(("127.0.0.1", srv.port), timeout=20) as s:
        s.sendall(head + b"\r\nConnection: close\r\n\r\n")
        data = b""
        while chunk := s.recv(65536):
            data += chunk
    head_part, _, body = data.partition(b"\r\n\r\n")
    lines = head_part.decode("latin-1").split("\r\n")
    headers: dict[str, list[str]] = {}
    for line in lines[1:]:
        k, _, v = line.partition(":")
        headers.setdefault(k.strip().lower(), []).append(v.strip())
    return Resp(int(lines[0].split()[1]), headers, body)


def cc(value: str) -> str:
    return quote(value, safe="")


@pytest.fixture(scope="module", params=["asgi", "wsgi"])
def srv(request: pytest.FixtureRequest) -> Iterator[Server]:
    with hostile_server(request.param, OPTS) as s:
        yield s


@pytest.fixture(scope="module")
def asgi(srv: Server) -> Server:
    assert srv.kind == "asgi", "a test of the ASGI adapter takes srv as asgi alone"
    return srv


# -- "_" in header names ------------------------------------------------------------------------


@pytest.mark.parametrize("srv", ["asgi"], indirect=True)
def test_underscore_header_does_not_poison_asgi(asgi: Server) -> None:
    # WsgiToAsgi, like most WSGI bridges, reads X_Forwarded_Host as X-Forwarded-Host.
    path = f"/{asgi.name()}"
    for name in ("X_Forwarded_Host", "x_forwarded_host", "X-Forwarded_Host"):
        evil = raw_request(
            asgi,
            f"GET {path} HTTP/1.1\r\nHost: 127.0.0.1:{asgi.port}\r\n{name}: evil.test".encode(),
        )
        assert evil.status == 200 and b"evil.test" in evil.body  # the app did read it
        clean = asgi.request(path)
        assert b"evil.test" not in clean.body, clean.body
        assert f"127.0.0.1:{asgi.port}/next".encode() in clean.body
        assert evil.cache_status.endswith("fwd=bypass; detail=underscore"), evil.cache_status
    # A fresh stored page is not served to such a request either: the app answers it.
    assert "hit" in asgi.request(path).cache_status.split("; ")
    again = raw_request(
        asgi, f"GET {path} HTTP/1.1\r\nHost: 127.0.0.1:{asgi.port}\r\nX_Y: 1".encode()
    )
    assert "detail=underscore" in again.cache_status


@pytest.mark.parametrize("header_map", ["drop", "dangerous"])
def test_underscore_header_does_not_poison_wsgi(header_map: str) -> None:
    # gunicorn drops such headers by default; "dangerous" maps them to the environ key of
    # the header they imitate, which the middleware then bypasses like the header itself.
    with hostile_server("wsgi", OPTS, "--header-map", header_map) as s:
        path = f"/{s.name()}"
        head = f"GET {path} HTTP/1.1\r\nHost: 127.0.0.1:{s.port}\r\nX_Forwarded_Host: evil.test"
        evil = raw_request(s, head.encode())
        assert evil.status == 200
        if header_map == "dangerous":
            assert b"evil.test" in evil.body  # the app did read it
            assert evil.cache_status.endswith("fwd=bypass; detail=header"), evil.cache_status
        else:
            assert b"evil.test" not in evil.body
        for _ in range(2):
            clean = s.request(path)
            assert b"evil.test" not in clean.body, clean.body
            assert f"127.0.0.1:{s.port}/next".encode() in clean.body


# -- request targets ----------------------------------------------------------------------------


def test_authority_like_target_does_not_poison_another_port(srv: Server) -> None:
    # "GET :8443/x" with Host example.com once keyed as "GET /x" with Host example.com:8443.
    name = srv.name()
    attack = raw_request(srv, f"GET :8443/{name} HTTP/1.1\r\nHost: example.com".encode())
    # h11 takes the target and the app answers it; gunicorn refuses it.
    assert attack.status == (404 if srv.kind == "asgi" else 400)
    for _ in range(2):
        victim = srv.request(f"/{name}", headers={"Host": "example.com:8443"})
        assert victim.status == 200, (victim.status, victim.body, victim.cache_status)
        assert victim.body.startswith(f"path=/{name} ".encode())
    if srv.kind == "asgi":
        assert attack.cache_status.endswith("fwd=bypass; detail=target"), attack.cache_status


def test_absolute_form_and_asterisk_are_not_cached(srv: Server) -> None:
    name = srv.name()
    for _ in range(2):
        r = raw_request(
            srv, f"GET http://evil.test/{name} HTTP/1.1\r\nHost: 127.0.0.1:{srv.port}".encode()
        )
        assert r.status in (200, 404)  # gunicorn hands the app the path, uvicorn the URL
        assert r.cache_status.endswith("fwd=bypass; detail=target"), r.cache_status
    r = raw_request(srv, f"OPTIONS * HTTP/1.1\r\nHost: 127.0.0.1:{srv.port}".encode())
    assert "hit" not in r.cache_status.split("; ")
    # The same path in origin form is cached as usual.
    assert "stored" in srv.request(f"/{name}").cache_status
    assert "hit" in srv.request(f"/{name}").cache_status.split("; ")


# -- PURGE and the purge token --------------------------------------------------------------------


def test_purge_of_twenty_tags(srv: Server) -> None:
    n = srv.name()
    tags = [f"t{i}-{n}" for i in range(20)]
    paths = [f"/{n}/{i}?tag={t}" for i, t in enumerate(tags)]
    for p in paths:
        assert "stored" in srv.request(p).cache_status
        assert "hit" in srv.request(p).cache_status.split("; ")
    r = srv.request(
        "/", method="PURGE", headers={"Purge-Token": TOKEN, "Cache-Tag": " ".join(tags)}
    )
    assert r.status == 200 and r.body == b"purged tags\n", (r.status, r.body, r.cache_status)
    for p in paths:
        assert "hit" not in srv.request(p).cache_status.split("; "), p
    assert tokens_seen(srv) == ""


def test_purge_token_never_reaches_the_app(srv: Server) -> None:
    n = srv.name()
    spellings = [("Purge-Token", TOKEN)]
    if srv.kind == "asgi":
        spellings.append(("Purge_Token", TOKEN))  # WsgiToAsgi maps it to the same key
    for name, value in spellings:
        h = {name: value}
        srv.request(f"/{n}/miss", headers=h)  # stored on a miss: the app ran
        srv.request(f"/{n}/post", method="POST", headers=h, body=b"x")  # unsafe: passes
        srv.request(f"/{n}/bypass", headers={**h, "X-Forwarded-Host": "a.test"})
        srv.request(f"/{n}/auth", headers={**h, "Authorization": "Bearer a"})
        srv.request(f"/{n}/ns?cc=no-store", headers=h)
        srv.request(f"/{n}/del", method="DELETE", headers=h)
        srv.request("/", method="PURGE", headers={**h, "Cache-Tag": " ".join("abcdefghij")})
        srv.request(f"/{n}/miss", method="PURGE", headers=h)
    assert tokens_seen(srv) == ""


def test_purge_token_stripped_when_purge_is_off() -> None:
    with hostile_server("asgi", {**OPTS, "purge_token": None}) as s:
        n = s.name()
        r = s.request(f"/{n}", method="PURGE", headers={"Purge-Token": TOKEN})
        assert r.status == 200 and r.body.startswith(f"path=/{n} ".encode())  # the app's
        s.request(f"/{n}", headers={"Purge-Token": TOKEN})
        assert tokens_seen(s) == ""


# -- Authorization ------------------------------------------------------------------------------


def test_authorization_must_revalidate_not_shared_by_default(srv: Server) -> None:
    p = f"/{srv.name()}?cc={cc('max-age=60, must-revalidate')}"
    alice = srv.request(p, headers={"Authorization": "Bearer alice"})
    assert b"user=Bearer alice" in alice.body
    assert alice.cache_status.endswith("detail=authorization"), alice.cache_status
    bob = srv.request(p, headers={"Authorization": "Bearer bob"})
    assert b"user=Bearer bob" in bob.body, bob.body
    anon = srv.request(p)
    assert b"alice" not in anon.body and b"bob" not in anon.body


@pytest.mark.parametrize("directive", ["public, max-age=60", "s-maxage=60"])
def test_authorization_public_or_s_maxage_shared_by_default(srv: Server, directive: str) -> None:
    p = f"/{srv.name()}?cc={cc(directive)}"
    first = srv.request(p, headers={"Authorization": "Bearer alice"})
    assert "stored" in first.cache_status
    second = srv.request(p, headers={"Authorization": "Bearer bob"})
    assert "hit" in second.cache_status.split("; ")
    assert b"user=Bearer alice" in second.body


@pytest.mark.parametrize("kind", ["asgi", "wsgi"])
def test_authorization_must_revalidate_shared_when_asked(kind: str) -> None:
    with hostile_server(kind, {**OPTS, "store_auth_must_revalidate": True}) as s:
        p = f"/{s.name()}?cc={cc('max-age=60, must-revalidate')}"
        first = s.request(p, headers={"Authorization": "Bearer alice"})
        assert "stored" in first.cache_status
        second = s.request(p, headers={"Authorization": "Bearer bob"})
        assert "hit" in second.cache_status.split("; ")
        assert b"user=Bearer alice" in second.body


def test_options_of_these_defences_are_checked() -> None:
    from ziggurat import Cache

    async def app(scope: Any, receive: Any, send: Any) -> None: ...

    cache = Cache("hostile-opts-" + uuid.uuid4().hex[:8], size="8MiB")
    try:
        with pytest.raises(ValueError, match=r"CacheMiddleware\(\): key_headers .*'x_tenant'.*'-'"):
            CacheMiddleware(app, cache, key_headers=["x_tenant"])
        with pytest.raises(TypeError, match=r"store_auth_must_revalidate must be True or False"):
            WSGICacheMiddleware(lambda e, s: [], cache, store_auth_must_revalidate="yes")
        assert CacheMiddleware(app, cache).options.store_auth_must_revalidate is False
    finally:
        cache.unlink()


# -- requests made to hold a worker -------------------------------------------------------------


def test_cache_control_lines_cost_in_proportion_to_their_number() -> None:
    # Distinct directives, one per line: 1,000 lines make about 24 KB, under nginx's default
    # limit of 32 KB for a request head. Medians of the CPU time of interleaved runs of n and
    # 4n lines, compared: work in proportion to the lines takes about 4 times as long, work
    # that grows with their square 16 times.
    from ziggurat import Cache

    async def app(scope: Any, receive: Any, send: Any) -> None:
        headers = [(b"cache-control", b"max-age=60")]
        await send({"type": "http.response.start", "status": 200, "headers": headers})
        await send({"type": "http.response.body", "body": b"page"})

    async def receive() -> dict[str, Any]:
        return {"type": "http.request", "body": b"", "more_body": False}

    def scope(lines: int) -> dict[str, Any]:
        cc = [(b"cache-control", b"z%05x" % i) for i in range(lines)]
        return asgi_scope(b"/p", [(b"host", b"example.com"), *cc])

    statuses: list[bytes] = []

    async def send(message: dict[str, Any]) -> None:
        if message["type"] == "http.response.start":
            statuses.append(dict(message["headers"])[b"cache-status"])

    async def run(mw: Any) -> dict[int, float]:
        await mw(scope(0), receive, send)  # stored: every timed request is a hit
        scopes = {n: scope(n) for n in (250, 1000)}
        times: dict[int, list[float]] = {n: [] for n in scopes}
        for _ in range(7):
            for n, s in scopes.items():
                start = time.thread_time()
                await mw(s, receive, send)
                times[n].append(time.thread_time() - start)
        return {n: statistics.median(t) for n, t in times.items()}

    cache = Cache("hostile-cc-" + uuid.uuid4().hex[:8], size="8MiB")
    try:
        cost = asyncio.run(run(CacheMiddleware(app, cache, allowed_hosts=["example.com"])))
    finally:
        cache.unlink()
    assert all(s.startswith(b"ziggurat; hit") for s in statuses[1:]), statuses
    assert cost[1000] / cost[250] <= 8, cost
