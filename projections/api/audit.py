"""Audit (R20): re-hash every artifact memory cites, and check the log's hash chain.

Each artifact ref resolves to ``experiments_root/<run_id>/<node_id>/<path>`` through its
entry's ``node_report_ref``. Only regular files inside that work dir are read: a path that
would leave it, a symlink leading out, a FIFO or a device is reported, never opened.
"""

from __future__ import annotations

import os
import stat
from collections.abc import Mapping
from dataclasses import asdict
from pathlib import Path
from typing import Any, get_args

from ledger import InvalidInput
from ledger.provenance import resolve_inside, sha256_file
from ledger.typed import evidence_refs
from ledger.vocabulary import is_sha256
from projections.api.session import Session
from projections.api.shapes import AuditResult, AuditRow, AuditStatus

STATUSES: tuple[str, ...] = get_args(AuditStatus)


def audit_ref(work_dir: Path, path: str, recorded: str | None) -> tuple[str | None, str]:
    """(current sha256, status) of one artifact ref; only a regular file inside is read."""
    try:
        target = resolve_inside(work_dir, path)
        regular = stat.S_ISREG(os.stat(target).st_mode)
    except (InvalidInput, OSError):
        return None, "missing"
    current = sha256_file(target) if regular else None
    if recorded is None or not is_sha256(recorded):
        return current, "unhashed" if regular else "missing"
    if current is None:
        return None, "missing"
    return current, "verified" if current == recorded else "mismatch"


def experiments_roots(checkpoint_dir: str | Path) -> list[Path]:
    """Where a checkpoint's node work dirs (``<root>/<run_id>/<node_id>``) may be, in order:
    ``experiments`` inside it or beside it, and ARI's layout, ``<workspace>/experiments``
    beside ``<workspace>/checkpoints/<run_id>``."""
    ckpt = Path(checkpoint_dir).resolve()
    return [ckpt / "experiments", ckpt.parent / "experiments", ckpt.parent.parent / "experiments"]


def check_run_id(run_id: object, field: str = "run_id") -> str:
    """A run id is one directory name under the experiments root, never a path."""
    if not isinstance(run_id, str) or run_id in ("", ".", "..") or "/" in run_id or "\\" in run_id or "\x00" in run_id:
        raise InvalidInput(field, f"{run_id!r} is not a run id (one directory name under experiments_root)")
    return run_id


class Audit:
    """Re-hash the artifacts every memory entry cites."""

    def __init__(self, session: Session) -> None:
        self.session = session

    def run(self, experiments_root: str | Path, run_id: str | None) -> AuditResult:
        """ARI's ``{"summary", "results"}``, plus ``ok`` (false on missing, mismatch or a broken
        chain) and the chain check."""
        root = Path(experiments_root)
        if not root.is_dir():
            raise InvalidInput("experiments_root", f"{root} is not a directory")
        if run_id is not None:
            check_run_id(run_id)
        with self.session.reading() as catalog:
            entries = list(catalog.entries.values())
            chain = self.session.ledger.verify()
        seen: dict[tuple[Any, ...], AuditRow] = {}
        for entry in entries:
            ref = entry.metadata.get("node_report_ref")
            if not isinstance(ref, Mapping) or (run_id is not None and ref.get("run_id") != run_id):
                continue
            try:
                work_dir = root / check_run_id(ref.get("run_id")) / check_run_id(ref.get("node_id"), "node_id")
            except InvalidInput:
                continue  # a pointer that names no work dir (its finding was recorded at write)
            for art in evidence_refs(entry.metadata):
                key = (ref["run_id"], ref["node_id"], art.get("path"), art.get("sha256"))
                if key in seen:
                    seen[key]["memory_ids"].append(entry.entry_id)
                    continue
                raw_path = art.get("path")
                path = raw_path if isinstance(raw_path, str) else ""
                current, status = audit_ref(work_dir, path, art.get("sha256"))
                seen[key] = {
                    "run_id": ref["run_id"],
                    "node_id": ref["node_id"],
                    "path": path,
                    "role": art.get("role", "unknown"),
                    "recorded_sha256": art.get("sha256"),
                    "current_sha256": current,
                    "status": status,  # type: ignore[typeddict-item]
                    "memory_ids": [entry.entry_id],
                }
        results = sorted(seen.values(), key=lambda r: (r["run_id"], r["node_id"], r["path"]))
        summary = {status: sum(1 for r in results if r["status"] == status) for status in STATUSES}
        ok = chain.ok and not summary["missing"] and not summary["mismatch"]
        self.session.access.record("audit", "audit_memory", summary=summary)
        return {"ok": ok, "summary": summary, "results": results, "chain": asdict(chain)}
