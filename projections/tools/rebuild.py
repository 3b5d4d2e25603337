"""``ari-ledger rebuild``: keep what a fold of the log derives, after something removed it.

A reading command never writes the projection snapshot, so after a bundle ``import``, a
``redact`` (which deletes it), a ``repair`` or ``verify --accept-rollback`` (which set it
aside) or a damaged snapshot, every read folds the whole log again. :func:`rebuild` folds the
log once, saves the snapshot, and writes ``verified_context.json`` as the paper stage would
(:meth:`MemoryBackend.write_verified_context`), for the best node the context it replaces
recorded (the file itself, or one set aside as ``*.rolled-back-*`` / ``*.repaired-*``), or,
with none, the best node the log's own reports and ``RESULT SUMMARY`` entries point to.
"""

from __future__ import annotations

import json
import re
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

from ledger import InvalidInput, LedgerNotFound, layout
from ledger.ari.report_file import read_report_file
from ledger.checkpoint_format import REPAIRED_MARK, ROLLED_BACK_MARK, VERIFIED_CONTEXT_NAME
from ledger.progress import Interrupted
from ledger.safe_io import SIDE_FILE_LIMIT, UnsafeFile, read_file
from projections import settings
from projections.api import MemoryBackend
from projections.engines.protocol import Progress
from projections.evidence.claims import is_result_summary
from projections.evidence.grounding import experiments_roots
from projections.evidence.usable import node_verdict
from projections.models.catalog import Catalog

SET_ASIDE = (ROLLED_BACK_MARK, REPAIRED_MARK)
_METRIC = re.compile(r"([A-Za-z_][\w.\-/]*)\s*[=:]\s*(-?\d+(?:\.\d+)?(?:[eE][-+]?\d+)?)")


@dataclass
class Rebuilt:
    """What ``rebuild`` did: the snapshot, and the verified context (or why not)."""

    checkpoint: str
    events: int
    folded: int  # events folded by this run
    from_scratch: str | None  # why the fold started at seq 0 (None: from the snapshot)
    snapshot: str | None  # the snapshot written, None when it could not be
    context: str | None = None  # verified_context.json written, or None
    context_source: str | None = None  # "recorded" (the lineage a context recorded) or "derived" (from the log)
    recorded_in: str | None = None  # the file whose best node and lineage were kept
    best_node: str | None = None
    lineage: list[str] = field(default_factory=list)
    nodes: int = 0  # node dicts derived from the log (context_source "derived")
    why_not: str | None = None  # why no context was written
    notes: list[str] = field(default_factory=list)

    @property
    def complete(self) -> bool:
        return self.snapshot is not None and self.context is not None

    def lines(self) -> list[str]:
        how = f"from scratch ({self.from_scratch})" if self.from_scratch else "after the snapshot"
        out = [
            f"snapshot: saved {self.snapshot} at seq {self.events} (folded {self.folded:,} events {how})"
            if self.snapshot
            else f"snapshot: NOT saved (folded {self.folded:,} events {how}; see the warning above)"
        ]
        if self.context is None:
            out.append(f"verified context: not written: {self.why_not}")
        elif self.context_source == "recorded":
            out.append(
                f"verified context: wrote {self.context} for best node {self.best_node} "
                f"(lineage {' → '.join(self.lineage)}), as recorded in {self.recorded_in}"
            )
        else:
            out.append(
                f"verified context: wrote {self.context} for best node {self.best_node} "
                f"(lineage {' → '.join(self.lineage)}), chosen among {self.nodes} nodes by their "
                "metrics in the log (node reports, RESULT SUMMARY entries)"
            )
        return out + [f"note: {n}" for n in self.notes]

    def as_dict(self) -> dict[str, Any]:
        return {**asdict(self), "complete": self.complete}


