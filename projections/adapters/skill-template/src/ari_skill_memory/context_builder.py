"""ARI's verified context for the paper stage; ranking and grounding live in the ledger's backend."""
from __future__ import annotations

from projections.api import MemoryBackend
from projections.api import VerifiedContextView


def build_verified_context(
    backend: MemoryBackend, ancestor_ids: list[str], *, purpose: str = "paper", limit: int | None = None
) -> VerifiedContextView:
    """Claims of the lineage ranked by evidence, limitations and the claims safe to state."""
    return backend.get_verified_context(ancestor_ids, purpose, limit)
