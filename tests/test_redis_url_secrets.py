"""A Redis URL's password never appears in what the cache or the command shows: errors,
their tracebacks, the command's text and ``--json`` output. redis-py takes a password from
the URL's user information and from a ``password=`` query parameter (the only place a
``unix://`` URL has for it); both are hidden. No server is needed: every URL here is one
that fails.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import traceback
import uuid

import pytest
from redis_servers import free_port
from ziggurat import Cache
from ziggurat.cli.clustered import redacted
from ziggurat.cluster.link import Link, scrubbed

PASSWORD = "pw-" + uuid.uuid4().hex
SECRET = "a-secret-of-more-than-16-bytes"

URLS = [
    f"redis://app:{PASSWORD}@127.0.0.1:6379/0",
    f"redis://:{PASSWORD}@127.0.0.1:6379/0",
    f"unix:///run/redis.sock?db=0&password={PASSWORD}",
    f"redis://127.0.0.1:6379/0?password={PASSWORD}&socket_timeout=1",
    f"rediss://app:{PASSWORD.replace('-', '%2D')}@[::1]:6379/0",
]


@pytest.mark.parametrize("url", URLS)
def test_redacted_hides_every_password(url: str) -> None:
    shown = redacted(url)
    assert PASSWORD not in shown and PASSWORD.replace("-", "%2D") not in shown
    assert "***" in shown
    assert shown.split("***")[0] == url.split(PASSWORD.split("-")[0])[0]
    assert scrubbed(f"said {PASSWORD} twice: {PASSWORD}", url) == "said *** twice: ***"


def test_redacted_leaves_a_url_without_a_password_and_never_raises() -> None:
    for url in ("redis://10.0.0.5:6379/0", "unix:///s.sock?db=1", "not a url", "redis://[::1"):
        assert redacted(url) == url


@pytest.mark.parametrize(
    "url",
    [
        f"redis://app:{PASSWORD}@h:notaport/0",
        f"redis://app:{PASSWORD}@127.0.0.1:6379/0?socket_timeout=x",
        f"unix:///run/redis.sock?password={PASSWORD}&db=x",
        f"http://app:{PASSWORD}@h/0",
    ],
)
def test_a_bad_url_is_refused_without_its_password(url: str) -> None:
    for make in (
        lambda: Link.of(url, timeout=0.1, method="Cache"),
        lambda: Cache("url-" + uuid.uuid4().hex[:8], size="8MiB", redis=url, secret=SECRET),
    ):
        with pytest.raises(ValueError) as caught:
            make()
        told = "".join(traceback.format_exception(caught.value))
        assert "redis" in str(caught.value)
        assert PASSWORD not in told, told


def ziggurat(*args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "ziggurat", *args],
        capture_output=True,
        text=True,
        timeout=60,
        env={**os.environ, "ZIGGURAT_SECRET": SECRET},
    )


@pytest.mark.parametrize("as_json", [False, True])
def test_the_command_never_shows_the_password(shm_dir: str, as_json: bool) -> None:
    name = "u" + uuid.uuid4().hex[:10]
    Cache(name, size="8MiB", directory=shm_dir).close()
    dead = f"redis://app:{PASSWORD}@127.0.0.1:{free_port()}/0"
    flags = ["--json"] if as_json else []
    runs = [
        ziggurat("doctor", name, "--directory", shm_dir, "--redis", dead, *flags),
        ziggurat(
            "doctor",
            name,
            "--directory",
            shm_dir,
            "--redis",
            f"unix://{shm_dir}/none.sock?password={PASSWORD}",
            *flags,
        ),
        ziggurat(
            "doctor", name, "--directory", shm_dir, "--redis", dead.replace("/0", ":x/0"), *flags
        ),
        ziggurat("purge", name, "--directory", shm_dir, "--redis", dead, "--key", "k", *flags),
        ziggurat(
            "purge",
            name,
            "--directory",
            shm_dir,
            "--redis",
            f"redis://app:{PASSWORD}@127.0.0.1:notaport/0",
            "--key",
            "k",
            *flags,
        ),
    ]
    for r in runs:
        assert r.returncode != 0, r
        assert PASSWORD not in r.stdout + r.stderr, r
        if r.args[3] == "doctor" or "notaport" in r.args:
            assert "***" in r.stdout + r.stderr, r  # the URL is named, redacted
        if as_json:
            json.loads(r.stdout or r.stderr)