def rebuild(
    checkpoint_dir: str | Path, experiments_root: str | Path | None = None, progress: Progress | None = None
) -> Rebuilt:
    """Fold the log, save the snapshot, rewrite ``verified_context.json`` (see the module).

    ``progress(events folded, events to fold)`` after each chunk. Interrupted (Ctrl-C) while
    folding, it saves what it folded as the snapshot (a fold of the log up to a seq: the next
    ``rebuild`` or read folds only the rest) and raises :class:`~ledger.progress.Interrupted`
    saying so; later, it says what was written. The log is never touched."""
    ckpt = Path(checkpoint_dir)
    if not layout.has_ledger(ckpt):
        raise LedgerNotFound(f"no ledger at {layout.log_path(ckpt)} (is {ckpt} a checkpoint directory?)")
    root = Path(experiments_root) if experiments_root is not None else None
    if root is not None and not root.is_dir():
        raise InvalidInput("--experiments", f"{root} is not a directory")
    backend = MemoryBackend(ckpt, progress=progress)
    try:
        if backend.readonly_reason is not None:
            raise InvalidInput("checkpoint", f"{ckpt} is read-only here: {backend.readonly_reason}")
        before = backend.folded_seq  # the snapshot's cursor, or 0
        try:
            folded = backend.fold(announce=False)  # folding from scratch is what was asked for
        except KeyboardInterrupt:
            raise _interrupted_fold(backend, before) from None
        saved = backend.save_snapshot()
        done = Rebuilt(str(ckpt), backend.last_seq, folded, backend.from_scratch, str(saved) if saved else None)
        try:
            _write_context(backend, ckpt, root, done)
        except KeyboardInterrupt:
            snapshot = (
                f"the snapshot was saved at seq {backend.folded_seq:,}" if saved else "the snapshot was not saved"
            )
            raise Interrupted(
                f"{snapshot}; {VERIFIED_CONTEXT_NAME} was not rewritten (the log is unchanged); "
                "run the same command again to write it"
            ) from None
    finally:
        backend.close()
    return done


def _interrupted_fold(backend: MemoryBackend, before: int) -> Interrupted:
    """Ctrl-C while folding: what was folded is kept as the snapshot (when the fold stopped
    between two chunks, as ``ari-ledger`` stops it), nothing is folded at close, and the
    message says how far it got."""
    folded, last = backend.folded_seq, backend.last_seq
    saved = backend.close_interrupted(keep=True)  # never the rest of the fold
    if saved is not None:
        kept = f"{folded:,} of {last:,} events folded and saved as the snapshot"
    elif folded > before:
        kept = f"{folded:,} of {last:,} events folded but not saved"
    else:
        kept = f"nothing folded beyond the snapshot's seq {before:,}" if before else "nothing saved"
    rest = "fold the rest" if saved is not None or before else "fold the log"
    return Interrupted(
        f"{kept}; the log is unchanged (it is the truth) and {VERIFIED_CONTEXT_NAME} was not rewritten; "
        f"run the same command again to {rest}"
    )


