"""What every engine is: a projection of the log kept at a cursor, and a search over it.

The local projection (``local.Projector``: catalog + semantic index + snapshot) and the Letta
projection (``letta.LettaProjection``: one agent per checkpoint) both satisfy
:class:`Projection`, so the API and the CLI drive either without reaching inside it
(``restore`` rebuilds any of them from the log). A :class:`SearchEngine` answers scoped
searches: ``embedded`` from the local index, ``letta`` from the server.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any, Protocol, runtime_checkable

Progress = Callable[[int, int], None]  # (events folded so far, events to fold)


@runtime_checkable
class Projection(Protocol):
    """A fold of the log at ``cursor`` (the last folded seq)."""

    name: str
    cursor: int

    def catch_up(self) -> int:
        """Fold every event after the cursor; return how many."""

    def lag(self) -> int:
        """Events in the log not folded yet."""

    def health(self) -> dict[str, Any]:
        """What a status line needs: cursor, lag, and anything wrong."""

    def restore(self, progress: Progress | None = None) -> dict[str, Any]:
        """Rebuild the projection from the log (from seq 0, or what a purge left visible)."""


@runtime_checkable
class SearchEngine(Protocol):
    """Where a scoped semantic search runs; results are (entry id, score in [0, 1]), best first."""

    @property
    def name(self) -> str: ...

    def search(self, query: str, node_ids: list[str], limit: int, as_of: int | None) -> list[tuple[str, float]]: ...

    def react_search(self, query: str, limit: int, as_of: int | None) -> list[tuple[str, float]]: ...

    def lag(self) -> int: ...

    def health(self) -> dict[str, Any]: ...
