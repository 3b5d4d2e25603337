"""Verifiable research memory: typed, artifact-grounded writes, consolidation, typed search.

Memory is an index, not evidence: a typed entry carries searchable text, a pointer to the
``node_report.json`` it came from and sha256-pinned artifact refs — never copies of the
report's fields. Typed entries are stored as ARI's writer stores them (``ledger.typed``), so
these methods accept ARI's helper arguments (``metric_ptr`` as ``{name, value}``, refs as
dicts or ARI's ``ArtifactRef``) and ARI's own helpers work on this backend too. They are
mixed into :class:`~projections.api.backend.MemoryBackend`.
"""
from __future__ import annotations

import os
from collections.abc import Iterable, Mapping
from pathlib import Path
from typing import Any

from ledger import CopyOnWriteViolation, InvalidInput, config
from ledger.consolidation import plan, spec_dict
from ledger.events import KINDS, REPRO_STATUSES, check_text
from ledger.node_report import read_report_file
from ledger.typed import typed_metadata

from projections.models.catalog import Entry
from projections.models.repro import repro_status


def _metric_ptr(ptr: object) -> object:
    """ARI's ``{name, value}``; this library's older ``"metrics.<name>"`` string is converted."""
    if isinstance(ptr, str):
        return {"name": ptr.removeprefix("metrics.")}
    return ptr


