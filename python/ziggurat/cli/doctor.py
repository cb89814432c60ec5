"""``ziggurat doctor [NAME]``: what can go wrong on this host before or while workers run,
and how to fix each.

Each check gives a finding of a severity: ``ok``, ``info`` (worth knowing, nothing to
fix), ``warning`` (the cache works, worse than it could) or ``error`` (the cache cannot
work as configured). The checks, for the directory and for the cache ``NAME`` (every
cache in the directory without a name):

- **directory**: it exists, this user can create files in it, and who else can replace
  them (its owner, mode and sticky bit);
- **free_space**: the free space (``statvfs``) against the size the caches ask for
  (``--size``; the default 64 MiB + 4 MiB otherwise), with the headroom a ``Cache`` keeps;
- **files**: both segment files of each cache are there (an incomplete pair is reported),
  whose they are, their mode, and whether the engine accepts them;
- **huge_pages**: whether huge pages back each segment (or the directory offers them),
  and how to get them;
- **redis** (with ``--redis`` or ``ZIGGURAT_REDIS_URL``): Redis answers, and the secret
  (``--secret-file`` or ``ZIGGURAT_SECRET``) verifies values stored for each cache;
- **stream_reader** (for a cache whose cluster tier ran on this host): the process that
  applies other hosts' invalidations is alive, and its lag.

The exit code is the worst severity: 0 for ok and info, 4 for warnings, 3 for errors (as
``verify`` finding problems); 1 when the command itself fails.

>>> import tempfile, shutil
>>> d = tempfile.mkdtemp(dir="/dev/shm")
>>> r = examine(d, [], None, None, [], 0.5)
>>> sorted({f["check"] for f in r}), worst(r) in ("ok", "info")  # info: no huge pages
(['directory', 'free_space', 'huge_pages'], True)
>>> shutil.rmtree(d)
"""

from __future__ import annotations

import argparse
import os
import stat
import time
from typing import TYPE_CHECKING, Any

from ziggurat._native import Segment, ZigguratError, huge_page_policy
from ziggurat.cli.clustered import redacted, secrets_from
from ziggurat.cli.errors import EXIT_PROBLEMS, EXIT_WARNINGS, CliError
from ziggurat.cli.ls import collect as list_caches
from ziggurat.cli.output import Output, human_bytes
from ziggurat.cli.segments import CacheFiles, owner_name
from ziggurat.cluster.link import scrubbed
from ziggurat.cluster.signing import secrets_of

if TYPE_CHECKING:
    from rich.table import Table

__all__ = ["examine", "run", "worst"]

SEVERITIES = ("ok", "info", "warning", "error")
MiB = 1 << 20
#: The default pair of a ``Cache`` (entries + cached misses).
DEFAULT_PAIR = 64 * MiB + 4 * MiB
_CONTAINER = (
    "in a container, give it a larger /dev/shm: docker run --shm-size=256m; Compose: "
    "shm_size: 256m; Kubernetes: an emptyDir with medium: Memory and a sizeLimit mounted at "
    "/dev/shm"
)


def _finding(
    check: str, subject: str, severity: str, message: str, remedy: str | None = None
) -> dict[str, Any]:
    return {
        "check": check,
        "subject": subject,
        "severity": severity,
        "message": message,
        "remedy": remedy,
    }


def worst(findings: list[dict[str, Any]]) -> str:
    """The highest severity among ``findings`` (``ok`` for none).

    >>> worst([_finding("a", "b", "info", "m"), _finding("a", "b", "warning", "m")])
    'warning'
    """
    return max((f["severity"] for f in findings), key=SEVERITIES.index, default="ok")


def _directory(d: str) -> list[dict[str, Any]]:
    try:
        st = os.stat(d)
    except FileNotFoundError:
        return [
            _finding(
                "directory",
                d,
                "error",
                f"{d} does not exist",
                "create it for the service's user (systemd: RuntimeDirectory=), or pass the "
                "Cache another directory",
            )
        ]
    if not stat.S_ISDIR(st.st_mode):
        return [_finding("directory", d, "error", f"{d} is not a directory")]
    mode = stat.S_IMODE(st.st_mode)
    who = f"owned by {owner_name(st.st_uid)}, mode {mode:04o}"
    out = []
    if not os.access(d, os.W_OK | os.X_OK):
        out.append(
            _finding(
                "directory",
                d,
                "error",
                f"this user ({owner_name(os.geteuid())}) cannot create files in {d} ({who})",
                "run the workers as a user that can write it, or give them a directory of "
                "their own (systemd RuntimeDirectory=, $XDG_RUNTIME_DIR)",
            )
        )
    if mode & 0o002 and not mode & 0o1000:
        out.append(
            _finding(
                "directory",
                d,
                "error",
                f"{d} is writable by every user without the sticky bit ({who}): any local "
                "user can rename, replace or remove segment files under running workers",
                f"chmod +t {d}, or give the service a directory only it can write (systemd "
                "RuntimeDirectory=, $XDG_RUNTIME_DIR, a container's own /dev/shm)",
            )
        )
    elif mode & 0o002:
        out.append(
            _finding(
                "directory",
                d,
                "info",
                f"{d} is shared by every user, with the sticky bit ({who}): nobody else can "
                "replace a cache's files, but any local user can take a cache's name before "
                "it is first created",
                "on a host shared with other users, give the service a directory only it can "
                "write (systemd RuntimeDirectory=, $XDG_RUNTIME_DIR)",
            )
        )
    elif not out:
        out.append(_finding("directory", d, "ok", f"{d}: {who}"))
    return out


