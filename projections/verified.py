"""Verified context (R21): the claims a paper may state, ranked by how well artifacts back them.

Claims are the experiment results of the best node's root→best lineage. A claim is
*grounded* when it points at its node_report and at least one sha256-pinned artifact;
its reproducibility status is the latest repro event by seq. Ranking: rerun_passed >
grounded > ungrounded > rerun_failed. Failure cases become limitations. Only grounded
claims that did not fail a re-run are ``usable_for_claims``. Re-runs count from anywhere in
the checkpoint: a validation child re-running its parent's result is the usual case.
"""
from __future__ import annotations

import json
import math
import os
from pathlib import Path
from typing import Any, Iterable, Mapping

from ledger import InvalidInput, config

from .catalog import Catalog, Entry
from .repro import UNVERIFIED, repro_status
from .research import research_dict

VERIFIED_CONTEXT_NAME = "verified_context.json"
CLAIM_KINDS = ("experiment_result", "paper_claim")


def is_grounded(entry: Entry) -> bool:
    refs = entry.body.get("artifact_refs", [])
    return bool(entry.body.get("node_report_ref")) and any(r.get("sha256") for r in refs)


def _rank(claim: dict) -> int:
    if claim["repro_status"] == "rerun_failed":
        return 3
    if claim["grounded"] and claim["repro_status"] == "rerun_passed":
        return 0
    return 1 if claim["grounded"] else 2


def verified_context(entries: list[Entry], repro_events: Iterable[Entry], limit: int | None = None) -> dict[str, Any]:
    """Claims, limitations and usable claims from the visible entries of a lineage (log order).

    ``repro_events`` come from the whole checkpoint: a re-run is evidence about its target
    whoever ran it (typically a validation child re-running its parent's result).
    """
    status = repro_status(repro_events)
    claims = []
    for entry in entries:
        if entry.kind in CLAIM_KINDS:
            claim = research_dict(entry)
            claim["grounded"] = is_grounded(entry)
            claim["repro_status"] = status.get(entry.entry_id, UNVERIFIED)
            claims.append(claim)
    claims.sort(key=lambda c: (_rank(c), c["seq"]))
    if limit is not None:
        claims = claims[:limit]
    limitations = [research_dict(e) for e in entries if e.kind == "failure_case"]
    usable = [c for c in claims if c["grounded"] and c["repro_status"] != "rerun_failed"]
    return {"claims": claims, "limitations": limitations, "usable_for_claims": usable}


def repro_events(catalog: Catalog, as_of: int | None = None) -> list[Entry]:
    """Every visible reproducibility event of the checkpoint (re-runs count from anywhere)."""
    return [e for e in catalog.entries.values() if e.kind == "reproducibility_event" and e.visible(as_of)]


def render_grounded_block(ctx: Mapping[str, Any]) -> str:
    """The prompt block listing usable claims with status and artifacts, or "" when none."""
    usable = ctx.get("usable_for_claims") or []
    if not usable:
        return ""
    lines = [
        "## Verified results (artifact-grounded)",
        "State quantitative claims only from this list; cite the artifacts. Re-run status in brackets.",
    ]
    for claim in usable:
        arts = ", ".join(f"{r['path']} (sha256 {r['sha256'][:12]})" for r in claim["artifact_refs"] if r.get("sha256"))
        metric = f" [{claim['metric_ptr']}]" if claim.get("metric_ptr") else ""
        lines.append(f"- [{claim['repro_status']}] {claim['node_id']}{metric}: {claim['text']} — artifacts: {arts}")
    limitations = ctx.get("limitations") or []
    if limitations:
        lines.append("## Known limitations (failed attempts; do not present as results)")
        lines.extend(f"- {lim['node_id']}: {lim['text']}" for lim in limitations)
    return "\n".join(lines) + "\n"


# ---------------------------------------------------------------------------- best node


def _finite(value: object) -> float | None:
    if isinstance(value, bool) or not isinstance(value, (int, float)) or not math.isfinite(value):
        return None
    return float(value)


def best_node(nodes: Iterable[Mapping[str, Any]], primary_metric: str | None = None, higher_is_better: bool = True) -> Mapping | None:
    """ARI's choice: nodes with real data first; then ``_scientific_score``; then the primary metric;
    then the largest numeric metric."""

    def key(node: Mapping[str, Any]) -> tuple:
        metrics = node.get("metrics") or {}
        real = bool(node.get("has_real_data", bool(metrics) and node.get("status", "success") == "success"))
        score = _finite(metrics.get("_scientific_score"))
        primary = _finite(metrics.get(primary_metric)) if primary_metric else None
        if primary is not None and not higher_is_better:
            primary = -primary
        largest = max((v for v in map(_finite, metrics.values()) if v is not None), default=None)
        return (
            real,
            score is not None, score or 0.0,
            primary is not None, primary or 0.0,
            largest is not None, largest or 0.0,
        )

    candidates = list(nodes)
    return max(candidates, key=key) if candidates else None


class VerifiedContextMixin:
    """get_verified_context / write_verified_context on the backend."""

    def get_verified_context(self, ancestor_ids: list[str], purpose: str = "paper", limit: int | None = None, *, as_of: int | None = None) -> dict:
        scope = self._node_ids(ancestor_ids)
        if limit is not None:
            self._limit(limit)
        with self._lock:
            self._read()
            catalog = self.projector.catalog
            ctx = verified_context(catalog.scope_entries(scope, as_of), repro_events(catalog, as_of), limit)
        ctx["purpose"] = purpose
        ctx["lineage"] = scope
        self.access.record("get_verified_context", [c["entry_id"] for c in ctx["claims"]], scope=scope)
        return ctx

    def write_verified_context(self, nodes: Iterable[Mapping[str, Any]]) -> Path | None:
        """Pick the best node, take its root→best lineage, write ``verified_context.json``.

        ``nodes`` are ARI's node dicts (``node_id`` or ``id``, ``metrics``, optional
        ``has_real_data`` and ``status``). Nothing is written when there are no claims or
        when ``ARI_MEMORY_CONSOLIDATE`` is off; the path is returned when written.
        """
        if not config.consolidation_enabled():
            return None
        with self._lock:
            self._read()
            candidates = [dict(n, node_id=n.get("node_id") or n.get("id")) for n in nodes]
            if any(not c["node_id"] for c in candidates):
                raise InvalidInput("nodes", "every node needs a node_id (or id)")
            context = self.get_experiment_context()
            best = best_node(candidates, context.get("primary_metric"), context.get("higher_is_better", True) is not False)
            if best is None:
                return None
            lineage = self.projector.catalog.lineage(best["node_id"])
            ctx = self.get_verified_context(lineage)
            if not ctx["claims"]:
                return None
            ctx.update(best_node=best["node_id"], as_of_seq=self.projector.cursor)
            path = self.checkpoint_dir / VERIFIED_CONTEXT_NAME
            tmp = path.with_name(path.name + ".tmp")
            tmp.write_text(json.dumps(ctx, indent=2, ensure_ascii=False, sort_keys=True) + "\n", encoding="utf-8")
            os.replace(tmp, path)
        return path


def write_verified_context(checkpoint_dir: str | Path, nodes: Iterable[Mapping[str, Any]]) -> Path | None:
    """ARI's pipeline entry point: the checkpoint's backend writes its verified context."""
    from .backend import get_backend

    return get_backend(checkpoint_dir).write_verified_context(nodes)
