"""``ziggurat follow NAME --redis URL``: follows the cluster's invalidation stream for this
host in a process of its own.

Without it, one worker process of each host follows the stream in a thread. A thread
beside CPU-bound requests waits for the interpreter's lock before it can apply an event
(up to the 5 ms switch interval, so an invalidation reaches the host up to about 10 ms
later at the 99th percentile); a process that does nothing else applies it at once. While
``follow`` runs, the workers' threads stand aside; when it stops (or dies), one of them
takes the stream over from where it stopped, without missing an event.

The secret and the Redis options are those of ``clustered``.

>>> from ziggurat.cli.parser import build
>>> build().parse_args(["follow", "shop", "--redis", "redis://10.0.0.5/0"]).redis_timeout
0.1
"""

from __future__ import annotations

import argparse
import os
import signal
import time
from typing import Any

from ziggurat.cli.clustered import open_clustered, redacted, secrets_from
from ziggurat.cli.errors import CliError
from ziggurat.cli.output import Output
from ziggurat.cli.segments import CacheFiles

__all__ = ["run"]


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
    from ziggurat.clustered import dedicated_reader

    files = CacheFiles.of(args.name, args.directory, args.version)
    secrets_from(args.secret_file, os.environ)  # a missing secret is told before any wait
    _wait_for(files, out)
    cache = open_clustered(args, files)
    try:
        reader = dedicated_reader(cache)
        other = reader.claim()
        if other:
            raise CliError(
                f"another process (pid {other}) already follows the stream of "
                f"{files.name!r} for this host",
                "busy",
            )
        for sig in (signal.SIGTERM, signal.SIGINT):
            # The handler only asks: the lease is given up below, once the batch of events
            # being applied is done, so no worker takes over in the middle of it.
            signal.signal(sig, lambda *_: reader.halt())
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
