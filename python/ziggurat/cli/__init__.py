"""The ``ziggurat`` command: inspect and manage the caches of this host.

``ziggurat ls``, ``stats``, ``top``, ``get``, ``verify``, ``doctor`` attach read-only;
``purge`` and ``rm`` are the only ones that change a cache. Every subcommand takes
``--json``. A failure is one line on stderr and a non-zero exit (1; 2 for a wrong command
line; 3 when ``verify`` finds problems or ``doctor`` an error, 4 when ``doctor`` finds
warnings). docs/cli.md describes each subcommand.

>>> import tempfile, shutil
>>> d = tempfile.mkdtemp(dir="/dev/shm")
>>> main(["ls", "--directory", d, "--json"])  # doctest: +ELLIPSIS
{"directory": "...", "caches": []}
0
>>> shutil.rmtree(d)
"""

from __future__ import annotations

import sys
from collections.abc import Sequence

from ziggurat._native import LockTimeout, ZigguratError
from ziggurat.cli.errors import EXIT_ERROR, CliError
from ziggurat.cli.output import Output
from ziggurat.cluster.link import scrubbed

__all__ = ["main"]


def main(argv: Sequence[str] | None = None) -> int:
    """Runs the command line ``argv`` (default ``sys.argv[1:]``); returns the exit code.

    >>> main(["stats", "no-such-cache", "--directory", "/no/such/dir"])
    1
    """
    from ziggurat.cli.parser import build

    args = build().parse_args(argv)
    out = Output(as_json=args.json)
    url = getattr(args, "redis", None)

    def error(message: str, cause: str) -> None:
        # Whatever raised, a password of the Redis URL never reaches the terminal or a log
        # that collects the command's output.
        out.error(args.command, scrubbed(message, url) if url else message, cause)

    try:
        code: int = args.func(args, out)
    except CliError as e:
        error(str(e), e.cause)
        return e.code
    except LockTimeout as e:
        error(str(e), "lock_timeout")
        return EXIT_ERROR
    except ZigguratError as e:
        error(str(e), getattr(e, "cause", None) or "io")
        return EXIT_ERROR
    except BrokenPipeError:
        # The reader went away (`ziggurat ls | head`): nothing left to tell it.
        sys.stderr.close()
        return EXIT_ERROR
    except OSError as e:
        where = f"{e.filename}: " if e.filename else ""
        error(f"{where}{e.strerror or e}", "io")
        return EXIT_ERROR
    except KeyboardInterrupt:
        return 130
    except Exception as e:
        # An operator's tool reports even its own bugs in one line.
        error(f"unexpected {type(e).__name__}: {e}", "internal")
        return EXIT_ERROR
    return code
