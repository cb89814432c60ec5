"""Flask-Caching's own extension tests (``@cached`` views, ``@memoize``, template fragments,
signals) with every app on ``ziggurat.contrib.flask.ZigguratCache``.

Flask-Caching's ``tests/conftest.py`` gives its tests an app on ``SimpleCache``; here the
``app`` fixture gives them one on the ziggurat backend (a fresh cache per test, removed after
it), and the tests of ``test_cache.py``, ``test_memoize.py``, ``test_view.py``,
``test_templates.py`` and ``test_signals.py`` (from the source fetched by
test_flask_suite.py) are collected from this module. The tests that request the ``clock``
fixture are skipped: they move a fake clock patched into cachelib's modules, which the
segment's clock does not follow. Tests that build their own ``Cache`` with an explicit
``CACHE_TYPE`` (Redis, SimpleCache) keep it: they test Flask-Caching's configuration.
"""

from __future__ import annotations

import importlib.util
import inspect
import uuid
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

# The type pytest's @fixture makes, to carry the modules' own fixtures over.
from _pytest.fixtures import FixtureFunctionDefinition

pytest.importorskip("flask_caching")

import flask
import flask_caching
from redis_servers import DEFAULT, Server
from test_flask_suite import flask_caching_tests
from ziggurat.contrib.flask import ZigguratCache

TESTS = flask_caching_tests().__file__
assert TESTS is not None
MODULES = ["test_cache", "test_memoize", "test_view", "test_templates", "test_signals"]
CLOCK_SKIP = (
    "moves a fake clock patched into cachelib's modules; ziggurat's entries expire by the "
    "segment's own clock"
)


def _load(name: str) -> Any:
    path = str(TESTS).rsplit("/", 1)[0] + f"/{name}.py"
    spec = importlib.util.spec_from_file_location(f"flask_caching_{name}", path)
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


#: The tests skipped for the fake clock, as docs/integrations/flask.md lists them.
CLOCK_TESTS = {
    "test_cache__cache_cached_function",
    "test_cache__cache_accepts_multiple_ciphers",
    "test_memoize__memoize",
    "test_memoize__memoize_hashes",
    "test_memoize__memoize_timeout",
    "test_memoize__memoize_entry_written_late_keeps_its_own_timeout",
    "test_memoize__memoize_version_key_outlives_newest_entry",
    "test_memoize__memoize_version_key_expires_once_its_entries_have",
    "test_memoize__memoize_delete_resets_version_key",
    "test_view__cached_view",
    "test_view__cached_view_class",
    "test_view__cache_timeout_property",
    "test_view__cache_timeout_dynamic_via_cached_reponse",
    "test_view__hit_cache",
    "test_view__cached_view_http_exception_expires",
}


def _collect() -> int:
    """Puts every test (renamed ``test_<module>__<name>``) and fixture of the modules
    here; returns the number of tests."""
    count = 0
    for name in MODULES:
        module = _load(name)
        for attr, obj in vars(module).items():
            if attr.startswith("test_") and callable(obj):
                globals()[f"test_{name[5:]}__{attr[5:]}"] = obj
                count += 1
            elif isinstance(obj, FixtureFunctionDefinition):
                globals()[attr] = obj
    return count


COLLECTED = _collect()


@pytest.fixture
def app(request: pytest.FixtureRequest) -> Iterator[flask.Flask]:
    app = flask.Flask(request.module.__name__, template_folder=str(TESTS).rsplit("/", 1)[0])
    app.testing = True
    app.config.update(
        CACHE_TYPE="ziggurat.contrib.flask.ZigguratCache",
        # No CACHE_OPTIONS: some tests configure a SimpleCache on this app, which would
        # receive them. The segments (default directory and size) are removed afterwards.
        CACHE_ZIGGURAT_NAME=f"flask-app-suite-{uuid.uuid4().hex[:12]}",
    )
    yield app
    for backend in getattr(app, "extensions", {}).get("cache", {}).values():
        if isinstance(backend, ZigguratCache):
            backend.cache.unlink()


@pytest.fixture
def cache(app: flask.Flask) -> flask_caching.Cache:
    return flask_caching.Cache(app)


@pytest.fixture
def clock() -> None:
    pytest.skip(CLOCK_SKIP)


@pytest.fixture
def redis_server(tmp_path: Path) -> Iterator[None]:
    # The test it serves checks Flask-Caching's own Redis backend beside this one, on the
    # port its suite's fixture gives the server.
    server = Server(DEFAULT, str(tmp_path))
    server.port = 6360
    server.start()
    try:
        yield
    finally:
        server.kill()


@pytest.fixture(
    params=list(flask_caching.SUPPORTED_HASH_FUNCTIONS),
    ids=[m.__name__ for m in flask_caching.SUPPORTED_HASH_FUNCTIONS],
)
def hash_method(request: pytest.FixtureRequest) -> Any:
    return request.param


def test_the_apps_use_ziggurat(app: flask.Flask, cache: flask_caching.Cache) -> None:
    assert isinstance(cache.cache, ZigguratCache)
    assert COLLECTED > 100


def test_only_the_listed_tests_use_the_fake_clock() -> None:
    uses_clock = {
        name
        for name, obj in globals().items()
        if name.startswith("test_") and "clock" in inspect.signature(obj).parameters
    }
    assert uses_clock == CLOCK_TESTS
