"""``ziggurat.contrib.flask.ZigguratCache`` through Flask-Caching's own ``Cache``: what
Flask-Caching's generic suite (test_flask_suite.py) does not cover: the documented example
(docs/integrations/flask.md) app with Flask's test client and under gunicorn with 2 workers,
several worker processes, the timeout mapping, the key prefix, configuration and argument errors."""

from __future__ import annotations

import datetime as dt
import json
import math
import os
import pickle
import re
import subprocess
import sys
import threading
import time
import urllib.error
import urllib.request
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import cache_helpers
import pytest
from cache_helpers import CTX, Worker, new_name
from http_servers import stop

pytest.importorskip("flask_caching")

from flask import Flask
from flask_caching import Cache as FlaskCache
from ziggurat.contrib.flask import ZigguratCache

cache_dir = cache_helpers.cache_dir  # a pytest fixture

HERE = Path(__file__).resolve().parent
DOC = HERE.parent / "docs" / "integrations" / "flask.md"  # the documented example
TYPE = "ziggurat.contrib.flask.ZigguratCache"

Configure = Callable[..., FlaskCache]


@pytest.fixture
def configure(cache_dir: str) -> Iterator[Configure]:
    """``configure(**config)``: a Flask app whose Flask-Caching ``Cache`` uses the backend
    (a fresh cache name in the test's directory); returns the ``flask_caching.Cache``."""
    made: list[FlaskCache] = []

    def configure(**config: Any) -> FlaskCache:
        app = Flask(__name__)
        app.config.update(
            CACHE_TYPE=TYPE,
            CACHE_ZIGGURAT_NAME=new_name("fl"),
            CACHE_OPTIONS={"directory": cache_dir, "size": "8MiB"},
        )
        app.config.update(config)
        cache = FlaskCache(app)
        made.append(cache)
        return cache

    yield configure
    for cache in made:
        cache.cache.cache.unlink()


# -- the configuration -------------------------------------------------------------------


def test_config_reaches_the_backend_and_the_cache(configure: Configure) -> None:
    cache = configure(CACHE_DEFAULT_TIMEOUT=7, CACHE_KEY_PREFIX="pre_")
    backend = cache.cache
    assert isinstance(backend, ZigguratCache)
    assert backend.default_timeout == 7
    assert backend.key_prefix == "pre_"
    assert backend.cache.stats()["host"]["l2"]["max_value_size"] < 8 * 1024 * 1024
    cache.set("k", "v")
    assert backend.cache.get("pre_k") == "v"


def test_the_default_name_is_flask(cache_dir: str) -> None:
    app = Flask(__name__)
    app.config.update(CACHE_TYPE=TYPE, CACHE_OPTIONS={"directory": cache_dir, "size": "8MiB"})
    backend = FlaskCache(app).cache
    try:
        assert backend.cache.name == "flask"
    finally:
        backend.cache.unlink()


def test_apps_of_one_name_share_one_cache(configure: Configure, cache_dir: str) -> None:
    one = configure(CACHE_KEY_PREFIX="")
    app = Flask("other")
    app.config.update(
        CACHE_TYPE=TYPE,
        CACHE_ZIGGURAT_NAME=one.cache.cache.name,
        CACHE_OPTIONS={"directory": cache_dir, "size": "8MiB"},
        CACHE_KEY_PREFIX="",
    )
    two = FlaskCache(app)
    assert two.cache is not one.cache
    assert two.cache.cache is one.cache.cache
    one.set("k", 1)
    assert two.get("k") == 1


@pytest.mark.parametrize(
    ("config", "error", "message"),
    [
        ({"CACHE_OPTIONS": {"ttl": 5}}, ValueError, "must not set 'ttl'"),
        ({"CACHE_OPTIONS": {"sise": "8MiB"}}, ValueError, "unknown options 'sise'"),
        ({"CACHE_OPTIONS": {"size": "lots"}}, ValueError, "cannot open the cache"),
        ({"CACHE_ARGS": ["x"]}, ValueError, r"ZigguratCache.factory\(\): CACHE_ARGS"),
        ({"CACHE_ZIGGURAT_NAME": "a/b"}, ValueError, "cannot open the cache 'a/b'"),
        ({"CACHE_DEFAULT_TIMEOUT": -1}, ValueError, "default_timeout must be >= 0"),
        ({"CACHE_DEFAULT_TIMEOUT": "soon"}, ValueError, "invalid literal"),
        ({"CACHE_KEY_PREFIX": 3}, TypeError, "key_prefix must be a str"),
        (
            {"CACHE_DEFAULT_TIMEOUT": None},
            TypeError,
            r"ZigguratCache\(\): default_timeout must be a number of seconds or a datetime",
        ),
    ],
)
def test_bad_configuration_is_refused(
    configure: Configure, config: dict[str, Any], error: type[Exception], message: str
) -> None:
    with pytest.raises(error, match=message):
        configure(**config)


