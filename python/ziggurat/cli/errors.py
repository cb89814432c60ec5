"""``CliError``: a failure the ``ziggurat`` command reports in one line, with its cause.

>>> e = CliError("no cache 'x' in /dev/shm", "missing_segment")
>>> str(e), e.cause, e.code
("no cache 'x' in /dev/shm", 'missing_segment', 1)
"""

from __future__ import annotations

__all__ = ["EXIT_ERROR", "EXIT_PROBLEMS", "EXIT_USAGE", "EXIT_WARNINGS", "CliError"]

#: A command could not do what was asked (the reason is on stderr).
EXIT_ERROR = 1
#: The command line itself is wrong (argparse's code).
EXIT_USAGE = 2
#: ``verify`` ran and found the segment inconsistent or unusable; ``doctor`` found errors.
EXIT_PROBLEMS = 3
#: ``doctor`` found warnings and no error.
EXIT_WARNINGS = 4


class CliError(Exception):
    """A failure with a stable ``cause`` (the engine's names where it has one:
    ``missing_segment``, ``other_owner``, ``damaged``, ...) and an exit code.

    >>> CliError("refused", "mapped").cause
    'mapped'
    """

    def __init__(self, message: str, cause: str, code: int = EXIT_ERROR) -> None:
        super().__init__(message)
        self.cause = cause
        self.code = code
