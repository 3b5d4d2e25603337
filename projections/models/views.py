"""Read-model records turned into the dicts ARI's callers receive (``shapes``)."""

from __future__ import annotations

from typing import cast

from projections.models.catalog import Entry, Step
from projections.models.shapes import EntryView, FindingView, ResearchEntryView, StepView


def entry_view(entry: Entry) -> EntryView:
    """ARI's entry (``entry_id``, ``text``, ``metadata``, ``ts`` float seconds) plus this
    library's ``node_id``, ``kind``, ``seq`` and, when there are any, ``findings``."""
    out: EntryView = {
        "entry_id": entry.entry_id,
        "node_id": entry.node_id,
        "text": entry.text,
        "metadata": entry.metadata,
        "ts": entry.ts,
        "kind": entry.kind,
        "seq": entry.seq,
    }
    if entry.findings:
        out["findings"] = cast(list[FindingView], entry.findings)
    return out


def step_view(step: Step) -> StepView:
    """ARI's ReAct step (``id``, ``content``, ``metadata``, ``ts``) plus ``seq``."""
    return {
        "id": step.step_id,
        "content": step.content,
        "metadata": step.metadata,
        "ts": step.ts,
        "entry_id": step.step_id,
        "node_id": step.node_id,
        "seq": step.seq,
    }


def research_view(entry: Entry) -> ResearchEntryView:
    """A typed entry: ARI's search-result keys plus its kind and pointers (read from metadata)."""
    md = entry.metadata
    out: ResearchEntryView = {
        "entry_id": entry.entry_id,
        "node_id": entry.node_id,
        "kind": entry.kind or entry.label,
        "text": entry.text,
        "metadata": md,
        "metric_ptr": md.get("metric_ptr"),
        "confidence": md.get("confidence"),
        "node_report_ref": md.get("node_report_ref"),
        "artifact_refs": md.get("artifact_refs") or [],
        "ts": entry.ts,
        "seq": entry.seq,
    }
    if entry.findings:
        out["findings"] = cast(list[FindingView], entry.findings)
    return out
