"""Consolidation at node end: a node report → the typed entries it grounds (no writes here).

The kinds are decided as ARI decides them (``ari_skill_memory.consolidation``): a report whose
``status`` is a success spelling (``success``/``succeeded``/``ok``, any case) and that has
metrics gives an ``experiment_result``; any other non-empty status a ``failure_case``; a
success without metrics nothing; ``next_steps_hints`` a ``reflection`` of confidence 0.4. Texts
and ``metric_ptr`` (``{name, value}``) follow ARI too, except that the experiment's own primary
metric wins when the report has it.

What this library knows more goes into findings on the entries, never into a refusal: the
report fails ARI's schema, an artifact path leaves the work dir, a success whose own
self-assessment says it failed. ARI's builder output and its fallback stubs both consolidate.
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import msgspec

from ..errors import InvalidInput
from ..events import check_node_id
from ..typed import typed_metadata
from ..vocabulary import NODE_LABELS, Finding
from .provenance import artifact_refs
from .report_file import report_hash

SUCCESS = frozenset({"success", "succeeded", "ok"})
METRIC_HINTS = ("gflop", "gb_per_s", "gb/s", "throughput", "speedup", "score")  # ARI's headline hints
TEXT_CHARS = 600  # ARI's cut
FAILURE_TEXT_CHARS = 1500  # a failure keeps its concerns: they become the paper's limitations
REFLECTION_CONFIDENCE = 0.4


@dataclass
class Spec:
    """One typed entry to write: ARI's kind, text and metadata, plus this library's findings."""

    kind: str
    text: str
    metadata: dict[str, Any]
    findings: list[Finding] = field(default_factory=list)


@dataclass
class Consolidation:
    """What one report consolidates to, and the node's place in the tree when it says so."""

    report_hash: str
    specs: list[Spec]
    lineage: dict[str, Any] | None  # a node_started body, learned from the report
    findings: list[Finding]


def plan(
    report: Mapping[str, Any], work_dir: Path, run_id: str | None = None, primary_metric: str | None = None
) -> Consolidation:
    """The typed entries ``report`` grounds, with provenance refs hashed in ``work_dir``."""
    node_id = report.get("node_id")
    if not isinstance(node_id, str) or not node_id:
        raise InvalidInput("node_report.node_id", "missing: the report does not say which node it is about")
    from .node_report import report_findings  # pydantic's models load with the first report, not with every client

    findings = report_findings(report)
    provenance = artifact_refs(report, work_dir)
    findings.extend(provenance.findings)
    ref = {"run_id": run_id or Path(work_dir).resolve().parent.name, "node_id": node_id}
    status = str(report.get("status") or "").strip().lower()
    metrics = _mapping(report.get("metrics"))
    assessment = _mapping(report.get("self_assessment"))
    text = summary_text(report)
    specs: list[Spec] = []
    if status in SUCCESS and metrics:
        result_findings = list(findings)
        if assessment.get("succeeded") is False:
            result_findings.append(
                Finding("node_report.self_assessment.succeeded", "false: the node judged its own result unsuccessful")
            )
        metadata = typed_metadata(
            "experiment_result",
            metric_ptr=headline_metric(metrics, primary_metric),
            artifact_refs=provenance.refs,
            node_report_ref=ref,
        )
        specs.append(Spec("experiment_result", text[:TEXT_CHARS], metadata, result_findings))
    elif status and status not in SUCCESS:
        concerns = "; ".join(str(c) for c in assessment.get("concerns") or [] if c)
        failure = text or f"node {node_id} failed ({status})"
        failure = f"{failure[:TEXT_CHARS]} Concerns: {concerns}" if concerns else failure[:TEXT_CHARS]
        metadata = typed_metadata("failure_case", artifact_refs=provenance.refs, node_report_ref=ref)
        specs.append(Spec("failure_case", failure[:FAILURE_TEXT_CHARS], metadata, list(findings)))
    hints = report.get("next_steps_hints") or []
    if isinstance(hints, list) and hints:
        metadata = typed_metadata("reflection", node_report_ref=ref, extra={"confidence": REFLECTION_CONFIDENCE})
        specs.append(Spec("reflection", "; ".join(str(h) for h in hints)[:TEXT_CHARS], metadata, list(findings)))
    return Consolidation(report_hash(report), specs, lineage_of(report), findings)


def summary_text(report: Mapping[str, Any]) -> str:
    """ARI's summary: the self-assessment headline, else what was done, else the delta."""
    assessment = _mapping(report.get("self_assessment"))
    for value in (assessment.get("headline"), report.get("what_was_done"), report.get("delta_vs_parent")):
        if isinstance(value, str) and value.strip():
            return value.strip()
    return f"node {report.get('node_id', '')} report"


def headline_metric(metrics: Mapping[str, Any], primary: str | None = None) -> dict[str, Any] | None:
    """``{name, value}`` of the metric a result is about: the experiment's primary metric when
    the report has it, else ARI's choice (the largest value of the first hint that matches —
    GFlop/s over a row count — else the first number)."""
    numeric = {k: float(v) for k, v in metrics.items() if _number(v)}
    if primary in numeric:
        return {"name": primary, "value": numeric[primary]}
    for pool in ({k: v for k, v in numeric.items() if not k.startswith("_")}, numeric):
        for hint in METRIC_HINTS:
            matches = {k: v for k, v in pool.items() if hint in k.lower()}
            if matches:
                name = max(matches, key=matches.__getitem__)
                return {"name": name, "value": matches[name]}
        if pool:
            name = next(iter(pool))
            return {"name": name, "value": pool[name]}
    return None


def lineage_of(report: Mapping[str, Any]) -> dict[str, Any] | None:
    """A ``node_started`` body from the report's tree position, when it is consistent."""
    parent, ancestors = report.get("parent_id"), report.get("ancestor_ids")
    if not isinstance(ancestors, list) or (parent is None and ancestors):
        return None
    try:
        for i, aid in enumerate(ancestors):
            check_node_id(aid, f"ancestor_ids[{i}]")
    except InvalidInput:
        return None
    if (
        (ancestors and ancestors[-1] != parent)
        or len(set(ancestors)) != len(ancestors)
        or report.get("node_id") in ancestors
    ):
        return None
    label = report.get("label") if report.get("label") in NODE_LABELS else "other"
    return {"parent_id": parent, "ancestor_ids": list(ancestors), "label": label, "depth": len(ancestors)}


def spec_dict(spec: Spec) -> dict[str, Any]:
    """ARI's spec shape (``kind``, ``text``, ``metric_ptr``, ``artifact_refs``, ``node_report_ref``)."""
    md = spec.metadata
    out = {
        "kind": spec.kind,
        "text": spec.text,
        "artifact_refs": md.get("artifact_refs", []),
        "node_report_ref": md.get("node_report_ref"),
    }
    if "metric_ptr" in md and spec.kind == "experiment_result":
        out["metric_ptr"] = md["metric_ptr"]
    if "confidence" in md:
        out["_confidence"] = md["confidence"]
    if spec.findings:
        out["findings"] = [msgspec.structs.asdict(f) for f in spec.findings]
    return out


def _number(value: object) -> bool:
    return isinstance(value, (int, float)) and not isinstance(value, bool) and math.isfinite(value)


def _mapping(value: object) -> Mapping[str, Any]:
    return value if isinstance(value, Mapping) else {}
