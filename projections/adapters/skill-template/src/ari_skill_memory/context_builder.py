"""ARI's verified context for the paper stage; ranking and grounding live in the ledger's backend."""
from __future__ import annotations

from typing import Any

from projections.api.backend import MemoryBackend


def build_verified_context(
    backend: MemoryBackend, ancestor_ids: list[str], *, purpose: str = "paper", limit: int | None = None
) -> dict[str, Any]:
    """Claims of the lineage ranked by evidence, limitations and the claims safe to state."""
    return backend.get_verified_context(ancestor_ids, purpose, limit)
