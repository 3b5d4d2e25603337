"""What ARI's callers receive, as types: the return shapes of ARI's ``MemoryBackend``.

Each shape is ARI's (``ari_skill_memory.backends.in_memory`` / ``letta_backend`` and the
skill's server); keys this library adds are marked "added". ``total=False`` shapes leave out
keys a call does not always return. These are plain dicts at run time: typing the face does
not change a byte of what ARI receives.
"""

from __future__ import annotations

from typing import Any, Literal, Required, TypedDict

# the verdicts' words, defined below the API; here too, beside the shapes that carry them
from projections.models.verdicts import AuditStatus as AuditStatus
from projections.models.verdicts import Evidence as Evidence
from projections.models.verdicts import ValuesVerdict as ValuesVerdict


class FindingView(TypedDict):
    """Added: something stored although this library knows it is wrong."""

    field: str
    reason: str


class AddResult(TypedDict, total=False):
    """``add_memory`` and the typed writers: ``{"ok": true, "id"}``, or ARI's CoW refusal
    ``{"ok": false, "error"}``."""

    ok: Required[bool]
    id: str
    seq: int  # added
    findings: list[FindingView]  # added
    error: str


class EntryView(TypedDict, total=False):
    """A node-scope entry: ARI's ``entry_id``, ``text``, ``metadata``, ``ts`` (float seconds)."""

    entry_id: Required[str]
    text: Required[str]
    metadata: Required[dict[str, Any]]
    ts: Required[float]
    node_id: str  # added (ARI's search results have it)
    kind: str | None  # added
    seq: int  # added
    findings: list[FindingView]  # added


class SearchHit(EntryView, total=False):
    score: Required[float]  # in [0, 1]


class SearchResult(TypedDict):
    results: list[SearchHit]


class NodeMemory(TypedDict):
    entries: list[EntryView]


class ByNode(TypedDict):
    by_node: dict[str, list[EntryView]]


class ClearResult(TypedDict, total=False):
    removed: Required[int]
    error: str  # ARI's CoW refusal: ``{"removed": 0, "error"}``


class StepView(TypedDict, total=False):
    """A ReAct step: ARI's ``id``, ``content``, ``metadata``, ``ts``."""

    id: Required[str]
    content: Required[str]
    metadata: Required[dict[str, Any]]
    ts: Required[float]
    entry_id: str  # added
    node_id: str  # added
    seq: int  # added
    score: float  # react_search only


class ReactAdded(TypedDict):
    """Added: ARI's ``react_add`` returns nothing."""

    ok: bool
    id: str
    seq: int


class SeedResult(TypedDict):
    ok: bool
    seeded_at: float
    id: str  # added
    seq: int  # added


class PurgeResult(TypedDict):
    removed_node: int
    removed_react: int


class ImportResult(TypedDict):
    imported: int
    kind: str
    skipped: int  # added


class StartResult(TypedDict, total=False):
    """Added (ARI never announces a node)."""

    ok: Required[bool]
    id: str
    seq: int
    error: str


class Health(TypedDict, total=False):
    ok: Required[bool]
    backend: Required[str]  # the engine that answers searches
    latency_ms: Required[float]
    server_version: Required[str]
    namespace: Required[str]
    events: int  # added
    lag: int  # added
    problems: list[str]  # added
    readonly: str | None  # added
    torn_tail: bool  # added
    snapshot_rebuilt: str | None  # added
    letta: dict[str, Any]  # added


class ResearchEntryView(EntryView, total=False):
    """A typed entry with its pointers read from metadata."""

    metric_ptr: Any
    confidence: Any
    node_report_ref: Any
    artifact_refs: list[Any]


class ResearchHit(ResearchEntryView, total=False):
    score: Required[float]


class ResearchResult(TypedDict):
    results: list[ResearchHit]


class ValuesView(TypedDict, total=False):
    """Added: do the numbers a claim states match its node report and cited artifacts?"""

    verdict: Required[ValuesVerdict]
    checked: Required[int]  # numbers that held (metric_ptr and mentions)
    mismatches: list[dict[str, Any]]  # value, reason, looked_in
    why: str  # for unchecked: what there was not
    numbers: list[dict[str, Any]]  # every number: written, text, verdict, why, looked_in (docs/grounding.md)
    unchecked: list[dict[str, Any]]  # value, why: the numbers that could not be checked


class ClaimExclusion(TypedDict):
    """Added: why a claim ARI's rule would offer is kept out of ``usable_for_claims``."""

    code: Literal["borrowed_report", "self_judged_failure", "unchecked_numbers"]
    text: str


class Claim(ResearchEntryView, total=False):
    grounded: Required[bool]  # ARI's rule: cites artifacts
    repro_status: Required[str | None]  # ARI's: the latest event, None without one
    evidence: Evidence  # added
    values: ValuesView  # added
    exclusions: list[ClaimExclusion]  # added, only when there are any
    event_hash: str | None  # added in verified_context.json: the hash of the event that wrote it


class VerifiedContextView(TypedDict, total=False):
    claims: Required[list[Claim]]
    limitations: Required[list[ResearchEntryView]]
    usable_for_claims: Required[list[Claim]]
    purpose: str
    lineage: list[str]
    min_evidence: str | None  # added: how it was built, so prove can rebuild it
    limit: int | None
    keep_mismatches: bool


class Written(TypedDict):
    kind: str
    ok: bool
    id: str | None


class ConsolidationResult(TypedDict, total=False):
    """ARI's ``{"written": [{"kind", "ok", "id"}]}``."""

    written: Required[list[Written]]
    ok: bool  # added
    already: list[dict[str, Any]]  # added: a report consolidated before writes nothing
    findings: list[FindingView]  # added
    skipped: str  # added: the gate is off
    error: str


class AuditRow(TypedDict):
    run_id: str
    node_id: str
    path: str
    role: str
    recorded_sha256: str | None
    current_sha256: str | None
    status: AuditStatus
    memory_ids: list[str]


class ValueRow(ValuesView, total=False):
    """Added: the values verdict of one claim in the audit."""

    entry_id: Required[str]
    node_id: Required[str]
    kind: Required[str | None]


class AuditResult(TypedDict):
    ok: bool  # added
    summary: dict[str, int]
    results: list[AuditRow]
    values: list[ValueRow]  # added
    value_summary: dict[str, int]  # added
    chain: dict[str, Any]  # added


class WorkingContext(TypedDict):
    """Added: what a node is told when it starts."""

    node_id: str
    messages: list[dict[str, str]]
    core: dict[str, Any]
    ancestor_summaries: list[dict[str, Any]]
    supplement: list[dict[str, Any]]
