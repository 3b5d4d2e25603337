"""ARI's typed memory writers; each is one call into the ledger's backend (which guards and validates)."""
from __future__ import annotations

from typing import Any

from projections.api import MemoryBackend
from projections.api import AddResult


def add_typed_memory(
    backend: MemoryBackend,
    node_id: str,
    kind: str,
    text: str,
    *,
    metric_ptr: dict | None = None,
    artifact_refs: list[dict] | None = None,
    node_report_ref: dict | None = None,
    extra: dict | None = None,
) -> AddResult:
    """One typed entry of ``kind`` for ``node_id`` (copy-on-write: the current node only)."""
    return backend.add_typed_memory(node_id, kind, text, metric_ptr=metric_ptr, artifact_refs=artifact_refs, node_report_ref=node_report_ref, extra=extra)


def add_experiment_result(backend: MemoryBackend, node_id: str, text: str, **kw: Any) -> AddResult:
    """A result (``metric_ptr``, ``artifact_refs``, ``node_report_ref``)."""
    return backend.add_experiment_result(node_id, text, **kw)


def add_failure_case(backend: MemoryBackend, node_id: str, text: str, **kw: Any) -> AddResult:
    """A failure (a limitation, never a claim)."""
    return backend.add_failure_case(node_id, text, **kw)


def add_procedure_memory(backend: MemoryBackend, node_id: str, text: str, **kw: Any) -> AddResult:
    """A reusable procedure."""
    return backend.add_procedure_memory(node_id, text, **kw)


def add_reflection(backend: MemoryBackend, node_id: str, text: str, *, confidence: float | None = None, **kw: Any) -> AddResult:
    """A reflection (supplementary, never a claim)."""
    return backend.add_reflection(node_id, text, confidence=confidence, **kw)


def add_reproducibility_event(
    backend: MemoryBackend,
    node_id: str,
    target_memory_id: str,
    status: str,
    *,
    artifact_refs: list[dict] | None = None,
    text: str | None = None,
) -> AddResult:
    """An append-only re-run status for a memory in ``node_id``'s lineage."""
    return backend.add_reproducibility_event(node_id, target_memory_id, status, artifact_refs=artifact_refs, text=text)
