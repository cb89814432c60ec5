"""The ``ziggurat`` command line: subcommands, their options, and the function each runs.

>>> args = build().parse_args(["get", "api", "user:7", "--json"])
>>> args.command, args.name, args.key, args.directory, args.json
('get', 'api', 'user:7', '/dev/shm', True)
"""

from __future__ import annotations

import argparse

from ziggurat.cli import clustered, doctor, follow, get, ls, purge, rm, stats, top, verify
from ziggurat.cli.entry import SERIALIZERS

__all__ = ["DEFAULT_DIRECTORY", "build"]

#: Where a ``Cache`` keeps its segments unless given ``directory``.
DEFAULT_DIRECTORY = "/dev/shm"


def _common(named: bool) -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(add_help=False)
    p.add_argument("--json", action="store_true", help="print machine-readable JSON")
    p.add_argument(
        "--directory",
        "-d",
        default=DEFAULT_DIRECTORY,
        metavar="DIR",
        help=f"where the segment files are (the Cache's directory; default {DEFAULT_DIRECTORY})",
    )
    if named:
        p.add_argument("name", metavar="NAME", help="the cache's name, as ziggurat ls shows it")
        p.add_argument(
            "--version",
            metavar="V",
            help="the cache's version option (the segment NAME.ver-V)",
        )
    return p


def build() -> argparse.ArgumentParser:
    """The parser; each subcommand sets ``func`` to its ``run(args, out)``.

    >>> build().parse_args(["top", "api", "--count", "2"]).count
    2
    """
    parser = argparse.ArgumentParser(
        prog="ziggurat",
        description="Inspect and manage the ziggurat caches (shared-memory segments) of this "
        "host. Everything but purge and rm attaches read-only and changes nothing.",
    )
    sub = parser.add_subparsers(dest="command", required=True, metavar="COMMAND")
    plain, named = _common(False), _common(True)

    p = sub.add_parser("ls", parents=[plain], help="list the caches in a directory")
    p.set_defaults(func=ls.run)

    p = sub.add_parser("stats", parents=[named], help="every host-wide counter, per tier")
    p.set_defaults(func=stats.run)

    p = sub.add_parser("top", parents=[named], help="live rates: hits, misses, loads, ...")
    p.add_argument(
        "--interval",
        "-i",
        type=float,
        default=1.0,
        metavar="S",
        help="seconds between two readings (default 1)",
    )
    p.add_argument(
        "--count",
        "-n",
        type=int,
        metavar="N",
        help="stop after N intervals (default: until Ctrl-C)",
    )
    p.set_defaults(func=top.run)

    p = sub.add_parser("get", parents=[named], help="a key's value and metadata")
    p.add_argument(
        "key", metavar="KEY", help="the key as the Cache stores it ('ns:k' in a namespace)"
    )
    p.add_argument(
        "--serializer",
        choices=SERIALIZERS,
        default="auto",
        help="how to decode the value (the cache's serializer; default auto)",
    )
    p.add_argument(
        "--width",
        type=int,
        default=200,
        metavar="N",
        help="longest preview of the value, in characters (default 200)",
    )
    p.add_argument(
        "--tag",
        action="append",
        default=[],
        metavar="T",
        help="a tag name to recognise among the entry's tags (repeatable)",
    )
    p.set_defaults(func=get.run)

    p = sub.add_parser("purge", parents=[named], help="remove entries for every process")
    what = p.add_mutually_exclusive_group(required=True)
    what.add_argument("--key", "-k", metavar="K", help="delete one key")
    what.add_argument("--tag", "-t", metavar="T", help="invalidate every entry tagged T")
    what.add_argument("--namespace", metavar="NS", help="clear the namespace NS")
    what.add_argument("--all", action="store_true", help="empty the cache")
    clustered.add_options(p, required=False)
    p.set_defaults(func=purge.run)

    p = sub.add_parser("verify", parents=[named], help="check the segments' consistency")
    p.add_argument(
        "--header-only",
        action="store_true",
        help="only the read-only header and geometry checks (takes no lock)",
    )
    p.set_defaults(func=verify.run)

    p = sub.add_parser(
        "follow",
        parents=[named],
        help="follow the cluster's invalidation stream for this host, in this process",
    )
    clustered.add_options(p, required=True)
    p.set_defaults(func=follow.run)

    p = sub.add_parser(
        "doctor",
        parents=[plain],
        help="check the host for what can stop or slow the caches, and say how to fix it",
    )
    p.add_argument(
        "name",
        metavar="NAME",
        nargs="?",
        help="the cache to check (default: every cache in the directory)",
    )
    p.add_argument(
        "--version", metavar="V", help="the cache's version option (the segment NAME.ver-V)"
    )
    p.add_argument(
        "--size",
        metavar="SIZE",
        help="the size= the caches are opened with (default: the Cache's default)",
    )
    clustered.add_options(p, required=False)
    p.set_defaults(func=doctor.run)

    p = sub.add_parser("rm", parents=[named], help="remove the segment files")
    p.add_argument(
        "--yes",
        "-y",
        action="store_true",
        help="remove even if other processes have the cache mapped",
    )
    p.set_defaults(func=rm.run)
    return parser
