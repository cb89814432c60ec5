"""How a closed cache answers: every method that reads or writes raises ``ZigguratError``.

>>> from ziggurat import Cache, ZigguratError
>>> c = Cache("doc-closed", size="8MiB"); c.unlink()
>>> try:
...     c.get("k")
... except ZigguratError as e:
...     print(e)
the cache 'doc-closed' is closed; open a new Cache to use it again
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any, NoReturn

from ziggurat.state import closed_error

if TYPE_CHECKING:
    from ziggurat.state import CacheState

    _Base = CacheState
else:
    _Base = object

__all__ = ["Closed"]


class Closed(_Base):
    """The native methods of a closed cache (the methods written in Python check
    ``closed`` themselves)."""

    def _refuse(self) -> NoReturn:
        raise closed_error(self.name)

    def get(self, *_args: Any, **_kwargs: Any) -> Any:
        self._refuse()

    def fetch(self, *_args: Any, **_kwargs: Any) -> Any:
        self._refuse()

    def set(self, *_args: Any, **_kwargs: Any) -> None:
        self._refuse()

    def add(self, *_args: Any, **_kwargs: Any) -> bool:
        self._refuse()

    def incr(self, *_args: Any, **_kwargs: Any) -> int:
        self._refuse()

    def touch(self, *_args: Any, **_kwargs: Any) -> bool:
        self._refuse()
