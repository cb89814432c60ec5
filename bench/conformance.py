"""The HTTP cache against the cache-tests.fyi suite, beside the shared caches it publishes.

`cache-tests <https://cache-tests.fyi>`_ (the npm package ``http-cache-tests``) exercises an
HTTP cache from the outside: its origin server answers what each test asks for, and its client
sends requests through the cache and checks what comes back. Its package ships the results
of the caches it was run against (Varnish, Apache Traffic Server, nginx, Squid, Apache httpd,
Fastly, ...), so one run here puts ziggurat in the same table, test by test.

ziggurat's HTTP cache is a middleware, not a proxy: here it wraps a small WSGI reverse proxy
(``proxy_app``: every request forwarded to the origin with ``http.client``) under gunicorn,
the way it wraps any app. Run::

    .venv/bin/python bench/conformance.py            # writes bench/conformance.json and .md
    .venv/bin/python bench/conformance.py --id freshness-max-age   # one test, verbose
    .venv/bin/python bench/conformance.py --front node --id vary-match   # through Node.js

Each run measures both front ends: the Python middleware (WSGI, under gunicorn) and
Node.js's ``ziggurat/http`` (``bench/node/conformance-proxy.mjs``, a node:http reverse
proxy on two cluster workers), each in front of the same reverse proxy's job.

Needs Node.js and npm (the suite is installed into ``target/cache-tests``). The score counts
the tests the suite marks as required of a shared cache (``kind`` required or unset, not
browser-only), as its own results page does: a test passes only when its result is ``true``.
"""

from __future__ import annotations

import argparse
import http.client
import json
import os
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable, Iterable
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parent.parent
SUITE_VERSION = "0.4.5"
SUITE_DIR = ROOT / "target" / "cache-tests"
# The origin the proxy forwards to (set by main() for the gunicorn workers).
ORIGIN_ENV = "ZIGGURAT_CONFORMANCE_ORIGIN"
# Peers that publish results in the suite's package, in the order of the table.
PEERS = ("varnish", "trafficserver", "nginx", "squid", "apache", "fastly", "nuster")
_HOP = {
    "connection",
    "keep-alive",
    "proxy-connection",
    "transfer-encoding",
    "te",
    "trailer",
    "upgrade",
}

StartResponse = Callable[..., Any]


def proxy_app(environ: dict[str, Any], start_response: StartResponse) -> Iterable[bytes]:
    """A WSGI reverse proxy to the suite's origin: method, target, headers and body as
    received; the origin's status, headers and body as answered."""
    host, port = os.environ[ORIGIN_ENV].rsplit(":", 1)
    target = environ.get("RAW_URI") or environ.get("PATH_INFO", "/")
    headers = {}
    for k, v in environ.items():
        if k.startswith("HTTP_"):
            name = k[5:].replace("_", "-").lower()
            if name not in _HOP and name != "host":
                headers[name] = v
    for k in ("CONTENT_TYPE", "CONTENT_LENGTH"):
        if environ.get(k):
            headers[k.replace("_", "-").lower()] = environ[k]
    length = int(environ.get("CONTENT_LENGTH") or 0)
    body = environ["wsgi.input"].read(length) if length else None
    conn = http.client.HTTPConnection(host, int(port), timeout=30)
    try:
        try:
            conn.request(environ["REQUEST_METHOD"], target, body=body, headers=headers)
            resp = conn.getresponse()
            data = resp.read()
        except (OSError, http.client.HTTPException):
            # What a reverse proxy answers when the origin fails.
            start_response("502 Bad Gateway", [("Content-Length", "0")])
            return [b""]
        # Connection goes up to the middleware, so that its rule for the fields that
        # Connection lists is what the suite measures; the server drops it on the way out.
        out = [(k, v) for k, v in resp.getheaders() if k.lower() not in _HOP - {"connection"}]
        out = [(k, v) for k, v in out if k.lower() != "content-length"]
        out.append(("Content-Length", str(len(data))))
        start_response(f"{resp.status} {resp.reason}", out)
        return [data]
    finally:
        conn.close()