def test_a_timedelta_default_timeout(configure: Configure) -> None:
    assert configure(CACHE_DEFAULT_TIMEOUT=dt.timedelta(minutes=2)).cache.default_timeout == 120


# -- timeouts --------------------------------------------------------------------------------


def test_timeouts_map_to_ttls(configure: Configure) -> None:
    cache = configure(CACHE_DEFAULT_TIMEOUT=0)
    backend = cache.cache
    cache.set("default", 1)
    cache.set("zero", 1, timeout=0)
    cache.set("short", 1, timeout=1)
    cache.set("delta", 1, timeout=dt.timedelta(seconds=1))
    time.sleep(1.5)
    # Timeout 0 (and the default of 0) never expires; 1 second has passed.
    assert cache.get("default") == 1 and cache.get("zero") == 1
    assert cache.get("short") is None and cache.get("delta") is None
    assert backend.cache.touch(backend._key("zero", "t"), math.inf)


def test_a_negative_timeout_stores_nothing(configure: Configure) -> None:
    cache = configure()
    cache.set("k", 1)
    assert cache.set("k", 2, timeout=-1) is True
    assert cache.has("k") is False
    assert cache.add("k", 3, timeout=-1) is True
    assert cache.has("k") is False
    cache.set("k", 1)
    assert cache.add("k", 3, timeout=-1) is False
    assert cache.set_many({"k": 5, "j": 6}, timeout=-5) == ["k", "j"]
    assert cache.get_many("k", "j") == [None, None]


@pytest.mark.parametrize(
    ("method", "args", "error", "message"),
    [
        ("set", ("k", 1, "soon"), TypeError, r"ZigguratCache.set\(\): timeout must be a number"),
        ("add", ("k", 1, True), TypeError, r"ZigguratCache.add\(\): timeout must be a number"),
        ("set", ("k", 1, math.nan), ValueError, r"ZigguratCache.set\(\): timeout must be a"),
        ("get", (3,), TypeError, r"ZigguratCache.get\(\): key must be str or bytes, not int"),
        ("has", ("",), ValueError, r"ZigguratCache.has\(\): key must not be empty"),
        ("inc", ("n", 1.5), TypeError, r"ZigguratCache.inc\(\): delta must be an int"),
        ("dec", ("n", "1"), TypeError, r"ZigguratCache.dec\(\): delta must be an int"),
        ("set_many", ([("a", 1)],), TypeError, r"ZigguratCache.set_many\(\): mapping must"),
    ],
)
def test_bad_arguments_name_the_method(
    configure: Configure, method: str, args: tuple[Any, ...], error: type[Exception], message: str
) -> None:
    backend = configure().cache
    with pytest.raises(error, match=message):
        getattr(backend, method)(*args)


class _Unpicklable:
    def __reduce__(self) -> Any:
        raise pickle.PicklingError("not this one")


def test_an_unpicklable_value_raises_a_pickling_error(configure: Configure, cache_dir: str) -> None:
    options = {"serializer": "pickle", "size": "8MiB", "directory": cache_dir}
    backend = configure(CACHE_OPTIONS=options).cache
    with pytest.raises(pickle.PicklingError, match=r"ZigguratCache.set\(\): cannot pickle"):
        backend.set("k", _Unpicklable())
    with pytest.raises(pickle.PicklingError, match=r"ZigguratCache.add\(\): cannot pickle"):
        backend.add("k", _Unpicklable())
    assert backend.has("k") is False


# -- keys, counters, clear -----------------------------------------------------------------


def test_a_long_key_is_stored_under_a_digest(configure: Configure) -> None:
    cache = configure()
    long_a, long_b = "a" * 5000, "a" * 4999 + "b"
    cache.set(long_a, 1)
    cache.set(long_b, 2)
    assert cache.get(long_a) == 1 and cache.get(long_b) == 2


def test_inc_and_dec_start_from_zero_and_refuse_non_counters(configure: Configure) -> None:
    cache = configure(CACHE_DEFAULT_TIMEOUT=0)
    assert cache.cache.inc("up", 5) == 5
    assert cache.cache.dec("down", 5) == -5
    cache.set("s", "text")
    with pytest.raises(TypeError, match=r"ZigguratCache.inc\(\): the value of 's' is not"):
        cache.cache.inc("s")
    cache.set("big", 2**63 - 1)
    with pytest.raises(OverflowError, match=r"ZigguratCache.inc\(\): the counter 'big'"):
        cache.cache.inc("big")


