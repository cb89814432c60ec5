"""dogpile.cache's own backend test suites, run against ``ziggurat.contrib.dogpile``.

dogpile.cache ships them in its wheel (``dogpile.testing.fixtures``): the generic backend
suite, the serializer suite (a region with a JSON serializer over the backend) and the
mutex suite. Each class here gets its own cache in a private directory under /dev/shm,
removed at the end of the module.
"""

from __future__ import annotations

import os
import shutil
import uuid
from collections.abc import Iterator
from typing import Any, ClassVar

import pytest

pytest.importorskip("dogpile.cache")

import ziggurat.contrib.dogpile  # noqa: F401  (registers the "ziggurat" backend)
from dogpile.testing import fixtures

DIRECTORY = f"/dev/shm/zigdogpile-{uuid.uuid4().hex}"


@pytest.fixture(scope="module", autouse=True)
def _directory() -> Iterator[None]:
    # Made when the module's first test runs, not when it is collected: a run that collects
    # the module but runs none of its tests leaves nothing behind.
    os.mkdir(DIRECTORY, 0o700)
    yield
    shutil.rmtree(DIRECTORY, ignore_errors=True)


def _arguments() -> dict[str, Any]:
    return {"name": f"dogpile-{uuid.uuid4().hex[:12]}", "directory": DIRECTORY, "size": "8MiB"}


class TestZigguratBackend(fixtures._GenericBackendTestSuite):  # type: ignore[misc]
    """dogpile's generic backend suite: none of its tests skipped."""

    backend = "ziggurat"
    config_args: ClassVar[dict[str, Any]] = {"arguments": _arguments()}


class TestZigguratSerializer(  # type: ignore[misc]
    fixtures._GenericSerializerTestSuite, fixtures._GenericBackendTestSuite
):
    """The generic suite again, through a region serializing with JSON, plus the serializer
    tests: the backend stores and returns the region's bytes."""

    backend = "ziggurat"
    config_args: ClassVar[dict[str, Any]] = {"arguments": _arguments()}


class TestZigguratMutex(fixtures._GenericMutexTestSuite):  # type: ignore[misc]
    """dogpile's mutex suite on ``get_mutex``'s host-wide lock."""

    backend = "ziggurat"
    config_args: ClassVar[dict[str, Any]] = {"arguments": _arguments()}