def _free_space(d: str, need: int, explicit: bool, what: str) -> dict[str, Any]:
    try:
        st = os.statvfs(d)
    except OSError as e:
        return _finding("free_space", d, "error", f"cannot read the free space of {d}: {e}")
    free, total = st.f_bavail * st.f_frsize, st.f_blocks * st.f_frsize
    room = free // 4 * 3  # the headroom a Cache keeps for the directory's other users
    said = f"{human_bytes(free)} free of {human_bytes(total)}; {what} need {human_bytes(need)}"
    if need <= room:
        return _finding("free_space", d, "ok", said)
    remedy = f"free space in {d}, or give it more room: {_CONTAINER}"
    if explicit or need > free:
        return _finding(
            "free_space",
            d,
            "error" if explicit else "warning",
            f"{said}: "
            + (
                "a cache of that size cannot be created here and runs degraded"
                if explicit
                else "a cache opened with the default size takes what fits instead"
            ),
            remedy,
        )
    return _finding(
        "free_space",
        d,
        "warning",
        f"{said}, more than the three quarters of the free space a cache opened with the "
        "default size takes: it takes what fits instead",
        remedy,
    )


def _file(files: CacheFiles, segment: str, path: str, role: str) -> tuple[dict[str, Any], bool]:
    """The ownership finding of one segment file, and whether the engine accepts it."""
    st = os.lstat(path)
    mode = stat.S_IMODE(st.st_mode)
    owner = owner_name(st.st_uid)
    desc = f"{path} ({role}): owned by {owner}, mode {mode:04o}"
    if not stat.S_ISREG(st.st_mode):
        return _finding(
            "files", files.name, "error", f"{path} is not a regular file", "remove it"
        ), False
    try:
        Segment(segment, None, directory=files.directory, read_only=True).close()
    except ZigguratError as e:
        cause = getattr(e, "cause", None) or "io"
        return _finding(
            "files",
            files.name,
            "error",
            f"{desc}: refused ({cause}): {e}",
            "remove the file once no process uses it (ziggurat rm), and start the workers as "
            "the user that should own it",
        ), False
    if st.st_uid != os.geteuid():
        return _finding(
            "files",
            files.name,
            "warning",
            f"{desc}: another user's file, shared through its group",
            "every member of that group can change the cache's values: keep the group to "
            "the service alone",
        ), True
    return _finding("files", files.name, "ok", desc), True


def _cache(files: CacheFiles) -> tuple[list[dict[str, Any]], Segment | None]:
    """The file findings of one cache and its main segment attached read-only (None when
    it cannot be)."""
    have_main, have_neg = os.path.lexists(files.main_path), os.path.lexists(files.neg_path)
    if not have_main and not have_neg:
        return [
            _finding(
                "files",
                files.name,
                "info",
                f"no segment files yet in {files.directory}: the first worker creates them",
            )
        ], None
    out = []
    if have_main != have_neg:
        there = files.main_path if have_main else files.neg_path
        out.append(
            _finding(
                "files",
                files.name,
                "warning",
                f"an incomplete pair: only {there} is there (left by an older version, or "
                "removed by hand)",
                f"remove it once no process uses it (ziggurat rm {files.name} --directory "
                f"{files.directory}): the next worker creates both",
            )
        )
    main_ok = False
    for segment, path, role, present in (
        (files.name, files.main_path, "entries", have_main),
        (files.neg_name, files.neg_path, "cached misses", have_neg),
    ):
        if present:
            finding, ok = _file(files, segment, path, role)
            out.append(finding)
            if role == "entries":
                main_ok = ok
    if not main_ok:
        return out, None
    try:
        return out, Segment(files.name, None, directory=files.directory, read_only=True)
    except ZigguratError:
        return out, None  # removed or replaced since: the findings above say enough


