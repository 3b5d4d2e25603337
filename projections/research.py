"""Verifiable research memory: typed, artifact-grounded writes, consolidation, typed search.

Memory is an index, not evidence: a typed entry carries searchable text, a pointer to the
``node_report.json`` it came from and sha256-pinned artifact refs — never copies of the
report's fields. These methods are mixed into :class:`~projections.backend.MemoryBackend`.
"""
from __future__ import annotations

from pathlib import Path
from typing import Any, Iterable, Mapping

import msgspec

from ledger import CopyOnWriteViolation, InvalidInput, config
from ledger.events import KINDS, REPRO_STATUSES, check_text
from ledger.node_report import NodeReport, load_node_report, report_hash
from ledger.provenance import artifact_refs, validate_artifact_refs

from .catalog import Entry

REFLECTION_CONFIDENCE = 0.4
MAX_SUMMARY_CHARS = 1500


def _refs(refs: Iterable[Mapping] | None) -> list[dict]:
    return [msgspec.to_builtins(r) for r in validate_artifact_refs(refs or [])]


def _report_ref(ref: Mapping | None) -> dict | None:
    if ref is None:
        return None
    if not isinstance(ref, Mapping) or set(ref) != {"run_id", "node_id"}:
        raise InvalidInput("node_report_ref", "must be an object with exactly run_id and node_id")
    for key in ("run_id", "node_id"):
        if not isinstance(ref[key], str) or not ref[key]:
            raise InvalidInput(f"node_report_ref.{key}", "must be a non-empty string")
    return {"run_id": ref["run_id"], "node_id": ref["node_id"]}


def is_success(report: NodeReport) -> bool:
    """A node whose results may become claims: it ran, judged itself a success, has metrics."""
    return report.status == "success" and report.self_assessment.succeeded and bool(report.metrics)


def headline_metric(metrics: Mapping[str, float], primary: str | None = None) -> str | None:
    """The metric a result is about: the experiment's primary metric, else the first public one."""
    if primary and primary in metrics:
        return primary
    public = [name for name in metrics if not name.startswith("_")]
    return (public or list(metrics) or [None])[0]