def _app() -> Any:
    """The gunicorn entry: the proxy under ziggurat's WSGI cache middleware."""
    from ziggurat import Cache
    from ziggurat.http import WSGICacheMiddleware

    cache = Cache(os.environ.get("ZIGGURAT_CONFORMANCE_CACHE", "conformance"), size="64MiB")
    return WSGICacheMiddleware(
        proxy_app, cache, allowed_hosts=["localhost", "127.0.0.1"], surrogate_control=True
    )


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def _wait_port(port: int, proc: subprocess.Popen[Any], what: str) -> None:
    deadline = time.monotonic() + 30
    while time.monotonic() < deadline:
        if proc.poll() is not None:
            raise RuntimeError(f"{what} exited with {proc.returncode}")
        try:
            socket.create_connection(("127.0.0.1", port), timeout=0.2).close()
            return
        except OSError:
            time.sleep(0.1)
    raise RuntimeError(f"{what} did not listen on {port}")


def install_suite() -> Path:
    """The suite's package in target/cache-tests (installed by npm once)."""
    pkg = SUITE_DIR / "node_modules" / "http-cache-tests"
    if not (pkg / "package.json").exists():
        if shutil.which("npm") is None:
            raise SystemExit("conformance: npm is required (Node.js 20 or later)")
        SUITE_DIR.mkdir(parents=True, exist_ok=True)
        (SUITE_DIR / "package.json").write_text('{"private": true}\n')
        subprocess.run(
            ["npm", "install", "--no-audit", "--no-fund", f"http-cache-tests@{SUITE_VERSION}"],
            cwd=SUITE_DIR,
            check=True,
        )
    return pkg


def test_kinds(pkg: Path) -> dict[str, dict[str, Any]]:
    """Each test's id with its kind, dependencies and browser-only flag, read from the
    suite's own test definitions."""
    script = (
        "import tests from './tests/index.mjs';"
        "import s from './tests/surrogate-control.mjs'; tests.push(s);"
        "const out = {};"
        "for (const suite of tests) for (const t of suite.tests) out[t.id] = {"
        "kind: t.kind || 'required', depends_on: t.depends_on || [],"
        "browser_only: !!t.browser_only, suite: suite.name, name: t.name};"
        "console.log(JSON.stringify(out));"
    )
    raw = subprocess.run(
        ["node", "--input-type=module", "-e", script],
        cwd=pkg,
        check=True,
        capture_output=True,
        text=True,
    ).stdout
    kinds: dict[str, dict[str, Any]] = json.loads(raw)
    return kinds


def run_suite(pkg: Path, test_id: str = "", front: str = "python") -> dict[str, Any]:
    """Runs the suite through the cache of ``front`` ('python' or 'node'); returns its
    results ({test id: true | [kind, why]})."""
    origin_port, proxy_port = _free_port(), _free_port()
    work = Path(tempfile.mkdtemp(prefix="zg-conf-"))
    env = dict(
        os.environ,
        npm_config_port=str(origin_port),
        npm_config_protocol="http",
        npm_config_pidfile=str(work / "origin.pid"),
        npm_config_base=f"http://localhost:{proxy_port}",
        npm_config_id=test_id,
        # The suite reads an unset id as "one test": an empty one means all of them.
        npm_package_config_id="",
        ZIGGURAT_DIR=str(work),
        ZIGGURAT_CONFORMANCE_CACHE=f"conf{os.getpid()}",
    )
    env[ORIGIN_ENV] = f"127.0.0.1:{origin_port}"
    env["PYTHONPATH"] = os.pathsep.join([str(ROOT / "bench"), str(ROOT / "python")])
    origin = subprocess.Popen(
        ["node", "server/server.mjs"], cwd=pkg, env=env, stdout=subprocess.DEVNULL
    )
    node_proxy = [
        "node",
        str(ROOT / "bench" / "node" / "conformance-proxy.mjs"),
        str(proxy_port),
        env[ORIGIN_ENV],
        env["ZIGGURAT_CONFORMANCE_CACHE"],
    ]
    proxy = subprocess.Popen(
        node_proxy
        if front == "node"
        else [
            str(Path(sys.executable).with_name("gunicorn")),
            "-w",
            "2",
            "--threads",
            "8",
            "-b",
            f"127.0.0.1:{proxy_port}",
            "--log-level",
            "warning",
            "conformance:_app()",
        ],
        env=env,
        cwd=work,
    )
    try:
        _wait_port(origin_port, origin, "the suite's origin server")
        _wait_port(proxy_port, proxy, "the proxy")
        out = subprocess.run(
            ["node", "--no-warnings", "cli.mjs"],
            cwd=pkg,
            env=env,
            check=True,
            capture_output=True,
            text=True,
            timeout=600,
        ).stdout
    finally:
        for p in (proxy, origin):
            p.send_signal(signal.SIGTERM)
        for p in (proxy, origin):
            try:
                p.wait(10)
            except subprocess.TimeoutExpired:
                p.kill()
        shutil.rmtree(work, ignore_errors=True)
    if test_id:
        print(out)
        return {}
    results: dict[str, Any] = json.loads(out)
    return results


