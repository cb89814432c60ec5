"""A cache with a cluster tier, opened by the command as the application opened it: the
segment as it exists (its size is the application's choice, never this command's), Redis
and the secret from the options, and no stream reader of its own (``follow`` runs one
explicitly; ``purge`` needs none).

The secret comes from ``--secret-file`` (one secret per line, the first signs) or from the
``ZIGGURAT_SECRET`` environment variable, never from the command line (which other users
of the host can read in the process list). For the same reason the Redis URL, which may
hold a password, can come from ``ZIGGURAT_REDIS_URL`` instead of ``--redis``.

>>> secrets_from(None, {"ZIGGURAT_SECRET": "a-secret-of-16-bytes+"})
['a-secret-of-16-bytes+']
>>> secrets_from(None, {})  # doctest: +ELLIPSIS
Traceback (most recent call last):
...
ziggurat.cli.errors.CliError: the cache's secret is needed with --redis: set ZIGGURAT_SECRET ...
"""

from __future__ import annotations

import argparse
import contextlib
import logging
import os
import warnings
from collections.abc import Iterator, Mapping
from typing import TYPE_CHECKING, Any

from ziggurat import _native
from ziggurat.cli.errors import CliError
from ziggurat.cli.segments import CacheFiles, attach
from ziggurat.cluster.link import redacted

if TYPE_CHECKING:
    from ziggurat.cache import Cache

__all__ = ["URL_VARIABLE", "add_options", "open_clustered", "redacted", "secrets_from"]

#: The environment variable that can give the Redis URL instead of ``--redis``.
URL_VARIABLE = "ZIGGURAT_REDIS_URL"


def add_options(
    p: argparse.ArgumentParser, required: bool, environ: Mapping[str, str] = os.environ
) -> None:
    """The options that name the cluster tier: ``--redis`` (by default
    ``ZIGGURAT_REDIS_URL``; ``required``: one of them must be given) and the Cache's
    settings.

    >>> p = argparse.ArgumentParser(); add_options(p, required=False, environ={})
    >>> p.parse_args([]).redis is None
    True
    >>> p = argparse.ArgumentParser()
    >>> add_options(p, required=True, environ={"ZIGGURAT_REDIS_URL": "redis://h/0"})
    >>> p.parse_args([]).redis
    'redis://h/0'
    """
    from_env = environ.get(URL_VARIABLE) or None
    p.add_argument(
        "--redis",
        required=required and from_env is None,
        default=from_env,
        metavar="URL",
        help=f"the Cache's redis= URL (redis://, rediss:// or unix://); default "
        f"${URL_VARIABLE}, which keeps a password in the URL out of the process list",
    )
    p.add_argument(
        "--secret-file",
        metavar="PATH",
        help="the Cache's secret, one per line, the first signs (default: $ZIGGURAT_SECRET)",
    )
    p.add_argument(
        "--redis-timeout",
        type=float,
        default=0.1,
        metavar="S",
        help="the Cache's redis_timeout, seconds (default 0.1)",
    )
    p.add_argument(
        "--stream-length",
        type=int,
        default=100_000,
        metavar="N",
        help="the Cache's stream_length, events (default 100000)",
    )


def secrets_from(path: str | None, environ: Mapping[str, str]) -> list[str]:
    """The cache's secrets: the lines of ``path``, else ``ZIGGURAT_SECRET``."""
    if path is not None:
        try:
            with open(path, encoding="utf-8") as f:
                found = [line.strip() for line in f if line.strip()]
        except OSError as e:
            raise CliError(f"--secret-file {path}: {e.strerror or e}", "invalid") from None
        if not found:
            raise CliError(f"--secret-file {path} holds no secret", "invalid")
        return found
    env = environ.get("ZIGGURAT_SECRET", "")
    if not env:
        raise CliError(
            "the cache's secret is needed with --redis: set ZIGGURAT_SECRET or give --secret-file",
            "invalid",
        )
    return [env]


@contextlib.contextmanager
def _quiet() -> Iterator[None]:
    # The segment exists with the parameters the application chose; the warning that the
    # size passed here differs from them is about this command, not the cache.
    logger = logging.getLogger("ziggurat")
    level = logger.level
    logger.setLevel(logging.ERROR)
    try:
        with warnings.catch_warnings():
            warnings.simplefilter("ignore", RuntimeWarning)
            yield
    finally:
        logger.setLevel(level)


def open_clustered(args: argparse.Namespace, files: CacheFiles) -> Cache:
    """The cache of ``files`` with its cluster tier, its stand-by stream reader stopped
    (``CliError`` for a missing cache, a bad URL or secret)."""
    from ziggurat.cache import Cache
    from ziggurat.clustered import quiet

    secrets = secrets_from(args.secret_file, os.environ)
    seg = attach(files)
    assert seg is not None
    try:
        # Taken from the file the engine accepted, not from a second look at the path.
        size, group = seg.size, seg.shared_group
    finally:
        seg.close()
    name, version = _native.name_and_version(args.name)
    kwargs: dict[str, Any] = {
        "directory": args.directory,
        "size": size,
        "version": args.version or version or None,
        "group": group,
        "redis": args.redis,
        "secret": secrets,
        "redis_timeout": args.redis_timeout,
        "stream_length": args.stream_length,
        "degraded": "raise",
    }
    try:
        with _quiet():
            cache = Cache(name, **kwargs)
    except (TypeError, ValueError) as e:
        raise CliError(str(e), "invalid") from None
    quiet(cache)
    return cache
