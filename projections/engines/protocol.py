"""What every engine is: a projection of the log kept at a cursor, and a search over it.

The local projection (``local.Projector``: catalog + semantic index + snapshot) and the Letta
projection (``letta.LettaProjection``: one agent per checkpoint) both satisfy
:class:`Projection`, so the API and the CLI drive a list of them without reaching inside one
(``restore`` rebuilds any of them from the log). The local one is folded on the reader's thread
(read-your-writes at memory speed); one that lives outside the process and that many processes
fold in turn is a :class:`SharedProjection`, kept current by one
:class:`~projections.engines.runner.ProjectionRunner` each. A :class:`SearchEngine` answers
scoped searches: ``embedded`` from the local index, ``letta`` from the server.
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
class SharedProjection(Projection, Protocol):
    """A projection held outside this process (a server) that many processes fold in turn,
    one at a time; what a :class:`~projections.engines.runner.ProjectionRunner` drives."""

    def fold(
        self, *, wait: float = 0.0, stop: Callable[[], bool] | None = None, limit: int | None = None
    ) -> int | None:
        """Fold the events after the cursor (at most ``limit``; ``stop()`` ends it after the
        batch in flight); None when another process folds it for longer than ``wait`` s."""

    def behind(self) -> bool:
        """The log (any process's writes) holds events not folded yet, as far as this process knows."""

    def current(self) -> bool:
        """Re-read where the projection stands (another process may have folded): at the log's end?"""

    def forget(self) -> None:
        """Drop what this process believes of the projection after a failure; the next fold looks again."""

    def hurry(self) -> None:
        """Short timeouts from now on: the process is closing and must not wait long."""


@runtime_checkable
class SearchEngine(Protocol):
    """Where a scoped semantic search runs; results are (entry id, score in [0, 1]), best first."""

    @property
    def name(self) -> str: ...

    def search(self, query: str, node_ids: list[str], limit: int, as_of: int | None) -> list[tuple[str, float]]: ...

    def react_search(self, query: str, limit: int, as_of: int | None) -> list[tuple[str, float]]: ...

    def lag(self) -> int: ...

    def health(self) -> dict[str, Any]: ...