def _huge(name: str, seg: Segment) -> dict[str, Any]:
    r = seg.huge_pages()
    if r["backed"]:
        return _finding(
            "huge_pages",
            name,
            "ok",
            f"{human_bytes(r['backed_bytes'])} of {human_bytes(r['eligible_bytes'])} of the "
            f"segment mapped with huge pages ({r['file_system']} huge={r['mount']})",
        )
    if r["offered"]:
        return _finding(
            "huge_pages",
            name,
            "warning",
            "the directory offers huge pages, but none back this segment (made before they "
            "were enabled, or memory too fragmented for them)",
            "remove the files once no process uses them (ziggurat rm): the next worker "
            "creates them with huge pages",
        )
    return _finding("huge_pages", name, "info", "no huge pages back the segment", r["remedy"])


def _huge_directory(d: str) -> dict[str, Any]:
    p = huge_page_policy(d)
    if p["offered"]:
        return _finding(
            "huge_pages", d, "ok", f"{p['file_system']} huge={p['mount']}: segments get them"
        )
    return _finding("huge_pages", d, "info", "segments here get no huge pages", p["remedy"])


def _stream_reader(name: str, seg: Segment, redis_seq: int | None) -> dict[str, Any] | None:
    from ziggurat._native import cluster_process_alive
    from ziggurat.cluster.reader import STALE_MS, _mono_ms
    from ziggurat.cluster.tier import W

    if not seg.app_load(W.HOST):
        return None  # no cluster tier ever ran on this host
    pid = seg.app_load(W.LEASE)
    if pid == 0 or not cluster_process_alive(pid):
        return _finding(
            "stream_reader",
            name,
            "warning",
            "no process applies the other hosts' invalidations: "
            + ("none holds the stream" if pid == 0 else f"its holder, pid {pid}, is gone"),
            "start the workers (each stands for the stream), or run ziggurat follow",
        )
    silent = _mono_ms() - seg.app_load(W.BEAT)
    p50, p99 = seg.app_load(W.LAG_P50) / 1000, seg.app_load(W.LAG_P99) / 1000
    behind = None if redis_seq is None else max(0, redis_seq - seg.app_load(W.SEQ))
    lag = f"invalidation lag p50 {p50:.1f} ms, p99 {p99:.1f} ms" + (
        "" if behind is None else f", {behind} events behind the stream"
    )
    if silent > STALE_MS:
        return _finding(
            "stream_reader",
            name,
            "error",
            f"the stream reader, pid {pid}, has been silent for {silent / 1000:.1f} s "
            f"(stopped, or stuck); {lag}",
            f"check process {pid}; another worker takes the stream over from a silent one",
        )
    late = p99 > 1000 or (behind is not None and behind > 1000)
    return _finding(
        "stream_reader",
        name,
        "warning" if late else "ok",
        f"pid {pid} reads the stream; {lag}",
        "the reader falls behind: check Redis's latency and the host's load" if late else None,
    )


def _redis(
    url: str, timeout: float, names: list[str], secrets: list[bytes]
) -> tuple[list[dict[str, Any]], dict[str, int]]:
    """Redis's findings, and the stream sequence of each cache (for the readers' lag)."""
    shown = redacted(url)
    try:
        import redis as redis_py
    except ImportError:
        return [
            _finding(
                "redis",
                shown,
                "error",
                "the redis package is not installed",
                "pip install 'ziggurat[redis]'",
            )
        ], {}
    from ziggurat.cluster.bodies import _body
    from ziggurat.cluster.signing import MAC_LEN, Signer

    try:
        client = redis_py.Redis.from_url(
            url, socket_timeout=timeout, socket_connect_timeout=timeout
        )
    except ValueError as e:
        return [
            _finding(
                "redis",
                shown,
                "error",
                f"the Redis URL {shown} is not valid: {scrubbed(str(e), url)}",
                "check the URL (--redis or ZIGGURAT_REDIS_URL)",
            )
        ], {}
    try:
        client.ping()
    except redis_py.RedisError as e:
        return [
            _finding(
                "redis",
                shown,
                "error",
                f"Redis at {shown} does not answer: {scrubbed(str(e), url)}",
                "check the URL, that the server runs, and the network between them",
            )
        ], {}
    out = [_finding("redis", shown, "ok", f"Redis at {shown} answers")]
    seqs: dict[str, int] = {}
    try:
        for name in names:
            prefix = b"{zg2:" + name.encode() + b"}:"
            seq = client.get(prefix + b"seq")
            if seq is not None:
                seqs[name] = int(seq)
            if not secrets:
                continue
            signer = Signer(name, secrets)
            checked = verified = 0
            for key in client.scan_iter(match=prefix + b"v:*", count=200):
                stored = client.get(key)
                view = _body(stored if isinstance(stored, bytes) else None)
                if view is None or len(view) == 0:
                    continue  # gone meanwhile, or a delete's tombstone
                body = bytes(view)
                kb = bytes(key)[len(prefix) + 2 :]
                if body[:1] == b"N":
                    wb = body[1 + MAC_LEN : 9 + MAC_LEN]
                    ok = signer.counter_ok(kb, wb, body[1 : 1 + MAC_LEN])
                else:
                    ok = body[:2] == b"Z2" and signer.value_ok(
                        kb, body[2 + MAC_LEN :], body[2 : 2 + MAC_LEN]
                    )
                checked += 1
                verified += ok
                if checked >= 20:
                    break
            if checked == 0:
                out.append(
                    _finding(
                        "redis",
                        name,
                        "info",
                        "no value stored in Redis for this cache yet to check the secret against",
                    )
                )
            elif verified == 0:
                out.append(
                    _finding(
                        "redis",
                        name,
                        "error",
                        f"the secret verifies none of the {checked} values checked: the hosts "
                        "writing them use another secret, so every value is refused",
                        "give every host the same secret (ZIGGURAT_SECRET or the Cache's "
                        "secret=); to change it, list the new one first and keep the old one "
                        "until every host has the new one",
                    )
                )
            else:
                out.append(
                    _finding(
                        "redis",
                        name,
                        "ok",
                        f"the secret verifies {verified} of the {checked} values checked",
                    )
                )
    except (redis_py.RedisError, IndexError, ValueError) as e:
        out.append(_finding("redis", shown, "error", f"reading Redis failed: {e}"))
    finally:
        client.close()
    return out, seqs


