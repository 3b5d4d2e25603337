"""The default search engine: the local semantic index, no server."""

from __future__ import annotations

from typing import Any

from projections.engines.local import Projector
from projections.models.semantic import REACT, ScopeRows


class EmbeddedEngine:
    """Searches the local projection's index (the embedder and numpy cosine, in process)."""

    name = "embedded"

    def __init__(self, projector: Projector) -> None:
        self.projector = projector

    def search(self, query: str, node_ids: list[str], limit: int, as_of: int | None) -> list[tuple[str, float]]:
        vector = self.projector.embedder.embed([query])[0]
        hits = self.projector.index.search_rows(vector, node_ids, limit, as_of)
        for hit in hits:  # the API reads each winner's entry next
            if hit.row is not None:
                self.projector.catalog.remember(hit.id, hit.collection, hit.row)
        return [(hit.id, hit.score) for hit in hits]

    def scope_rows(self, query: str, node_ids: list[str], as_of: int | None) -> ScopeRows:
        vector = self.projector.embedder.embed([query])[0]
        return self.projector.index.scope_rows(vector, node_ids, as_of)

    def react_search(self, query: str, limit: int, as_of: int | None) -> list[tuple[str, float]]:
        vector = self.projector.embedder.embed([query])[0]
        return self.projector.index.search(vector, [REACT], limit, as_of)

    def lag(self) -> int:
        return self.projector.lag()

    def health(self) -> dict[str, Any]:
        return {}
