"""How the command prints: one JSON document (or line) with ``--json``, rich tables
otherwise, and errors as one line on stderr.

>>> out = Output(as_json=True)
>>> out.show({"name": "api", "entries": 3}, lambda: "unused")
{"name": "api", "entries": 3}
>>> human_bytes(8 * 1024 * 1024), percent(0.5), percent(None)
('8.0 MiB', '50.0%', '-')
"""

from __future__ import annotations

import json
import os
import sys
from collections.abc import Callable
from typing import TYPE_CHECKING, Any, TextIO

from ziggurat.cli.errors import CliError

if TYPE_CHECKING:
    from rich.console import Console, RenderableType

__all__ = ["Output", "human_bytes", "percent"]


def human_bytes(n: int | None) -> str:
    """``n`` bytes in binary units, one decimal.

    >>> human_bytes(512), human_bytes(1536), human_bytes(None)
    ('512 B', '1.5 KiB', '-')
    """
    if n is None:
        return "-"
    if n < 1024:
        return f"{n} B"
    x = float(n)
    for unit in ("KiB", "MiB", "GiB", "TiB"):
        x /= 1024
        if x < 1024 or unit == "TiB":
            break
    return f"{x:.1f} {unit}"


def percent(x: float | None) -> str:
    """A ratio as a percentage, ``-`` when there is none.

    >>> percent(0.9312)
    '93.1%'
    """
    return "-" if x is None else f"{100 * x:.1f}%"


class Output:
    """Where a command's result goes. ``as_json``: ``show`` prints the data as one JSON
    line; otherwise the renderable ``render()`` makes, through rich (imported only then).

    >>> Output(as_json=False, stderr=sys.stdout).error("ls", "no directory /nope", "invalid")
    ziggurat ls: no directory /nope
    """

    def __init__(
        self, as_json: bool, stdout: TextIO | None = None, stderr: TextIO | None = None
    ) -> None:
        self.as_json = as_json
        self.stdout = stdout or sys.stdout
        self.stderr = stderr or sys.stderr
        self._console: Console | None = None

    @property
    def console(self) -> Console:
        """The rich console on stdout; ``CliError`` when rich is not installed."""
        if self._console is None:
            try:
                from rich.console import Console
            except ImportError:
                raise CliError(
                    "tables need the rich package: pip install 'ziggurat[cli]', or pass --json",
                    "missing_dependency",
                ) from None
            # Piped or redirected, rich would assume 80 columns and squeeze the tables;
            # COLUMNS still wins when set.
            width = None
            if not self.stdout.isatty() and "COLUMNS" not in os.environ:
                width = 120
            self._console = Console(file=self.stdout, highlight=False, width=width)
        return self._console

    def line(self, data: Any) -> None:
        """Prints ``data`` as one JSON line and flushes it."""
        self.stdout.write(json.dumps(data) + "\n")
        self.stdout.flush()

    def show(self, data: Any, render: Callable[[], RenderableType]) -> None:
        """Prints ``data`` (``--json``) or what ``render`` draws."""
        if self.as_json:
            self.line(data)
        else:
            self.console.print(render())

    def error(self, command: str, message: str, cause: str) -> None:
        """Reports a failure as one line on stderr: a JSON object ``{"error", "cause"}``
        with ``--json``, else ``ziggurat <command>: <message>``."""
        message = " ".join(message.split())
        if self.as_json:
            text = json.dumps({"error": message, "cause": cause})
        else:
            text = f"ziggurat {command}: {message}" if command else f"ziggurat: {message}"
        self.stderr.write(text + "\n")
        self.stderr.flush()
