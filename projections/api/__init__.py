"""ARI's ``MemoryBackend`` and what it returns: the read side's one door.

What lives here: the facade (:class:`MemoryBackend`, one per checkpoint, ARI's ``get_backend``,
and ``write_verified_context`` for the paper stage), the shapes of what its calls return (plain dicts at run time, ``TypedDict``s
for a reader), and the finishing of a checkpoint's interrupted operations that the person-run
tools share with the facade's open. The services behind the facade (``session``, ``nodes``,
``research``, ``verified``, ``audit``, …) are its own: import-linter's contract "The facade has
one door" fails CI when a module outside ``projections.api`` imports one of them. The rules
those services apply (what a claim must match, what makes it usable, the value grammar) are
:mod:`projections.evidence`'s, a room below, which the tools use directly.
"""

from __future__ import annotations

from projections.api.backend import MemoryBackend, clear_backend_cache, get_backend, write_verified_context
from projections.api.unfinished import (
    accept_rollback,
    finish_redaction,
    finish_repair,
    refuse_unfinished,
    scrub_derived,
)
from projections.models.shapes import (
    AddResult,
    AuditResult,
    AuditRow,
    AuditStatus,
    ByNode,
    Claim,
    ClaimExclusion,
    ClearResult,
    ConsolidationResult,
    EntryView,
    Evidence,
    FindingView,
    Health,
    ImportResult,
    NodeMemory,
    PurgeResult,
    ReactAdded,
    ResearchEntryView,
    ResearchHit,
    ResearchResult,
    SearchHit,
    SearchResult,
    SeedResult,
    StartResult,
    StepView,
    ValueRow,
    ValuesVerdict,
    ValuesView,
    VerifiedContextView,
    WorkingContext,
    Written,
)

__all__ = [
    "AddResult",
    "AuditResult",
    "AuditRow",
    "AuditStatus",
    "ByNode",
    "Claim",
    "ClaimExclusion",
    "ClearResult",
    "ConsolidationResult",
    "EntryView",
    "Evidence",
    "FindingView",
    "Health",
    "ImportResult",
    "MemoryBackend",
    "NodeMemory",
    "PurgeResult",
    "ReactAdded",
    "ResearchEntryView",
    "ResearchHit",
    "ResearchResult",
    "SearchHit",
    "SearchResult",
    "SeedResult",
    "StartResult",
    "StepView",
    "ValueRow",
    "ValuesVerdict",
    "ValuesView",
    "VerifiedContextView",
    "WorkingContext",
    "Written",
    "accept_rollback",
    "clear_backend_cache",
    "finish_redaction",
    "finish_repair",
    "get_backend",
    "refuse_unfinished",
    "scrub_derived",
    "write_verified_context",
]
