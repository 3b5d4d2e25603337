"""Verifiable research memory: typed, artifact-grounded writes, consolidation, typed reads.

Memory is an index, not evidence: a typed entry carries searchable text, a pointer to the
``node_report.json`` it came from and sha256-pinned artifact refs — never copies of the
report's fields. Typed entries are stored as ARI's writer stores them (``ledger.typed``), so
the writers take ARI's helper arguments (``metric_ptr`` as ``{name, value}``, refs as dicts or
ARI's ``ArtifactRef``) and ARI's own helpers work on this backend too.
"""

from __future__ import annotations

import os
from collections.abc import Iterable, Mapping
from pathlib import Path
from typing import Any, NamedTuple

from ledger import CopyOnWriteViolation, InvalidInput
from ledger.ari.consolidation import Consolidation, plan, spec_dict
from ledger.ari.report_file import read_report_file
from ledger.errors import kind_of
from ledger.events import Event, MemoryAdded, check_text
from ledger.ledger import Batch
from ledger.typed import typed_metadata
from ledger.vocabulary import KINDS, REPRO_STATUSES
from projections import settings
from projections.access.log import ReadTool
from projections.api import checks
from projections.api.context import ExperimentContext
from projections.api.nodes import Nodes
from projections.api.session import Session
from projections.evidence.repro import repro_status
from projections.models.catalog import Catalog, Entry
from projections.models.shapes import AddResult, ConsolidationResult, ResearchEntryView, ResearchResult, Written
from projections.models.views import research_view


def _metric_ptr(ptr: object) -> object:
    """ARI's ``{name, value}``; this library's older ``"metrics.<name>"`` string is converted."""
    if isinstance(ptr, str):
        return {"name": ptr.removeprefix("metrics.")}
    return ptr


class Pointers(NamedTuple):
    """What a typed entry points at, as ARI's writers take it (each becomes a metadata key)."""

    metric_ptr: object = None
    artifact_refs: Iterable[Any] | None = None
    node_report_ref: object = None
    extra: Mapping[str, Any] | None = None