def verdict(tid: str, kinds: dict[str, dict[str, Any]], results: dict[str, Any]) -> str:
    """'pass', 'fail', 'untested', 'setup' or 'dependency' for one required test."""
    r = results.get(tid)
    if r is None:
        return "untested"
    for dep in kinds[tid]["depends_on"]:
        if results.get(dep) is not True:
            return "dependency"
    if isinstance(r, list) and r and r[0] == "Setup":
        return "setup"
    return "pass" if r is True else "fail"


def score(kinds: dict[str, dict[str, Any]], results: dict[str, Any]) -> dict[str, int]:
    """Counts of verdicts over the tests required of a shared cache."""
    out = {"pass": 0, "fail": 0, "untested": 0, "setup": 0, "dependency": 0}
    for tid, k in kinds.items():
        if k["kind"] == "required" and not k["browser_only"]:
            out[verdict(tid, kinds, results)] += 1
    return out


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--id", default="", help="run one test by id and print its details")
    ap.add_argument("--front", default="python", choices=["python", "node"])
    args = ap.parse_args()
    pkg = install_suite()
    if args.id:
        run_suite(pkg, args.id, args.front)
        return
    kinds = test_kinds(pkg)
    ours = run_suite(pkg)
    node = run_suite(pkg, front="node")
    table = {"ziggurat": score(kinds, ours), "ziggurat (Node.js)": score(kinds, node)}
    peers = {}
    for name in PEERS:
        f = pkg / "results" / f"{name}.json"
        if f.exists():
            peers[name] = json.loads(f.read_text())
            table[name] = score(kinds, peers[name])
    required = [t for t, k in kinds.items() if k["kind"] == "required" and not k["browser_only"]]
    failing = sorted(t for t in required if verdict(t, kinds, ours) != "pass")
    node_failing = sorted(t for t in required if verdict(t, kinds, node) != "pass")
    (ROOT / "bench" / "conformance.json").write_text(
        json.dumps(
            {"suite": SUITE_VERSION, "ziggurat": ours, "ziggurat-node": node, "score": table},
            indent=1,
        )
        + "\n"
    )
    lines = [
        f"cache-tests {SUITE_VERSION}: tests required of a shared cache ({len(required)}), "
        "ziggurat run here, peers as published in the suite's package.",
        "",
        "| cache | pass | fail | setup | dependency | untested |",
        "|---|---:|---:|---:|---:|---:|",
    ]
    for name, s in sorted(table.items(), key=lambda kv: -kv[1]["pass"]):
        lines.append(
            f"| {name} | {s['pass']} | {s['fail']} | {s['setup']} | {s['dependency']} "
            f"| {s['untested']} |"
        )
    lines += ["", "Required tests ziggurat does not pass:", ""]
    for t in failing:
        r = ours.get(t)
        why = r[1] if isinstance(r, list) and len(r) > 1 else verdict(t, kinds, ours)
        peers_passing = [n for n, res in peers.items() if res.get(t) is True]
        lines.append(
            f"- `{t}` ({kinds[t]['name']}): {why}; passed by: {', '.join(peers_passing) or 'none'}"
        )
    differ = sorted(set(failing) ^ set(node_failing))
    lines += ["", "Required tests where the two front ends differ:", ""]
    for t in differ:
        who = "Python" if t in node_failing else "Node.js"
        r = (node if who == "Python" else ours).get(t)
        why = r[1] if isinstance(r, list) and len(r) > 1 else ""
        lines.append(f"- `{t}` ({kinds[t]['name']}): passed by {who} only; {why}")
    if not differ:
        lines.append("- none: both pass and fail the same tests.")
    (ROOT / "bench" / "conformance.md").write_text("\n".join(lines) + "\n")
    print("\n".join(lines))


if __name__ == "__main__":
    main()
