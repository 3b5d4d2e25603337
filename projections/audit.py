"""Audit (R20): re-hash every artifact memory cites, and check the log's hash chain.

Each artifact ref resolves to ``experiments_root/<run_id>/<node_id>/<path>`` through its
entry's ``node_report_ref``; a path that would leave that work dir is reported, not read.
"""
from __future__ import annotations

from dataclasses import asdict
from pathlib import Path
from typing import Any

from ledger import InvalidInput
from ledger.provenance import resolve_inside, sha256_file

STATUSES = ("verified", "missing", "mismatch", "unhashed")


def audit_ref(work_dir: Path, path: str, recorded: str | None) -> tuple[str | None, str]:
    """(current sha256, status) of one artifact ref."""
    try:
        target = resolve_inside(work_dir, path)
    except InvalidInput:
        return None, "missing"
    current = sha256_file(target) if target.is_file() else None
    if recorded is None:
        return current, "unhashed"
    if current is None:
        return None, "missing"
    return current, "verified" if current == recorded else "mismatch"


class AuditMixin:
    """audit_memory on the backend."""

    def audit_memory(self, experiments_root: str | Path, run_id: str | None = None) -> dict[str, Any]:
        root = Path(experiments_root)
        if not root.is_dir():
            raise InvalidInput("experiments_root", f"{root} is not a directory")
        with self._lock:
            self._read()
            entries = list(self.projector.catalog.entries.values())
            chain = self.ledger.verify()
        seen: dict[tuple, dict] = {}
        for entry in entries:
            ref = entry.body.get("node_report_ref")
            if not ref or (run_id is not None and ref["run_id"] != run_id):
                continue
            for art in entry.body.get("artifact_refs", []):
                key = (ref["run_id"], ref["node_id"], art["path"], art.get("sha256"))
                if key in seen:
                    seen[key]["memory_ids"].append(entry.entry_id)
                    continue
                current, status = audit_ref(root / ref["run_id"] / ref["node_id"], art["path"], art.get("sha256"))
                seen[key] = {
                    "run_id": ref["run_id"],
                    "node_id": ref["node_id"],
                    "path": art["path"],
                    "role": art.get("role", "unknown"),
                    "recorded_sha256": art.get("sha256"),
                    "current_sha256": current,
                    "status": status,
                    "memory_ids": [entry.entry_id],
                }
        results = sorted(seen.values(), key=lambda r: (r["run_id"], r["node_id"], r["path"]))
        summary = {status: sum(1 for r in results if r["status"] == status) for status in STATUSES}
        ok = chain.ok and not summary["missing"] and not summary["mismatch"]
        self.access.record("audit_memory", [], summary=summary)
        return {"ok": ok, "summary": summary, "results": results, "chain": asdict(chain)}
