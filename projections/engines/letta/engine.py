"""Reading from Letta (``ARI_MEMORY_SEARCH_ENGINE=letta``): an explicit choice, not the default.

The local index holds the same entries with the same embedder and answers in well under a
millisecond, so searches run there unless Letta is chosen. Chosen, a search first brings the
agent up to date (read-your-writes), and while Letta cannot answer the embedded engine does
(``health()`` says so). Letta returns no score; the score reported is the same embedder's
cosine, as on the embedded engine.
"""
from __future__ import annotations

import time
from typing import Any, Callable, Iterable

import numpy as np

from ledger.errors import EmbeddingMismatch

from projections.engines.letta.sync import LettaSync
from projections.engines.local import Projector
from projections.models.catalog import Catalog

RETRY_AFTER_S = 2.0  # after a failure, reads use the embedded engine this long before retrying


class LettaEngine:
    """Search on Letta; the embedded engine answers (and says so) while Letta cannot."""

    def __init__(self, projector: Projector, fallback: Any, sync: LettaSync) -> None:
        self.projector = projector
        self.fallback = fallback
        self.sync = sync
        self.letta = sync.projection
        self._failed_at = 0.0

    @property
    def name(self) -> str:
        return "letta" if self.sync.error is None else "embedded (letta unavailable)"

    def ready(self) -> bool:
        """Bring Letta up to date for this read; False when it cannot be reached now."""
        if self.sync.error is not None and time.monotonic() - self._failed_at < RETRY_AFTER_S:
            return False
        if self.sync.catch_up():
            return True
        self._failed_at = time.monotonic()
        return False

    def _answer(self, on_letta: Callable[[], list[tuple[str, float]]], fallback: Callable[[], list[tuple[str, float]]],
                as_of: int | None = None):
        """Letta's answer when it can give one, else the embedded engine's (and remember why).

        A purge deleted the agent, as ARI's purge does: what a read as of an earlier seq must
        see is only in the local index, which answers it."""
        if as_of is not None and any(seq > as_of for seq in self.projector.catalog.purges):
            return fallback()
        if not self.ready():
            return fallback()
        try:
            return on_letta()
        except EmbeddingMismatch:
            raise
        except Exception as exc:  # noqa: BLE001 - as in ready(): fall back, never fail a read
            self.sync._failed(exc)
            self._failed_at = time.monotonic()
            return fallback()

    def _visible(self, node_ids: Iterable[str] | None, as_of: int | None) -> Callable[[str], bool]:
        catalog: Catalog = self.projector.catalog
        scope = None if node_ids is None else set(node_ids)

        def wanted(eid: str) -> bool:
            entry = catalog.entries.get(eid)
            return entry is not None and entry.visible(as_of) and (scope is None or entry.node_id in scope)

        return wanted

    def _scored(self, query: str, ids: list[str], text_of: Callable[[str], str]) -> list[tuple[str, float]]:
        if not ids:
            return []
        vectors = self.projector.embedder.embed([query] + [text_of(i) for i in ids])
        scores = np.clip((vectors[1:] @ vectors[0] + 1.0) / 2.0, 0.0, 1.0)
        return list(zip(ids, map(float, scores)))

    def search(self, query: str, node_ids: list[str], limit: int, as_of: int | None) -> list[tuple[str, float]]:
        def on_letta() -> list[tuple[str, float]]:
            tags = [f"n:{n}" for n in dict.fromkeys(node_ids)]
            ids = self.letta.search(query, tags, self._visible(node_ids, as_of), limit)
            return self._scored(query, ids, lambda eid: self.projector.catalog.entries[eid].text)

        return self._answer(on_letta, lambda: self.fallback.search(query, node_ids, limit, as_of), as_of)

    def react_search(self, query: str, limit: int, as_of: int | None) -> list[tuple[str, float]]:
        def on_letta() -> list[tuple[str, float]]:
            steps = {s.step_id: s for s in self.projector.catalog.steps_as_of(as_of)}
            ids = self.letta.search(query, [self.letta.react_tag], steps.__contains__, limit)
            return self._scored(query, ids, lambda sid: steps[sid].content)

        return self._answer(on_letta, lambda: self.fallback.react_search(query, limit, as_of), as_of)

    def lag(self) -> int:
        return self.letta.lag()

    def health(self) -> dict[str, Any]:
        """Reading from Letta, a health check brings it up to date first (as a read would)."""
        self.ready()
        return {}
