"""``ziggurat follow NAME --redis URL``: follows the cluster's invalidation stream for this
host in a process of its own.

Without it, one worker process of each host follows the stream in a thread. A thread
beside CPU-bound requests waits for the interpreter's lock before it can apply an event
(up to the 5 ms switch interval, so an invalidation reaches the host up to about 10 ms
later at the 99th percentile); a process that does nothing else applies it at once. While
``follow`` runs, the workers' threads stand aside; when it stops (or dies), one of them
takes the stream over from where it stopped, without missing an event.

The secret comes from ``--secret-file`` (one secret per line, the first signs) or from the
``ZIGGURAT_SECRET`` environment variable, never from the command line (which other users
of the host can read in the process list).

>>> secrets_from(None, {"ZIGGURAT_SECRET": "a-secret-of-16-bytes+"})
['a-secret-of-16-bytes+']
>>> secrets_from(None, {})  # doctest: +ELLIPSIS
Traceback (most recent call last):
...
ziggurat.cli.errors.CliError: follow needs the cache's secret: set ZIGGURAT_SECRET or ...
"""

from __future__ import annotations

import argparse
import contextlib
import logging
import os
import signal
import stat
import time
import warnings
from collections.abc import Iterator, Mapping
from typing import Any
from urllib.parse import urlsplit, urlunsplit

from ziggurat.cli.errors import CliError
from ziggurat.cli.output import Output
from ziggurat.cli.segments import CacheFiles, attach

__all__ = ["redacted", "run", "secrets_from"]


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
            "follow needs the cache's secret: set ZIGGURAT_SECRET or give --secret-file",
            "invalid",
        )
    return [env]


def redacted(url: str) -> str:
    """``url`` without its password, for messages.

    >>> redacted("redis://app:hunter2@10.0.0.5:6379/0")
    'redis://app:***@10.0.0.5:6379/0'
    """
    parts = urlsplit(url)
    if parts.password is None:
        return url
    host = parts.netloc.rpartition("@")[2]
    user = parts.username or ""
    return urlunsplit(parts._replace(netloc=f"{user}:***@{host}"))


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


def _say(out: Output, data: dict[str, Any], text: str) -> None:
    # A line per event, flushed: this command runs for as long as the host does, and its
    # output usually goes to a log.
    if out.as_json:
        out.line(data)
    else:
        out.stdout.write(text + "\n")
        out.stdout.flush()


def _wait_for(files: CacheFiles, out: Output) -> None:
    # Started before the application (as a service may be), it waits for the cache
    # rather than create it with parameters the application did not choose.
    if not os.path.lexists(files.main_path):
        _say(
            out,
            {"waiting": files.main_path},
            f"{files.name}: waiting for the application to create {files.main_path}",
        )
    while not os.path.lexists(files.main_path):
        time.sleep(0.5)


def run(args: argparse.Namespace, out: Output) -> int:
    """Follows the stream until SIGTERM or SIGINT; returns the exit code."""
    from ziggurat.cache import Cache
    from ziggurat.cluster.reader import Reader

    secrets = secrets_from(args.secret_file, os.environ)
    files = CacheFiles.of(args.name, args.directory, args.version)
    _wait_for(files, out)
    seg = attach(files)
    assert seg is not None
    size = seg.size
    seg.close()
    st = os.lstat(files.main_path)
    group = st.st_gid if stat.S_IMODE(st.st_mode) == 0o660 else None
    name, _, version = args.name.partition(".ver-")
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
    try:
        tier, thread = cache._tier, cache._reader
        assert tier is not None and thread is not None
        thread.stop()  # the constructor's stand-by thread: this process follows in its own
        reader = Reader(tier, dedicated=True)
        other = reader.claim()
        if other:
            raise CliError(
                f"another process (pid {other}) already follows the stream of "
                f"{files.name!r} for this host",
                "busy",
            )
        for sig in (signal.SIGTERM, signal.SIGINT):
            signal.signal(sig, lambda *_: reader.stop())
        _say(
            out,
            {"following": files.name, "redis": redacted(args.redis), "pid": os.getpid()},
            f"{files.name}: following the invalidation stream on {redacted(args.redis)} "
            f"for this host (pid {os.getpid()})",
        )
        reader.run()
        reader.stop()
        _say(out, {"stopped": files.name}, f"{files.name}: stopped")
    finally:
        cache.close()
    return 0