class Research:
    """Typed writers, consolidation and typed reads, over the node-scope service."""

    def __init__(self, session: Session, nodes: Nodes, context: ExperimentContext) -> None:
        self.session, self.nodes, self.context = session, nodes, context
        self._labels: tuple[int, set[str]] | None = None  # every entry's label, at a catalog change count

    # -- typed writers -----------------------------------------------------------------

    def typed(
        self,
        node_id: str,
        kind: str,
        text: str,
        pointers: Pointers,
        *,
        findings: list[dict[str, str]] | None = None,
        tool: str = "add_typed_memory",
        current_node: str | None = None,
    ) -> AddResult:
        """One typed entry, stamped as ARI's writer stamps it; an unknown kind is refused
        (a ValueError, as ARI's writer raises), anything else stored and flagged."""
        metric_ptr, artifact_refs, node_report_ref, extra = pointers
        if kind not in KINDS:
            raise InvalidInput("kind", f"unknown kind {kind!r}; expected one of {', '.join(KINDS)}")
        if artifact_refs is not None and (
            isinstance(artifact_refs, (str, bytes, Mapping)) or not isinstance(artifact_refs, (list, tuple))
        ):
            raise InvalidInput("artifact_refs", "expected a list of artifact refs")
        metadata = typed_metadata(
            kind,
            metric_ptr=_metric_ptr(metric_ptr),
            artifact_refs=artifact_refs,
            node_report_ref=node_report_ref,
            extra=extra,
        )
        body: dict[str, Any] = {"text": text, "metadata": metadata}
        if findings:
            body["findings"] = findings
        return self.nodes.add(node_id, body, tool, current_node)

    def reproducibility(
        self,
        node_id: str,
        target_memory_id: str,
        status: str,
        artifact_refs: list[Any] | None,
        text: str | None,
        current_node: str | None,
    ) -> AddResult:
        """A status change about another entry (never edits it). An unknown status is refused
        (ARI's ValueError); a target this node cannot see is recorded as a finding."""
        if status not in REPRO_STATUSES:
            raise InvalidInput("status", f"unknown status {status!r}; expected one of {', '.join(REPRO_STATUSES)}")
        if not isinstance(target_memory_id, str) or not target_memory_id:
            raise InvalidInput("target_memory_id", "must be the id of a memory entry")
        with self.session.reading() as catalog:
            target = catalog.get(target_memory_id)
            findings = []
            if target is None:
                findings.append(
                    {
                        "field": "target_memory_id",
                        "reason": f"no visible memory {target_memory_id!r} in this checkpoint",
                    }
                )
            elif node_id in catalog.nodes and target.node_id not in catalog.lineage(node_id):
                findings.append(
                    {
                        "field": "target_memory_id",
                        "reason": f"{target_memory_id!r} belongs to {target.node_id!r}, outside the lineage of {node_id!r}",
                    }
                )
            return self.typed(
                node_id,
                "reproducibility_event",
                text if text is not None else f"reproducibility: {target_memory_id} -> {status}",
                Pointers(
                    artifact_refs=artifact_refs, extra={"repro_target_id": target_memory_id, "repro_status": status}
                ),
                findings=findings,
                tool="add_reproducibility_event",
                current_node=current_node,
            )

    # -- consolidation at node end ---------------------------------------------------------

    def consolidate(
        self,
        node_id: str,
        node_report: Mapping[str, Any] | str | Path,
        work_dir: str | Path,
        run_id: str | None,
        current_node: str | None,
    ) -> ConsolidationResult:
        """node_report → experiment_result / failure_case (+ reflection), once per report.

        The report may be a dict (as ARI sends it) or the path of a regular file inside
        ``work_dir``. When it gives the node's parent and ancestors, the node's place in the
        tree is recorded in the same group commit.
        """
        if not settings.consolidation_enabled():
            return {"ok": True, "written": [], "skipped": "ARI_MEMORY_CONSOLIDATE is off"}
        work = Path(work_dir)
        report = _report(node_report, work)
        if report.get("node_id") not in (None, "", node_id):
            raise InvalidInput("node_report.node_id", f"is {report.get('node_id')!r}, but consolidating {node_id!r}")
        report = {**report, "node_id": node_id}
        with self.session.reading() as catalog:  # a report consolidated before needs no lock
            consolidation = plan(report, work, run_id, self.context.get().get("primary_metric"))
            done = _already(catalog, node_id, consolidation.report_hash)
        if not done:
            try:
                with self.session.deciding() as (catalog, batch):  # decided again under the log's lock
                    done = _already(catalog, node_id, consolidation.report_hash)
                    events = [] if done else self._consolidated(batch, catalog, node_id, consolidation, current_node)
            except CopyOnWriteViolation as exc:
                none = [{"kind": s.kind, "ok": False, "id": None} for s in consolidation.specs]
                return self.session.refused("consolidate_node_memory", exc, current_node, written=none)
        if done:
            return {"ok": True, "written": [], "already": done}
        for event in events:
            stored = event.body_as(MemoryAdded)
            self.session.access.write(
                "node_scope",
                event.id,
                stored.text,
                stored.metadata,
                tool="consolidate_node_memory",
                node=current_node,
                seq=event.seq,
            )
        written: list[Written] = [{"kind": s.kind, "ok": True, "id": e.id} for s, e in zip(consolidation.specs, events)]
        result: ConsolidationResult = {"ok": True, "written": written}
        if consolidation.findings:
            result["findings"] = [{"field": f.field, "reason": f.reason} for f in consolidation.findings]
        return result

    @staticmethod
    def _consolidated(
        batch: Batch, catalog: Catalog, node_id: str, consolidation: Consolidation, current_node: str | None
    ) -> list[Event]:
        """Queue a report's entries (and the node's place in the tree, when new) in ``batch``."""
        if consolidation.lineage is not None and node_id not in catalog.nodes:
            batch.append(node_id, "node_started", consolidation.lineage, current_node=current_node)
        return [
            batch.append(
                node_id,
                "memory_added",
                {
                    "text": s.text,
                    "metadata": s.metadata,
                    "report_hash": consolidation.report_hash,
                    "findings": [{"field": f.field, "reason": f.reason} for f in s.findings],
                },
                current_node=current_node,
            )
            for s in consolidation.specs
        ]

    def plan(self, node_report: Mapping[str, Any], work_dir: str | Path, run_id: str | None) -> list[dict[str, Any]]:
        """ARI's pure planner: the specs a report consolidates to, in ARI's shape (no writes)."""
        consolidation = plan(node_report, Path(work_dir), run_id, self.context.get().get("primary_metric"))
        return [spec_dict(s) for s in consolidation.specs]

    # -- typed reads -----------------------------------------------------------------

    def check_kinds(self, kinds: Iterable[str] | None, field: str = "kinds") -> None:
        """Each kind one of ARI's kinds or a label some entry of the checkpoint has (ARI's labels
        are free text, ``result_summary``); anything else names nothing, and a surface a person
        or an agent types into refuses it rather than answer with nothing. ARI's own call keeps
        ARI's answer (none matched: no result)."""
        wanted = checks.labels(kinds)
        unknown = sorted(k for k in wanted or () if k not in KINDS)
        if not unknown:
            return
        with self.session.reading() as catalog:
            if self._labels is None or self._labels[0] != catalog.changes:  # kept until the next fold
                self._labels = (catalog.changes, {e.label for e in catalog.entries.values() if e.label})
            labels = self._labels[1]
        for kind in unknown:
            if kind not in labels:
                raise InvalidInput(
                    field,
                    f"unknown kind {kind!r}: not one of {', '.join(KINDS)}, and no entry of this checkpoint has it",
                )

    def search(
        self,
        query: str,
        ancestor_ids: list[str],
        kinds: Iterable[str] | None,
        require_artifacts: bool,
        limit: int,
        as_of: int | None,
    ) -> ResearchResult:
        """Exact-scope semantic search filtered by kind (ARI's ``mem_kind``/``type`` label, so
        ``result_summary`` works too) and artifact presence. The whole scope is ranked before
        filtering, so ``limit`` results come back even when other kinds rank higher."""
        check_text(query, "query")
        wanted = checks.labels(kinds)
        scope, limit = checks.node_ids(ancestor_ids), checks.limit(limit)
        with self.session.reading() as catalog:

            def keep(entry: Entry) -> bool:
                return (wanted is None or entry.label in wanted) and (
                    not require_artifacts or bool(entry.metadata.get("artifact_refs"))
                )

            in_scope = catalog.scope_entries(scope, as_of)
            allowed = {e.entry_id for e in in_scope if keep(e)}
            hits = self.session.engine.search(query, scope, len(in_scope), as_of) if allowed and limit else []
            results = [
                {**research_view(catalog.entries[eid]), "score": score} for eid, score in hits if eid in allowed
            ][:limit]
            stamp = self.session.read_stamp(as_of)
        args = {"kinds": None if wanted is None else sorted(wanted), "require_artifacts": require_artifacts}
        self.session.access.node_search(
            query, scope, limit, results, tool=ReadTool.SEARCH_RESEARCH_MEMORY, as_of=as_of, **stamp, args=args
        )
        return {"results": results}  # type: ignore[typeddict-item]

    def ancestors(
        self, ancestor_ids: list[str], kinds: Iterable[str] | None, as_of: int | None
    ) -> list[ResearchEntryView]:
        """Every entry of these ancestors (root→parent order, then log order) of the given
        kinds: the deterministic, full hand-off ARI's retriever gives (no search)."""
        wanted = checks.labels(kinds)
        scope = checks.node_ids(ancestor_ids)
        with self.session.reading() as catalog:
            return [
                research_view(e)
                for nid in dict.fromkeys(scope)
                for e in catalog.node_entries(nid, as_of)
                if wanted is None or e.label in wanted
            ]

    def reproducibility_status(self, ancestor_ids: list[str], as_of: int | None) -> dict[str, dict[str, Any]]:
        """The latest status per target memory among these nodes' reproducibility events (by seq)."""
        scope = checks.node_ids(ancestor_ids)
        with self.session.reading() as catalog:
            entries = catalog.scope_entries(scope, as_of)
        return {target: {"status": status} for target, status in repro_status(entries).items()}


def _already(catalog: Catalog, node_id: str, report_hash: str) -> list[dict[str, str | None]]:
    """The node's entries a report with this hash already consolidated to (ARI's "already")."""
    return [
        {"kind": e.kind, "id": e.entry_id}
        for e in catalog.node_entries(node_id)
        if e.body.get("report_hash") == report_hash
    ]


def _report(node_report: object, work: Path) -> Mapping[str, Any]:
    """The report as ARI sends it (a dict), or read safely from a file inside the work dir."""
    if not isinstance(node_report, (Mapping, str, os.PathLike)):
        raise InvalidInput(
            "node_report", f"expected a report object or the path of node_report.json, got {kind_of(node_report)}"
        )
    report = node_report if isinstance(node_report, Mapping) else read_report_file(Path(node_report), inside=work)
    if not isinstance(report, Mapping):
        raise InvalidInput("node_report", f"expected a JSON object, got {kind_of(report)}")
    return report
