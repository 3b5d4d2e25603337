"""Which entries state a result, and what each claim says of itself: the forms ARI writes
(typed ``experiment_result``/``paper_claim`` entries, a ``metric_ptr``, the ``RESULT SUMMARY``
note its loop writes per node), whether a claim cites artifacts (ARI's *grounded*), and whose
node report it cites."""

from __future__ import annotations

from collections.abc import Mapping

from projections.models.catalog import Entry

CLAIM_KINDS = ("experiment_result", "paper_claim")


def is_result_summary(entry: Entry) -> bool:
    """ARI writes a node's result summary as free text tagged in metadata, or prefixed."""
    meta = entry.metadata
    return "result_summary" in (meta.get("kind"), meta.get("type")) or entry.text.startswith("RESULT SUMMARY")


def is_claim(entry: Entry) -> bool:
    """What states a result: typed results and claims, anything with a metric_ptr, and the
    ``RESULT SUMMARY`` note ARI's loop writes per node."""
    return entry.label in CLAIM_KINDS or bool(entry.metadata.get("metric_ptr")) or is_result_summary(entry)


def is_grounded(entry: Entry) -> bool:
    """ARI's rule: the claim cites artifacts."""
    return bool(entry.metadata.get("artifact_refs"))


def borrowed_report(entry: Entry) -> str | None:
    """The node whose report the entry cites when that is not the entry's own node, else None."""
    ref = entry.metadata.get("node_report_ref")
    cited = ref.get("node_id") if isinstance(ref, Mapping) else None
    if cited is None or cited == "" or cited == entry.node_id:
        return None
    return str(cited)
