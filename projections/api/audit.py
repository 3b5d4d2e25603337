"""Audit (R20): re-hash every artifact memory cites, check the numbers claims state against
their node reports and those artifacts, and check the log's hash chain.

Each artifact ref resolves to ``experiments_root/<run_id>/<node_id>/<path>`` through its
entry's ``node_report_ref``. Only regular files inside that work dir are read: a path that
would leave it, a symlink leading out, a FIFO or a device is reported, never opened.
"""

from __future__ import annotations

from dataclasses import asdict
from pathlib import Path
from typing import Any, get_args

from ledger import InvalidInput
from ledger.typed import evidence_refs
from projections.api.session import Session
from projections.evidence.claims import is_claim
from projections.evidence.grounding import Grounding, check_run_id, run_and_node
from projections.models.shapes import AuditResult, AuditRow, AuditStatus, ValueRow, ValuesVerdict

STATUSES: tuple[str, ...] = get_args(AuditStatus)
VALUE_VERDICTS: tuple[str, ...] = get_args(ValuesVerdict)


class Audit:
    """Re-hash the artifacts every memory entry cites; check the numbers every claim states."""

    def __init__(self, session: Session) -> None:
        self.session = session

    def run(self, experiments_root: str | Path, run_id: str | None, as_of: int | None = None) -> AuditResult:
        """ARI's ``{"summary", "results"}``, plus ``values`` (a verdict per claim),
        ``value_summary``, ``ok`` (false on missing, mismatch, a value mismatch or a broken
        chain) and the chain check.

        ``as_of``: only the entries written up to that seq (cleared ones too, as now) and the
        core seed of then are audited; the files they cite and the log's chain are checked as
        they are now (a file cannot be read as it was, and a chain broken later breaks the
        trust in all of it)."""
        root = Path(experiments_root)
        if not root.is_dir():
            raise InvalidInput("experiments_root", f"{root} is not a directory")
        if run_id is not None:
            check_run_id(run_id)
        with self.session.reading() as catalog:
            entries = [e for e in catalog.entries.values() if as_of is None or e.seq <= as_of]
            seed = catalog.context(as_of)
            chain = self.session.ledger.verify()
        experiment = dict(seed.context) if seed else {}  # its facts and primary metric ground claims too
        grounding = Grounding([root], experiment.get("metric_ranges"), experiment, self.session.cited_files)
        grounding.learn(entries)
        seen: dict[tuple[Any, ...], AuditRow] = {}
        values: list[ValueRow] = []
        for entry in entries:
            where = grounding.pointer(entry)
            if run_id is not None and (where is None or where[0] != run_id):
                continue
            if is_claim(entry):
                verdict = grounding.values(entry, grounding.work_dir(entry))
                values.append({"entry_id": entry.entry_id, "node_id": entry.node_id, "kind": entry.label, **verdict})
            pair = run_and_node(entry.metadata.get("node_report_ref"))
            if pair is None:
                continue  # cites no work dir (its finding, if any, was recorded at write)
            work_dir = root / pair[0] / pair[1]
            for art in evidence_refs(entry.metadata):
                key = (pair[0], pair[1], art.get("path"), art.get("sha256"))
                if key in seen:
                    seen[key]["memory_ids"].append(entry.entry_id)
                    continue
                raw_path = art.get("path")
                path = raw_path if isinstance(raw_path, str) else ""
                state = grounding.artifact(work_dir, path, art.get("sha256"))
                seen[key] = {
                    "run_id": pair[0],
                    "node_id": pair[1],
                    "path": path,
                    "role": art.get("role", "unknown"),
                    "recorded_sha256": art.get("sha256"),
                    "current_sha256": state.current,
                    "status": state.status,
                    "memory_ids": [entry.entry_id],
                }
        results = sorted(seen.values(), key=lambda r: (r["run_id"], r["node_id"], r["path"]))
        summary = {status: sum(1 for r in results if r["status"] == status) for status in STATUSES}
        value_summary = {v: sum(1 for r in values if r["verdict"] == v) for v in VALUE_VERDICTS}
        ok = chain.ok and not summary["missing"] and not summary["mismatch"] and not value_summary["mismatch"]
        at: dict[str, Any] = {"as_of": as_of} if as_of is not None else {}
        self.session.access.record("audit", "audit_memory", summary=summary, value_summary=value_summary, **at)
        return {
            "ok": ok,
            "summary": summary,
            "results": results,
            "values": values,
            "value_summary": value_summary,
            "chain": asdict(chain),
        }