class ResearchMemory:
    """Typed writers, consolidation and typed search (mixed into MemoryBackend)."""

    # -- typed writers -----------------------------------------------------------------

    def _typed(self, tool: str, node_id: str, kind: str, text: str, current_node: str | None = None, **fields: Any) -> dict:
        body = {"text": text, "kind": kind, **{k: v for k, v in fields.items() if v is not None and v != []}}
        return self._add_entry(node_id, body, tool, current_node)

    def add_experiment_result(
        self,
        node_id: str,
        text: str,
        metric_ptr: str | None = None,
        artifact_refs: list[Mapping] | None = None,
        node_report_ref: Mapping | None = None,
        *,
        current_node: str | None = None,
    ) -> dict:
        return self._typed(
            "add_experiment_result", node_id, "experiment_result", text, current_node,
            metric_ptr=metric_ptr, artifact_refs=_refs(artifact_refs), node_report_ref=_report_ref(node_report_ref),
        )

    def add_failure_case(
        self, node_id: str, text: str, artifact_refs: list[Mapping] | None = None, node_report_ref: Mapping | None = None,
        *, current_node: str | None = None,
    ) -> dict:
        return self._typed(
            "add_failure_case", node_id, "failure_case", text, current_node,
            artifact_refs=_refs(artifact_refs), node_report_ref=_report_ref(node_report_ref),
        )

    def add_procedure_memory(
        self, node_id: str, text: str, artifact_refs: list[Mapping] | None = None, node_report_ref: Mapping | None = None,
        *, current_node: str | None = None,
    ) -> dict:
        return self._typed(
            "add_procedure_memory", node_id, "procedure", text, current_node,
            artifact_refs=_refs(artifact_refs), node_report_ref=_report_ref(node_report_ref),
        )

    def add_reflection(
        self, node_id: str, text: str, confidence: float | None = None, node_report_ref: Mapping | None = None,
        *, current_node: str | None = None,
    ) -> dict:
        return self._typed(
            "add_reflection", node_id, "reflection", text, current_node,
            confidence=confidence, node_report_ref=_report_ref(node_report_ref),
        )

    def add_reproducibility_event(
        self,
        node_id: str,
        target_memory_id: str,
        status: str,
        artifact_refs: list[Mapping] | None = None,
        text: str | None = None,
        *,
        current_node: str | None = None,
    ) -> dict:
        """Append a status change for an entry in the writer's scope (never edits the entry)."""
        if status not in REPRO_STATUSES:
            raise InvalidInput("status", f"unknown status {status!r}; expected one of {', '.join(REPRO_STATUSES)}")
        with self._lock:
            self._read()
            catalog = self.projector.catalog
            scope = catalog.lineage(node_id)
            target = catalog.get(target_memory_id) if isinstance(target_memory_id, str) else None
            if target is None or target.node_id not in scope:
                raise InvalidInput("target_memory_id", f"no memory {target_memory_id!r} in the scope of {node_id!r}")
            return self._typed(
                "add_reproducibility_event", node_id, "reproducibility_event",
                text or f"reproducibility {status} for {target_memory_id}", current_node,
                target_id=target_memory_id, status=status, artifact_refs=_refs(artifact_refs),
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
        """node_report → experiment_result / failure_case (+ reflection from hints), once per report."""
        if not config.consolidation_enabled():
            return {"ok": True, "written": [], "skipped": "ARI_MEMORY_CONSOLIDATE is off"}
        report = load_node_report(node_report)
        if report.node_id != node_id:
            raise InvalidInput("node_report.node_id", f"is {report.node_id!r}, but consolidating {node_id!r}")
        digest = report_hash(report)
        work = Path(work_dir)
        ref = {"run_id": run_id or work.resolve().parent.name, "node_id": node_id}
        with self._lock:
            self._read()
            done = [e.entry_id for e in self.projector.catalog.node_entries(node_id) if e.body.get("report_hash") == digest]
            if done:
                return {"ok": True, "written": [], "already": done}
            provenance = artifact_refs(report, work)
            refs = [msgspec.to_builtins(r) for r in provenance.refs]
            bodies = self._consolidated_bodies(report, refs, ref, digest)
            try:
                with self.ledger.batch() as batch:
                    events = [batch.append(node_id, "memory_added", body, current_node=current_node) for body in bodies]
            except CopyOnWriteViolation as exc:
                return exc.as_dict()
            self.projector.catch_up()
        ids = [e.id for e in events]
        self.access.record("consolidate_node_memory", ids)
        return {"ok": True, "written": ids, "refused_paths": [msgspec.to_builtins(r) for r in provenance.refused]}

    def _consolidated_bodies(self, report: NodeReport, refs: list[dict], ref: dict, digest: str) -> list[dict]:
        assessment = report.self_assessment
        common = {"node_report_ref": ref, "report_hash": digest}
        if is_success(report):
            primary = self.get_experiment_context().get("primary_metric")
            metric = headline_metric(report.metrics, primary)
            text = f"EXPERIMENT RESULT {report.node_id} ({report.label}): {assessment.headline or report.what_was_done}"
            bodies = [{"text": text[:MAX_SUMMARY_CHARS], "kind": "experiment_result", "artifact_refs": refs,
                       "metric_ptr": f"metrics.{metric}" if metric else None, **common}]
        else:
            concerns = "; ".join(assessment.concerns)
            text = f"FAILURE CASE {report.node_id} ({report.label}, status {report.status}): {assessment.headline}"
            text += f" Concerns: {concerns}" if concerns else ""
            bodies = [{"text": text[:MAX_SUMMARY_CHARS], "kind": "failure_case", "artifact_refs": refs, **common}]
        if report.next_steps_hints:
            hints = " ".join(f"- {h}" for h in report.next_steps_hints)
            bodies.append({"text": f"REFLECTION {report.node_id}: next steps {hints}"[:MAX_SUMMARY_CHARS],
                           "kind": "reflection", "confidence": REFLECTION_CONFIDENCE, **common})
        return [{k: v for k, v in body.items() if v is not None} for body in bodies]

    # -- typed search ------------------------------------------------------------------

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
        """Exact-scope semantic search filtered by kind and artifact presence.

        The whole scope is ranked before filtering, so ``limit`` results come back even when
        many entries of other kinds rank higher.
        """
        check_text(query, "query")
        wanted = self._kinds(kinds)
        scope, limit = self._node_ids(ancestor_ids), self._limit(limit)
        with self._lock:
            self._read()
            catalog = self.projector.catalog

            def keep(entry: Entry) -> bool:
                return (wanted is None or entry.kind in wanted) and (not require_artifacts or bool(entry.body.get("artifact_refs")))

            in_scope = catalog.scope_entries(scope, as_of)
            candidates = [e for e in in_scope if keep(e)]
            hits = self.engine.search(query, scope, len(in_scope), as_of) if candidates and limit else []
            allowed = {e.entry_id for e in candidates}
            results = [
                {**research_dict(catalog.entries[eid]), "score": score} for eid, score in hits if eid in allowed
            ][:limit]
        self.access.record("search_research_memory", [r["entry_id"] for r in results], scope=scope)
        return {"results": results}

    @staticmethod
    def _kinds(kinds: list[str] | None) -> set[str] | None:
        if kinds is None:
            return None
        if isinstance(kinds, str) or not isinstance(kinds, (list, tuple)):
            raise InvalidInput("kinds", "must be a list of kinds")
        for i, kind in enumerate(kinds):
            if kind not in KINDS:
                raise InvalidInput(f"kinds[{i}]", f"unknown kind {kind!r}; expected one of {', '.join(KINDS)}")
        return set(kinds)


def research_dict(entry: Entry) -> dict[str, Any]:
    """A typed entry with its pointers (and ARI's base fields)."""
    body = entry.body
    return {
        "entry_id": entry.entry_id,
        "node_id": entry.node_id,
        "kind": entry.kind,
        "text": entry.text,
        "metadata": body.get("metadata", {}),
        "metric_ptr": body.get("metric_ptr"),
        "confidence": body.get("confidence"),
        "node_report_ref": body.get("node_report_ref"),
        "artifact_refs": body.get("artifact_refs", []),
        "ts": entry.ts,
        "seq": entry.seq,
    }
