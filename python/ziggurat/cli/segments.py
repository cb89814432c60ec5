"""The files of a cache on this host, and how the command attaches to them.

A ``Cache`` named ``api`` has two segment files in its directory:
``ziggurat.api.v<LAYOUT>`` (entries) and ``ziggurat.api.neg.v<LAYOUT>`` (cached misses and
load leases); with ``version="2"`` the segment name is ``api.ver-2``. A bare ``Segment``
has the first file only.

>>> files = CacheFiles.of("api", "/dev/shm")
>>> files.main_path, files.neg_path
('/dev/shm/ziggurat.api.v2', '/dev/shm/ziggurat.api.neg.v2')
>>> CacheFiles.of("api", "/dev/shm", version="2").name
'api.ver-2'
"""

from __future__ import annotations

import os
import pwd
from dataclasses import dataclass

from ziggurat import _native
from ziggurat._native import LAYOUT_VERSION, Segment, ZigguratError
from ziggurat.cli.errors import CliError

__all__ = ["NEG_SUFFIX", "CacheFiles", "attach", "owner_name", "segment_file"]

#: Suffix of the cached-miss segment's name.
NEG_SUFFIX = ".neg"


def segment_file(segment: str, layout: int = LAYOUT_VERSION) -> str:
    """The file name of segment ``segment``.

    >>> segment_file("api.neg")
    'ziggurat.api.neg.v2'
    """
    return f"ziggurat.{segment}.v{layout}"


def owner_name(uid: int) -> str:
    """The user name of ``uid``, or the number when it has none.

    >>> owner_name(0)
    'root'
    """
    try:
        return pwd.getpwuid(uid).pw_name
    except KeyError:
        return str(uid)


@dataclass(frozen=True)
class CacheFiles:
    """The segment files of one cache: ``name`` is its main segment's name.

    >>> CacheFiles.of("shop", "/run/app").neg_name
    'shop.neg'
    """

    name: str
    directory: str

    @classmethod
    def of(cls, name: str, directory: str, version: str | None = None) -> CacheFiles:
        """The files of the cache ``name`` (of ``version``, if given) in ``directory``;
        ``CliError`` for a name the engine would refuse.

        >>> CacheFiles.of("a b", "/dev/shm")  # doctest: +ELLIPSIS
        Traceback (most recent call last):
        ...
        ziggurat.cli.errors.CliError: NAME: segment name must be 1-200 characters of ..., got "a b"
        """
        try:
            # The engine's rule, checked before a path is made from the name.
            _native.check_segment_name(name)
        except ValueError as e:
            raise CliError(f"NAME: {e}", "invalid") from None
        if name.endswith(NEG_SUFFIX):
            raise CliError(
                f"{name!r} is the cached-miss segment of the cache "
                f"{name[: -len(NEG_SUFFIX)]!r}: name the cache, which covers both",
                "invalid",
            )
        if version is not None:
            try:
                name = _native.segment_name(name, version)
            except ValueError as e:
                raise CliError(
                    f"--{e}" if str(e).startswith("version") else f"NAME: {e}", "invalid"
                ) from None
        return cls(name, directory)

    @property
    def neg_name(self) -> str:
        """Name of the cached-miss segment."""
        return self.name + NEG_SUFFIX

    @property
    def main_path(self) -> str:
        """Path of the entries' segment file."""
        return os.path.join(self.directory, segment_file(self.name))

    @property
    def neg_path(self) -> str:
        """Path of the cached-miss segment file."""
        return os.path.join(self.directory, segment_file(self.neg_name))

    def missing(self) -> CliError:
        """The error for a cache with no main segment file.

        >>> print(CacheFiles("x", "/dev/shm").missing())  # doctest: +ELLIPSIS
        no cache 'x' in /dev/shm (no file ziggurat.x.v2); ziggurat ls ... lists them
        """
        if not os.path.isdir(self.directory):
            return CliError(f"directory {self.directory} does not exist", "missing_directory")
        return CliError(
            f"no cache {self.name!r} in {self.directory} (no file {segment_file(self.name)}); "
            f"ziggurat ls --directory {self.directory} lists them",
            "missing_segment",
        )


def attach(files: CacheFiles, negative: bool = False, read_only: bool = True) -> Segment | None:
    """Attaches the main segment (or, with ``negative``, the cached-miss one) of ``files``.

    Read-only by default: the mapping cannot be written, and nothing is counted. A missing
    main file, another user's file or one the engine refuses (damaged, incompatible) raise
    ``CliError``; a missing cached-miss file returns None (a bare ``Segment`` has none).
    Whose files may be read is the engine's rule, judged on the opened file: this user's,
    or shared (mode 0660) with one of its groups; root is held to it too, so the command
    never decodes memory another user can write. A read-write attach (for ``purge`` and
    ``verify``) is only made to the very file the read-only open accepted (the group it
    is shared with, then its identity, are taken from that open), and is refused if the
    name refers to another file by then. (A read-write open creates a missing file: only
    a file removed in the instant between the two opens could be created, and the command
    then says so.)

    >>> attach(CacheFiles("no-such-cache", "/dev/shm"))  # doctest: +ELLIPSIS
    Traceback (most recent call last):
    ...
    ziggurat.cli.errors.CliError: no cache 'no-such-cache' in /dev/shm (no file ...); ...
    """
    path, name = (files.neg_path, files.neg_name) if negative else (files.main_path, files.name)
    if not os.path.lexists(path):
        if negative:
            return None
        raise files.missing()
    try:
        seg = Segment(name, None, directory=files.directory, read_only=True)
        if read_only:
            return seg
        try:
            # A file shared with a group is only accepted by an open that names the group.
            group, accepted = seg.shared_group, seg.file_id
        finally:
            seg.close()
        seg = Segment(name, None, directory=files.directory, group=group)
    except ZigguratError as e:
        raise CliError(str(e), getattr(e, "cause", None) or "io") from None
    if seg.file_id != accepted:
        seg.close()
        raise CliError(f"{path} was replaced while it was being opened: run again", "replaced")
    return seg