def examine(
    directory: str,
    names: list[str],
    size: int | None,
    redis_url: str | None,
    secrets: list[bytes],
    redis_timeout: float,
) -> list[dict[str, Any]]:
    """Every finding for ``directory`` and the caches ``names`` (their segment names;
    every cache there when empty)."""
    findings = _directory(directory)
    if not os.path.isdir(directory):
        return findings
    if not names:
        names = [row["name"] for row in list_caches(directory)]
    caches = [CacheFiles(n, directory) for n in names]
    missing = [
        c for c in caches if not os.path.lexists(c.main_path) and not os.path.lexists(c.neg_path)
    ]
    per_cache = DEFAULT_PAIR if size is None else size + max(size // 16, MiB)
    count = len(missing) if caches else 1
    if count:
        what = "a new cache would" if not caches else f"{count} cache(s) still to create"
        findings.append(_free_space(directory, count * per_cache, size is not None, what))
    else:
        findings.append(
            _finding("free_space", directory, "ok", "every cache's files are there already")
        )
    segments: list[tuple[str, Segment]] = []
    for c in caches:
        found, seg = _cache(c)
        findings += found
        if seg is not None:
            segments.append((c.name, seg))
    try:
        if not segments:
            findings.append(_huge_directory(directory))
        for name, seg in segments:
            findings.append(_huge(name, seg))
        seqs: dict[str, int] = {}
        if redis_url:
            found, seqs = _redis(redis_url, redis_timeout, names, secrets)
            findings += found
        for name, seg in segments:
            reader = _stream_reader(name, seg, seqs.get(name))
            if reader is not None:
                findings.append(reader)
    finally:
        for _, seg in segments:
            seg.close()
    return findings


def _table(data: dict[str, Any]) -> Table:
    from rich.table import Table

    colour = {"ok": "green", "info": "cyan", "warning": "yellow", "error": "red"}
    t = Table(
        title=f"ziggurat doctor: {data['directory']} ({data['severity']})",
        title_justify="left",
        show_lines=True,
    )
    for col in ("severity", "check", "subject", "finding", "remedy"):
        t.add_column(col, overflow="fold")
    for f in data["findings"]:
        t.add_row(
            f"[{colour[f['severity']]}]{f['severity']}[/]",
            f["check"],
            f["subject"],
            f["message"],
            f["remedy"] or "",
        )
    return t


def run(args: argparse.Namespace, out: Output) -> int:
    """Runs every check; the exit code is the worst severity's."""
    from ziggurat._native import parse_size

    size = None
    if args.size is not None:
        try:
            size = int(parse_size(args.size))
        except ValueError as e:
            raise CliError(f"--size: {e}", "invalid") from None
    names = []
    if args.name is not None:
        names = [CacheFiles.of(args.name, args.directory, args.version).name]
    secrets: list[bytes] = []
    if args.redis and (args.secret_file or os.environ.get("ZIGGURAT_SECRET")):
        secrets = secrets_of(secrets_from(args.secret_file, os.environ), "ziggurat doctor")
    started = time.monotonic()
    findings = examine(args.directory, names, size, args.redis, secrets, args.redis_timeout)
    data = {
        "directory": args.directory,
        "severity": worst(findings),
        "findings": findings,
        "seconds": round(time.monotonic() - started, 3),
    }
    out.show(data, lambda: _table(data))
    return {"error": EXIT_PROBLEMS, "warning": EXIT_WARNINGS}.get(data["severity"], 0)