class ResearchMemory:
    """Typed writers, consolidation and typed search (mixed into MemoryBackend)."""

    # -- typed writers -----------------------------------------------------------------

    def add_typed_memory(
        self,
        node_id: str,
        kind: str,
        text: str,
        *,
        metric_ptr: object = None,
        artifact_refs: list | tuple | None = None,
        node_report_ref: object = None,
        extra: Mapping[str, Any] | None = None,
        findings: list[dict[str, str]] | None = None,
        tool: str = "add_typed_memory",
        current_node: str | None = None,
    ) -> dict:
        """One typed entry, stamped as ARI's writer stamps it; an unknown kind is refused
        (a ValueError, as ARI's writer raises), anything else stored and flagged."""
        if kind not in KINDS:
            raise InvalidInput("kind", f"unknown kind {kind!r}; expected one of {', '.join(KINDS)}")
        if artifact_refs is not None and (isinstance(artifact_refs, (str, bytes, Mapping)) or not isinstance(artifact_refs, (list, tuple))):
            raise InvalidInput("artifact_refs", "expected a list of artifact refs")
        metadata = typed_metadata(kind, metric_ptr=_metric_ptr(metric_ptr), artifact_refs=artifact_refs,
                                  node_report_ref=node_report_ref, extra=extra)
        body: dict[str, Any] = {"text": text, "metadata": metadata}
        if findings:
            body["findings"] = findings
        return self._add_entry(node_id, body, tool, current_node)

    def add_experiment_result(
        self, node_id: str, text: str, metric_ptr: object = None, artifact_refs: list | None = None,
        node_report_ref: object = None, *, extra: Mapping[str, Any] | None = None, current_node: str | None = None,
    ) -> dict:
        return self.add_typed_memory(node_id, "experiment_result", text, metric_ptr=metric_ptr, artifact_refs=artifact_refs,
                                     node_report_ref=node_report_ref, extra=extra, tool="add_experiment_result", current_node=current_node)

    def add_failure_case(
        self, node_id: str, text: str, artifact_refs: list | None = None, node_report_ref: object = None,
        *, metric_ptr: object = None, extra: Mapping[str, Any] | None = None, current_node: str | None = None,
    ) -> dict:
        return self.add_typed_memory(node_id, "failure_case", text, metric_ptr=metric_ptr, artifact_refs=artifact_refs,
                                     node_report_ref=node_report_ref, extra=extra, tool="add_failure_case", current_node=current_node)

    def add_procedure_memory(
        self, node_id: str, text: str, artifact_refs: list | None = None, node_report_ref: object = None,
        *, metric_ptr: object = None, extra: Mapping[str, Any] | None = None, current_node: str | None = None,
    ) -> dict:
        return self.add_typed_memory(node_id, "procedure", text, metric_ptr=metric_ptr, artifact_refs=artifact_refs,
                                     node_report_ref=node_report_ref, extra=extra, tool="add_procedure_memory", current_node=current_node)

    def add_reflection(
        self, node_id: str, text: str, confidence: float | None = None, node_report_ref: object = None,
        *, artifact_refs: list | None = None, metric_ptr: object = None, extra: Mapping[str, Any] | None = None,
        current_node: str | None = None,
    ) -> dict:
        """A reflection (never a claim); ``confidence`` goes into metadata as ARI's writer puts it."""
        extra = {**(extra or {}), **({"confidence": confidence} if confidence is not None else {})}
        return self.add_typed_memory(node_id, "reflection", text, metric_ptr=metric_ptr, artifact_refs=artifact_refs,
                                     node_report_ref=node_report_ref, extra=extra, tool="add_reflection", current_node=current_node)

    def add_reproducibility_event(
        self,
        node_id: str,
        target_memory_id: str,
        status: str,
        artifact_refs: list | None = None,
        text: str | None = None,
        *,
        current_node: str | None = None,
    ) -> dict:
        """Append a status change about another entry (never edits it). An unknown status is
        refused (ARI's ValueError); a target this node cannot see is recorded as a finding."""
        if status not in REPRO_STATUSES:
            raise InvalidInput("status", f"unknown status {status!r}; expected one of {', '.join(REPRO_STATUSES)}")
        if not isinstance(target_memory_id, str) or not target_memory_id:
            raise InvalidInput("target_memory_id", "must be the id of a memory entry")
        with self._lock:
            self._read()
            catalog = self.projector.catalog
            target = catalog.get(target_memory_id)
            findings = []
            if target is None:
                findings.append({"field": "target_memory_id", "reason": f"no visible memory {target_memory_id!r} in this checkpoint"})
            elif node_id in catalog.nodes and target.node_id not in catalog.lineage(node_id):
                findings.append({"field": "target_memory_id",
                                 "reason": f"{target_memory_id!r} belongs to {target.node_id!r}, outside the lineage of {node_id!r}"})
            return self.add_typed_memory(
                node_id, "reproducibility_event", text if text is not None else f"reproducibility: {target_memory_id} -> {status}",
                artifact_refs=artifact_refs, extra={"repro_target_id": target_memory_id, "repro_status": status},
                findings=findings, tool="add_reproducibility_event", current_node=current_node,
            )

    # -- consolidation at node end ---------------------------------------------------------

    def consolidate_node_memory(
        self,
        node_id: str,
        node_report: Mapping | str | Path,
        work_dir: str | Path,
        run_id: str | None = None,
        *,
        current_node: str | None = None,
    ) -> dict:
        """node_report → experiment_result / failure_case (+ reflection), once per report.

        Returns ARI's ``{"written": [{"kind", "ok", "id"}]}``; a report already consolidated
        writes nothing (``"already"`` lists its entries). The report may be a dict (as ARI
        sends it) or the path of a regular file inside ``work_dir``. When the report gives
        the node's parent and ancestors, the node's place in the tree is recorded too.
        """
        if not config.consolidation_enabled():
            return {"ok": True, "written": [], "skipped": "ARI_MEMORY_CONSOLIDATE is off"}
        work = Path(work_dir)
        if not isinstance(node_report, (Mapping, str, os.PathLike)):
            raise InvalidInput("node_report", f"expected a report object or the path of node_report.json, got {type(node_report).__name__}")
        report = node_report if isinstance(node_report, Mapping) else read_report_file(Path(node_report), inside=work)
        if not isinstance(report, Mapping):
            raise InvalidInput("node_report", f"expected a JSON object, got {type(report).__name__}")
        if report.get("node_id") not in (None, "", node_id):
            raise InvalidInput("node_report.node_id", f"is {report.get('node_id')!r}, but consolidating {node_id!r}")
        report = {**report, "node_id": node_id}
        with self._lock:
            self._read()
            consolidation = plan(report, work, run_id, self.get_experiment_context().get("primary_metric"))
            catalog = self.projector.catalog
            done = [e for e in catalog.node_entries(node_id) if e.body.get("report_hash") == consolidation.report_hash]
            if done:
                return {"ok": True, "written": [], "already": [{"kind": e.kind, "id": e.entry_id} for e in done]}
            try:
                with self.ledger.batch() as batch:
                    if consolidation.lineage is not None and node_id not in catalog.nodes:
                        batch.append(node_id, "node_started", consolidation.lineage, current_node=current_node)
                    events = [
                        batch.append(node_id, "memory_added", {"text": s.text, "metadata": s.metadata, "report_hash": consolidation.report_hash,
                                                               "findings": [{"field": f.field, "reason": f.reason} for f in s.findings]},
                                     current_node=current_node)
                        for s in consolidation.specs
                    ]
            except CopyOnWriteViolation as exc:
                self._refused("consolidate_node_memory", exc, current_node)
                return {"ok": False, "error": exc.message, "written": [{"kind": s.kind, "ok": False, "id": None} for s in consolidation.specs]}
            self._after_durable("folding the consolidated entries", self.projector.catch_up)
        for event in events:
            self.access.write("node_scope", event.id, event.body["text"], event.body["metadata"],
                              tool="consolidate_node_memory", node=current_node, seq=event.seq)
        written = [{"kind": s.kind, "ok": True, "id": e.id} for s, e in zip(consolidation.specs, events)]
        findings = [{"field": f.field, "reason": f.reason} for f in consolidation.findings]
        return {"ok": True, "written": written, **({"findings": findings} if findings else {})}

    def consolidate_from_node_report(self, node_report: Mapping, work_dir: str | Path, run_id: str | None = None) -> list[dict]:
        """ARI's pure planner: the specs a report consolidates to, in ARI's shape (no writes)."""
        consolidation = plan(node_report, Path(work_dir), run_id, self.get_experiment_context().get("primary_metric"))
        return [spec_dict(s) for s in consolidation.specs]

    # -- typed reads -----------------------------------------------------------------

    def search_research_memory(
        self,
        query: str,
        ancestor_ids: list[str],
        kinds: list[str] | None = None,
        require_artifacts: bool = False,
        limit: int = 5,
        *,
        as_of: int | None = None,
    ) -> dict:
        """Exact-scope semantic search filtered by kind (ARI's ``mem_kind``/``type`` label, so
        ``result_summary`` works too) and artifact presence.

        The whole scope is ranked before filtering, so ``limit`` results come back even when
        many entries of other kinds rank higher.
        """
        check_text(query, "query")
        wanted = self._labels(kinds)
        scope, limit = self._node_ids(ancestor_ids), self._limit(limit)
        with self._lock:
            self._read()
            catalog = self.projector.catalog

            def keep(entry: Entry) -> bool:
                return (wanted is None or entry.label in wanted) and (not require_artifacts or bool(entry.metadata.get("artifact_refs")))

            in_scope = catalog.scope_entries(scope, as_of)
            allowed = {e.entry_id for e in in_scope if keep(e)}
            hits = self.engine.search(query, scope, len(in_scope), as_of) if allowed and limit else []
            results = [{**research_dict(catalog.entries[eid]), "score": score} for eid, score in hits if eid in allowed][:limit]
        self.access.read(
            "node_scope", query, scope, limit,
            [{"entry_id": r["entry_id"], "src_node_id": r["node_id"], "score": r["score"]} for r in results],
            tool="search_research_memory", as_of=as_of,
        )
        return {"results": results}

    def ancestor_typed_memory(self, ancestor_ids: list[str], kinds: list[str] | None = None, *, as_of: int | None = None) -> list[dict]:
        """Every entry of these ancestors (root→parent order, then log order) of the given
        kinds: the deterministic, full hand-off ARI's retriever gives (no search)."""
        wanted = self._labels(kinds)
        scope = self._node_ids(ancestor_ids)
        with self._lock:
            self._read()
            catalog = self.projector.catalog
            return [research_dict(e) for nid in dict.fromkeys(scope) for e in catalog.node_entries(nid, as_of)
                    if wanted is None or e.label in wanted]

    def fold_reproducibility(self, ancestor_ids: list[str], *, as_of: int | None = None) -> dict[str, dict[str, Any]]:
        """The latest status per target memory among these nodes' reproducibility events (by seq)."""
        scope = self._node_ids(ancestor_ids)
        with self._lock:
            self._read()
            entries = self.projector.catalog.scope_entries(scope, as_of)
        return {target: {"status": status} for target, status in repro_status(entries).items()}

    @staticmethod
    def _labels(kinds: Iterable[str] | None) -> set[str] | None:
        if kinds is None:
            return None
        if isinstance(kinds, str) or not isinstance(kinds, (list, tuple, set, frozenset)):
            raise InvalidInput("kinds", "must be a list of kinds")
        return set(kinds) or None


def research_dict(entry: Entry) -> dict[str, Any]:
    """A typed entry: ARI's search-result keys plus its kind and pointers (read from metadata)."""
    md = entry.metadata
    out = {
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
        out["findings"] = entry.findings
    return out
