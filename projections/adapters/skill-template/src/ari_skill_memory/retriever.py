"""ARI's typed retrieval; scope, ranking and the re-run fold live in the ledger's backend."""
from __future__ import annotations

from typing import Any

from projections.api import MemoryBackend
from projections.api import ResearchEntryView, ResearchResult


def search_research_memory(
    backend: MemoryBackend,
    query: str,
    ancestor_ids: list[str],
    *,
    kinds: list[str] | None = None,
    require_artifacts: bool = False,
    limit: int = 5,
) -> ResearchResult:
    """Typed entries of exactly these ancestors, ranked by similarity, filtered by kind and artifacts."""
    return backend.search_research_memory(query, ancestor_ids, kinds=kinds, require_artifacts=require_artifacts, limit=limit)


def ancestor_typed_memory(backend: MemoryBackend, ancestor_ids: list[str], *, kinds: list[str] | None = None) -> list[ResearchEntryView]:
    """Every typed entry of these ancestors (no search), in lineage order."""
    return backend.ancestor_typed_memory(ancestor_ids, kinds=kinds)


def fold_reproducibility(backend: MemoryBackend, ancestor_ids: list[str]) -> dict[str, dict[str, Any]]:
    """The latest re-run status per target memory in these ancestors."""
    return backend.fold_reproducibility(ancestor_ids)