def test_clear_voids_only_its_prefix(configure: Configure, cache_dir: str) -> None:
    one = configure(CACHE_KEY_PREFIX="one_")
    app = Flask("two")
    app.config.update(
        CACHE_TYPE=TYPE,
        CACHE_ZIGGURAT_NAME=one.cache.cache.name,
        CACHE_OPTIONS={"directory": cache_dir, "size": "8MiB"},
        CACHE_KEY_PREFIX="two_",
    )
    two = FlaskCache(app)
    one.set("k", 1)
    one.cache.inc("n")
    two.set("k", 2)
    assert one.clear() is True
    assert one.get("k") is None and one.get("n") is None
    assert two.get("k") == 2
    # Without a prefix, clear() empties the whole cache.
    app = Flask("three")
    app.config.update(app.config | two.app.config | {"CACHE_KEY_PREFIX": ""})
    assert FlaskCache(app).clear() is True
    assert two.get("k") is None


def test_memoize_and_delete_memoized(configure: Configure) -> None:
    cache = configure()
    calls: list[int] = []

    @cache.memoize(timeout=0)
    def square(n: int) -> int:
        calls.append(n)
        return n * n

    with cache.app.app_context():
        assert [square(3), square(3), square(4)] == [9, 9, 16]
        cache.delete_memoized(square, 3)
        assert square(3) == 9
    assert calls == [3, 4, 3]


# -- several processes -------------------------------------------------------------------


def _open(name: str, directory: str) -> ZigguratCache:
    app = Flask("worker")
    app.config.update(
        CACHE_TYPE=TYPE,
        CACHE_ZIGGURAT_NAME=name,
        CACHE_OPTIONS={"directory": directory, "size": "8MiB"},
    )
    backend = FlaskCache(app).cache
    assert isinstance(backend, ZigguratCache)
    return backend


def _count(name: str, directory: str, n: int, start: Any) -> int:
    # Opens the cache in the child, as a worker process does at its start.
    backend = _open(name, directory)
    start.wait()
    for _ in range(n):
        backend.inc("hits")
    return os.getpid()


def test_inc_is_atomic_across_worker_processes(configure: Configure, cache_dir: str) -> None:
    """4 processes x 2,500 ``inc`` on a key none created first end at exactly 10,000."""
    backend = configure().cache
    start = CTX.Event()
    args = (backend.cache.name, cache_dir)
    workers = [Worker(_count, *args, 2500, start) for _ in range(4)]
    start.set()
    pids = [w.result(timeout=120) for w in workers]
    assert len(set(pids)) == 4
    assert backend.get("hits") == 10_000


def _add(name: str, directory: str, start: Any) -> bool:
    backend = _open(name, directory)
    start.wait()
    return backend.add("race", os.getpid(), timeout=60)


def test_add_has_one_winner_among_processes(configure: Configure, cache_dir: str) -> None:
    backend = configure().cache
    for _round in range(3):
        start = CTX.Event()
        workers = [Worker(_add, backend.cache.name, cache_dir, start) for _ in range(4)]
        start.set()
        wins = [w.result(timeout=60) for w in workers]
        assert wins.count(True) == 1, wins
        assert backend.get("race") == workers[wins.index(True)].pid
        assert backend.delete("race") is True


# -- the documented example (docs/integrations/flask.md) --------------------------------


def _readme_flask_block() -> str:
    text = DOC.read_text()
    section = text.split("# Flask\n", 1)[1]
    blocks = re.findall(r"```python\n(.*?)```", section, re.DOTALL)
    assert blocks, "no python block on the Flask page"
    return str(blocks[0])


def test_the_readme_example_is_the_tested_app() -> None:
    assert _readme_flask_block() in (HERE / "flask_app.py").read_text()
    # The page comes right after Django's in the site's navigation.
    nav = (HERE.parent / "mkdocs.yml").read_text()
    assert nav.index("integrations/flask.md") > nav.index("integrations/django.md")
    between = nav[nav.index("integrations/django.md") : nav.index("integrations/flask.md")]
    assert between.count(".md") == 1


@pytest.fixture
def example_env(cache_dir: str, monkeypatch: pytest.MonkeyPatch) -> dict[str, str]:
    env = {
        "FLASK_CACHE_ZIGGURAT_NAME": new_name("ex"),
        "FLASK_CACHE_OPTIONS": json.dumps({"directory": cache_dir, "size": "8MiB"}),
    }
    for k, v in env.items():
        monkeypatch.setenv(k, v)
    return env