def _write_context(backend: MemoryBackend, ckpt: Path, root: Path | None, done: Rebuilt) -> None:
    if not settings.consolidation_enabled():
        done.why_not = "ARI_MEMORY_CONSOLIDATE is off (the paper stage writes no verified context then)"
        return
    roots = [root] if root is not None else [r for r in experiments_roots(ckpt) if r.is_dir()]
    recorded, source = _recorded(ckpt)
    catalog = backend.fresh_catalog()
    if recorded is not None:
        best = recorded.get("best_node_id") or recorded.get("best_node")
        lineage = recorded.get("lineage")
        if not isinstance(best, str) and isinstance(lineage, list) and lineage:
            best = lineage[-1]
        if isinstance(best, str) and backend.lineage(best) is not None:
            nodes = [{"node_id": best, "metrics": {}, "has_real_data": True}]
            done.context_source, done.recorded_in = "recorded", source
            purpose = recorded.get("purpose")
            if purpose not in (None, "paper"):
                done.notes.append(f"{source} recorded purpose {purpose!r}; the paper stage writes 'paper'")
            if isinstance(lineage, list) and lineage != backend.lineage(best):
                done.notes.append(f"{source} recorded lineage {lineage}; the log's tree now gives another")
        else:
            done.notes.append(f"{source} names no node of this log as best; choosing from the log instead")
            recorded = None
    if recorded is None:
        nodes = _derived_nodes(catalog, roots[0] if roots else None)
        done.context_source, done.nodes = "derived", len(nodes)
        if not nodes:
            done.why_not = "the log records no node"
            return
        if not roots:
            done.notes.append("no experiments directory found: claims are not re-hashed; pass --experiments DIR")
    written = backend.write_verified_context(nodes, experiments_root=roots[0] if roots else None)
    if written is None:
        done.why_not = "the best node's lineage holds no claims (experiment_result or paper_claim entries)"
        done.context_source = None
        return
    ctx = json.loads(read_file(written, SIDE_FILE_LIMIT))
    done.context, done.best_node, done.lineage = str(written), ctx.get("best_node"), ctx.get("lineage", [])


def _recorded(ckpt: Path) -> tuple[dict[str, Any] | None, str | None]:
    """The verified context to rebuild for: the checkpoint's own, else the newest set aside."""
    candidates = [ckpt / VERIFIED_CONTEXT_NAME]
    aside = [p for p in ckpt.glob(VERIFIED_CONTEXT_NAME + ".*") if any(s in p.name for s in SET_ASIDE)]
    candidates += sorted(aside, key=lambda p: p.name.rsplit("-", 1)[-1], reverse=True)
    for path in candidates:
        try:
            data = json.loads(read_file(path, SIDE_FILE_LIMIT).decode("utf-8"))
        except (FileNotFoundError, UnsafeFile, OSError, ValueError):
            continue
        if isinstance(data, dict):
            return data, path.name
    return None, None


def _derived_nodes(catalog: Catalog, root: Path | None) -> list[dict[str, Any]]:
    """ARI's node dicts from the log: each node's metrics from its node_report.json (under
    ``root``), else its newest RESULT SUMMARY; its status from its own verdict."""
    order = list(catalog.nodes) + [n for n in catalog.by_node if n not in catalog.nodes]
    nodes = []
    for nid in order:
        entries = catalog.node_entries(nid)
        report = _report(root, entries, nid)
        metrics = report.get("metrics") if report is not None else None
        if not isinstance(metrics, dict):
            metrics = next((m for e in reversed(entries) if is_result_summary(e) and (m := _summary_metrics(e))), {})
        verdict = node_verdict(report, entries)
        status = "unknown" if verdict is None else "success" if verdict.succeeded else "failed"
        nodes.append(
            {
                "node_id": nid,
                "metrics": metrics,
                "status": status,
                "has_real_data": bool(metrics) and status == "success",
            }
        )
    return nodes


def _summary_metrics(entry: Any) -> dict[str, Any]:
    given = entry.metadata.get("metrics")
    if isinstance(given, dict):
        return given
    found = re.search(r"metrics=\[([^\]]*)\]", entry.text)
    return {k: float(v) for k, v in _METRIC.findall(found.group(1))} if found else {}


def _report(root: Path | None, entries: list[Any], nid: str) -> dict[str, Any] | None:
    refs = [r for e in entries if isinstance(r := e.metadata.get("node_report_ref"), dict) and r.get("run_id")]
    own = [r for r in refs if r.get("node_id") == nid]
    run_id = (own or refs)[0]["run_id"] if refs else None
    if root is None or not isinstance(run_id, str):
        return None
    work = root / run_id / nid
    try:
        report = read_report_file(work / "node_report.json", inside=work)
    except (InvalidInput, OSError):
        return None
    return report if isinstance(report, dict) else None
