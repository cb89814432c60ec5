"""``ziggurat purge NAME --key K | --tag T | --namespace NS | --all``: removes entries for
every process of the host, as the ``Cache`` methods do.

- ``--key K``: ``Cache.delete(K)``: the record goes, and the key's stamp moves, so every
  process's L1 copy and any cached miss of the key stop counting.
- ``--tag T``: ``Cache.invalidate_tags(T)``: one increment of the tag's version in both
  segments voids every entry and cached miss carrying it.
- ``--namespace NS``: ``cache.namespace(NS).clear()``: the same for the namespace's tag.
- ``--all``: ``Cache.clear()``: both segments emptied, shard by shard under their locks.

The segments are attached read-write for this, and only after a read-only attach checked
them (the command never creates one).

On a cache with a cluster tier, a purge of this host alone comes back: the host reads the
values again from Redis, and the other hosts keep theirs. With ``--redis URL`` (and the
secret, see ``clustered``), the purge goes through the cache's cluster tier instead, as the
application's ``Cache`` methods do: Redis, every host's segment through the invalidation
stream, then this host's.

>>> import tempfile, shutil
>>> from ziggurat import Cache
>>> d = tempfile.mkdtemp(dir="/dev/shm")
>>> c = Cache("doc-purge", size="8MiB", directory=d); c.set("k", 1)
>>> purge(CacheFiles("doc-purge", d), key="k")["deleted"], c.get("k")
(True, None)
>>> c.close(); shutil.rmtree(d)
"""

from __future__ import annotations

import argparse
import os
from typing import Any

from ziggurat._native import MAX_KEY, namespace_parts
from ziggurat.cli.errors import CliError
from ziggurat.cli.output import Output
from ziggurat.cli.segments import CacheFiles, attach

__all__ = ["check_target", "purge", "purge_cluster", "run"]


def check_target(key: str | None, tag: str | None, namespace: str | None, everything: bool) -> None:
    """``CliError`` unless exactly one valid target is named.

    >>> check_target(None, None, None, False)
    Traceback (most recent call last):
    ...
    ziggurat.cli.errors.CliError: give exactly one of --key, --tag, --namespace or --all
    """
    if sum(x is not None for x in (key, tag, namespace)) + everything != 1:
        raise CliError("give exactly one of --key, --tag, --namespace or --all", "invalid")
    if key is not None and not 0 < len(os.fsencode(key)) <= MAX_KEY:
        raise CliError(f"--key must be 1 to {MAX_KEY} bytes", "invalid")
    if tag is not None and not tag:
        raise CliError("--tag must not be empty", "invalid")
    if namespace is not None:
        try:
            namespace_parts(namespace)
        except ValueError as e:
            raise CliError(f"--namespace: {e}", "invalid") from None


def _document(
    files: CacheFiles, key: str | None, tag: str | None, namespace: str | None, everything: bool
) -> dict[str, Any]:
    """The ``--json`` document of a purge of the one target named (checked)."""
    check_target(key, tag, namespace, everything)
    return {
        "name": files.name,
        "directory": files.directory,
        "purged": "all" if everything else "key" if key else "tag" if tag else "namespace",
        "key": key,
        "tag": tag,
        "namespace": namespace,
        "deleted": None,
        "entries_before": None,
    }


def purge(
    files: CacheFiles,
    key: str | None = None,
    tag: str | None = None,
    namespace: str | None = None,
    everything: bool = False,
) -> dict[str, Any]:
    """Purges what one of ``key``, ``tag``, ``namespace`` or ``everything`` names; returns
    the ``--json`` document.

    >>> purge(CacheFiles("x", "/dev/shm"))
    Traceback (most recent call last):
    ...
    ziggurat.cli.errors.CliError: give exactly one of --key, --tag, --namespace or --all
    """
    out = _document(files, key, tag, namespace, everything)
    main = attach(files, read_only=False)
    assert main is not None
    try:
        neg = attach(files, negative=True, read_only=False)
    except BaseException:
        main.close()
        raise
    segs = [s for s in (main, neg) if s is not None]
    try:
        if key is not None:
            # The argument's bytes: UTF-8 for text, any other sequence as it is.
            out["deleted"] = main.delete(os.fsencode(key))
        elif tag is not None or namespace is not None:
            name = tag if tag is not None else namespace_parts(str(namespace))[1]
            for s in segs:
                s.invalidate_tag(name)
        else:
            out["entries_before"] = main.stats()["entries"]
            for s in segs:
                s.clear()
    finally:
        for s in segs:
            s.close()
    return out


def _say(d: dict[str, Any]) -> str:
    if d["purged"] == "key":
        did = "deleted" if d["deleted"] else "had no live record of"
        return f"{d['name']}: {did} key {d['key']!r}"
    if d["purged"] == "tag":
        return f"{d['name']}: invalidated tag {d['tag']!r}"
    if d["purged"] == "namespace":
        return f"{d['name']}: cleared namespace {d['namespace']!r}"
    return f"{d['name']}: cleared ({d['entries_before']:,} entries before)"


def purge_cluster(args: argparse.Namespace, files: CacheFiles) -> dict[str, Any]:
    """``purge`` through the cache's cluster tier (``args.redis``): every host and Redis.
    The ``--json`` document is ``purge``'s, with ``"cluster": true``.

    >>> from ziggurat.cli.parser import build
    >>> a = build().parse_args(["purge", "shop", "--tag", "t", "--redis", "redis://h/0"])
    >>> purge_cluster(a, CacheFiles("shop", "/no/such/dir"))  # doctest: +ELLIPSIS
    Traceback (most recent call last):
    ...
    ziggurat.cli.errors.CliError: directory /no/such/dir does not exist
    """
    from ziggurat.cli.clustered import open_clustered

    out = _document(files, args.key, args.tag, args.namespace, args.all)
    seg = attach(files)
    assert seg is not None
    out.update(entries_before=seg.stats()["entries"] if args.all else None, cluster=True)
    seg.close()
    cache = open_clustered(args, files)
    try:
        if args.key is not None:
            out["deleted"] = cache.delete(args.key)
        elif args.tag is not None:
            cache.invalidate_tags(args.tag)
        elif args.namespace is not None:
            cache.namespace(args.namespace).clear()
        else:
            cache.clear()
        l3 = cache.stats()["l3"]
        if l3["dirty_writes"]:
            raise CliError(
                f"Redis at the Redis URL (--redis or ZIGGURAT_REDIS_URL) could not be reached: "
                f"the purge was applied on this host only, and reaches the others once a "
                f"process of this host publishes its recovery (a clear of the cache) "
                f"({l3['timeouts']} timeouts, {l3['errors']} errors)",
                "unreachable",
            )
    finally:
        cache.close()
    return out


def run(args: argparse.Namespace, out: Output) -> int:
    """Purges ``args.name`` as its options say."""
    files = CacheFiles.of(args.name, args.directory, args.version)
    if args.redis is not None:
        d = purge_cluster(args, files)
    else:
        d = purge(files, args.key, args.tag, args.namespace, args.all)
    out.show(d, lambda: _say(d) + (" on every host" if d.get("cluster") else ""))
    return 0