def test_the_example_with_flasks_test_client(example_env: dict[str, str]) -> None:
    import flask_app

    app = flask_app.create_app()
    backend = app.extensions["cache"][flask_app.cache]
    try:
        assert isinstance(backend, ZigguratCache)
        assert backend.cache.name == example_env["FLASK_CACHE_ZIGGURAT_NAME"]
        assert backend.key_prefix == "myapp_" and backend.default_timeout == 300
        client = app.test_client()
        first = client.get("/report").get_json()
        assert first == {"renders": 1, "rendered_by": os.getpid()}
        assert client.get("/report").get_json() == first
        assert client.get("/renders").get_json() == {"renders": 1}
        assert client.get("/motd").text == "(none)"
        assert client.put("/motd", data="hello").status_code == 204
        assert client.get("/motd").text == "hello"
        assert backend.cache.get("myapp_motd") == "hello"
    finally:
        backend.cache.unlink()


def _free_port() -> int:
    import socket

    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


class _Server:
    def __init__(self, port: int) -> None:
        self.base = f"http://127.0.0.1:{port}"

    def request(self, path: str, data: bytes | None = None) -> tuple[int, str, str]:
        """(status, body, serving worker's pid) of one request on a new connection."""
        req = urllib.request.Request(self.base + path, data=data, method="PUT" if data else "GET")
        try:
            with urllib.request.urlopen(req, timeout=60) as resp:
                return resp.status, resp.read().decode(), resp.headers["X-Worker"]
        except urllib.error.HTTPError as e:
            return e.code, e.read().decode(), e.headers.get("X-Worker", "")

    def pair(self, path: str, group: str) -> list[tuple[int, str, str]]:
        """Two concurrent requests of one ``?meet=`` group: two different workers."""
        out: list[tuple[int, str, str]] = [(0, "", "")] * 2
        sep = "&" if "?" in path else "?"

        def one(i: int) -> None:
            out[i] = self.request(f"{path}{sep}meet={group}")

        threads = [threading.Thread(target=one, args=(i,)) for i in range(2)]
        for t in threads:
            t.start()
        for t in threads:
            t.join(90)
        assert all(status == 200 for status, _, _ in out), out
        assert out[0][2] != out[1][2], f"both requests served by one worker: {out}"
        return out


@pytest.fixture
def gunicorn(example_env: dict[str, str]) -> Iterator[_Server]:
    port = _free_port()
    env = dict(os.environ)
    env["PYTHONPATH"] = os.pathsep.join(filter(None, [str(HERE), env.get("PYTHONPATH")]))
    cmd = [sys.executable, "-m", "gunicorn", "flask_app:create_app()", "-b", f"127.0.0.1:{port}"]
    cmd += ["-w", "2", "--log-level", "warning", "--timeout", "60"]
    proc = subprocess.Popen(
        cmd, cwd=HERE, env=env, stdout=subprocess.PIPE, stderr=subprocess.STDOUT
    )
    server = _Server(port)
    try:
        deadline = time.monotonic() + 60
        while True:
            try:
                server.request("/renders")
                break
            except OSError:
                if proc.poll() is not None or time.monotonic() > deadline:
                    out = proc.stdout.read().decode() if proc.stdout else ""
                    pytest.fail(f"gunicorn did not start: {out[-3000:]}")
                time.sleep(0.1)
        yield server
    finally:
        stop(proc)
        if proc.stdout:
            proc.stdout.close()


def test_the_example_under_gunicorn_with_two_workers(gunicorn: _Server) -> None:
    # Both workers read the message first, so each holds it in its L1.
    before = gunicorn.pair("/motd", "read-before")
    assert [body for _, body, _ in before] == ["(none)", "(none)"]
    # A write in one worker ...
    status, _, writer = gunicorn.request("/motd", data=b"hello from one worker")
    assert status == 204
    # ... is seen by both, the other worker included.
    after = gunicorn.pair("/motd", "read-after")
    assert [body for _, body, _ in after] == ["hello from one worker"] * 2
    assert writer in {pid for _, _, pid in after}

    # The cached view renders once for both workers.
    status, body, first_worker = gunicorn.request("/report")
    assert status == 200
    first = json.loads(body)
    assert first == {"renders": 1, "rendered_by": int(first_worker)}
    both = gunicorn.pair("/report", "report")
    assert [json.loads(body) for _, body, _ in both] == [first, first]
    assert json.loads(gunicorn.request("/renders")[1]) == {"renders": 1}
